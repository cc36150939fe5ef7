//! Schedulers: a narrow hook trait; the engine owns threads, clock and
//! bookkeeping, a scheduler only orders the ready threads.

pub mod credit;
pub mod eevdf;
pub mod fair;
pub mod lpar;
pub mod rr;

use crate::model::ThreadId;

/// Where a ready thread is queued, in the vocabulary of Umeno et al.'s
/// three subqueues; each scheduler maps it onto its own structure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sub {
    /// Proper-ready: woken or yielding threads.
    ProperReady,
    /// Time-slice end: preempted after a full slice.
    SliceEnd,
    /// Out-service: run after everything else that is ready.
    OutService,
}

/// Whether, and why, a CPU with nothing of its own to run may take a
/// waiting thread from another CPU's run queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pull {
    /// Not at all.
    No,
    /// Its last thread just left (Linux's newidle balance): a failed pull
    /// does not count towards taking cache-hot threads, because these
    /// balances are so frequent.
    NewIdle,
    /// Periodic load balancing of an idle CPU: a failed pull counts.
    Periodic,
}

/// The scheduler hooks.
pub trait Scheduler {
    /// `t` became ready (`woken`: after blocking).
    fn enqueue(&mut self, t: ThreadId, sub: Sub, woken: bool);
    /// The first ready thread for which `eligible` holds; it is removed.
    fn pick(&mut self, eligible: &mut dyn FnMut(ThreadId) -> bool) -> Option<ThreadId>;
    /// The first ready thread for CPU `c` at time `now` (per-CPU run
    /// queues: its own queue, else, as `pull` allows, one pulled from
    /// another CPU); it is removed.
    fn pick_on(
        &mut self,
        _c: u32,
        _now: i64,
        _pull: Pull,
        eligible: &mut dyn FnMut(ThreadId) -> bool,
    ) -> Option<ThreadId> {
        self.pick(eligible)
    }
    /// `t` is asleep but still counted on its run queue (EEVDF's delayed
    /// dequeue): a wakeup requeues it rather than placing it anew.
    fn delayed(&self, _t: ThreadId) -> bool {
        false
    }
    /// The ready `t` is to run on idle CPU `c` (per-CPU run queues move it).
    fn migrate(&mut self, _t: ThreadId, _c: u32) {}
    /// Per-CPU run queues: running threads are charged as they go (before
    /// wakeup preemption checks), not only when they leave the CPU, and
    /// idle CPUs look for work to pull at every tick (load balancing).
    fn per_cpu_queues(&self) -> bool {
        false
    }
    /// If set, an expired slice is only noticed at the next multiple of
    /// this period (the kernel's scheduler tick).
    fn slice_tick_ns(&self) -> Option<i64> {
        None
    }
    /// Ready threads waiting for CPU `c`.
    fn ready_on(&self, _c: u32) -> usize {
        self.ready()
    }
    /// Whether a ready thread for which `eligible` holds is waiting (one
    /// a given CPU may run: its pin, pool, affinity). Schedulers with one
    /// global queue look; the default counts every waiting thread.
    fn any_ready(&self, _eligible: &mut dyn FnMut(ThreadId) -> bool) -> bool {
        self.ready() > 0
    }
    /// The slice `t` gets now, with `ready` threads waiting.
    fn slice_ns(&self, t: ThreadId, ready: usize) -> i64;
    /// `t` ran for `ns`.
    fn charge(&mut self, t: ThreadId, ns: i64);
    /// `t` left the CPU to block or finish (it is not ready).
    fn sleep(&mut self, _t: ThreadId) {}
    /// Directed yield: make `t` the next pick.
    fn boost(&mut self, t: ThreadId);
    /// Should a newly woken `woken` preempt `running`?
    fn preempts(&self, woken: ThreadId, running: ThreadId) -> bool;
    /// Periodic bookkeeping every [`tick_ns`](Self::tick_ns), if any.
    fn tick(&mut self, _now: i64) {}
    /// The engine's clock before each event (schedulers that average
    /// how long threads were runnable, as PELT does, read time here).
    fn clock(&mut self, _now: i64) {}
    /// Tick period.
    fn tick_ns(&self) -> Option<i64> {
        None
    }
    /// Number of ready threads.
    fn ready(&self) -> usize;
}
