//! What a replay produces: state segments per thread, CPU slices, marks,
//! spin episodes and the counters behind the metrics. Columns are plain
//! vectors; the binding turns them into canonical tables.

use crate::model::{Host, Phase, Workload};

/// A thread's state in the output timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum StateCode {
    /// Running guest (or thread) work.
    Guest = 0,
    /// Running, spinning on a lock.
    Spinning = 1,
    /// Ready, waiting for a CPU.
    Preempted = 2,
    /// Blocked (I/O, timer, causal wait).
    Blocked = 3,
    /// Finished its demand.
    Done = 4,
    /// Halted in a pv spinlock wait until a kick.
    Halted = 5,
}

impl StateCode {
    /// Every state, by code.
    pub const ALL: [StateCode; 6] = [
        StateCode::Guest,
        StateCode::Spinning,
        StateCode::Preempted,
        StateCode::Blocked,
        StateCode::Done,
        StateCode::Halted,
    ];

    /// Canonical vcpu_states name.
    pub fn name(self) -> &'static str {
        match self {
            StateCode::Guest => "guest",
            StateCode::Spinning => "spinning",
            StateCode::Preempted => "preempted",
            StateCode::Blocked => "blocked",
            StateCode::Done => "done",
            StateCode::Halted => "halted",
        }
    }
}

/// Columns of (thread, state, start, end, pcpu).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StateColumns {
    /// Thread index.
    pub thread: Vec<u32>,
    /// State code.
    pub state: Vec<u8>,
    /// Start ns.
    pub start: Vec<i64>,
    /// End ns.
    pub end: Vec<i64>,
    /// pCPU or -1.
    pub pcpu: Vec<i32>,
}

/// Replay results.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Output {
    cur: Vec<(StateCode, i64, i32)>,
    /// State segments.
    pub states: StateColumns,
    /// CPU slices: cpu, thread, start, end.
    pub slice_cpu: Vec<u32>,
    /// Thread of each slice.
    pub slice_thread: Vec<u32>,
    /// Slice start.
    pub slice_start: Vec<i64>,
    /// Slice end.
    pub slice_end: Vec<i64>,
    /// Throughput marks: thread, time.
    pub mark_thread: Vec<u32>,
    /// Mark time.
    pub mark_ts: Vec<i64>,
    /// Spin episodes: thread, start, end, holder thread (-1 unknown), calls, excessive.
    pub ep_thread: Vec<u32>,
    /// Episode start.
    pub ep_start: Vec<i64>,
    /// Episode end.
    pub ep_end: Vec<i64>,
    /// Holder thread or -1.
    pub ep_holder: Vec<i64>,
    /// Hypervisor calls in the episode.
    pub ep_calls: Vec<i64>,
    /// Uncleared re-dispatches in the episode: times the spinner was
    /// dispatched again after its spin response and found the lock still
    /// held (Umeno et al.'s retries).
    pub ep_retries: Vec<i64>,
    open_ep: Vec<Option<usize>>,
    /// Per thread: CPU ns (including spinning).
    pub cpu_ns: Vec<i64>,
    /// Per thread: spinning ns.
    pub spin_ns: Vec<i64>,
    /// Per thread: hypervisor calls.
    pub calls: Vec<i64>,
    /// Per thread: excessive spins (episodes with more than
    /// `excess_retries` uncleared re-dispatches).
    pub excessive: Vec<i64>,
    /// Per thread: uncleared re-dispatches.
    pub uncleared: Vec<i64>,
    /// Hypervisor/scheduler overhead ns (context switches, calls, scans).
    pub overhead_ns: i64,
    /// Simulated end time.
    pub end_ns: i64,
    /// Events processed.
    pub events: u64,
    /// pCPU count.
    pub pcpus: usize,
    /// Energy balancing: swaps decided.
    pub swaps_decided: u64,
    /// Energy balancing: swaps realised.
    pub swaps_realised: u64,
    /// Energy balancing samples: time, core, energy in the period (J), temperature (°C).
    pub bal_ts: Vec<i64>,
    /// Core of each sample.
    pub bal_core: Vec<u32>,
    /// Energy of the core in the period.
    pub bal_energy_j: Vec<f64>,
    /// Core temperature at the period's end.
    pub bal_temp_c: Vec<f64>,
    /// Each core's highest temperature over the run (°C) and its time
    /// above the throttle point (ns), from the thermal model.
    pub core_peak_c: Vec<f64>,
    /// See `core_peak_c`.
    pub core_hot_ns: Vec<i64>,
    /// Energy balance: each realised swap's wait from its decision (ns).
    pub swap_latency_ns: Vec<i64>,
    /// Frequency of each core in force (kHz).
    pub core_khz: Vec<u64>,
    /// Voltage of each core in force.
    pub core_volt: Vec<f64>,
    /// Dynamic power of each core while busy (C·f·V²), W.
    pub core_dynamic_w: Vec<f64>,
    /// Busy time of each core, ns.
    pub core_busy_ns: Vec<i64>,
    /// Energy of each core over the run from the power model, J.
    pub core_energy_j: Vec<f64>,
    /// Asymmetric placement: pool of each core (0 fast, 1 slow).
    pub core_pool: Vec<i32>,
    /// Asymmetric placement: pool of each thread (0 fast, 1 slow, -1 any).
    pub vcpu_pool: Vec<i32>,
    /// Asymmetric placement: class of each thread (0 CPU-intensive, 1
    /// I/O-intensive, -1 not a vCPU or no pools), by label or classifier.
    pub vcpu_class: Vec<i32>,
    /// Asymmetric placement: vCPUs whose recorded affinity their pool
    /// replaced.
    pub affinity_replaced: u64,
    /// Per thread: work done, in the demand's own ns (at the recorded
    /// frequency): what a run achieved, whatever the speed of the cores it
    /// ran on (a slow core's ns of CPU time is less of it).
    pub work_ns: Vec<i64>,
}

/// How many rows the output columns are given room for, from the demand:
/// a state segment or so per phase, a CPU slice at most per stretch of
/// work (and per preemption of one), a mark per mark, a spin episode per
/// lock taken. Room not written is never touched, so it costs no memory;
/// growing a column by doubling instead left the old copies behind in the
/// heap, and the replay's peak memory then grew with the trace beyond the
/// columns themselves (benchmarks/replay_engine.py measures it).
struct RowsAhead {
    phases: usize,
    work: usize,
    marks: usize,
    acquires: usize,
}

impl RowsAhead {
    fn of<'p>(demand: impl Iterator<Item = &'p [Phase]>) -> Self {
        let mut r = RowsAhead {
            phases: 0,
            work: 0,
            marks: 0,
            acquires: 0,
        };
        for phases in demand {
            r.phases += phases.len();
            for ph in phases {
                match ph {
                    Phase::Work(_) => r.work += 1,
                    Phase::Mark => r.marks += 1,
                    Phase::Acquire(_) => r.acquires += 1,
                    _ => {}
                }
            }
        }
        r
    }
}

impl Output {
    /// An output with room for what `demand` (each thread's phases) will
    /// write.
    pub(crate) fn new<'p>(
        w: &Workload,
        h: &Host,
        demand: impl Iterator<Item = &'p [Phase]>,
    ) -> Self {
        let n = w.threads.len();
        let rows = RowsAhead::of(demand);
        let (states, slices) = (rows.phases + n, rows.work + n);
        Output {
            states: StateColumns {
                thread: Vec::with_capacity(states),
                state: Vec::with_capacity(states),
                start: Vec::with_capacity(states),
                end: Vec::with_capacity(states),
                pcpu: Vec::with_capacity(states),
            },
            slice_cpu: Vec::with_capacity(slices),
            slice_thread: Vec::with_capacity(slices),
            slice_start: Vec::with_capacity(slices),
            slice_end: Vec::with_capacity(slices),
            mark_thread: Vec::with_capacity(rows.marks),
            mark_ts: Vec::with_capacity(rows.marks),
            ep_thread: Vec::with_capacity(rows.acquires),
            ep_start: Vec::with_capacity(rows.acquires),
            ep_end: Vec::with_capacity(rows.acquires),
            ep_holder: Vec::with_capacity(rows.acquires),
            ep_calls: Vec::with_capacity(rows.acquires),
            ep_retries: Vec::with_capacity(rows.acquires),
            cur: w
                .threads
                .iter()
                .map(|t| (StateCode::Blocked, t.start_ns.min(0), -1))
                .collect(),
            open_ep: vec![None; n],
            cpu_ns: vec![0; n],
            spin_ns: vec![0; n],
            calls: vec![0; n],
            excessive: vec![0; n],
            uncleared: vec![0; n],
            work_ns: vec![0; n],
            pcpus: h.freq_khz.len(),
            ..Default::default()
        }
    }

    pub(crate) fn thread_state(&mut self, t: u32, code: StateCode, now: i64, pcpu: Option<u32>) {
        let p = pcpu.map_or(-1, |c| c as i32);
        let (c0, s0, p0) = self.cur[t as usize];
        if c0 == code && p0 == p {
            return;
        }
        if now > s0 {
            self.states.thread.push(t);
            self.states.state.push(c0 as u8);
            self.states.start.push(s0);
            self.states.end.push(now);
            self.states.pcpu.push(p0);
        }
        self.cur[t as usize] = (code, now.max(s0), p);
    }

    pub(crate) fn ran(&mut self, t: u32, c: u32, start: i64, end: i64) {
        if end > start {
            self.slice_cpu.push(c);
            self.slice_thread.push(t);
            self.slice_start.push(start);
            self.slice_end.push(end);
            self.cpu_ns[t as usize] += end - start;
        }
    }

    pub(crate) fn spin(&mut self, t: u32, ns: i64) {
        self.spin_ns[t as usize] += ns.max(0);
    }

    pub(crate) fn mark(&mut self, t: u32, ts: i64) {
        self.mark_thread.push(t);
        self.mark_ts.push(ts);
    }

    pub(crate) fn overhead(&mut self, ns: i64) {
        self.overhead_ns += ns;
    }

    pub(crate) fn hypercall(&mut self, t: u32, ns: i64) {
        self.calls[t as usize] += 1;
        self.overhead_ns += ns;
        if let Some(i) = self.open_ep[t as usize] {
            self.ep_calls[i] += 1;
        }
    }

    pub(crate) fn spin_episode_start(&mut self, t: u32, now: i64, holder: Option<u32>) {
        self.open_ep[t as usize] = Some(self.ep_thread.len());
        self.ep_thread.push(t);
        self.ep_start.push(now);
        self.ep_end.push(now);
        self.ep_holder.push(holder.map_or(-1, |h| h as i64));
        self.ep_calls.push(0);
        self.ep_retries.push(0);
    }

    pub(crate) fn spin_episode_end(&mut self, t: u32, now: i64) {
        if let Some(i) = self.open_ep[t as usize].take() {
            self.ep_end[i] = now;
        }
    }

    pub(crate) fn balance_sample(&mut self, ts: i64, core: u32, j: f64, temp: f64) {
        self.bal_ts.push(ts);
        self.bal_core.push(core);
        self.bal_energy_j.push(j);
        self.bal_temp_c.push(temp);
    }

    pub(crate) fn uncleared_redispatch(&mut self, t: u32) {
        self.uncleared[t as usize] += 1;
        if let Some(i) = self.open_ep[t as usize] {
            self.ep_retries[i] += 1;
        }
    }

    pub(crate) fn excessive_spin(&mut self, t: u32) {
        self.excessive[t as usize] += 1;
    }

    pub(crate) fn finish(&mut self, end: i64) {
        self.end_ns = end;
        for t in 0..self.cur.len() {
            let (c, _, _) = self.cur[t];
            self.thread_state(
                t as u32,
                if c == StateCode::Done {
                    StateCode::Done
                } else {
                    StateCode::Blocked
                },
                end,
                None,
            );
            // close the last segment explicitly
            let (c0, s0, p0) = self.cur[t];
            if end > s0 {
                self.states.thread.push(t as u32);
                self.states.state.push(c0 as u8);
                self.states.start.push(s0);
                self.states.end.push(end);
                self.states.pcpu.push(p0);
            }
            self.cur[t].1 = end;
        }
        for i in 0..self.open_ep.len() {
            if let Some(e) = self.open_ep[i].take() {
                self.ep_end[e] = end;
            }
        }
    }
}
