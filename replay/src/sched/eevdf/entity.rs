//! EEVDF's arithmetic on schedulable entities (threads, and the entities
//! that stand for a scheduling group on one CPU) and the run queues that
//! hold them: virtual runtimes and deadlines, the weighted average that
//! defines eligibility, lag kept across sleeps (PLACE_LAG), sleepers kept
//! in the average while ahead of their share (DELAY_DEQUEUE), moves
//! between queues, and reweighting. Knows nothing of CPUs or groups: the
//! hierarchy is `super`'s.

use std::collections::BTreeSet;

/// One run queue: ready entities by (deadline, arrival order), and
/// Σ weight × (vruntime − base), Σ weight over its ready, running and
/// delayed entities (relative to `base` so the sums stay small).
#[derive(Default)]
pub(super) struct RunQueue {
    pub(super) ready: BTreeSet<(i64, u64, u32)>,
    /// Its delayed sleepers (few: one per entity that slept ahead of its
    /// share), so settling them does not scan every entity.
    pub(super) delayed: Vec<u32>,
    pub(super) sum_wv: i128,
    pub(super) sum_w: i128,
    base: i64,
}

impl RunQueue {
    /// The weighted average virtual runtime: the 0-lag point.
    pub(super) fn avg(&self) -> i64 {
        if self.sum_w == 0 {
            return self.base;
        }
        self.base + (self.sum_wv / self.sum_w) as i64
    }
}

/// Every entity's EEVDF state, and the run queues.
pub(super) struct Entities {
    pub(super) vruntime: Vec<i64>,
    pub(super) deadline: Vec<i64>,
    pub(super) weight: Vec<i64>,
    /// Lag at the last sleep (the run queue's average − own, virtual ns).
    pub(super) slept: Vec<Option<i64>>,
    /// Asleep but still counted in its run queue's average (delayed
    /// dequeue: it slept ahead of its share).
    pub(super) delayed: Vec<bool>,
    /// Slice protection: runs on until its virtual runtime reaches this
    /// (its deadline when it was picked; RUN_TO_PARITY).
    pub(super) vprot: Vec<i64>,
    /// The run queue an entity is on, or was on last.
    pub(super) rq: Vec<usize>,
    key: Vec<Option<(i64, u64)>>,
    /// Counted in its run queue's average: ready, running or delayed.
    pub(super) on_rq: Vec<bool>,
    pub(super) rqs: Vec<RunQueue>,
    seq: u64,
    /// The base slice (real ns at weight 1024).
    pub(super) slice: i64,
}

impl Entities {
    /// `weights.len()` entities, all on queue 0 to begin with, and
    /// `queues` run queues.
    pub(super) fn new(weights: Vec<i64>, queues: usize, slice: i64) -> Self {
        let n = weights.len();
        Entities {
            vruntime: vec![0; n],
            deadline: vec![0; n],
            weight: weights.into_iter().map(|w| w.max(1)).collect(),
            slept: vec![None; n],
            delayed: vec![false; n],
            vprot: vec![0; n],
            rq: vec![0; n],
            key: vec![None; n],
            on_rq: vec![false; n],
            rqs: (0..queues.max(1)).map(|_| RunQueue::default()).collect(),
            seq: 0,
            slice: slice.max(1),
        }
    }

    pub(super) fn vslice(&self, e: usize) -> i64 {
        self.slice * 1024 / self.weight[e]
    }

    pub(super) fn avg_of(&self, e: usize) -> i64 {
        self.rqs[self.rq[e]].avg()
    }

    pub(super) fn eligible(&self, e: usize) -> bool {
        self.vruntime[e] <= self.avg_of(e)
    }

    /// In its queue's ready set (not running, not asleep).
    pub(super) fn is_ready(&self, e: usize) -> bool {
        self.key[e].is_some()
    }

    pub(super) fn join_rq(&mut self, e: usize) {
        if !self.on_rq[e] {
            self.on_rq[e] = true;
            let rq = &mut self.rqs[self.rq[e]];
            if rq.sum_w == 0 {
                rq.base = self.vruntime[e];
            }
            rq.sum_w += self.weight[e] as i128;
            rq.sum_wv += self.weight[e] as i128 * (self.vruntime[e] - rq.base) as i128;
        }
    }

    pub(super) fn leave_rq(&mut self, e: usize) {
        if self.on_rq[e] {
            self.on_rq[e] = false;
            let rq = &mut self.rqs[self.rq[e]];
            let avg = rq.avg();
            rq.sum_w -= self.weight[e] as i128;
            rq.sum_wv -= self.weight[e] as i128 * (self.vruntime[e] - rq.base) as i128;
            if rq.sum_w == 0 {
                // an empty queue: the average stays where it was
                rq.sum_wv = 0;
                rq.base = avg;
            }
        }
    }

    /// Move entity `e`'s virtual runtime, keeping the sums in step.
    pub(super) fn set_vruntime(&mut self, e: usize, v: i64) {
        if self.on_rq[e] {
            self.rqs[self.rq[e]].sum_wv += self.weight[e] as i128 * (v - self.vruntime[e]) as i128;
        }
        self.vruntime[e] = v;
    }

    /// Charge `ns` of real time at its weight; a passed deadline gets a
    /// new slice from here (update_deadline).
    pub(super) fn charge(&mut self, e: usize, ns: i64) {
        let v = self.vruntime[e] + ns * 1024 / self.weight[e];
        self.set_vruntime(e, v);
        if v >= self.deadline[e] {
            self.deadline[e] = v + self.vslice(e);
        }
    }

    /// Real ns until `e` reaches its deadline at its weight.
    pub(super) fn slice_left(&self, e: usize) -> i64 {
        ((self.deadline[e] - self.vruntime[e]) * self.weight[e] / 1024).max(1)
    }

    /// (Re)insert into its queue's ready set, keyed by deadline.
    pub(super) fn insert(&mut self, e: usize) {
        self.take(e);
        self.seq += 1;
        self.rqs[self.rq[e]]
            .ready
            .insert((self.deadline[e], self.seq, e as u32));
        self.key[e] = Some((self.deadline[e], self.seq));
    }

    /// Out of its queue's ready set (picked, or asleep).
    pub(super) fn take(&mut self, e: usize) {
        if let Some((d, s)) = self.key[e].take() {
            self.rqs[self.rq[e]].ready.remove(&(d, s, e as u32));
        }
    }

    /// The delayed sleepers of queue `q` that its average has caught up
    /// with leave it with zero lag (DELAY_ZERO); returns them.
    pub(super) fn settle_delayed(&mut self, q: usize) -> Vec<usize> {
        let mut left = Vec::new();
        while !self.rqs[q].delayed.is_empty() {
            let v = self.rqs[q].avg();
            // lowest entity first, so the order (and the empty queue's
            // resting average) does not depend on the list's order
            let Some(k) = (0..self.rqs[q].delayed.len())
                .filter(|&k| self.vruntime[self.rqs[q].delayed[k] as usize] <= v)
                .min_by_key(|&k| self.rqs[q].delayed[k])
            else {
                break;
            };
            let e = self.rqs[q].delayed.swap_remove(k) as usize;
            self.delayed[e] = false;
            self.slept[e] = Some(0);
            self.leave_rq(e);
            left.push(e);
        }
        left
    }

    /// `e` is no longer a delayed sleeper (woken, or moved elsewhere).
    pub(super) fn undelay(&mut self, e: usize) {
        self.delayed[e] = false;
        let d = &mut self.rqs[self.rq[e]].delayed;
        if let Some(k) = d.iter().position(|&x| x as usize == e) {
            d.swap_remove(k);
        }
    }

    /// `e` stops being runnable: ahead of its share it stays in the
    /// average (delayed) until it is not; else it leaves with its lag,
    /// clamped as Linux does to about two slices.
    pub(super) fn sleep(&mut self, e: usize) {
        self.take(e);
        if self.on_rq[e] {
            let lag = self.avg_of(e) - self.vruntime[e];
            if lag < 0 {
                self.delayed[e] = true;
                self.rqs[self.rq[e]].delayed.push(e as u32);
                return;
            }
            self.slept[e] = Some(lag.min(2 * self.vslice(e)));
            self.leave_rq(e);
        }
    }

    /// `e` becomes runnable again (not yet counted): a delayed sleeper
    /// resumes where it was, or, if the average has passed it since, level
    /// with the others (requeue_delayed_entity with DELAY_ZERO); one that
    /// left is placed (place_entity) with the lag it had: owed when it
    /// slept, owed again, scaled for its own weight joining the average
    /// (Linux's lag × (W + w) / W).
    pub(super) fn wake(&mut self, e: usize) {
        if self.delayed[e] {
            self.undelay(e);
            if self.avg_of(e) > self.vruntime[e] {
                self.leave_rq(e);
                let v = self.avg_of(e);
                self.vruntime[e] = v;
                self.deadline[e] = v + self.vslice(e);
            }
            return;
        }
        if self.on_rq[e] {
            return;
        }
        let rq = &self.rqs[self.rq[e]];
        let v = rq.avg();
        let placed = match self.slept[e].take() {
            Some(lag) if lag > 0 && rq.sum_w > 0 => {
                v - (lag as i128 * (rq.sum_w + self.weight[e] as i128) / rq.sum_w) as i64
            }
            Some(lag) if lag > 0 => v - lag,
            Some(_) | None => v,
        };
        self.vruntime[e] = placed;
        self.deadline[e] = placed + self.vslice(e);
    }

    /// Move a counted (or ready) entity to queue `q`, keeping its lag and
    /// relative deadline (PLACE_REL_DEADLINE); a delayed sleeper leaves
    /// its old queue first, with its lag.
    pub(super) fn move_to(&mut self, e: usize, q: usize) {
        if self.rq[e] == q {
            return;
        }
        if self.delayed[e] {
            self.undelay(e);
            self.slept[e] = Some(self.avg_of(e) - self.vruntime[e]);
            self.leave_rq(e);
        }
        let queued = self.key[e].is_some();
        let counted = self.on_rq[e];
        if !counted {
            self.take(e);
            self.rq[e] = q;
            return;
        }
        self.take(e);
        let lag = self.avg_of(e) - self.vruntime[e];
        let rel = self.deadline[e] - self.vruntime[e];
        self.leave_rq(e);
        self.rq[e] = q;
        let v = self.rqs[q].avg() - lag;
        self.vruntime[e] = v;
        self.deadline[e] = v + rel;
        self.join_rq(e);
        if queued {
            self.insert(e);
        }
    }

    /// A new weight for `e` (a group entity whose share changed): a
    /// counted entity keeps its weighted lag and weighted distance to its
    /// deadline, so its queue's average does not move (reweight_eevdf).
    pub(super) fn reweight(&mut self, e: usize, w: i64) {
        let (old, w) = (self.weight[e], w.max(1));
        if old == w {
            return;
        }
        if !self.on_rq[e] {
            self.weight[e] = w;
            return;
        }
        let queued = self.key[e].is_some();
        self.take(e);
        let avg = self.avg_of(e);
        let lag = (avg - self.vruntime[e]) as i128 * old as i128 / w as i128;
        let rel = (self.deadline[e] - avg) as i128 * old as i128 / w as i128;
        self.leave_rq(e);
        self.weight[e] = w;
        // w × (v' − avg) = old × (v − avg): joining back there leaves the
        // average where it was
        self.vruntime[e] = avg - lag as i64;
        self.deadline[e] = avg + rel as i64;
        self.join_rq(e);
        if queued {
            self.insert(e);
        }
    }

    /// The ready entity of queue `q` to run next among those `ok` accepts:
    /// eligible with the earliest deadline; if the running entities hold
    /// the average down so none is, the least-run one.
    pub(super) fn best(&self, q: usize, ok: &mut dyn FnMut(usize) -> bool) -> Option<usize> {
        let rq = &self.rqs[q];
        let v = rq.avg();
        rq.ready
            .iter()
            .find(|k| self.vruntime[k.2 as usize] <= v && ok(k.2 as usize))
            .map(|k| k.2 as usize)
            .or_else(|| {
                rq.ready
                    .iter()
                    .filter(|k| ok(k.2 as usize))
                    .min_by_key(|k| (self.vruntime[k.2 as usize], k.1))
                    .map(|k| k.2 as usize)
            })
    }

    /// __pick_eevdf with `running` current on its queue, to decide on the
    /// ready `woken`: the running entity keeps the CPU while eligible and
    /// protected (RUN_TO_PARITY); past its protection the queue picks
    /// again (the earliest eligible deadline, the running one included
    /// while eligible).
    pub(super) fn preempts(&self, woken: usize, running: usize) -> bool {
        let protected = self.vruntime[running] < self.vprot[running];
        if self.eligible(running) && protected {
            return false;
        }
        if !protected {
            return true;
        }
        let rq = &self.rqs[self.rq[woken]];
        let v = rq.avg();
        rq.ready
            .iter()
            .find(|k| self.vruntime[k.2 as usize] <= v)
            .is_some_and(|k| k.2 as usize == woken)
    }
}
