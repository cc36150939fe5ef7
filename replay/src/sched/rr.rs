//! Round robin over one FIFO queue (Linux's SCHED_RR among equals, the
//! `cratrace synth` scenarios' hosts): the longest-waiting ready thread
//! runs next, for a fixed slice; woken and preempted threads join the
//! tail; a wakeup never preempts. With each thread pinned, a CPU takes the
//! first waiting thread it may run, so the order on every CPU is that
//! CPU's own FIFO.

use super::{Scheduler, Sub};
use crate::model::ThreadId;
use std::collections::VecDeque;

/// The round-robin scheduler.
pub struct RoundRobin {
    queue: VecDeque<u32>,
    queued: Vec<bool>,
    slice: i64,
}

impl RoundRobin {
    /// A scheduler for `n` threads with a fixed `slice` (ns).
    pub fn new(n: usize, slice: i64) -> Self {
        RoundRobin {
            queue: VecDeque::new(),
            queued: vec![false; n],
            slice: slice.max(1),
        }
    }

    fn remove(&mut self, t: ThreadId) {
        if std::mem::take(&mut self.queued[t.0 as usize]) {
            self.queue.retain(|&x| x != t.0);
        }
    }
}

impl Scheduler for RoundRobin {
    fn enqueue(&mut self, t: ThreadId, _sub: Sub, _woken: bool) {
        self.remove(t);
        self.queue.push_back(t.0);
        self.queued[t.0 as usize] = true;
    }

    fn pick(&mut self, eligible: &mut dyn FnMut(ThreadId) -> bool) -> Option<ThreadId> {
        let pos = self.queue.iter().position(|&x| eligible(ThreadId(x)))?;
        let t = self.queue.remove(pos).expect("position is valid");
        self.queued[t as usize] = false;
        Some(ThreadId(t))
    }

    fn any_ready(&self, eligible: &mut dyn FnMut(ThreadId) -> bool) -> bool {
        self.queue.iter().any(|&x| eligible(ThreadId(x)))
    }

    fn slice_ns(&self, _t: ThreadId, _ready: usize) -> i64 {
        self.slice
    }

    fn charge(&mut self, _t: ThreadId, _ns: i64) {}

    fn boost(&mut self, t: ThreadId) {
        if self.queued[t.0 as usize] {
            self.remove(t);
            self.queue.push_front(t.0);
            self.queued[t.0 as usize] = true;
        }
    }

    fn preempts(&self, _woken: ThreadId, _running: ThreadId) -> bool {
        false
    }

    fn ready(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_in_first_out_never_preempting_and_skipping_what_a_cpu_may_not_run() {
        let mut s = RoundRobin::new(4, 800_000);
        for t in [2, 0, 3, 1] {
            s.enqueue(ThreadId(t), Sub::ProperReady, true);
        }
        assert!(!s.preempts(ThreadId(0), ThreadId(1)));
        // a CPU that may run only the odd threads takes the first of them
        assert_eq!(s.pick(&mut |t| t.0 % 2 == 1), Some(ThreadId(3)));
        assert!(s.any_ready(&mut |t| t.0 == 1) && !s.any_ready(&mut |t| t.0 == 3));
        // a preempted thread goes behind everyone waiting
        s.enqueue(ThreadId(3), Sub::SliceEnd, false);
        let order: Vec<u32> = std::iter::from_fn(|| s.pick(&mut |_| true).map(|t| t.0)).collect();
        assert_eq!(order, vec![2, 0, 1, 3]);
        assert_eq!(s.slice_ns(ThreadId(0), 3), 800_000);
    }
}
