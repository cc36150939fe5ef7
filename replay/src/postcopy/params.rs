//! Parameters of the postcopy scenario, with the defaults and where each
//! comes from (postcopy.md §2 unless stated).

/// When a page-ready notification reaches a vCPU that is in guest mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadyDelay {
    /// The paper's kernel: at the next VM exit, measured 99 µs later.
    Paper,
    /// Linux ≥ 5.8: an interrupt, delivered at once.
    Modern,
    /// A given delay in ns.
    Fixed(i64),
}

impl ReadyDelay {
    /// The delay in ns.
    pub fn ns(self) -> i64 {
        match self {
            ReadyDelay::Paper => 99_000,
            ReadyDelay::Modern => 0,
            ReadyDelay::Fixed(ns) => ns.max(0),
        }
    }
}

/// Everything the scenario needs besides the workload.
#[derive(Clone, Debug, PartialEq)]
pub struct PostcopyParams {
    /// Guest cooperates with async page faults.
    pub async_pf: bool,
    /// Page size, bytes (4 KiB).
    pub page_bytes: u64,
    /// Migration link bandwidth, bytes/s (10 GbE).
    pub link_bytes_per_s: f64,
    /// Round-trip time, ns (ping RTT ≈ 30 µs).
    pub rtt_ns: i64,
    /// Software cost of one fetch (daemon request, copy, map), ns: 67 µs so
    /// that an idle fetch takes the paper's ≈100 µs with RTT and transfer.
    pub fetch_overhead_ns: i64,
    /// Demand fetches in flight at once; more wait in FIFO order.
    pub max_inflight: usize,
    /// Async faults one vCPU may have outstanding (KVM's ASYNC_PF_PER_VCPU);
    /// past that a fault is synchronous.
    pub apf_per_vcpu: usize,
    /// vCPU time outside the guest to take a fault and exit/enter, ns.
    pub exit_entry_ns: i64,
    /// Extra vCPU time outside the guest to inject page-not-present, ns
    /// ("several microseconds" in the text; the traced 44 µs includes
    /// SystemTap overhead, see postcopy.md §6.1).
    pub not_present_ns: i64,
    /// Guest time to park the faulting task and switch to another, ns.
    pub guest_switch_ns: i64,
    /// Guest time to wake and resume a task when its page is ready, ns.
    pub guest_wake_ns: i64,
    /// Guest scheduler time slice, ns: a task that has held its vCPU this
    /// long (wall time, stalls included: the guest's tick keeps running)
    /// is preempted for the next runnable task.
    pub guest_slice_ns: i64,
    /// Page-ready delivery while the vCPU is in guest mode.
    pub ready_delay: ReadyDelay,
    /// Fraction of touches made in guest kernel mode (they block even
    /// with async PF, as on modern guests without SEND_ALWAYS).
    pub kernel_fault_fraction: f64,
    /// Background stream: start this long after the switch (None = off,
    /// the paper's setting).
    pub background_start_ns: Option<i64>,
    /// Background fetches kept in flight.
    pub background_depth: usize,
    /// Seed for the kernel-mode draw.
    pub seed: u64,
}

impl Default for PostcopyParams {
    fn default() -> Self {
        PostcopyParams {
            async_pf: true,
            page_bytes: 4096,
            link_bytes_per_s: 10e9 / 8.0,
            rtt_ns: 30_000,
            fetch_overhead_ns: 67_000,
            max_inflight: 64,
            apf_per_vcpu: 64,
            exit_entry_ns: 4_000,
            not_present_ns: 5_000,
            guest_switch_ns: 10_000,
            guest_wake_ns: 10_000,
            guest_slice_ns: 4_000_000,
            ready_delay: ReadyDelay::Modern,
            kernel_fault_fraction: 0.0,
            background_start_ns: None,
            background_depth: 4,
            seed: 1,
        }
    }
}
