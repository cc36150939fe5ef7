//! The replay's inputs: a workload (demand per thread, as phases), a host
//! and a policy. Ids are newtypes so a vCPU index cannot be mistaken for a
//! pCPU.

/// Index of a replayed thread (vCPU or plain host thread).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ThreadId(pub u32);

/// Index of a host CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CpuId(pub u32);

/// Index of a VM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VmId(pub u32);

/// The CPU the capture ran a stretch of work on, if known, in 4 bytes (an
/// `Option<u32>` takes 8, and a 100 M-event capture has about 100 M
/// phases): `u32::MAX` stands for unknown. No host has that many CPUs, and
/// a recorded CPU the replayed host lacks is read as unknown anyway.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordedCpu(u32);

impl RecordedCpu {
    /// No CPU known (other phases than work, or not recorded).
    pub const UNKNOWN: RecordedCpu = RecordedCpu(u32::MAX);

    /// The CPU, None when unknown.
    pub fn get(self) -> Option<u32> {
        (self != Self::UNKNOWN).then_some(self.0)
    }
}

impl From<Option<u32>> for RecordedCpu {
    fn from(cpu: Option<u32>) -> Self {
        cpu.map_or(Self::UNKNOWN, RecordedCpu)
    }
}

/// One step of a thread's recorded demand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// CPU work: this many ns at the recorded frequency.
    Work(i64),
    /// Off CPU for this long (I/O, timer): open loop.
    Block(i64),
    /// Take a spin lock of the thread's VM; spins (per the spin response)
    /// while a sibling holds it.
    Acquire(u32),
    /// Release it.
    Release(u32),
    /// A throughput point (transaction end).
    Mark,
    /// Wait until `thread` has completed `phase` (a causal wakeup).
    WaitFor {
        /// The waker.
        thread: ThreadId,
        /// The waker's phase index that wakes us.
        phase: u32,
    },
    /// Wait at the VM's barrier until every vCPU of the VM that has
    /// barriers (and has not finished) arrives at it: a gang-synchronised
    /// parallel job's phase boundary (OpenMP's, LU-OMP's). `spin`: the
    /// waiter spins (busy-waits, per the spin response; it holds its CPU)
    /// rather than sleeping until the last arrival wakes it.
    Barrier {
        /// Busy-wait (true) or sleep (false).
        spin: bool,
    },
}

/// A thread to replay.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadSpec {
    /// Thread id in the capture.
    pub tid: i64,
    /// The VM it is a vCPU of (None: plain host thread).
    pub vm: Option<VmId>,
    /// vCPU index within the VM.
    pub vcpu: Option<u32>,
    /// Demand in order.
    pub phases: Vec<Phase>,
    /// When the thread first becomes runnable (ns since replay start).
    pub start_ns: i64,
    /// The CPU it was on when the capture began, if known: where per-CPU
    /// run queues start it (the recorded placement is initial state).
    pub start_cpu: Option<u32>,
    /// The kernel re-read its runtime every few µs while it worked (system
    /// calls that run update_curr): an expired slice then ends at once, not
    /// at the next tick, except while it spins (no calls). From the
    /// capture's `sched_stat_runtime` events; false without them.
    pub fine_accounting: bool,
    /// Per phase, the CPU the capture ran that stretch of work on (None for
    /// other phases or when unknown; empty: none known): where the
    /// `recorded` placement runs it.
    pub work_cpu: Vec<RecordedCpu>,
    /// Its CFS scheduling group on the host (an index into
    /// [`Workload::groups`]; None: the root group).
    pub group: Option<u32>,
    /// The CPUs it may run on (its affinity: sched_setaffinity, a cpuset,
    /// libvirt's vcpupin); None: any. CPUs the replayed host lacks are
    /// dropped; if none is left, any.
    pub allowed_cpus: Option<Vec<u32>>,
    /// Its power while it runs at the recorded frequency and the host's
    /// voltage, W (static included), when known (a hot vCPU draws more
    /// than a cold one); None: the core's from the power model.
    pub power_w: Option<f64>,
}

/// A VM.
#[derive(Clone, Debug, PartialEq)]
pub struct VmSpec {
    /// Name.
    pub name: String,
    /// Scheduler weight of the whole VM, shared by its vCPUs as in Xen's
    /// credit scheduler (cratrace gives 256 per vCPU by default).
    pub weight: u32,
    /// Asymmetric placement label: `Some(true)` CPU-intensive (fast pool),
    /// `Some(false)` I/O-intensive (slow pool), `None` classify from demand.
    pub cpu_intensive: Option<bool>,
    /// Elasticity of this VM's work time to frequency (None: the host's).
    pub elasticity: Option<f64>,
    /// Its share against other VMs' (cgroup cpu.weight / 100: 1.0 by
    /// default): scales each of its vCPUs' weight under fair and eevdf
    /// and the VM's under credit.
    pub share: f64,
    /// Its CPU cap in CPUs (0.5: half of one CPU per period; cgroup
    /// cpu.max, Xen's credit cap); None: uncapped.
    pub cap: Option<f64>,
}

impl VmSpec {
    /// A VM with this weight, classified from its demand, host elasticity.
    pub fn new(name: impl Into<String>, weight: u32) -> Self {
        VmSpec {
            name: name.into(),
            weight,
            cpu_intensive: None,
            elasticity: None,
            share: 1.0,
            cap: None,
        }
    }
}

/// A CFS scheduling group of the host (an autogroup or a CPU cgroup).
#[derive(Clone, Debug, PartialEq)]
pub struct GroupSpec {
    /// Name (`autogroup-N`, `cgroup:<path>`).
    pub name: String,
    /// Weight in the kernel's units (1024: nice 0, cpu.weight 100).
    pub shares: i64,
}

/// Demand to replay.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Workload {
    /// Threads.
    pub threads: Vec<ThreadSpec>,
    /// VMs.
    pub vms: Vec<VmSpec>,
    /// The host's scheduling groups the threads are in (`eevdf` schedules
    /// them; the other schedulers ignore them).
    pub groups: Vec<GroupSpec>,
}

/// Per-event costs charged to the hypervisor, with defaults typical of a
/// current x86 KVM host (documented in docs/replay.md).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Costs {
    /// Switching a pCPU from one thread to another, ns.
    pub context_switch_ns: i64,
    /// A hypervisor call (PAUSE exit / suspend-spin call), ns.
    pub hypercall_ns: i64,
    /// Scanning one partner in a spin response, ns.
    pub scan_per_partner_ns: i64,
    /// Running on another pCPU than last time (cache refill), ns.
    pub migration_ns: i64,
}

impl Default for Costs {
    fn default() -> Self {
        Costs {
            context_switch_ns: 2_000,
            hypercall_ns: 1_500,
            scan_per_partner_ns: 100,
            migration_ns: 5_000,
        }
    }
}

/// The host the demand is replayed on.
#[derive(Clone, Debug, PartialEq)]
pub struct Host {
    /// Frequency of each pCPU, kHz.
    pub freq_khz: Vec<u64>,
    /// Frequency at which the workload was recorded, kHz.
    pub recorded_khz: u64,
    /// Elasticity of work time to frequency (−1: CPU bound).
    pub elasticity: f64,
    /// Costs.
    pub costs: Costs,
    /// Each pCPU's speed over time as the capture showed it (a shared
    /// host's cores slow down while their other hyperthreads or tenants
    /// work): (from, in ns of the replay's clock; factor), in time order,
    /// the first from 0 on. Recorded work is in units of this speed (see
    /// `demand::Segment::speed`). A pCPU without an entry runs at 1.
    pub cpu_speed: Vec<Vec<(i64, f64)>>,
}

impl Host {
    /// `n` identical pCPUs at `khz`, work recorded at `khz`.
    pub fn uniform(n: usize, khz: u64) -> Self {
        Host {
            freq_khz: vec![khz; n],
            recorded_khz: khz,
            elasticity: -1.0,
            costs: Costs::default(),
            cpu_speed: Vec::new(),
        }
    }

    /// The recorded speed of pCPU `cpu` at time `t` (1 when none was).
    pub fn speed_at(&self, cpu: usize, t: i64) -> f64 {
        let Some(steps) = self.cpu_speed.get(cpu) else {
            return 1.0;
        };
        match steps.partition_point(|&(from, _)| from <= t) {
            0 => steps.first().map_or(1.0, |s| s.1),
            i => steps[i - 1].1,
        }
    }

    /// Work progress per ns on `cpu` (1.0 at the recorded frequency).
    pub fn rate(&self, cpu: CpuId) -> f64 {
        self.rate_at(self.freq_khz[cpu.0 as usize], self.elasticity)
    }

    /// Work progress per ns at `khz` for work of this `elasticity`.
    pub fn rate_at(&self, khz: u64, elasticity: f64) -> f64 {
        // the common case (replayed at the recorded speed) without a powf:
        // this runs for every stretch of work the engine accounts
        if khz == self.recorded_khz.max(1) {
            return 1.0;
        }
        (khz as f64 / self.recorded_khz.max(1) as f64).powf(-elasticity)
    }
}

#[cfg(test)]
mod tests {
    /// The engine holds every phase of the demand for the whole replay:
    /// its size is the replay's memory per phase (benchmarks/replay_engine.py
    /// counts on it).
    #[test]
    fn a_phase_takes_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<super::Phase>(), 16);
    }

    /// Its recorded CPU takes 4 more, and says what an `Option` said.
    #[test]
    fn a_recorded_cpu_takes_four_bytes_and_round_trips() {
        use super::RecordedCpu;
        assert_eq!(std::mem::size_of::<RecordedCpu>(), 4);
        for cpu in [Some(0), Some(7), Some(u32::MAX - 1), None] {
            assert_eq!(RecordedCpu::from(cpu).get(), cpu);
        }
        // the sentinel: unknown, as a CPU no host has would be read anyway
        assert_eq!(RecordedCpu::from(Some(u32::MAX)).get(), None);
    }
}
