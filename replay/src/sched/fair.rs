//! CFS-like proportional share over one global run queue (floating
//! pCPUs): the ready thread with the least virtual runtime runs next;
//! slices shrink with the number of runnable threads down to a minimum
//! granularity; a woken thread is placed half a latency behind the current
//! minimum (sleeper credit) and preempts when far enough ahead.

use super::{Scheduler, Sub};
use crate::model::ThreadId;
use std::collections::BTreeSet;

/// The fair scheduler.
pub struct Fair {
    vruntime: Vec<i64>,
    weight: Vec<i64>,
    queue: BTreeSet<(i64, u64, u32)>,
    key: Vec<Option<(i64, u64)>>,
    seq: u64,
    min_vruntime: i64,
    latency: i64,
    min_gran: i64,
    wakeup_gran: i64,
}

impl Fair {
    /// A scheduler for `n` threads of the given weights (1024 = nice 0).
    pub fn new(weights: Vec<i64>, latency: i64, min_gran: i64, wakeup_gran: i64) -> Self {
        let n = weights.len();
        Fair {
            vruntime: vec![0; n],
            weight: weights,
            queue: BTreeSet::new(),
            key: vec![None; n],
            seq: 0,
            min_vruntime: 0,
            latency,
            min_gran,
            wakeup_gran,
        }
    }

    fn insert(&mut self, t: ThreadId, v: i64) {
        self.vruntime[t.0 as usize] = v;
        self.seq += 1;
        self.queue.insert((v, self.seq, t.0));
        self.key[t.0 as usize] = Some((v, self.seq));
    }

    fn take(&mut self, t: ThreadId) {
        if let Some((v, s)) = self.key[t.0 as usize].take() {
            self.queue.remove(&(v, s, t.0));
        }
    }
}

impl Scheduler for Fair {
    fn enqueue(&mut self, t: ThreadId, sub: Sub, woken: bool) {
        self.take(t);
        let own = self.vruntime[t.0 as usize];
        let v = match sub {
            Sub::ProperReady if woken => own.max(self.min_vruntime - self.latency / 2),
            Sub::ProperReady | Sub::SliceEnd => own.max(self.min_vruntime - self.latency),
            // behind everything ready now
            Sub::OutService => self
                .queue
                .iter()
                .next_back()
                .map_or(own, |k| k.0 + 1)
                .max(own),
        };
        self.insert(t, v);
    }

    fn any_ready(&self, eligible: &mut dyn FnMut(ThreadId) -> bool) -> bool {
        self.queue.iter().any(|k| eligible(ThreadId(k.2)))
    }

    fn pick(&mut self, eligible: &mut dyn FnMut(ThreadId) -> bool) -> Option<ThreadId> {
        let found = self
            .queue
            .iter()
            .find(|k| eligible(ThreadId(k.2)))
            .copied()?;
        self.queue.remove(&found);
        self.key[found.2 as usize] = None;
        if let Some(first) = self.queue.iter().next() {
            self.min_vruntime = self.min_vruntime.max(first.0.min(found.0));
        } else {
            self.min_vruntime = self.min_vruntime.max(found.0);
        }
        Some(ThreadId(found.2))
    }

    fn slice_ns(&self, _t: ThreadId, ready: usize) -> i64 {
        (self.latency / (ready as i64 + 1)).max(self.min_gran)
    }

    fn charge(&mut self, t: ThreadId, ns: i64) {
        let i = t.0 as usize;
        self.vruntime[i] += ns * 1024 / self.weight[i].max(1);
    }

    fn boost(&mut self, t: ThreadId) {
        if self.key[t.0 as usize].is_some() {
            let v = self.queue.iter().next().map_or(self.min_vruntime, |k| k.0) - 1;
            self.take(t);
            self.insert(t, v);
        }
    }

    fn preempts(&self, woken: ThreadId, running: ThreadId) -> bool {
        self.vruntime[woken.0 as usize] + self.wakeup_gran < self.vruntime[running.0 as usize]
    }

    fn ready(&self) -> usize {
        self.queue.len()
    }
}
