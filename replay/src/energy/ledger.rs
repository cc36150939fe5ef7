//! Conserved energy accounting.
//!
//! Every joule a core draws lands in exactly one bucket: an owner (a VM,
//! through the vCPU or host worker that ran), `idle`, or `unattributed`
//! (busy time nobody can be billed for, e.g. host housekeeping). The host
//! total is accumulated separately, so `owners + idle + unattributed ==
//! total` is a check, not an identity of the code.

use std::collections::BTreeMap;

/// Who a busy segment is charged to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Owner {
    /// An owner index (e.g. a VM id assigned by the caller).
    Vm(u32),
    /// Busy, but not attributable.
    Unattributed,
}

/// Energy per core and per owner.
#[derive(Clone, Debug, Default)]
pub struct EnergyLedger {
    per_core_j: Vec<f64>,
    per_owner_j: BTreeMap<u32, f64>,
    idle_j: f64,
    unattributed_j: f64,
    total_j: f64,
}

impl EnergyLedger {
    /// A ledger for `cores` cores.
    pub fn new(cores: usize) -> Self {
        EnergyLedger {
            per_core_j: vec![0.0; cores],
            ..Default::default()
        }
    }

    fn add_core(&mut self, core: usize, j: f64) {
        if core >= self.per_core_j.len() {
            self.per_core_j.resize(core + 1, 0.0);
        }
        self.per_core_j[core] += j;
        self.total_j += j;
    }

    /// Charge `watts × dt_ns` of busy time on `core` to `owner`.
    pub fn busy(&mut self, core: usize, owner: Owner, watts: f64, dt_ns: i64) -> f64 {
        let j = watts * dt_ns.max(0) as f64 * 1e-9;
        self.add_core(core, j);
        match owner {
            Owner::Vm(v) => *self.per_owner_j.entry(v).or_insert(0.0) += j,
            Owner::Unattributed => self.unattributed_j += j,
        }
        j
    }

    /// Charge `watts × dt_ns` of idle time on `core`.
    pub fn idle(&mut self, core: usize, watts: f64, dt_ns: i64) -> f64 {
        let j = watts * dt_ns.max(0) as f64 * 1e-9;
        self.add_core(core, j);
        self.idle_j += j;
        j
    }

    /// Joules per core.
    pub fn per_core_j(&self) -> &[f64] {
        &self.per_core_j
    }
    /// Joules per owner, by owner index (sorted).
    pub fn per_owner_j(&self) -> &BTreeMap<u32, f64> {
        &self.per_owner_j
    }
    /// Joules drawn while idle.
    pub fn idle_j(&self) -> f64 {
        self.idle_j
    }
    /// Joules of busy time nobody is billed for.
    pub fn unattributed_j(&self) -> f64 {
        self.unattributed_j
    }
    /// Host total, accumulated independently of the buckets.
    pub fn total_j(&self) -> f64 {
        self.total_j
    }
    /// `total - (owners + idle + unattributed)`: zero up to rounding.
    pub fn conservation_residual_j(&self) -> f64 {
        let parts: f64 = self.per_owner_j.values().sum::<f64>() + self.idle_j + self.unattributed_j;
        self.total_j - parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_add_up_to_the_independent_total() {
        let mut l = EnergyLedger::new(2);
        l.busy(0, Owner::Vm(1), 10.0, 1_000_000_000);
        l.busy(1, Owner::Vm(2), 5.0, 500_000_000);
        l.busy(1, Owner::Unattributed, 4.0, 250_000_000);
        l.idle(0, 1.0, 2_000_000_000);
        assert_eq!(l.per_owner_j()[&1], 10.0);
        assert_eq!(l.per_owner_j()[&2], 2.5);
        assert_eq!(l.unattributed_j(), 1.0);
        assert_eq!(l.idle_j(), 2.0);
        assert_eq!(l.total_j(), 15.5);
        assert_eq!(l.per_core_j(), &[12.0, 3.5]);
        assert!(l.conservation_residual_j().abs() < 1e-12);
    }

    #[test]
    fn negative_durations_charge_nothing_and_unknown_cores_grow_the_table() {
        let mut l = EnergyLedger::new(1);
        assert_eq!(l.busy(0, Owner::Vm(0), 10.0, -5), 0.0);
        l.idle(3, 2.0, 1_000_000_000);
        assert_eq!(l.per_core_j().len(), 4);
        assert_eq!(l.total_j(), 2.0);
    }
}
