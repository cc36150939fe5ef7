//! Asymmetric (fast/slow core) scheduling support (issue #6;
//! ../shared/papers/asym.md): core pools by frequency, vCPU
//! classification, and how work stretches when it runs at another
//! frequency.
//!
//! The scheduling itself is the credit scheduler with one pool per core
//! class (30 ms slice on fast cores, 10 ms on slow, 30 ms accounting on
//! both, no cross-pool stealing); this module holds the pieces that are
//! pure functions of the inputs.

/// A vCPU's workload class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum VcpuClass {
    /// CPU-intensive: belongs on fast cores.
    Cpu,
    /// I/O-intensive: belongs on slow cores.
    Io,
}

/// What the capture says about a vCPU, for classification.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VcpuFeatures {
    /// Share of wall time the vCPU was running (0..1).
    pub utilisation: f64,
    /// Blocks (sleeps on I/O or timers) per second of wall time.
    pub blocks_per_s: f64,
    /// I/O exits (IO instruction, MMIO/EPT misconfig) per second.
    pub io_exits_per_s: f64,
}

/// Thresholds of the automatic classifier (asym.md §6.1's proposed
/// resolution: the paper gives none).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClassifierThresholds {
    /// Minimum utilisation of a CPU-intensive vCPU.
    pub min_cpu_utilisation: f64,
    /// Above this block rate a vCPU is I/O-intensive.
    pub max_cpu_blocks_per_s: f64,
    /// Above this I/O-exit rate a vCPU is I/O-intensive.
    pub max_cpu_io_exits_per_s: f64,
}

impl Default for ClassifierThresholds {
    fn default() -> Self {
        ClassifierThresholds {
            min_cpu_utilisation: 0.8,
            max_cpu_blocks_per_s: 100.0,
            max_cpu_io_exits_per_s: 1000.0,
        }
    }
}

/// Classify one vCPU from its features.
pub fn classify(f: &VcpuFeatures, t: &ClassifierThresholds) -> VcpuClass {
    if f.utilisation >= t.min_cpu_utilisation
        && f.blocks_per_s <= t.max_cpu_blocks_per_s
        && f.io_exits_per_s <= t.max_cpu_io_exits_per_s
    {
        VcpuClass::Cpu
    } else {
        VcpuClass::Io
    }
}

/// Time to do, at `f_khz`, work that took `t_rec_ns` at `f_rec_khz`, for a
/// workload whose completion-time elasticity to frequency is `elasticity`
/// (−1 = purely CPU-bound: time ∝ 1/f; 0 = insensitive). Uses the power
/// law `t = t_rec · (f / f_rec)^elasticity`, exact for both limits.
pub fn stretch_ns(t_rec_ns: i64, f_rec_khz: u64, f_khz: u64, elasticity: f64) -> i64 {
    if f_khz == 0 || f_rec_khz == 0 || f_khz == f_rec_khz {
        return t_rec_ns;
    }
    let ratio = f_khz as f64 / f_rec_khz as f64;
    (t_rec_ns as f64 * ratio.powf(elasticity)).round() as i64
}

/// The arc (midpoint) elasticity of completion time to frequency,
/// asym.md eq. (1), from two runs.
pub fn arc_elasticity(t_fast: f64, t_slow: f64, f_fast: f64, f_slow: f64) -> f64 {
    (t_fast - t_slow) / (f_fast - f_slow) * (f_fast + f_slow) / (t_fast + t_slow)
}

/// Core pools: cores at the highest frequency are fast, the rest slow.
/// Returns (fast cores, slow cores); a homogeneous host is all fast.
pub fn pools_by_frequency(core_khz: &[u64]) -> (Vec<usize>, Vec<usize>) {
    let top = core_khz.iter().copied().max().unwrap_or(0);
    let fast = (0..core_khz.len())
        .filter(|&c| core_khz[c] == top)
        .collect();
    let slow = (0..core_khz.len())
        .filter(|&c| core_khz[c] != top)
        .collect();
    (fast, slow)
}

/// A vCPU as the pool rule sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PoolCandidate {
    /// Its class.
    pub class: VcpuClass,
    /// Its VM has several vCPUs (rule 3 favours single-vCPU VMs).
    pub multi_vcpu_vm: bool,
    /// The share of a core it asks for: the work share of its recorded
    /// demand (1: always runnable).
    pub load: f64,
    /// Its work progress per ns on a fast and on a slow core (its VM's
    /// elasticity; 1: as recorded).
    pub fast_rate: f64,
    /// See `fast_rate`.
    pub slow_rate: f64,
}

/// Which pool each vCPU goes to (asym.md §1.3, §6.6): I/O-class on slow
/// cores, CPU-class on fast ones (rules 2 and 3). With no slow cores
/// everything shares the fast pool.
///
/// More CPU-class demand than the fast cores hold (§6.6, which the paper
/// leaves open) with `spill`: CPU-class vCPUs are taken single-vCPU VMs
/// first (rule 3), then in order, and each goes to the pool where it
/// would progress faster given what is there already: its rate on the
/// pool's cores times the share of a core it would get, min(1, cores /
/// (load there + its own)). A fast pool with room always wins; the slow
/// pool takes a vCPU only when the fast cores are crowded enough that a
/// slow core's whole time is worth more than a fast core's share. Without
/// `spill` every CPU-class vCPU queues on the fast cores (the paper's
/// static pinning). The rule used before (the excess over one vCPU per
/// fast core went slow) put 7 of 8 CPU-bound vCPUs on one slow core next
/// to one alone on a fast core.
pub fn assign_pools(
    vcpus: &[PoolCandidate],
    fast_cores: usize,
    slow_cores: usize,
    spill: bool,
) -> Vec<Pool> {
    if slow_cores == 0 {
        return vec![Pool::Fast; vcpus.len()];
    }
    let mut out = vec![Pool::Slow; vcpus.len()];
    let mut slow_load: f64 = vcpus
        .iter()
        .filter(|v| v.class == VcpuClass::Io)
        .map(|v| v.load)
        .sum();
    let mut fast_load = 0.0;
    let mut cpu: Vec<(bool, usize)> = vcpus
        .iter()
        .enumerate()
        .filter(|(_, v)| v.class == VcpuClass::Cpu)
        .map(|(i, v)| (v.multi_vcpu_vm, i))
        .collect();
    cpu.sort(); // single-vCPU VMs first, then in order
    let share = |cores: usize, load: f64| (cores as f64 / load.max(1e-12)).min(1.0);
    for (_, i) in cpu {
        let v = &vcpus[i];
        let fast = v.fast_rate * share(fast_cores, fast_load + v.load);
        let slow = v.slow_rate * share(slow_cores, slow_load + v.load);
        if !spill || fast >= slow {
            out[i] = Pool::Fast;
            fast_load += v.load;
        } else {
            slow_load += v.load;
        }
    }
    out
}

/// A core pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Pool {
    /// Fast cores, 30 ms slice by default.
    Fast,
    /// Slow cores, 10 ms slice by default.
    Slow,
}

impl Pool {
    /// The paper's time slice for this pool, ns.
    pub fn default_slice_ns(self) -> i64 {
        match self {
            Pool::Fast => 30_000_000,
            Pool::Slow => 10_000_000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_bound_work_has_elasticity_minus_one_and_stretches_by_the_frequency_ratio() {
        // A purely CPU-bound burst: 100 ms at 2.79 GHz takes 2.79/1.33 as long at 1.33 GHz.
        let slow = stretch_ns(100_000_000, 2_790_000, 1_330_000, -1.0);
        assert!((slow as f64 / 1e8 - 2.79 / 1.33).abs() < 1e-6);
        let e = arc_elasticity(1e8, slow as f64, 2.79, 1.33);
        assert!((e + 1.0).abs() < 1e-6, "elasticity {e}");
        // insensitive work does not stretch
        assert_eq!(stretch_ns(5_000, 2_790_000, 1_330_000, 0.0), 5_000);
    }

    #[test]
    fn published_inverse_ratios() {
        // asym.md §2.1: for E = −0.5 the slow/fast time ratio is 1.431 under
        // the arc definition; the power law is a different curve through the
        // same endpoints (E = 0, −1), so check it stays close in between.
        let r = stretch_ns(1_000_000, 2_790_000, 1_330_000, -0.5) as f64 / 1e6;
        assert!((r - 1.431).abs() < 0.03, "{r}");
    }

    #[test]
    fn classifier_and_pools() {
        let t = ClassifierThresholds::default();
        let cpu = VcpuFeatures {
            utilisation: 0.95,
            blocks_per_s: 2.0,
            io_exits_per_s: 10.0,
        };
        let io = VcpuFeatures {
            utilisation: 0.3,
            blocks_per_s: 800.0,
            io_exits_per_s: 5000.0,
        };
        assert_eq!(classify(&cpu, &t), VcpuClass::Cpu);
        assert_eq!(classify(&io, &t), VcpuClass::Io);
        let (fast, slow) = pools_by_frequency(&[2_790_000, 2_790_000, 1_330_000, 1_330_000]);
        assert_eq!((fast, slow), (vec![0, 1], vec![2, 3]));
        let v = |class, multi| PoolCandidate {
            class,
            multi_vcpu_vm: multi,
            load: 1.0,
            fast_rate: 1.0,
            slow_rate: 1.33 / 2.79,
        };
        assert_eq!(
            assign_pools(
                &[v(VcpuClass::Cpu, false), v(VcpuClass::Io, false)],
                1,
                1,
                true
            ),
            vec![Pool::Fast, Pool::Slow]
        );
        assert_eq!(
            assign_pools(&[v(VcpuClass::Io, false)], 1, 0, true),
            vec![Pool::Fast]
        );
    }

    #[test]
    fn crowded_fast_cores_spill_where_a_vcpu_progresses_faster() {
        // 8 CPU-bound vCPUs of two 4-vCPU VMs, 1 fast (2.79 GHz) and 1
        // slow (1.33 GHz) core: the fast core's share beats the slow
        // core's until 6 share it (2.79/6 = 0.465 > 1.33/3 = 0.443), so
        // 6 fast and 2 slow, the split that gives the slowest vCPU the
        // most (5:3 gives 0.443, 7:1 0.399), not 1 fast and 7 slow
        let v = |_: usize| PoolCandidate {
            class: VcpuClass::Cpu,
            multi_vcpu_vm: true,
            load: 1.0,
            fast_rate: 1.0,
            slow_rate: 1.33 / 2.79,
        };
        let pools = assign_pools(&(0..8).map(v).collect::<Vec<_>>(), 1, 1, true);
        let fast = pools.iter().filter(|&&p| p == Pool::Fast).count();
        assert_eq!(fast, 6, "{pools:?}");
        // as many fast cores as vCPUs: all fast; without spill: all fast
        assert!(assign_pools(&(0..8).map(v).collect::<Vec<_>>(), 8, 1, true)
            .iter()
            .all(|&p| p == Pool::Fast));
        assert!(
            assign_pools(&(0..8).map(v).collect::<Vec<_>>(), 1, 1, false)
                .iter()
                .all(|&p| p == Pool::Fast)
        );
        // a frequency-insensitive vCPU (same rate on both) goes where it
        // gets more of a core
        let flat = PoolCandidate {
            slow_rate: 1.0,
            ..v(0)
        };
        assert_eq!(
            assign_pools(&[v(0), flat], 1, 1, true),
            vec![Pool::Fast, Pool::Slow]
        );
    }
}
