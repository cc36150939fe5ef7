//! Barriers of gang-synchronised guests (issue 41): each vCPU of a VM
//! that has `Phase::Barrier`s waits at its k-th barrier until every such
//! vCPU of the VM (not yet finished) has arrived at its k-th, as an
//! OpenMP parallel job does between phases (the paper's LU-OMP,
//! ../shared/papers/asym.md §5.2).
//!
//! A spinning waiter busy-waits through the spin machinery, on a lock of
//! its own per VM whose "free" means the waiter's barrier has been
//! released: the spin response applies as to a lock (native spin holds
//! the CPU to the end of its slice; yield, pv and the suspend-spin calls
//! give it up), which is how a shorter slice shortens busy blocking. A
//! sleeping waiter blocks until the last arrival wakes it.

use super::{vm_of, Engine, Ev, St};
use crate::model::Phase;
use crate::output::StateCode;

/// The lock id (in the engine's (vm, lock) index) that stands for a
/// VM's barrier; recorded locks are numbered from 0.
pub(super) const BARRIER_LOCK: u32 = u32::MAX;

/// Per-VM barrier state and per-thread progress through it.
#[derive(Default)]
pub(super) struct Barriers {
    /// Per VM: its vCPUs that wait at barriers and have not finished.
    parties: Vec<usize>,
    /// Per VM: arrivals at the barrier not yet released.
    arrived: Vec<usize>,
    /// Per VM: barriers released so far.
    released: Vec<usize>,
    /// Per VM: sleeping waiters.
    sleepers: Vec<Vec<u32>>,
    /// Per thread: barriers passed (its current one is this index), and
    /// whether it has arrived at the current one.
    passed: Vec<usize>,
    arrived_here: Vec<bool>,
    member: Vec<bool>,
    /// Per lock index: the VM whose barrier it stands for.
    pub(super) lock_vm: Vec<Option<usize>>,
}

impl Barriers {
    /// From each thread's phases (their VM, whether any is a barrier) and
    /// the lock index the engine built.
    pub(super) fn new(
        vms: usize,
        members: Vec<(Option<usize>, bool)>,
        lock_index: &std::collections::BTreeMap<(u32, u32), usize>,
    ) -> Self {
        let mut parties = vec![0; vms];
        for &(vm, has) in &members {
            if let (Some(v), true) = (vm, has) {
                parties[v] += 1;
            }
        }
        let mut lock_vm = vec![None; lock_index.len()];
        for (&(vm, l), &i) in lock_index {
            if l == BARRIER_LOCK {
                lock_vm[i] = Some(vm as usize);
            }
        }
        let n = members.len();
        Barriers {
            parties,
            arrived: vec![0; vms],
            released: vec![0; vms],
            sleepers: vec![Vec::new(); vms],
            passed: vec![0; n],
            arrived_here: vec![false; n],
            member: members.iter().map(|&(v, has)| v.is_some() && has).collect(),
            lock_vm,
        }
    }

    /// Whether thread `t`'s current barrier has been released.
    pub(super) fn open_for(&self, t: u32, vm: usize) -> bool {
        self.released[vm] > self.passed[t as usize]
    }
}

/// Whether a thread's phases hold a barrier.
pub(super) fn has_barrier<'p>(mut phases: impl Iterator<Item = &'p Phase>) -> bool {
    phases.any(|p| matches!(p, Phase::Barrier { .. }))
}

impl Engine<'_> {
    /// Thread `t`, running on `c`, is at a barrier phase. Returns true
    /// when it waits (it spins or sleeps; stop stepping), false when the
    /// barrier is open and the phase is done.
    pub(super) fn at_barrier(&mut self, t: u32, c: u32, spin: bool) -> bool {
        let Some(v) = vm_of(self.w, t).map(|v| v.0 as usize) else {
            self.complete_phase(t);
            return false;
        };
        let ti = t as usize;
        if !self.bars.arrived_here[ti] {
            self.bars.arrived_here[ti] = true;
            self.bars.arrived[v] += 1;
            self.release_if_all_arrived(v);
        }
        if self.bars.open_for(t, v) {
            self.pass_barrier(t);
            self.complete_phase(t);
            return false;
        }
        if spin {
            let li = self.lock(t, BARRIER_LOCK);
            self.start_spin(t, c, li);
        } else {
            self.bars.sleepers[v].push(t);
            self.block(t, c, None, StateCode::Blocked);
        }
        true
    }

    /// `t` goes past its current barrier.
    pub(super) fn pass_barrier(&mut self, t: u32) {
        let ti = t as usize;
        self.bars.passed[ti] += 1;
        self.bars.arrived_here[ti] = false;
    }

    fn release_if_all_arrived(&mut self, v: usize) {
        if self.bars.arrived[v] == 0 || self.bars.arrived[v] < self.bars.parties[v] {
            return;
        }
        self.bars.arrived[v] = 0;
        self.bars.released[v] += 1;
        // sleepers pass and wake; spinners on the CPU re-check now; ones
        // waiting for a CPU pass when they next run; pv-halted ones wake
        for s in std::mem::take(&mut self.bars.sleepers[v]) {
            self.pass_barrier(s);
            self.complete_phase(s);
            self.th[s as usize].gen += 1;
            let g = self.th[s as usize].gen;
            self.at(self.now, Ev::Unblock(s, g));
        }
        let key = (v as u32, BARRIER_LOCK);
        if let Some(&li) = self.lock_index.get(&key) {
            self.wake_spinners(li);
            while let Some(h) = self.halted[li].pop_front() {
                let ht = &mut self.th[h as usize];
                ht.pv_spun = 0;
                if let Some((l, _)) = ht.spin {
                    ht.spin = Some((l, self.now));
                }
                ht.gen += 1;
                let g = ht.gen;
                self.at(self.now, Ev::Unblock(h, g));
            }
        }
    }

    /// A thread finished its demand: its VM's barriers no longer wait for
    /// it (a capture cut mid-phase leaves the others at their last one).
    pub(super) fn leave_barriers(&mut self, t: u32) {
        let ti = t as usize;
        if !self.bars.member[ti] || self.th[ti].st != St::Done {
            return;
        }
        self.bars.member[ti] = false;
        if let Some(v) = vm_of(self.w, t).map(|v| v.0 as usize) {
            self.bars.parties[v] -= 1;
            self.release_if_all_arrived(v);
        }
    }
}
