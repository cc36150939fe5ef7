//! Xen's credit scheduler (see ../shared/papers/asym.md §1.1): credits
//! refill every accounting period in proportion to VM weight (capped at
//! one period's worth), burn at 10 per ms of run time; priority BOOST
//! (just woken with credit left) > UNDER (credit left) > OVER; FIFO within
//! a priority; a fixed time slice; BOOST ends at the next tick.

use super::{Scheduler, Sub};
use crate::model::ThreadId;
use std::collections::VecDeque;

const BOOST: usize = 0;
const UNDER: usize = 1;
const OVER: usize = 2;
/// Credits per accounting period per vCPU (300 per 30 ms).
const CREDITS_PER_ACCT: i64 = 300;

/// The credit scheduler.
pub struct Credit {
    credit: Vec<i64>,
    prio: Vec<usize>,
    weight: Vec<i64>,
    queues: [VecDeque<u32>; 3],
    queued: Vec<bool>,
    slice: i64,
    tick: i64,
    acct: i64,
    next_acct: i64,
    pcpus: i64,
}

impl Credit {
    /// A scheduler for threads with these weights (256 per vCPU).
    pub fn new(weights: Vec<i64>, pcpus: usize, slice: i64, tick: i64, acct: i64) -> Self {
        let n = weights.len();
        Credit {
            credit: vec![CREDITS_PER_ACCT; n],
            prio: vec![UNDER; n],
            weight: weights,
            queues: Default::default(),
            queued: vec![false; n],
            slice,
            tick,
            acct,
            next_acct: acct,
            pcpus: pcpus as i64,
        }
    }

    fn remove(&mut self, t: ThreadId) {
        if self.queued[t.0 as usize] {
            for q in &mut self.queues {
                q.retain(|&x| x != t.0);
            }
            self.queued[t.0 as usize] = false;
        }
    }

    fn base_prio(&self, i: usize) -> usize {
        if self.credit[i] > 0 {
            UNDER
        } else {
            OVER
        }
    }
}

impl Scheduler for Credit {
    fn enqueue(&mut self, t: ThreadId, sub: Sub, woken: bool) {
        self.remove(t);
        let i = t.0 as usize;
        let base = self.base_prio(i);
        self.prio[i] = if woken && base == UNDER { BOOST } else { base };
        let q = match sub {
            Sub::OutService => OVER.max(self.prio[i]),
            _ => self.prio[i],
        };
        self.queues[q].push_back(t.0);
        self.queued[i] = true;
    }

    fn pick(&mut self, eligible: &mut dyn FnMut(ThreadId) -> bool) -> Option<ThreadId> {
        for q in 0..3 {
            if let Some(pos) = self.queues[q].iter().position(|&x| eligible(ThreadId(x))) {
                let t = self.queues[q].remove(pos).expect("position is valid");
                self.queued[t as usize] = false;
                return Some(ThreadId(t));
            }
        }
        None
    }

    fn any_ready(&self, eligible: &mut dyn FnMut(ThreadId) -> bool) -> bool {
        self.queues.iter().flatten().any(|&x| eligible(ThreadId(x)))
    }

    fn slice_ns(&self, _t: ThreadId, _ready: usize) -> i64 {
        self.slice
    }

    fn charge(&mut self, t: ThreadId, ns: i64) {
        // modern Xen burns credits in proportion to run time: 10 per ms
        self.credit[t.0 as usize] -= ns * CREDITS_PER_ACCT / self.acct.max(1);
    }

    fn boost(&mut self, t: ThreadId) {
        if self.queued[t.0 as usize] {
            self.remove(t);
            self.queues[BOOST].push_front(t.0);
            self.queued[t.0 as usize] = true;
        }
    }

    fn preempts(&self, woken: ThreadId, running: ThreadId) -> bool {
        self.prio[woken.0 as usize] < self.prio[running.0 as usize]
    }

    fn tick(&mut self, now: i64) {
        // BOOST lasts until the next tick
        for i in 0..self.prio.len() {
            if self.prio[i] == BOOST {
                self.prio[i] = self.base_prio(i);
            }
        }
        if now >= self.next_acct {
            self.next_acct += self.acct;
            let total: i64 = self.weight.iter().sum::<i64>().max(1);
            let pool = CREDITS_PER_ACCT * self.pcpus;
            for i in 0..self.credit.len() {
                let share = pool * self.weight[i] / total;
                self.credit[i] = (self.credit[i] + share).min(CREDITS_PER_ACCT);
                self.prio[i] = self.base_prio(i);
            }
            // re-sort queued threads by their new priorities
            let mut all: Vec<u32> = Vec::new();
            for q in &mut self.queues {
                all.extend(q.drain(..));
            }
            for t in all {
                let p = self.prio[t as usize];
                self.queues[p].push_back(t);
            }
        }
    }

    fn tick_ns(&self) -> Option<i64> {
        Some(self.tick)
    }

    fn ready(&self) -> usize {
        self.queues.iter().map(VecDeque::len).sum()
    }
}
