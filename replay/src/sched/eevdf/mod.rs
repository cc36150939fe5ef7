//! EEVDF, Linux's fair class since 6.6, with one run queue per pCPU: each
//! thread has a virtual runtime and a virtual deadline one slice ahead of
//! it; the next thread is the *eligible* one (virtual runtime at or below
//! its queue's weighted average, i.e. not ahead of its share) with the
//! earliest deadline. RUN_TO_PARITY: a running thread keeps the CPU while
//! it is eligible and inside its slice; a wakeup on its CPU preempts it
//! only once it is ahead of its share or past its slice. Without HRTICK
//! an expired slice is noticed at the next tick, so a spinning vCPU can
//! hold a CPU for up to a slice plus a tick while its lock holder waits
//! in the same queue: the lock-holder preemption the traces show.
//!
//! Placement (PLACE_LAG): a thread keeps the lag it had when it slept, so
//! an owed thread comes back owed. DELAY_DEQUEUE: a thread that sleeps
//! while ahead of its share stays in its run queue's average until the
//! average catches up with it (then it leaves with zero lag); woken
//! before that, it resumes where it was. An idle CPU pulls from the
//! busiest other queue, but not a thread that ran within the migration
//! cost unless a pull already failed that way; where woken threads go is
//! the engine's part (`engine/per_cpu.rs`).

use super::{Scheduler, Sub};
use crate::model::ThreadId;
use std::collections::BTreeSet;

/// Failed pulls of only cache-hot threads before one is taken anyway
/// (the MC domain's cache_nice_tries).
const CACHE_NICE_TRIES: u32 = 1;

/// One CPU's run queue: ready threads by (deadline, arrival order), and
/// Σ weight × (vruntime − base), Σ weight over its ready and running
/// threads (relative to `base` so the sums stay small).
#[derive(Default)]
struct RunQueue {
    ready: BTreeSet<(i64, u64, u32)>,
    /// Its delayed sleepers (few: one per thread that slept ahead of its
    /// share), so settling them does not scan every thread.
    delayed: Vec<u32>,
    sum_wv: i128,
    sum_w: i128,
    base: i64,
}

impl RunQueue {
    /// The weighted average virtual runtime: the 0-lag point.
    fn avg(&self) -> i64 {
        if self.sum_w == 0 {
            return self.base;
        }
        self.base + (self.sum_wv / self.sum_w) as i64
    }
}

/// The EEVDF scheduler.
pub struct Eevdf {
    vruntime: Vec<i64>,
    deadline: Vec<i64>,
    weight: Vec<i64>,
    /// Lag at the last sleep (the run queue's average − own, virtual ns).
    slept: Vec<Option<i64>>,
    /// Asleep but still counted in its run queue's average (delayed
    /// dequeue: it slept ahead of its share).
    delayed: Vec<bool>,
    /// Slice protection: runs on until its virtual runtime reaches this
    /// (its deadline when it was picked; RUN_TO_PARITY).
    vprot: Vec<i64>,
    /// The run queue a thread is on, or was on last.
    cpu: Vec<usize>,
    key: Vec<Option<(i64, u64)>>,
    /// Counted in its run queue's average: ready or running.
    on_rq: Vec<bool>,
    rqs: Vec<RunQueue>,
    seq: u64,
    slice: i64,
    tick: i64,
    /// A thread that ran less than this ago is cache-hot: another CPU's
    /// load balancing leaves it where it is.
    migration_cost: i64,
    /// When each thread last stopped running (as far as charged).
    ran_until: Vec<i64>,
    /// Per CPU, pulls in a row that found only cache-hot threads; past
    /// CACHE_NICE_TRIES the next pull takes a hot one (nr_balance_failed).
    pull_failed: Vec<u32>,
    /// Directed yield: picked next if it may run.
    next: Option<u32>,
}

impl Eevdf {
    /// A scheduler for threads of the given weights (1024 = nice 0) on
    /// `cpus` run queues, with a base slice, the tick period (0: slices end
    /// exactly, as with HRTICK) and the migration cost, in ns.
    pub fn new(weights: Vec<i64>, cpus: usize, slice: i64, tick: i64, migration_cost: i64) -> Self {
        let n = weights.len();
        Eevdf {
            vruntime: vec![0; n],
            deadline: vec![0; n],
            weight: weights.into_iter().map(|w| w.max(1)).collect(),
            slept: vec![None; n],
            delayed: vec![false; n],
            vprot: vec![0; n],
            cpu: vec![0; n],
            key: vec![None; n],
            on_rq: vec![false; n],
            rqs: (0..cpus.max(1)).map(|_| RunQueue::default()).collect(),
            seq: 0,
            slice: slice.max(1),
            tick: tick.max(0),
            migration_cost,
            ran_until: vec![i64::MIN / 2; n],
            pull_failed: vec![0; cpus.max(1)],
            next: None,
        }
    }

    /// Linux's default base slice: 0.75 ms scaled by 1 + log2(CPUs), CPUs
    /// capped at 8 (SCHED_TUNABLESCALING_LOG).
    pub fn default_slice_ns(pcpus: usize) -> i64 {
        let n = pcpus.clamp(1, 8);
        750_000 * (1 + n.ilog2() as i64)
    }

    fn vslice(&self, i: usize) -> i64 {
        self.slice * 1024 / self.weight[i]
    }

    fn avg_of(&self, i: usize) -> i64 {
        self.rqs[self.cpu[i]].avg()
    }

    fn eligible(&self, i: usize) -> bool {
        self.vruntime[i] <= self.avg_of(i)
    }

    fn join_rq(&mut self, i: usize) {
        if !self.on_rq[i] {
            self.on_rq[i] = true;
            let rq = &mut self.rqs[self.cpu[i]];
            if rq.sum_w == 0 {
                rq.base = self.vruntime[i];
            }
            rq.sum_w += self.weight[i] as i128;
            rq.sum_wv += self.weight[i] as i128 * (self.vruntime[i] - rq.base) as i128;
        }
    }

    fn leave_rq(&mut self, i: usize) {
        if self.on_rq[i] {
            self.on_rq[i] = false;
            let rq = &mut self.rqs[self.cpu[i]];
            let avg = rq.avg();
            rq.sum_w -= self.weight[i] as i128;
            rq.sum_wv -= self.weight[i] as i128 * (self.vruntime[i] - rq.base) as i128;
            if rq.sum_w == 0 {
                // an empty queue: the average stays where it was
                rq.sum_wv = 0;
                rq.base = avg;
            }
        }
    }

    /// Move thread `i`'s virtual runtime, keeping the sums in step.
    fn set_vruntime(&mut self, i: usize, v: i64) {
        if self.on_rq[i] {
            self.rqs[self.cpu[i]].sum_wv += self.weight[i] as i128 * (v - self.vruntime[i]) as i128;
        }
        self.vruntime[i] = v;
    }

    fn insert(&mut self, i: usize) {
        self.take(i);
        self.seq += 1;
        self.rqs[self.cpu[i]]
            .ready
            .insert((self.deadline[i], self.seq, i as u32));
        self.key[i] = Some((self.deadline[i], self.seq));
    }

    fn take(&mut self, i: usize) {
        if let Some((d, s)) = self.key[i].take() {
            self.rqs[self.cpu[i]].ready.remove(&(d, s, i as u32));
        }
    }

    /// Delayed sleepers of run queue `c` that the average has caught up
    /// with leave it, with zero lag (DELAY_ZERO).
    fn settle_delayed(&mut self, c: usize) {
        while !self.rqs[c].delayed.is_empty() {
            let v = self.rqs[c].avg();
            // lowest thread first, so the order (and the empty queue's
            // resting average) does not depend on the list's order
            let Some(k) = (0..self.rqs[c].delayed.len())
                .filter(|&k| self.vruntime[self.rqs[c].delayed[k] as usize] <= v)
                .min_by_key(|&k| self.rqs[c].delayed[k])
            else {
                return;
            };
            let i = self.rqs[c].delayed.swap_remove(k) as usize;
            self.delayed[i] = false;
            self.slept[i] = Some(0);
            self.leave_rq(i);
        }
    }

    /// `i` is no longer a delayed sleeper (woken, or moved to another CPU).
    fn undelay(&mut self, i: usize) {
        self.delayed[i] = false;
        let d = &mut self.rqs[self.cpu[i]].delayed;
        if let Some(k) = d.iter().position(|&x| x as usize == i) {
            d.swap_remove(k);
        }
    }

    /// place_entity: where a woken thread rejoins its run queue.
    fn place(&mut self, i: usize) {
        let rq = &self.rqs[self.cpu[i]];
        let v = rq.avg();
        let placed = match self.slept[i].take() {
            // owed when it slept: owed again, scaled for its own weight
            // joining the average (Linux's lag × (W + w) / W)
            Some(lag) if lag > 0 && rq.sum_w > 0 => {
                v - (lag as i128 * (rq.sum_w + self.weight[i] as i128) / rq.sum_w) as i64
            }
            Some(lag) if lag > 0 => v - lag,
            Some(_) | None => v,
        };
        self.vruntime[i] = placed;
        self.deadline[i] = placed + self.vslice(i);
    }

    /// Move a ready or running thread to run queue `c`, keeping its lag
    /// and relative deadline (PLACE_REL_DEADLINE).
    fn move_to(&mut self, i: usize, c: usize) {
        if self.cpu[i] == c {
            return;
        }
        let queued = self.key[i].is_some();
        let counted = self.on_rq[i];
        self.take(i);
        let lag = self.avg_of(i) - self.vruntime[i];
        let rel = self.deadline[i] - self.vruntime[i];
        self.leave_rq(i);
        self.cpu[i] = c;
        let v = self.rqs[c].avg() - lag;
        self.vruntime[i] = v;
        self.deadline[i] = v + rel;
        if counted {
            self.join_rq(i);
        }
        if queued {
            self.insert(i);
        }
    }

    /// The ready thread run queue `c` runs next: eligible with the
    /// earliest deadline; if the running threads hold the average down so
    /// none is, the least-run ready thread.
    fn best(&self, c: usize, ok: &mut dyn FnMut(ThreadId) -> bool) -> Option<u32> {
        let rq = &self.rqs[c];
        let v = rq.avg();
        rq.ready
            .iter()
            .find(|k| self.vruntime[k.2 as usize] <= v && ok(ThreadId(k.2)))
            .map(|k| k.2)
            .or_else(|| {
                rq.ready
                    .iter()
                    .filter(|k| ok(ThreadId(k.2)))
                    .min_by_key(|k| (self.vruntime[k.2 as usize], k.1))
                    .map(|k| k.2)
            })
    }
}

impl Scheduler for Eevdf {
    fn enqueue(&mut self, t: ThreadId, sub: Sub, woken: bool) {
        let i = t.0 as usize;
        self.settle_delayed(self.cpu[i]);
        if self.delayed[i] {
            // woken before the average caught up: resumes where it was
            self.undelay(i);
        } else if woken && !self.on_rq[i] {
            self.place(i);
        }
        self.join_rq(i);
        if sub == Sub::OutService {
            // behind everything ready now
            let last = self.rqs[self.cpu[i]]
                .ready
                .iter()
                .next_back()
                .map_or(self.deadline[i], |k| k.0 + 1);
            self.deadline[i] = self.deadline[i].max(last);
        }
        self.insert(i);
    }

    fn pick(&mut self, eligible: &mut dyn FnMut(ThreadId) -> bool) -> Option<ThreadId> {
        self.pick_on(0, i64::MAX / 2, true, eligible)
    }

    fn pick_on(
        &mut self,
        c: u32,
        now: i64,
        pull: bool,
        eligible: &mut dyn FnMut(ThreadId) -> bool,
    ) -> Option<ThreadId> {
        let c = c as usize % self.rqs.len();
        self.settle_delayed(c);
        let found = match self.next.take() {
            Some(n) if self.key[n as usize].is_some() && eligible(ThreadId(n)) => Some(n),
            _ => None,
        };
        // own queue first; an idle CPU pulls from the busiest other queue,
        // but not a thread that ran there within the migration cost
        let found = found.or_else(|| self.best(c, eligible)).or_else(|| {
            if !pull {
                return None;
            }
            let mut others: Vec<usize> = (0..self.rqs.len()).filter(|&o| o != c).collect();
            others.sort_by_key(|&o| std::cmp::Reverse(self.rqs[o].ready.len()));
            let (hot, cost) = (&self.ran_until, self.migration_cost);
            let cold = others.iter().find_map(|&o| {
                self.best(o, &mut |t| now - hot[t.0 as usize] >= cost && eligible(t))
            });
            if cold.is_some() {
                return cold;
            }
            if others.iter().all(|&o| self.rqs[o].ready.is_empty()) {
                return None;
            }
            self.pull_failed[c] += 1;
            if self.pull_failed[c] <= CACHE_NICE_TRIES {
                return None;
            }
            others.into_iter().find_map(|o| self.best(o, eligible))
        });
        let found = found?;
        if self.cpu[found as usize] != c {
            self.pull_failed[c] = 0;
        }
        let i = found as usize;
        self.move_to(i, c);
        self.take(i);
        self.ran_until[i] = now;
        self.vprot[i] = self.deadline[i];
        Some(ThreadId(found))
    }

    fn migrate(&mut self, t: ThreadId, c: u32) {
        let c = c as usize % self.rqs.len();
        let i = t.0 as usize;
        if self.delayed[i] {
            self.undelay(i);
            self.slept[i] = Some(self.avg_of(i) - self.vruntime[i]);
            self.leave_rq(i);
        }
        if self.on_rq[i] {
            self.move_to(i, c);
        } else {
            self.cpu[i] = c;
        }
    }

    fn slice_ns(&self, t: ThreadId, _ready: usize) -> i64 {
        // run to parity: until the deadline, in real time at its weight
        let i = t.0 as usize;
        ((self.deadline[i] - self.vruntime[i]) * self.weight[i] / 1024).max(1)
    }

    fn charge(&mut self, t: ThreadId, ns: i64) {
        let i = t.0 as usize;
        self.ran_until[i] += ns;
        let v = self.vruntime[i] + ns * 1024 / self.weight[i];
        self.set_vruntime(i, v);
        if v >= self.deadline[i] {
            // update_deadline: a new slice from here
            self.deadline[i] = v + self.vslice(i);
        }
    }

    fn per_cpu_queues(&self) -> bool {
        true
    }

    fn tick_ns(&self) -> Option<i64> {
        // idle CPUs balance at ticks
        (self.tick > 0).then_some(self.tick)
    }

    fn slice_tick_ns(&self) -> Option<i64> {
        // without HRTICK a slice's end is noticed at the next tick: with
        // HZ=250 a spinning vCPU keeps the CPU up to 4 ms past its slice
        (self.tick > 0).then_some(self.tick)
    }

    fn sleep(&mut self, t: ThreadId) {
        let i = t.0 as usize;
        self.take(i);
        if self.on_rq[i] {
            let lag = self.avg_of(i) - self.vruntime[i];
            if lag < 0 {
                // ahead of its share: stays in the average until it is not
                self.delayed[i] = true;
                self.rqs[self.cpu[i]].delayed.push(i as u32);
                return;
            }
            // Linux clamps lag to about two slices
            self.slept[i] = Some(lag.min(2 * self.vslice(i)));
            self.leave_rq(i);
        }
    }

    fn boost(&mut self, t: ThreadId) {
        if self.key[t.0 as usize].is_some() {
            self.next = Some(t.0);
        }
    }

    fn preempts(&self, woken: ThreadId, running: ThreadId) -> bool {
        let (w, r) = (woken.0 as usize, running.0 as usize);
        if self.cpu[w] != self.cpu[r] {
            return false;
        }
        // __pick_eevdf with the running thread: it keeps the CPU while
        // eligible and protected (RUN_TO_PARITY); past its protection, the
        // scheduler picks again (the earliest eligible deadline, the
        // running thread included while eligible)
        let protected = self.vruntime[r] < self.vprot[r];
        if self.eligible(r) && protected {
            return false;
        }
        if !protected {
            return true;
        }
        let rq = &self.rqs[self.cpu[w]];
        let v = rq.avg();
        rq.ready
            .iter()
            .find(|k| self.vruntime[k.2 as usize] <= v)
            .is_some_and(|k| k.2 == woken.0)
    }

    fn ready(&self) -> usize {
        self.rqs.iter().map(|q| q.ready.len()).sum()
    }

    fn ready_on(&self, c: u32) -> usize {
        self.rqs[c as usize % self.rqs.len()].ready.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(s: &mut Eevdf) -> Option<u32> {
        s.pick(&mut |_| true).map(|t| t.0)
    }

    #[test]
    fn the_slice_is_linux_default_for_the_cpu_count() {
        assert_eq!(Eevdf::default_slice_ns(1), 750_000);
        assert_eq!(Eevdf::default_slice_ns(2), 1_500_000);
        assert_eq!(Eevdf::default_slice_ns(4), 2_250_000);
        assert_eq!(Eevdf::default_slice_ns(64), 3_000_000);
    }

    #[test]
    fn equal_threads_take_turns_by_deadline() {
        let mut s = Eevdf::new(vec![1024; 2], 1, 1_000_000, 0, 0);
        s.enqueue(ThreadId(0), Sub::ProperReady, true);
        s.enqueue(ThreadId(1), Sub::ProperReady, true);
        assert_eq!(pick(&mut s), Some(0));
        assert_eq!(s.slice_ns(ThreadId(0), 1), 1_000_000);
        s.charge(ThreadId(0), 1_000_000);
        s.enqueue(ThreadId(0), Sub::SliceEnd, false);
        // 0 is ahead of the average now, 1 is not
        assert_eq!(pick(&mut s), Some(1));
        s.charge(ThreadId(1), 1_000_000);
        s.enqueue(ThreadId(1), Sub::SliceEnd, false);
        assert_eq!(pick(&mut s), Some(0));
    }

    #[test]
    fn a_partly_used_slice_resumes_where_it_stopped() {
        let mut s = Eevdf::new(vec![1024; 2], 1, 1_000_000, 0, 0);
        s.enqueue(ThreadId(0), Sub::ProperReady, true);
        assert_eq!(pick(&mut s), Some(0));
        s.charge(ThreadId(0), 300_000);
        s.enqueue(ThreadId(0), Sub::ProperReady, false);
        assert_eq!(pick(&mut s), Some(0));
        assert_eq!(s.slice_ns(ThreadId(0), 0), 700_000);
    }

    #[test]
    fn an_owed_sleeper_comes_back_owed_and_one_ahead_stays_ahead() {
        let ms = 1_000_000;
        let mut s = Eevdf::new(vec![1024; 3], 1, ms, 0, 0);
        for t in 0..3 {
            s.enqueue(ThreadId(t), Sub::ProperReady, true);
        }
        // 0 runs 2 ms and sleeps ahead of its share: it stays counted
        assert_eq!(pick(&mut s), Some(0));
        s.charge(ThreadId(0), 2 * ms);
        s.sleep(ThreadId(0));
        assert!(s.delayed[0]);
        // 1 runs 1 ms (average now 1 ms); 2 sleeps unrun: owed 1 ms
        assert_eq!(pick(&mut s), Some(1));
        s.charge(ThreadId(1), ms);
        s.enqueue(ThreadId(1), Sub::SliceEnd, false);
        assert_eq!(s.rqs[0].avg(), ms);
        assert_eq!(pick(&mut s), Some(2));
        s.sleep(ThreadId(2));
        assert_eq!(s.slept[2], Some(ms));
        // 0 wakes before the average (1.5 ms) reaches it: resumes at 2 ms
        s.enqueue(ThreadId(0), Sub::ProperReady, true);
        assert_eq!(s.vruntime[0], 2 * ms);
        // 2 is placed its lag behind, scaled by (W + w) / W = 3/2
        s.enqueue(ThreadId(2), Sub::ProperReady, true);
        assert_eq!(s.vruntime[2], 3 * ms / 2 - 3 * ms / 2);
        assert_eq!(pick(&mut s), Some(2));
    }

    #[test]
    fn a_delayed_sleeper_leaves_level_once_the_average_reaches_it() {
        let ms = 1_000_000;
        let mut s = Eevdf::new(vec![1024; 2], 1, ms, 0, 0);
        s.enqueue(ThreadId(0), Sub::ProperReady, true);
        s.enqueue(ThreadId(1), Sub::ProperReady, true);
        assert_eq!(pick(&mut s), Some(0));
        s.charge(ThreadId(0), 2 * ms);
        s.sleep(ThreadId(0));
        assert!(s.delayed[0]);
        assert_eq!(pick(&mut s), Some(1));
        s.charge(ThreadId(1), 3 * ms);
        // the average passed 0's 2 ms: it leaves with zero lag ...
        s.enqueue(ThreadId(1), Sub::SliceEnd, false);
        assert!(!s.delayed[0] && !s.on_rq[0]);
        // ... and comes back level with the queue (1 alone, at 3 ms)
        s.enqueue(ThreadId(0), Sub::ProperReady, true);
        assert_eq!(s.vruntime[0], 3 * ms);
    }

    #[test]
    fn a_wakeup_preempts_only_a_thread_ahead_of_its_share_or_past_its_slice() {
        let us = 1_000;
        let mut s = Eevdf::new(vec![1024; 2], 1, 1000 * us, 0, 0);
        s.enqueue(ThreadId(0), Sub::ProperReady, true);
        assert_eq!(pick(&mut s), Some(0));
        s.charge(ThreadId(0), 500 * us);
        s.enqueue(ThreadId(1), Sub::ProperReady, true);
        // 1 is placed at the average, which is 0's own time: 0 is still
        // eligible and inside its slice (RUN_TO_PARITY)
        assert_eq!(s.vruntime[1], 500 * us);
        assert!(!s.preempts(ThreadId(1), ThreadId(0)));
        // 0 runs on past the average: 1 is the eligible one now
        s.charge(ThreadId(0), 200 * us);
        assert!(!s.eligible(0));
        assert!(s.preempts(ThreadId(1), ThreadId(0)));
        // past its protected slice, any wakeup makes the CPU choose again
        let mut s = Eevdf::new(vec![1024; 2], 1, 1000 * us, 0, 0);
        s.enqueue(ThreadId(0), Sub::ProperReady, true);
        assert_eq!(pick(&mut s), Some(0));
        s.charge(ThreadId(0), 1000 * us);
        s.enqueue(ThreadId(1), Sub::ProperReady, true);
        assert!(s.preempts(ThreadId(1), ThreadId(0)));
    }

    #[test]
    fn an_idle_cpu_pulls_only_when_allowed_and_not_a_cache_hot_thread() {
        let ms = 1_000_000;
        let mut s = Eevdf::new(vec![1024; 2], 2, ms, 0, ms / 2);
        s.migrate(ThreadId(0), 1);
        s.migrate(ThreadId(1), 1);
        s.enqueue(ThreadId(0), Sub::ProperReady, true);
        s.enqueue(ThreadId(1), Sub::ProperReady, true);
        assert_eq!(s.pick_on(1, 0, true, &mut |_| true), Some(ThreadId(0)));
        s.charge(ThreadId(0), ms);
        s.enqueue(ThreadId(0), Sub::SliceEnd, false);
        assert_eq!(s.pick_on(1, ms, true, &mut |_| true), Some(ThreadId(1)));
        assert_eq!(s.ready_on(1), 1);
        // CPU 0 is idle: no pull unless balancing is allowed, and 0 ran
        // until 1 ms, so it is cache-hot until 1.5 ms
        assert_eq!(s.pick_on(0, ms + ms / 4, false, &mut |_| true), None);
        assert_eq!(s.pick_on(0, ms + ms / 4, true, &mut |_| true), None);
        let rel = s.deadline[0] - s.vruntime[0];
        assert_eq!(s.pick_on(0, 2 * ms, true, &mut |_| true), Some(ThreadId(0)));
        assert_eq!(s.cpu[0], 0);
        assert_eq!((s.ready_on(0), s.ready_on(1)), (0, 0));
        // it keeps its relative deadline (PLACE_REL_DEADLINE)
        assert_eq!(s.deadline[0] - s.vruntime[0], rel);
    }

    #[test]
    fn yield_picks_the_target() {
        let mut s = Eevdf::new(vec![1024; 3], 1, 1_000_000, 0, 0);
        for t in 0..3 {
            s.enqueue(ThreadId(t), Sub::ProperReady, true);
        }
        s.boost(ThreadId(2));
        assert_eq!(pick(&mut s), Some(2));
        assert_eq!(s.slice_tick_ns(), None);
        assert_eq!(
            Eevdf::new(vec![1024], 1, 1, 4_000_000, 0).slice_tick_ns(),
            Some(4_000_000)
        );
    }
}
