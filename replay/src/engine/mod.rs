//! The discrete-event loop.
//!
//! Events are ordered by (time, seq) with a monotonic seq, so simultaneous
//! events run in scheduling order and a replay is a pure function of its
//! inputs. Stale events (a thread preempted before its work completion
//! fired) are recognised by a per-thread/per-CPU generation counter rather
//! than removed from the heap. No hash-order iteration anywhere.

mod barrier;
mod caps;
mod per_cpu;
mod placement;
mod spin;
mod thread_demand;

use placement::Balancer;
use thread_demand::ThreadDemand;

use crate::asymmetric::VcpuFeatures;
use crate::model::{Host, Phase, ThreadId, VmId, Workload};
use crate::output::{Output, StateCode};
use crate::policy::{Placement, Policy, SchedulerKind};
use crate::sched::{
    credit::Credit, eevdf::Eevdf, fair::Fair, lpar::Lpar, rr::RoundRobin, Pull, Scheduler, Sub,
};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// An idle pCPU looks for work.
    Dispatch(u32),
    /// The running thread's current step ended (work done, spin window over).
    Step(u32, u64),
    /// The pCPU's slice ended.
    SliceEnd(u32, u64),
    /// A blocked thread's block ends.
    Unblock(u32, u64),
    /// Scheduler tick.
    Tick,
    /// Energy-balance accounting period ends.
    Balance,
    /// Capped VMs' running time is checked against their quota.
    CapCheck,
    /// Pending energy-balance swaps look again (their vCPUs reach a
    /// point where they may be swapped).
    SwapCheck,
    /// The caps' period ends.
    CapPeriod,
    /// The pCPU's recorded speed changes (`Host::cpu_speed`).
    Speed(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum St {
    Ready,
    Running(u32),
    Blocked,
    Done,
}

struct Th {
    phase: usize,
    remaining: i64,
    st: St,
    gen: u64,
    /// When the current stint on a CPU began (for CPU time).
    run_start: i64,
    /// When it was dispatched (before the switch cost): the scheduler
    /// charges from here, so bouncing threads pay for their switches.
    dispatched_at: i64,
    /// Charged to the scheduler up to here (schedulers that charge
    /// running threads as they go).
    charged_at: i64,
    /// Left the CPU (parked or requeued) since its last suspend-spin call.
    redispatched: bool,
    /// Up to when work progress has been accounted.
    progress_at: i64,
    last_cpu: Option<u32>,
    /// Linux's `recent_used_cpu`: the previous CPU at the last wakeup.
    recent_cpu: Option<u32>,
    /// Spinning on this lock since this time.
    spin: Option<(usize, i64)>,
    /// pv: spun (on CPU) since the episode began or the last kick.
    pv_spun: i64,
    /// Parked by WAPD/WOPD: ready but not dispatchable.
    aspw: bool,
    /// WAPD: partners this thread waits to see dispatched.
    dmask: Vec<u32>,
    sub: Sub,
    retries: u32,
    excessive_counted: bool,
    /// Completed phases (for causal waits).
    done_phases: usize,
    waiters: Vec<(u32, usize)>,
}

struct Cpu {
    cur: Option<u32>,
    gen: u64,
    /// A Dispatch event is queued for this CPU (so wakeups spread out
    /// over idle CPUs instead of all targeting the first one).
    pending: bool,
    /// Per-CPU run queues (Linux's newidle balance): when this CPU last
    /// went idle, the running average of its idle periods, and whether
    /// the queued Dispatch is a tick's load balancing.
    idle_stamp: Option<i64>,
    avg_idle: i64,
    balancing: bool,
}

/// Runs one replay.
pub struct Engine<'a> {
    w: &'a Workload,
    /// Each thread's phases (the workload's own are read through this).
    demand: Vec<ThreadDemand<'a>>,
    h: &'a Host,
    p: &'a Policy,
    now: i64,
    seq: u64,
    heap: BinaryHeap<Reverse<(i64, u64, Ev)>>,
    th: Vec<Th>,
    cpus: Vec<Cpu>,
    sched: Box<dyn Scheduler>,
    /// (vm, lock) → flat lock index.
    lock_index: std::collections::BTreeMap<(u32, u32), usize>,
    /// Gang barriers (`Phase::Barrier`).
    bars: barrier::Barriers,
    lock_holder: Vec<Option<u32>>,
    /// pv: waiters halted on each lock, in the order they halted.
    halted: Vec<std::collections::VecDeque<u32>>,
    siblings: Vec<Vec<u32>>,
    gspw: Vec<u32>,
    last_boosted: Vec<usize>,
    /// Core a thread is pinned to (its affinity when that is one CPU; the
    /// energy-balance placement's, which overrides it).
    pin: Vec<Option<u32>>,
    /// CPUs a thread may run on when its affinity is several (one: `pin`).
    allowed: Vec<Option<Vec<u32>>>,
    /// Pool a thread must run in, and each CPU's pool (asymmetric placement).
    pool: Vec<Option<u8>>,
    cpu_pool: Vec<u8>,
    /// Frequency of each pCPU in force (the host's, or the pools').
    freq: Vec<u64>,
    /// Voltage of each pCPU in force (`volt`, or the pools').
    volt: Vec<f64>,
    bal: Option<Balancer>,
    /// The output being built.
    pub out: Output,
    events: u64,
    /// Host utilisation (per-CPU run queues' idle search), and the busy
    /// time of the current tick window.
    util_avg: f64,
    win_busy: i64,
    win_start: i64,
    /// Per-CPU run queues: the policy's `migration_cost_ns` (read once),
    /// which caps a CPU's average idle period, and the average idle period
    /// below which a CPU going idle pulls nothing (`newidle_cost_ns`).
    migration_cost: i64,
    newidle_cost: i64,
    /// Charge a queue's running thread before placing a woken one on it
    /// (`wake_update_curr`).
    wake_charges_running: bool,
    /// Host threads (not vCPUs) run where the capture ran them
    /// (`host_placement=1`).
    host_recorded: bool,
    /// Each VM's CPU cap (None: uncapped), the caps' period and check
    /// interval, and from when each thread's running time is yet to count.
    caps: Vec<Option<caps::Cap>>,
    cap_period: i64,
    cap_check: i64,
    cap_from: Vec<i64>,
    remaining_threads: usize,
}

/// What CPU `c` may run: threads not parked by a spin response, within
/// their pin, pool and affinity.
struct Placed<'e> {
    c: u32,
    pool: u8,
    th: &'e [Th],
    pin: &'e [Option<u32>],
    pools: &'e [Option<u8>],
    allowed: &'e [Option<Vec<u32>>],
    w: &'e Workload,
    caps: &'e [Option<caps::Cap>],
}

/// The [`Placed`] of CPU `c` from the engine's fields (a macro, so that
/// the scheduler, another field, can be borrowed mutably beside it).
macro_rules! placed {
    ($e:expr, $c:expr) => {
        Placed {
            c: $c,
            pool: $e.cpu_pool[$c as usize],
            th: &$e.th,
            pin: &$e.pin,
            pools: &$e.pool,
            allowed: &$e.allowed,
            w: $e.w,
            caps: &$e.caps,
        }
    };
}

impl Placed<'_> {
    fn run(&self, i: usize) -> bool {
        !self.th[i].aspw
            && self.pin[i].is_none_or(|p| p == self.c)
            && self.pools[i].is_none_or(|p| p == self.pool)
            && self.allowed[i].as_ref().is_none_or(|s| s.contains(&self.c))
            && !self.w.threads[i]
                .vm
                .and_then(|v| self.caps[v.0 as usize].as_ref())
                .is_some_and(|c| c.throttled)
    }
}

fn vm_of(w: &Workload, t: u32) -> Option<VmId> {
    w.threads[t as usize].vm
}

/// Number of vCPU threads of each VM.
fn vcpus_per_vm(w: &Workload) -> Vec<usize> {
    let mut n = vec![0usize; w.vms.len()];
    for t in &w.threads {
        if let Some(v) = t.vm {
            n[v.0 as usize] += 1;
        }
    }
    n
}

/// Classifier features of a thread's recorded demand: the share of it spent
/// working, and blocks per second of it. (The workload carries no I/O-exit
/// counts; blocks stand in for them.)
fn demand_features(phases: &[Phase]) -> VcpuFeatures {
    let (mut work, mut block, mut blocks) = (0i64, 0i64, 0i64);
    for ph in phases {
        match ph {
            Phase::Work(x) => work += x,
            Phase::Block(x) => {
                block += x;
                blocks += 1
            }
            _ => {}
        }
    }
    let span = (work + block).max(1) as f64;
    VcpuFeatures {
        utilisation: work as f64 / span,
        blocks_per_s: blocks as f64 / (span * 1e-9),
        io_exits_per_s: 0.0,
    }
}

impl<'a> Engine<'a> {
    /// Prepare a replay that reads the workload's phases where they are.
    pub fn new(w: &'a Workload, h: &'a Host, p: &'a Policy) -> Self {
        let demand = w
            .threads
            .iter()
            .map(|t| ThreadDemand::Borrowed {
                phases: &t.phases,
                cpus: &t.work_cpu,
            })
            .collect();
        Self::with_demand(w, demand, h, p)
    }

    /// Prepare a replay that takes over each thread's phases (and recorded
    /// CPUs) from `w` and lets them go as the replay passes them: `w` is
    /// left without them.
    pub fn consuming(w: &'a mut Workload, h: &'a Host, p: &'a Policy) -> Self {
        let demand = w
            .threads
            .iter_mut()
            .map(|t| ThreadDemand::Owned {
                phases: std::mem::take(&mut t.phases),
                cpus: std::mem::take(&mut t.work_cpu),
                released: 0,
            })
            .collect();
        Self::with_demand(w, demand, h, p)
    }

    fn with_demand(
        w: &'a Workload,
        demand: Vec<ThreadDemand<'a>>,
        h: &'a Host,
        p: &'a Policy,
    ) -> Self {
        let n = w.threads.len();
        // A VM's weight is shared by its vCPUs (Xen credit), so a VM's share
        // grows with its weight, not with weight × vCPUs.
        let per_vm = vcpus_per_vm(w);
        let share = |t: &crate::model::ThreadSpec| t.vm.map_or(1.0, |v| w.vms[v.0 as usize].share);
        let weights: Vec<i64> = w
            .threads
            .iter()
            .map(|t| {
                t.vm.map_or(256, |v| {
                    let per_vcpu =
                        w.vms[v.0 as usize].weight as f64 / per_vm[v.0 as usize].max(1) as f64;
                    (per_vcpu * share(t)).round().max(1.0) as i64
                })
            })
            .collect();
        // fair and eevdf: nice 0 (1024) scaled by the VM's share
        let linux_weights: Vec<i64> = w
            .threads
            .iter()
            .map(|t| (1024.0 * share(t)).round().max(1.0) as i64)
            .collect();
        let ncpu = h.freq_khz.len() as u32;
        // affinity on the replayed host: its CPUs only; none left, any
        let affinity: Vec<Option<Vec<u32>>> = w
            .threads
            .iter()
            .map(|t| {
                let set: Vec<u32> = t
                    .allowed_cpus
                    .as_ref()?
                    .iter()
                    .copied()
                    .filter(|&c| c < ncpu)
                    .collect();
                (!set.is_empty() && set.len() < ncpu as usize).then_some(set)
            })
            .collect();
        let pin: Vec<Option<u32>> = affinity
            .iter()
            .map(|a| a.as_ref().filter(|s| s.len() == 1).map(|s| s[0]))
            .collect();
        let allowed: Vec<Option<Vec<u32>>> = affinity
            .iter()
            .map(|a| a.clone().filter(|s| s.len() > 1))
            .collect();
        let migration_cost = p.params.migration_cost_ns as i64;
        let newidle_cost = p.params.newidle_cost_ns.max(0.0) as i64;
        let sched: Box<dyn Scheduler> = match p.scheduler {
            SchedulerKind::Fair => Box::new(Fair::new(
                linux_weights.clone(),
                p.params.sched_latency_ns as i64,
                p.params.min_granularity_ns as i64,
                p.params.wakeup_granularity_ns as i64,
            )),
            SchedulerKind::Eevdf => {
                let slice = p.params.base_slice_ns as i64;
                let hz = p.params.tick_hz;
                let tick = if hz > 0.0 {
                    (1e9 / hz).round() as i64
                } else {
                    0
                };
                let slice = if slice > 0 {
                    slice
                } else {
                    Eevdf::default_slice_ns(h.freq_khz.len())
                };
                let mut s = Eevdf::with_groups(
                    linux_weights.clone(),
                    w.threads
                        .iter()
                        .map(|t| t.group.map(|g| g as usize))
                        .collect(),
                    w.groups.iter().map(|g| g.shares).collect(),
                    h.freq_khz.len(),
                    slice,
                    tick,
                    migration_cost,
                );
                s.set_affinity(affinity.clone());
                // pinned, pooled or recorded placements say where threads
                // run; the kernel's balancing is for floating ones
                if p.placement == Placement::Floating {
                    s.set_busy_balance(p.params.busy_balance_ns as i64);
                    s.set_balance_by_load(p.params.busy_balance_load != 0.0);
                    if p.params.newidle_odds != 0.0 {
                        s.set_newidle_odds(Some(p.seed));
                    }
                }
                Box::new(s)
            }
            SchedulerKind::Credit => Box::new(Credit::new(
                weights,
                h.freq_khz.len(),
                p.params.credit_slice_ns as i64,
                p.params.credit_tick_ns as i64,
                p.params.credit_acct_ns as i64,
            )),
            SchedulerKind::Rr => Box::new(RoundRobin::new(n, p.params.rr_slice_ns as i64)),
            SchedulerKind::Lpar => Box::new(Lpar::new(
                w.threads
                    .iter()
                    .map(|t| t.vm.map(|v| v.0 as usize))
                    .collect(),
                &w.vms
                    .iter()
                    .map(|v| v.weight as f64 * v.share)
                    .collect::<Vec<_>>(),
                h.freq_khz.len(),
                p.params.lpar_slice_ns as i64,
                p.params.lpar_epoch_ns as i64,
            )),
        };
        let mut lock_index = std::collections::BTreeMap::new();
        let mut members = Vec::with_capacity(n);
        for (t, d) in w.threads.iter().zip(&demand) {
            for ph in d.ahead() {
                if let (Phase::Acquire(l) | Phase::Release(l), Some(vm)) = (ph, t.vm) {
                    let k = lock_index.len();
                    lock_index.entry((vm.0, *l)).or_insert(k);
                }
            }
            let waits = barrier::has_barrier(d.ahead().iter());
            if let (true, Some(vm)) = (waits, t.vm) {
                // a VM's barrier: a lock its spinning waiters spin on
                let k = lock_index.len();
                lock_index.entry((vm.0, barrier::BARRIER_LOCK)).or_insert(k);
            }
            members.push((t.vm.map(|v| v.0 as usize), waits));
        }
        let bars = barrier::Barriers::new(w.vms.len(), members, &lock_index);
        let mut siblings = vec![Vec::new(); w.vms.len()];
        for (i, t) in w.threads.iter().enumerate() {
            if let Some(vm) = t.vm {
                siblings[vm.0 as usize].push(i as u32);
            }
        }
        let th = (0..n)
            .map(|i| Th {
                phase: 0,
                remaining: 0,
                st: St::Blocked,
                gen: 0,
                run_start: 0,
                dispatched_at: 0,
                charged_at: 0,
                redispatched: false,
                progress_at: 0,
                // where it starts: its pin, else its recorded CPU if allowed
                last_cpu: pin[i].or_else(|| {
                    let ok =
                        |c: &u32| *c < ncpu && allowed[i].as_ref().is_none_or(|s| s.contains(c));
                    w.threads[i]
                        .start_cpu
                        .filter(ok)
                        .or_else(|| allowed[i].as_ref().map(|s| s[0]))
                }),
                recent_cpu: None,
                spin: None,
                pv_spun: 0,
                aspw: false,
                dmask: Vec::new(),
                sub: Sub::ProperReady,
                retries: 0,
                excessive_counted: false,
                done_phases: 0,
                waiters: Vec::new(),
            })
            .collect();
        let cpus = (0..h.freq_khz.len())
            .map(|_| Cpu {
                cur: None,
                gen: 0,
                pending: false,
                idle_stamp: None,
                avg_idle: 2 * migration_cost,
                balancing: false,
            })
            .collect();
        let nl = lock_index.len();
        Engine {
            w,
            h,
            p,
            now: 0,
            seq: 0,
            heap: BinaryHeap::new(),
            th,
            cpus,
            sched,
            lock_index,
            bars,
            lock_holder: vec![None; nl],
            halted: vec![std::collections::VecDeque::new(); nl],
            gspw: vec![0; w.vms.len()],
            last_boosted: vec![0; w.vms.len()],
            siblings,
            out: Output::new(w, h, demand.iter().map(|d| d.ahead())),
            demand,
            events: 0,
            util_avg: 1.0,
            win_busy: 0,
            win_start: 0,
            migration_cost,
            newidle_cost,
            wake_charges_running: p.params.wake_update_curr != 0.0,
            host_recorded: p.params.host_placement != 0.0,
            remaining_threads: n,
            caps: w
                .vms
                .iter()
                .map(|v| {
                    v.cap.map(|c| caps::Cap {
                        quota: (c.max(0.0) * p.params.cap_period_ns).round() as i64,
                        ..Default::default()
                    })
                })
                .collect(),
            cap_period: (p.params.cap_period_ns as i64).max(1),
            cap_check: (p.params.cap_check_ns as i64).max(1),
            cap_from: vec![0; n],
            pin,
            allowed,
            bal: None,
            pool: vec![None; n],
            cpu_pool: vec![0; h.freq_khz.len()],
            freq: h.freq_khz.clone(),
            volt: vec![p.params.volt; h.freq_khz.len()],
        }
    }

    fn at(&mut self, t: i64, ev: Ev) {
        if let Ev::Dispatch(c) = ev {
            self.cpus[c as usize].pending = true;
        }
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq, ev)));
    }

    /// Run to completion (or until `limit_ns` of simulated time).
    pub fn run(mut self, limit_ns: i64) -> Output {
        for i in 0..self.w.threads.len() {
            if let Some(c) = self.th[i].last_cpu {
                self.sched.migrate(ThreadId(i as u32), c);
            }
            self.load_phase(i as u32);
            let s = self.w.threads[i].start_ns;
            self.th[i].gen += 1;
            let g = self.th[i].gen;
            self.at(s, Ev::Unblock(i as u32, g));
        }
        if let Some(t) = self.sched.tick_ns() {
            self.at(t, Ev::Tick);
        }
        for c in 0..self.cpus.len() {
            let steps = self.h.cpu_speed.get(c).map_or(&[][..], |v| &v[..]);
            for w in steps.windows(2) {
                if w[1].1 != w[0].1 && w[1].0 > 0 {
                    self.at(w[1].0, Ev::Speed(c as u32));
                }
            }
        }
        self.start_caps();
        match self.p.placement {
            Placement::EnergyBalance => self.start_balancer(),
            Placement::Asymmetric => self.start_pools(),
            Placement::Floating | Placement::Recorded => {}
        }
        while let Some(Reverse((t, _, ev))) = self.heap.pop() {
            if t > limit_ns || self.remaining_threads == 0 {
                break;
            }
            self.now = t;
            self.events += 1;
            self.sched.clock(t);
            match ev {
                Ev::Dispatch(c) => self.dispatch(c),
                Ev::Step(th, g) => {
                    if self.th[th as usize].gen == g {
                        self.step(th)
                    }
                }
                Ev::SliceEnd(c, g) => {
                    if self.cpus[c as usize].gen == g {
                        self.slice_end(c)
                    }
                }
                Ev::Unblock(th, g) => {
                    if self.th[th as usize].gen == g && self.th[th as usize].st == St::Blocked {
                        self.wake(th)
                    }
                }
                Ev::Balance => self.balance(),
                Ev::CapCheck => self.cap_check(),
                Ev::SwapCheck => self.realise_swaps(),
                Ev::CapPeriod => self.cap_period_end(),
                Ev::Speed(c) => self.speed_change(c),
                Ev::Tick => {
                    self.sched.tick(self.now);
                    if let (true, Some(p)) = (self.sched.per_cpu_queues(), self.sched.tick_ns()) {
                        self.update_util(p);
                    }
                    if self.sched.per_cpu_queues() && self.sched.ready() > 0 {
                        // periodic load balancing: idle CPUs look for work
                        for c in 0..self.cpus.len() {
                            if self.cpus[c].cur.is_none() && !self.cpus[c].pending {
                                self.cpus[c].balancing = true;
                                self.at(self.now, Ev::Dispatch(c as u32));
                            }
                        }
                    }
                    if let Some(p) = self.sched.tick_ns() {
                        self.at(self.now + p, Ev::Tick);
                    }
                }
            }
        }
        let end = self.now;
        for c in 0..self.cpus.len() {
            self.put_off_cpu(c as u32, end);
        }
        self.out.events = self.events;
        self.core_energy(end);
        self.out.finish(end);
        self.out
    }

    /// Whether `t` runs each stretch of work where the capture did: every
    /// thread under the recorded placement, host threads when
    /// `host_placement=1`.
    fn follows_recording(&self, t: u32) -> bool {
        self.p.placement == Placement::Recorded
            || (self.host_recorded
                && self.p.placement == Placement::Floating
                && vm_of(self.w, t).is_none())
    }

    fn set_state(&mut self, t: u32, code: StateCode, pcpu: Option<u32>) {
        self.out.thread_state(t, code, self.now, pcpu);
    }

    fn wake(&mut self, t: u32) {
        self.th[t as usize].st = St::Ready;
        self.th[t as usize].sub = Sub::ProperReady;
        if self.follows_recording(t) {
            self.follow_recording(t);
        }
        if self.sched.per_cpu_queues()
            && self.wake_charges_running
            && !self.sched.delayed(ThreadId(t))
        {
            // the queue's running thread is charged up to now before the
            // woken one is placed against the queue's average, as
            // enqueue_entity's update_curr does (`wake_update_curr`); a
            // delayed sleeper is requeued against the average as it stands
            // (requeue_delayed_entity charges nobody)
            if let Some(r) = self.home_cpu(t).and_then(|c| self.cpus[c as usize].cur) {
                self.charge_running(r);
            }
        }
        self.sched.enqueue(ThreadId(t), Sub::ProperReady, true);
        self.set_state(t, StateCode::Preempted, None);
        if !self.throttled(t) {
            self.kick_idle_or_preempt(t);
        }
    }

    fn kick_idle_or_preempt(&mut self, t: u32) {
        if self.sched.per_cpu_queues() {
            return self.wake_on_own_cpu(t);
        }
        if let Some(p) = self.pin[t as usize] {
            match self.cpus[p as usize].cur {
                None => self.at(self.now, Ev::Dispatch(p)),
                Some(r) if self.sched.preempts(ThreadId(t), ThreadId(r)) => {
                    self.preempt(p, Sub::ProperReady);
                    self.at(self.now, Ev::Dispatch(p));
                }
                Some(_) => {}
            }
            return;
        }
        // Only CPUs of the thread's pool (asymmetric placement) and
        // affinity are candidates.
        let pool = self.pool[t as usize];
        let allowed = self.allowed[t as usize].as_ref();
        let fits = |c: usize| {
            pool.is_none_or(|p| self.cpu_pool[c] == p)
                && allowed.is_none_or(|s| s.contains(&(c as u32)))
        };
        let pending = (0..self.cpus.len())
            .filter(|&c| fits(c) && self.cpus[c].cur.is_none() && self.cpus[c].pending)
            .count();
        if pending > 0 && self.sched.ready() <= self.cpus.iter().filter(|c| c.pending).count() {
            return;
        }
        if let Some(c) = (0..self.cpus.len())
            .find(|&c| fits(c) && self.cpus[c].cur.is_none() && !self.cpus[c].pending)
        {
            self.at(self.now, Ev::Dispatch(c as u32));
            return;
        }
        // wakeup preemption of the least deserving running thread
        let victim = (0..self.cpus.len())
            .filter(|&c| fits(c))
            .filter_map(|c| self.cpus[c].cur.map(|r| (c, r)))
            .find(|&(_, r)| self.sched.preempts(ThreadId(t), ThreadId(r)));
        if let Some((c, _)) = victim {
            self.preempt(c as u32, Sub::ProperReady);
            self.at(self.now, Ev::Dispatch(c as u32));
        }
    }

    /// Account the running thread's time and take it off `c`.
    fn put_off_cpu(&mut self, c: u32, now: i64) -> Option<u32> {
        let t = self.cpus[c as usize].cur.take()?;
        self.cpus[c as usize].gen += 1;
        self.account_progress(t, c, now);
        self.cap_account(t, now);
        // from the dispatch: the switch heats the core as the run does
        let w = self.thread_busy_w(t, c as usize);
        let dispatched_at = self.th[t as usize].dispatched_at;
        if let Some(b) = self.bal.as_mut() {
            let ran = (now - dispatched_at.max(b.period_start)).max(0);
            b.busy[c as usize] += ran;
            b.energy_j[c as usize] += ran as f64 * w * 1e-9;
        }
        self.win_busy += (now - self.th[t as usize].dispatched_at.max(self.win_start)).max(0);
        let th = &mut self.th[t as usize];
        if let Some((_, since)) = th.spin {
            let spun = now - since.max(th.run_start);
            self.out.spin(t, spun);
            th.pv_spun += spun.max(0);
        }
        th.gen += 1;
        // from dispatch (or the last charge), so the switch cost counts too
        self.sched.charge(ThreadId(t), now - th.charged_at);
        // the switch cost counts as the thread's, as a trace shows it
        self.out.ran(t, c, th.dispatched_at, now);
        Some(t)
    }

    /// Work progress per ns of thread `t` on `c` at time `at` (its VM's
    /// elasticity, else the host's; the CPU's recorded speed then).
    fn rate(&self, t: u32, c: u32, at: i64) -> f64 {
        let e = vm_of(self.w, t)
            .and_then(|v| self.w.vms[v.0 as usize].elasticity)
            .unwrap_or(self.h.elasticity);
        self.h.rate_at(self.freq[c as usize], e) * self.h.speed_at(c as usize, at)
    }

    /// Work done since `progress_at` at this CPU's speed.
    fn account_progress(&mut self, t: u32, c: u32, now: i64) {
        // nothing progresses before the dispatch cost has been paid; no
        // speed change falls inside [from, now) (one re-times the step)
        let from = self.th[t as usize]
            .progress_at
            .max(self.th[t as usize].run_start);
        let rate = self.rate(t, c, from);
        let th = &mut self.th[t as usize];
        if th.spin.is_none() && th.remaining > 0 && now > from {
            let done = (((now - from) as f64 * rate).round() as i64).min(th.remaining);
            th.remaining -= done;
            self.out.work_ns[t as usize] += done;
        }
        th.progress_at = now;
    }

    /// CPU `c`'s recorded speed changes now: its running thread's work so
    /// far counts at the old speed, and its step is re-timed at the new.
    fn speed_change(&mut self, c: u32) {
        let Some(t) = self.cpus[c as usize].cur else {
            return;
        };
        let ti = t as usize;
        let working = matches!(self.demand[ti].get(self.th[ti].phase), Some(Phase::Work(_)));
        // before run_start the dispatch's own step times the work
        if !working
            || self.th[ti].spin.is_some()
            || self.th[ti].remaining <= 0
            || self.now < self.th[ti].run_start
        {
            return;
        }
        self.account_progress(t, c, self.now);
        // the step armed at the old speed is dropped by `gen`
        self.th[ti].gen += 1;
        self.arm_work_step(t, c);
    }

    /// The running `t`'s next step on `c`: when its remaining work is done
    /// at the CPU's rate now.
    fn arm_work_step(&mut self, t: u32, c: u32) {
        let th = &self.th[t as usize];
        let (remaining, g) = (th.remaining, th.gen);
        let dt = (remaining as f64 / self.rate(t, c, self.now)).ceil() as i64;
        self.at(self.now + dt.max(1), Ev::Step(t, g));
    }

    fn preempt(&mut self, c: u32, sub: Sub) {
        if let Some(t) = self.put_off_cpu(c, self.now) {
            let th = &mut self.th[t as usize];
            th.st = St::Ready;
            th.sub = sub;
            self.sched.enqueue(ThreadId(t), sub, false);
            self.set_state(t, StateCode::Preempted, None);
        }
    }

    fn slice_end(&mut self, c: u32) {
        if let Some(t) = self.cpus[c as usize].cur {
            // a thread noticed at once when it works is noticed only at the
            // tick while it spins (no system calls)
            let due = self.slice_end_at(self.now);
            if due > self.now && self.th[t as usize].spin.is_some() {
                let g = self.cpus[c as usize].gen;
                self.at(due, Ev::SliceEnd(c, g));
                return;
            }
        }
        if !self.anyone_waits_for(c) {
            // nobody waits: keep running, new slice
            if let Some(t) = self.cpus[c as usize].cur {
                let s = self.sched.slice_ns(ThreadId(t), 0);
                let g = self.cpus[c as usize].gen;
                let end = self.slice_end_for(t, self.now + s);
                self.at(end, Ev::SliceEnd(c, g));
            }
            return;
        }
        self.preempt(c, Sub::SliceEnd);
        self.at(self.now, Ev::Dispatch(c));
    }

    /// A thread waits that CPU `c` may run: on its own queue (per-CPU
    /// run queues), or in the global queue within its pin, pool and
    /// affinity.
    fn anyone_waits_for(&self, c: u32) -> bool {
        if self.sched.per_cpu_queues() {
            return self.sched.ready_on(c) > 0;
        }
        let may = placed!(self, c);
        self.sched
            .any_ready(&mut |x: ThreadId| may.run(x.0 as usize))
    }

    fn dispatch(&mut self, c: u32) {
        self.cpus[c as usize].pending = false;
        let balancing = std::mem::take(&mut self.cpus[c as usize].balancing);
        if self.cpus[c as usize].cur.is_some() {
            return;
        }
        // a CPU going idle pulls work from another only when its idle
        // periods have been long enough to pay for a balance (avg_idle)
        let cost = self.migration_cost;
        let pull = if balancing {
            Pull::Periodic
        } else if self.cpus[c as usize].avg_idle >= self.newidle_cost {
            Pull::NewIdle
        } else {
            Pull::No
        };
        let now = self.now;
        let may = placed!(self, c);
        let Some(ThreadId(t)) = self
            .sched
            .pick_on(c, now, pull, &mut |x: ThreadId| may.run(x.0 as usize))
        else {
            let cpu = &mut self.cpus[c as usize];
            cpu.idle_stamp = cpu.idle_stamp.or(Some(now));
            return;
        };
        let cpu = &mut self.cpus[c as usize];
        if let Some(since) = cpu.idle_stamp.take() {
            // update_avg, capped at twice the migration cost
            cpu.avg_idle = (cpu.avg_idle + (now - since - cpu.avg_idle) / 8).min(2 * cost);
        }
        let cost = self.h.costs.context_switch_ns
            + if self.th[t as usize].last_cpu.is_some_and(|l| l != c) {
                self.h.costs.migration_ns
            } else {
                0
            };
        self.out.overhead(cost);
        self.cpus[c as usize].cur = Some(t);
        self.cpus[c as usize].gen += 1;
        let th = &mut self.th[t as usize];
        th.st = St::Running(c);
        th.dispatched_at = self.now;
        self.cap_from[t as usize] = self.now;
        th.charged_at = self.now;
        th.run_start = self.now + cost;
        th.progress_at = self.now + cost;
        th.last_cpu = Some(c);
        th.gen += 1;
        let ready = self.sched.ready();
        let slice = match self.p.placement {
            Placement::Asymmetric if self.cpu_pool[c as usize] == 0 => {
                self.p.params.fast_slice_ns as i64
            }
            Placement::Asymmetric => self.p.params.slow_slice_ns as i64,
            _ => self.sched.slice_ns(ThreadId(t), ready),
        };
        let g = self.cpus[c as usize].gen;
        // the slice begins at the dispatch: the switch is the incoming
        // thread's, inside its slice, as the kernel charges it (its run
        // time counts from set_next_entity) and a trace shows it
        let end = self.slice_end_for(t, self.now + slice);
        self.at(end, Ev::SliceEnd(c, g));
        self.on_dispatch_policy(t);
        let g = self.th[t as usize].gen;
        self.at(self.now + cost, Ev::Step(t, g));
    }

    fn cpu_of(&self, t: u32) -> u32 {
        match self.th[t as usize].st {
            St::Running(c) => c,
            _ => unreachable!("step of a thread that is not running"),
        }
    }

    /// Advance the running thread `t` through its phases from now.
    fn step(&mut self, t: u32) {
        let c = self.cpu_of(t);
        let ti = t as usize;
        loop {
            if self.th[ti].spin.is_some() {
                // a spin window ended or the lock was released: re-check
                if self.retry_spin(t, c) {
                    return;
                }
                continue;
            }
            let Some(ph) = self.demand[ti].get(self.th[ti].phase) else {
                self.finish(t, c);
                return;
            };
            match ph {
                Phase::Work(_) => {
                    if self.follows_recording(t) && self.move_to_recorded(t, c) {
                        return;
                    }
                    self.account_progress(t, c, self.now);
                    if self.th[ti].remaining > 0 {
                        self.set_state(t, StateCode::Guest, Some(c));
                        self.arm_work_step(t, c);
                        return;
                    }
                    self.complete_phase(t);
                }
                Phase::Block(ns) => {
                    self.complete_phase(t);
                    self.block(t, c, Some(ns), StateCode::Blocked);
                    return;
                }
                Phase::Mark => {
                    self.out.mark(t, self.now);
                    self.complete_phase(t);
                }
                Phase::Acquire(l) => {
                    let li = self.lock(t, l);
                    match self.lock_holder[li] {
                        None => {
                            self.lock_holder[li] = Some(t);
                            self.complete_phase(t);
                        }
                        Some(h) if h == t => self.complete_phase(t),
                        Some(_) => {
                            self.start_spin(t, c, li);
                            return;
                        }
                    }
                }
                Phase::Release(l) => {
                    let li = self.lock(t, l);
                    if self.lock_holder[li] == Some(t) {
                        self.lock_holder[li] = None;
                        self.wake_spinners(li);
                        self.kick_halted(t, li);
                    }
                    self.complete_phase(t);
                }
                Phase::Barrier { spin } => {
                    if self.at_barrier(t, c, spin) {
                        return;
                    }
                }
                Phase::WaitFor { thread, phase } => {
                    if self.th[thread.0 as usize].done_phases > phase as usize {
                        self.complete_phase(t);
                    } else {
                        self.th[thread.0 as usize].waiters.push((t, phase as usize));
                        self.block(t, c, None, StateCode::Blocked);
                        return;
                    }
                }
            }
        }
    }

    /// Entering a phase: a Work phase starts with its full amount.
    fn load_phase(&mut self, t: u32) {
        let ti = t as usize;
        self.th[ti].remaining = match self.demand[ti].get(self.th[ti].phase) {
            Some(Phase::Work(ns)) => ns.max(0),
            _ => 0,
        };
        self.th[ti].progress_at = self.now;
    }

    fn lock(&self, t: u32, l: u32) -> usize {
        let vm = vm_of(self.w, t).map_or(u32::MAX, |v| v.0);
        self.lock_index.get(&(vm, l)).copied().unwrap_or(0)
    }

    fn complete_phase(&mut self, t: u32) {
        let ti = t as usize;
        self.th[ti].phase += 1;
        self.demand[ti].passed(self.th[ti].phase);
        self.load_phase(t);
        self.th[ti].done_phases = self.th[ti].phase;
        if !self.th[ti].waiters.is_empty() {
            let done = self.th[ti].done_phases;
            let (ready, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.th[ti].waiters)
                .into_iter()
                .partition(|&(_, p)| done > p);
            self.th[ti].waiters = keep;
            for (w, _) in ready {
                if self.th[w as usize].st == St::Blocked {
                    self.th[w as usize].gen += 1;
                    let g = self.th[w as usize].gen;
                    self.at(self.now, Ev::Unblock(w, g));
                }
            }
        }
    }

    fn block(&mut self, t: u32, c: u32, dur: Option<i64>, code: StateCode) {
        self.put_off_cpu(c, self.now);
        self.sched.sleep(ThreadId(t));
        let th = &mut self.th[t as usize];
        th.st = St::Blocked;
        th.gen += 1;
        let g = th.gen;
        self.set_state(t, code, None);
        if let Some(d) = dur {
            self.at(self.now + d.max(0), Ev::Unblock(t, g));
        }
        self.at(self.now, Ev::Dispatch(c));
    }

    fn finish(&mut self, t: u32, c: u32) {
        self.put_off_cpu(c, self.now);
        self.sched.sleep(ThreadId(t));
        self.th[t as usize].st = St::Done;
        self.set_state(t, StateCode::Done, None);
        self.remaining_threads -= 1;
        self.leave_barriers(t);
        self.at(self.now, Ev::Dispatch(c));
    }
}
