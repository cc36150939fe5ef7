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

/// The guest's share of vCPU time in the paper's sequential-read run
/// without async page faults (postcopy.md §4: "≈ 17.6 s; 38%"). The one
/// figure of the paper used as an input: it sets the guest compute per
/// touched page of the working-set model ([`PostcopyParams::compute_for_guest_share`]).
pub const PAPER_BASELINE_GUEST_SHARE: f64 = 0.38;

/// Everything the scenario needs besides the workload.
#[derive(Clone, Debug, PartialEq)]
pub struct PostcopyParams {
    /// Guest cooperates with async page faults.
    pub async_pf: bool,
    /// Page size, bytes (4 KiB).
    pub page_bytes: u64,
    /// Migration link bandwidth, bytes/s: the paper's 10 GbE migration
    /// link (postcopy.md §2), 1.25e9; 1 GbE is 1.25e8. Shared by every
    /// fetch, each direction on its own (full duplex).
    pub link_bytes_per_s: f64,
    /// Round-trip time, ns: the paper's ping RTT on that link, ≈ 30 µs
    /// (postcopy.md §2); half on the request's way, half on the reply's.
    pub rtt_ns: i64,
    /// The page-transfer protocol's header per message, bytes: the 64-bit
    /// page offset the daemon sends and the source echoes with the page
    /// (postcopy.md §1.1, "Major fault").
    pub msg_header_bytes: u64,
    /// Link MTU, bytes (Ethernet's 1500): a message travels in frames of
    /// at most `mtu_bytes - 40` bytes of payload (IPv4 + TCP headers).
    pub mtu_bytes: u64,
    /// Wire bytes per frame besides the payload: TCP 20 + IPv4 20 +
    /// Ethernet header 14 + FCS 4 + preamble 8 + inter-frame gap 12 = 78.
    /// A request is 86 bytes on the wire, a 4 KiB page's reply 4,338.
    pub frame_bytes: u64,
    /// The destination's software per fetch (fault path, daemon request,
    /// page install, wake-up), ns; fetches overlap here freely. 56.5 µs:
    /// the paper's ≈ 100 µs idle fetch (postcopy.md §2, "min fetch") less
    /// the RTT, both messages' wire time and `source_service_ns`.
    pub fetch_overhead_ns: i64,
    /// The source's time to serve one page (take the request, read and
    /// send the page), ns. 10 µs, an assumption: the paper gives its 67 µs
    /// of software per fetch without a split between the hosts. Measure
    /// it on the source (e.g. QEMU's `postcopy_page_req_*` and
    /// `ram_save_queue_pages` trace events).
    pub source_service_ns: i64,
    /// Pages the source serves at once; more wait in FIFO order (demand
    /// before background). 1: one server answering the daemon's requests
    /// in order (postcopy.md §1.1; [modern] QEMU's return-path thread
    /// queues requests for its single migration thread).
    pub source_workers: usize,
    /// Demand fetches the destination keeps in flight at once; more wait
    /// in FIFO order before their request is sent.
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
    /// Guest time to wake and resume a task when its page is ready, ns:
    /// taken from whatever the vCPU was running (the page-ready interrupt
    /// and the enqueue run on it).
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

impl PostcopyParams {
    /// vCPU time outside the guest for one major fault without async PF
    /// on an idle link and source: exit/entry plus the fetch, ns.
    pub fn idle_stall_ns(&self) -> i64 {
        self.exit_entry_ns + super::network::Link::new(self).idle_fetch_ns()
    }

    /// Guest compute per touched page at which a reader without async PF
    /// spends `share` of its vCPU's time in the guest: each page costs
    /// c + stall, so c = share / (1 − share) × stall. With the defaults
    /// and [`PAPER_BASELINE_GUEST_SHARE`], the working-set model's default
    /// (≈ 63.8 µs).
    pub fn compute_for_guest_share(&self, share: f64) -> i64 {
        (share / (1.0 - share) * self.idle_stall_ns() as f64).round() as i64
    }
}

impl Default for PostcopyParams {
    fn default() -> Self {
        PostcopyParams {
            async_pf: true,
            page_bytes: 4096,
            link_bytes_per_s: 10e9 / 8.0,
            rtt_ns: 30_000,
            msg_header_bytes: 8,
            mtu_bytes: 1500,
            frame_bytes: 78,
            fetch_overhead_ns: 56_500,
            source_service_ns: 10_000,
            source_workers: 1,
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
