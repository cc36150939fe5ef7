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
//! cost unless a pull already failed that way. Every few tens of ms busy
//! CPUs balance by load (periodic load_balance between overloaded CPUs):
//! each thread's load is PELT's runnable average (weight × the share of
//! recent time it was on its queue, halving over 32 ms; a sleeper's
//! decays where it slept), a CPU's the sum of its threads', and a CPU
//! below the average takes waiting threads whose load fits the
//! imbalance (with two CPUs, half the difference). Two CPUs with two threads each are even by count but not
//! when one pair spins and the other sleeps; Linux then moves threads
//! between them tens of times a second (a lab capture: 416 vCPU moves in
//! 6 s), which keeps a VM's vCPUs from staying packed on one CPU. Where
//! woken threads go is the engine's part (`engine/per_cpu.rs`).
//!
//! Scheduling groups (autogroups, CPU cgroups; FAIR_GROUP_SCHED): a
//! group's threads on a CPU share one run queue, which an entity of the
//! group stands for in that CPU's top-level queue, weighted by the
//! group's shares times its part of the group's load on all CPUs
//! (calc_group_shares, from runnable weight). The top level picks among
//! groups and ungrouped threads, then the group's queue among its
//! threads, each level by the same rules; a wakeup is decided at the
//! level where the woken and the running thread meet: between siblings in
//! their group's queue, else between their groups. A thread of another
//! group that preempts a vCPU takes the CPU from the vCPU's whole group,
//! and when the group gets it back its queue picks afresh, without the
//! interrupted thread's slice protection. The entity arithmetic is in
//! `entity.rs`.

mod entity;

use super::{Pull, Scheduler, Sub};
use crate::model::ThreadId;
use crate::rng::SplitMix64;
use entity::Entities;

/// Failed pulls of only cache-hot threads before one is taken anyway
/// (the MC domain's cache_nice_tries).
const CACHE_NICE_TRIES: u32 = 1;

/// Fewest shares a group's entity on one CPU gets (MIN_SHARES).
const MIN_SHARES: i64 = 2;

/// The EEVDF scheduler.
pub struct Eevdf {
    /// Threads are entities `0..threads`; group `g`'s entity on CPU `c` is
    /// `threads + g × cpus + c`. Queue `c` is CPU `c`'s top level, queue
    /// `cpus + g × cpus + c` group `g`'s on CPU `c`.
    e: Entities,
    threads: usize,
    cpus: usize,
    /// Each thread's group, if any, and each group's shares.
    group: Vec<Option<usize>>,
    shares: Vec<i64>,
    /// Each thread's CPU (the queue it is on, or was on last).
    cpu: Vec<usize>,
    /// The thread each CPU runs (picked, not yet back or asleep).
    running: Vec<Option<usize>>,
    tick: i64,
    /// A thread that ran less than this ago is cache-hot: another CPU's
    /// load balancing leaves it where it is.
    migration_cost: i64,
    /// When each thread last stopped running (as far as charged).
    ran_until: Vec<i64>,
    /// Per CPU, its periodic balancing attempts in a row that found an
    /// imbalance and moved nothing (nr_balance_failed): past
    /// CACHE_NICE_TRIES any pull, newidle ones too, may take a cache-hot
    /// thread. A move or a balanced system resets it; a failed newidle
    /// pull leaves it alone.
    balance_failed: Vec<u32>,
    /// Proportional newidle balancing, if on.
    newidle: Option<NewidleOdds>,
    /// Directed yield: picked next if it may run.
    next: Option<u32>,
    /// Busy CPUs' periodic load balancing: its interval (0: none) and
    /// when it runs next.
    busy_balance: i64,
    next_busy_balance: i64,
    /// Busy balancing by load (PELT) rather than by thread counts.
    by_load: bool,
    /// The engine's clock, and per thread its runnable load average
    /// (weight × the share of recent time it was on its run queue) as of
    /// `load_at`.
    now: i64,
    load: Vec<f64>,
    load_at: Vec<i64>,
    /// Per thread, the CPUs its affinity allows (None: any): busy
    /// balancing moves no thread off them.
    allowed: Vec<Option<Vec<u32>>>,
}

/// Linux's proportional newidle balance (NI_RANDOM; 6.18.5 and later,
/// 6.19): a CPU going idle balances only as often as its newidle balances
/// have lately succeeded. Per CPU: balances due, their weighted successes,
/// and the success ratio out of 1024 (sched_domain's newidle_call,
/// newidle_success and newidle_ratio, starting at 50%).
struct NewidleOdds {
    rng: SplitMix64,
    /// Some CPU had a thread waiting since the last balance looked (the
    /// root domain's overloaded flag: set as a run queue reaches two
    /// threads, cleared only by a balance that finds none): a newidle
    /// balance runs, and may fail, on a stale flag.
    overloaded: bool,
    call: Vec<u32>,
    success: Vec<u32>,
    ratio: Vec<u32>,
}

impl NewidleOdds {
    /// Count one newidle balance due on CPU `c` and its weighted success
    /// (update_newidle_stats): every 1024 the ratio takes the successes,
    /// and both counts halve.
    fn record(&mut self, c: usize, success: u32) {
        self.call[c] += 1;
        self.success[c] += success;
        if self.call[c] >= 1024 {
            self.ratio[c] = self.success[c];
            self.call[c] /= 2;
            self.success[c] /= 2;
        }
    }
}

/// `load_at` of a thread that has not been runnable yet: it has no load
/// until it is, and then starts at its full weight, as Linux starts a new
/// task's (init_entity_runnable_average).
const NEVER_RUNNABLE: i64 = i64::MIN;

/// PELT's half-life: a load average halves over 32 ms.
const LOAD_HALF_LIFE_NS: f64 = 32e6;

/// Busy balancing pulls from an overloaded CPU only when it is this much
/// (percent) busier than an overloaded local one (the MC domain's
/// imbalance_pct).
const IMBALANCE_PCT: f64 = 117.0;

/// Group `g`'s queue on CPU `c` of `cpus`: entity queues are the CPUs'
/// top levels first, then each group's, one per CPU.
fn group_queue(cpus: usize, g: usize, c: usize) -> usize {
    cpus + g * cpus + c
}

impl Eevdf {
    /// A scheduler for threads of the given weights (1024 = nice 0) on
    /// `cpus` run queues, with a base slice, the tick period (0: slices end
    /// exactly, as with HRTICK) and the migration cost, in ns; no groups.
    pub fn new(weights: Vec<i64>, cpus: usize, slice: i64, tick: i64, migration_cost: i64) -> Self {
        let n = weights.len();
        Self::with_groups(
            weights,
            vec![None; n],
            Vec::new(),
            cpus,
            slice,
            tick,
            migration_cost,
        )
    }

    /// As [`new`](Self::new), each thread in `group` (an index into
    /// `shares`, the groups' weights: 1024 for an autogroup of nice 0 or a
    /// cgroup of cpu.weight 100) or in none.
    pub fn with_groups(
        weights: Vec<i64>,
        group: Vec<Option<usize>>,
        shares: Vec<i64>,
        cpus: usize,
        slice: i64,
        tick: i64,
        migration_cost: i64,
    ) -> Self {
        let n = weights.len();
        let cpus = cpus.max(1);
        let groups = shares.len();
        let mut w = weights;
        w.extend((0..groups * cpus).map(|k| shares[k / cpus].max(MIN_SHARES)));
        let mut e = Entities::new(w, cpus + groups * cpus, slice);
        for g in 0..groups {
            for c in 0..cpus {
                e.rq[n + g * cpus + c] = c;
            }
        }
        let group: Vec<Option<usize>> = group
            .into_iter()
            .map(|g| g.filter(|&g| g < groups))
            .collect();
        let mut s = Eevdf {
            e,
            threads: n,
            cpus,
            group,
            shares,
            cpu: vec![0; n],
            running: vec![None; cpus],
            tick: tick.max(0),
            migration_cost,
            ran_until: vec![i64::MIN / 2; n],
            balance_failed: vec![0; cpus],
            newidle: None,
            next: None,
            busy_balance: 0,
            next_busy_balance: 0,
            by_load: false,
            now: 0,
            load: vec![0.0; n],
            load_at: vec![NEVER_RUNNABLE; n],
            allowed: vec![None; n],
        };
        for i in 0..n {
            s.e.rq[i] = s.queue_of(i, 0);
        }
        s
    }

    /// Balance busy CPUs every `ns` (0: never): a CPU with at least two
    /// threads more (running and ready) than another hands it one that
    /// is not cache-hot (Linux's periodic load_balance between busy CPUs,
    /// every balance interval × busy_factor: 2 ms × 16 in a 2-CPU domain).
    pub fn set_busy_balance(&mut self, ns: i64) {
        self.busy_balance = ns.max(0);
        self.next_busy_balance = self.busy_balance;
    }

    /// Newidle balancing in proportion to its success (Linux's NI_RANDOM),
    /// its dice drawn from the replay's `seed`; `None`: every time.
    pub fn set_newidle_odds(&mut self, seed: Option<u64>) {
        self.newidle = seed.map(|seed| NewidleOdds {
            rng: SplitMix64::seeded(0x4E49_5F52_414E_444F, seed),
            overloaded: false,
            call: vec![512; self.cpus],
            success: vec![256; self.cpus],
            ratio: vec![512; self.cpus],
        });
    }

    /// An idle CPU `c` pulls (see `pull_for`); a newidle pull first throws
    /// a 1024-sided die against its success ratio, and a success counts
    /// 1024 / (1 + ratio), so that a rarely tried balance that works
    /// still lifts its ratio (sched_balance_newidle).
    fn idle_pull(
        &mut self,
        c: usize,
        now: i64,
        pull: Pull,
        eligible: &mut dyn FnMut(ThreadId) -> bool,
    ) -> Option<usize> {
        let mut others: Vec<usize> = (0..self.cpus).filter(|&o| o != c).collect();
        let waiting = others.iter().any(|&o| self.ready_on(o as u32) > 0);
        // a newidle balance trusts the overloaded flag, however stale
        let flagged = pull == Pull::NewIdle && self.newidle.as_ref().is_some_and(|o| o.overloaded);
        if !waiting && !flagged {
            // no CPU overloaded: nothing to balance, nothing counted
            self.balance_failed[c] = 0;
            return None;
        }
        others.sort_by_key(|&o| std::cmp::Reverse(self.ready_on(o as u32)));
        let weight = match (&mut self.newidle, pull) {
            (Some(odds), Pull::NewIdle) => {
                let d1k = ((odds.rng.next_f64() * 1024.0) as u32).min(1023);
                let w = 1 + odds.ratio[c];
                if d1k > w {
                    odds.record(c, 0);
                    return None;
                }
                Some((1024 + w / 2) / w)
            }
            _ => None,
        };
        if let Some(odds) = &mut self.newidle {
            // the balance looks at every CPU: the flag is fresh again
            odds.overloaded = waiting;
        }
        // on a stale flag the balance finds no busiest CPU: balanced
        // (out_balanced resets the failure count), and for the odds a
        // balance that pulled nothing
        let found = if waiting {
            self.pull_for(c, &others, now, pull, &mut |t| eligible(ThreadId(t as u32)))
        } else {
            self.balance_failed[c] = 0;
            None
        };
        if let (Some(w), Some(odds)) = (weight, &mut self.newidle) {
            odds.record(c, if found.is_some() { w } else { 0 });
        }
        found
    }

    /// The CPUs each thread may run on (None: any), which busy balancing
    /// keeps to (idle CPUs' pulls ask the engine, which knows them too).
    pub fn set_affinity(&mut self, allowed: Vec<Option<Vec<u32>>>) {
        self.allowed = allowed;
    }

    /// Whether thread `i` may run on CPU `c`.
    fn allows(&self, i: usize, c: usize) -> bool {
        self.allowed[i]
            .as_ref()
            .is_none_or(|s| s.contains(&(c as u32)))
    }

    /// Busy balancing by runnable load (true), as Linux's load_balance
    /// between overloaded CPUs, or by thread counts only (false).
    pub fn set_balance_by_load(&mut self, on: bool) {
        self.by_load = on;
    }

    /// Bring thread `i`'s load average up to now: it was runnable (on its
    /// run queue, running, waiting or a delayed sleeper) since `load_at`
    /// if it is now. Called before it joins or leaves its queue.
    fn fold_load(&mut self, i: usize) {
        if self.load_at[i] == NEVER_RUNNABLE {
            return;
        }
        let dt = self.now - self.load_at[i];
        if dt <= 0 {
            return;
        }
        let d = 0.5f64.powf(dt as f64 / LOAD_HALF_LIFE_NS);
        let target = if self.e.on_rq[i] {
            self.e.weight[i] as f64
        } else {
            0.0
        };
        self.load[i] = self.load[i] * d + target * (1.0 - d);
        self.load_at[i] = self.now;
    }

    /// CPU `c`'s load: its threads' load averages, sleepers' decaying
    /// with them (cfs_rq load_avg, blocked load included). The balancer
    /// sums every CPU's in one pass; tests ask for one.
    #[cfg(test)]
    fn cpu_load(&mut self, c: usize) -> f64 {
        let mut sum = 0.0;
        for i in 0..self.threads {
            if self.cpu[i] == c {
                self.fold_load(i);
                sum += self.load[i];
            }
        }
        sum
    }

    /// Test helper: the next tick balances busy CPUs.
    #[cfg(test)]
    fn busy_balance_due_now(&mut self) {
        self.next_busy_balance = i64::MIN;
    }

    fn nr_running(&self, c: usize) -> usize {
        self.ready_on(c as u32) + usize::from(self.running[c].is_some())
    }

    fn balance_busy(&mut self, now: i64) {
        if self.by_load {
            return self.balance_busy_by_load(now);
        }
        for c in 0..self.cpus {
            let Some(o) = (0..self.cpus)
                .filter(|&o| o != c)
                .max_by_key(|&o| (self.nr_running(o), std::cmp::Reverse(o)))
            else {
                return;
            };
            if self.nr_running(o) < self.nr_running(c) + 2 {
                self.balance_failed[c] = 0;
                continue;
            }
            let may: Vec<bool> = (0..self.threads).map(|i| self.allows(i, c)).collect();
            if let Some(i) = self.pull_for(c, &[o], now, Pull::Periodic, &mut |i| may[i]) {
                self.balance_failed[c] = 0;
                self.settle(o);
                self.move_thread(i, c);
                self.settle(c);
            }
        }
    }

    /// Linux's periodic load_balance on each busy CPU `c`: the busiest
    /// other CPU that is overloaded (a thread waiting beside the running
    /// one) gives `c` waiting threads, least recently run first, while
    /// `c`'s load is below the busiest's and the average (and, when `c` is
    /// overloaded too, the busiest is IMBALANCE_PCT of it), each one whose
    /// load fits the imbalance (the smaller of the busiest's excess over
    /// the average and `c`'s shortfall), a thread's load halved once per
    /// attempt in a row that moved nothing; cache-hot threads only once
    /// more than CACHE_NICE_TRIES such attempts have failed
    /// (calculate_imbalance's migrate_load, detach_tasks).
    fn balance_busy_by_load(&mut self, now: i64) {
        // every CPU's load and thread count once (one pass over the
        // threads), then kept in step as threads move
        let mut loads = vec![0.0; self.cpus];
        for i in 0..self.threads {
            self.fold_load(i);
            loads[self.cpu[i]] += self.load[i];
        }
        let mut nr: Vec<usize> = (0..self.cpus).map(|c| self.nr_running(c)).collect();
        // moves shift load between CPUs, never change its sum
        let avg = loads.iter().sum::<f64>() / self.cpus as f64;
        for c in 0..self.cpus {
            if nr[c] == 0 {
                // idle: its own balancing (pulls) looks after it
                continue;
            }
            let Some(b) = (0..self.cpus)
                .filter(|&o| o != c && nr[o] >= 2)
                .max_by(|&x, &y| loads[x].total_cmp(&loads[y]).then(y.cmp(&x)))
            else {
                self.balance_failed[c] = 0;
                continue;
            };
            let (lb, ll) = (loads[b], loads[c]);
            let balanced =
                ll >= lb || ll >= avg || (nr[c] >= 2 && 100.0 * lb <= IMBALANCE_PCT * ll);
            if balanced {
                self.balance_failed[c] = 0;
                continue;
            }
            let mut imbalance = (lb - avg).min(avg - ll);
            let mut waiting: Vec<usize> = (0..self.threads)
                .filter(|&i| self.cpu[i] == b && self.e.is_ready(i) && self.allows(i, c))
                .collect();
            waiting.sort_by_key(|&i| (self.ran_until[i], i));
            let failed = self.balance_failed[c];
            let mut moved = false;
            for i in waiting {
                let hot = now - self.ran_until[i] < self.migration_cost;
                if hot && failed <= CACHE_NICE_TRIES {
                    continue;
                }
                let l = self.load[i].max(1.0);
                if l / 2f64.powi(failed.min(62) as i32) > imbalance {
                    continue;
                }
                self.settle(b);
                self.move_thread(i, c);
                self.settle(c);
                loads[b] -= self.load[i];
                loads[c] += self.load[i];
                nr[b] -= 1;
                nr[c] += 1;
                moved = true;
                imbalance -= l;
                if imbalance <= 0.0 || nr[b] < 2 {
                    break;
                }
            }
            self.balance_failed[c] = if moved { 0 } else { failed + 1 };
        }
    }

    /// A waiting thread CPU `c` may take from the first CPU of `from`
    /// that has one `ok` accepts: one that is not cache-hot (ran at least
    /// the migration cost ago) if any; else, once `c`'s periodic balancing
    /// has failed more than CACHE_NICE_TRIES times in a row, a hot one.
    /// Idle pulls and busy balancing by count take threads this way, from
    /// CPUs with threads waiting; the caller resets the failures when a
    /// thread moves.
    fn pull_for(
        &mut self,
        c: usize,
        from: &[usize],
        now: i64,
        why: Pull,
        ok: &mut dyn FnMut(usize) -> bool,
    ) -> Option<usize> {
        let (hot, cost) = (&self.ran_until, self.migration_cost);
        let cold = from
            .iter()
            .find_map(|&o| self.best_thread(o, &mut |t| now - hot[t] >= cost && ok(t)));
        if cold.is_some() {
            return cold;
        }
        if self.balance_failed[c] > CACHE_NICE_TRIES {
            return from.iter().find_map(|&o| self.best_thread(o, &mut *ok));
        }
        // newidle balances are too frequent to count (load_balance)
        if why == Pull::Periodic {
            self.balance_failed[c] += 1;
        }
        None
    }

    /// Linux's default base slice: 0.75 ms scaled by 1 + log2(CPUs), CPUs
    /// capped at 8 (SCHED_TUNABLESCALING_LOG).
    pub fn default_slice_ns(pcpus: usize) -> i64 {
        let n = pcpus.clamp(1, 8);
        750_000 * (1 + n.ilog2() as i64)
    }

    /// Group `g`'s queue on CPU `c` (after the CPUs' top-level queues).
    fn group_queue(&self, g: usize, c: usize) -> usize {
        group_queue(self.cpus, g, c)
    }

    /// A CPU number from the engine as an index: the engine asks only for
    /// the host's CPUs, and a bad one must not wrap onto another CPU.
    fn cpu_index(&self, c: u32) -> usize {
        let c = c as usize;
        debug_assert!(c < self.cpus, "CPU {c} of {}", self.cpus);
        c
    }

    /// Group `g`'s entity on CPU `c`.
    fn group_entity(&self, g: usize, c: usize) -> usize {
        self.threads + g * self.cpus + c
    }

    /// The queue thread `i` is on when on CPU `c`.
    fn queue_of(&self, i: usize, c: usize) -> usize {
        match self.group[i] {
            Some(g) => self.group_queue(g, c),
            None => c,
        }
    }

    /// Thread `i`'s entity in its CPU's top level: its group's, or itself.
    fn top(&self, i: usize) -> usize {
        match self.group[i] {
            Some(g) => self.group_entity(g, self.cpu[i]),
            None => i,
        }
    }

    /// Group `g`'s entity on CPU `c` follows its queue: counted at the top
    /// level while the queue has counted threads (placed with its lag when
    /// it comes back, delayed or gone with it when it empties), ready
    /// there while the queue has ready threads and none of them runs, and
    /// weighted by the group's shares × this CPU's part of its load.
    fn sync_group(&mut self, g: usize, c: usize) {
        let ge = self.group_entity(g, c);
        let q = self.group_queue(g, c);
        self.e.settle_delayed(q);
        self.reweight_group(g);
        let counted = self.e.rqs[q].sum_w > 0;
        if counted && (!self.e.on_rq[ge] || self.e.delayed[ge]) {
            self.e.wake(ge);
            self.e.join_rq(ge);
        } else if !counted && self.e.on_rq[ge] && !self.e.delayed[ge] {
            self.e.sleep(ge);
        }
        let runs_here = self.running[c].is_some_and(|t| self.group[t] == Some(g));
        if counted && !self.e.rqs[q].ready.is_empty() && !runs_here {
            if !self.e.is_ready(ge) {
                self.e.insert(ge);
            }
        } else {
            self.e.take(ge);
        }
    }

    /// Group `g`'s entity weights from its threads' runnable weight per
    /// CPU (calc_group_shares, without PELT's averaging).
    fn reweight_group(&mut self, g: usize) {
        let base = self.cpus + g * self.cpus;
        let load: Vec<i128> = (0..self.cpus).map(|c| self.e.rqs[base + c].sum_w).collect();
        let total: i128 = load.iter().sum();
        if total == 0 {
            return;
        }
        let shares = self.shares[g].max(MIN_SHARES);
        for (c, &l) in load.iter().enumerate() {
            if l > 0 {
                let w = (shares as i128 * l / total) as i64;
                let ge = self.group_entity(g, c);
                self.e.reweight(ge, w.clamp(MIN_SHARES, shares));
            }
        }
    }

    /// Settle the delayed sleepers of CPU `c`'s queues (its top level and
    /// its groups'), and the groups that emptied with them.
    fn settle(&mut self, c: usize) {
        if self.by_load {
            let (cpus, groups) = (self.cpus, self.shares.len());
            for q in std::iter::once(c).chain((0..groups).map(|g| group_queue(cpus, g, c))) {
                for k in 0..self.e.rqs[q].delayed.len() {
                    let x = self.e.rqs[q].delayed[k] as usize;
                    if x < self.threads {
                        self.fold_load(x);
                    }
                }
            }
        }
        for g in 0..self.shares.len() {
            let q = self.group_queue(g, c);
            if !self.e.settle_delayed(q).is_empty() {
                self.sync_group(g, c);
            }
        }
        self.e.settle_delayed(c);
    }

    /// The ready thread CPU `c`'s queues run next (descending from its
    /// top level through a group's queue), among threads `ok` accepts.
    fn best_thread(&self, c: usize, ok: &mut dyn FnMut(usize) -> bool) -> Option<usize> {
        let (n, cpus, e) = (self.threads, self.cpus, &self.e);
        // a group's entity stands for its best thread, if it has one
        let mut pick = |x: usize| -> Option<usize> {
            if x < n {
                return ok(x).then_some(x);
            }
            let g = (x - n) / cpus;
            e.best(group_queue(cpus, g, c), &mut |t| ok(t))
        };
        let chosen = e.best(c, &mut |x| pick(x).is_some())?;
        pick(chosen)
    }

    /// Move ready or counted thread `i` to CPU `c` (its group's queue
    /// there), keeping its lag and relative deadline.
    fn move_thread(&mut self, i: usize, c: usize) {
        let from = self.cpu[i];
        if from == c {
            return;
        }
        let q = self.queue_of(i, c);
        self.e.move_to(i, q);
        self.cpu[i] = c;
        if let Some(g) = self.group[i] {
            self.sync_group(g, from);
            self.sync_group(g, c);
        }
    }

    /// Thread `i` starts running on CPU `c`: out of the ready sets, and
    /// protected for its slice at each level it was picked at.
    fn start(&mut self, i: usize, c: usize, now: i64) {
        self.e.take(i);
        self.running[c] = Some(i);
        self.ran_until[i] = now;
        self.e.vprot[i] = self.e.deadline[i];
        if let Some(g) = self.group[i] {
            let ge = self.group_entity(g, c);
            self.e.take(ge);
            self.e.vprot[ge] = self.e.deadline[ge];
        }
    }

    /// CPU `c` may just have reached two threads (running and waiting):
    /// raise the overloaded flag newidle balancing reads.
    fn note_overload(&mut self, c: usize) {
        if self.newidle.as_ref().is_some_and(|o| !o.overloaded) {
            let waiting = self.ready_on(c as u32);
            if waiting >= 2 || (waiting == 1 && self.running[c].is_some()) {
                if let Some(o) = &mut self.newidle {
                    o.overloaded = true;
                }
            }
        }
    }

    /// Thread `i` no longer runs (preempted, or asleep).
    fn stop(&mut self, i: usize) {
        let c = self.cpu[i];
        if self.running[c] == Some(i) {
            self.running[c] = None;
        }
    }
}

impl Scheduler for Eevdf {
    fn enqueue(&mut self, t: ThreadId, sub: Sub, woken: bool) {
        let i = t.0 as usize;
        let c = self.cpu[i];
        // no settling of the queue's delayed sleepers here: Linux removes
        // one only when it is picked or woken, so an eligible sleeper
        // stays in the average (and the woken thread's lag is placed
        // against it) until the CPU next chooses
        if self.by_load {
            if self.load_at[i] == NEVER_RUNNABLE {
                self.load[i] = self.e.weight[i] as f64;
                self.load_at[i] = self.now;
            }
            self.fold_load(i);
        }
        if woken || self.e.delayed[i] {
            // woken before the average caught up: resumes where it was;
            // else placed with the lag it slept with
            self.e.wake(i);
        }
        self.e.join_rq(i);
        if sub == Sub::OutService {
            // behind everything ready now
            let last = self.e.rqs[self.e.rq[i]]
                .ready
                .iter()
                .next_back()
                .map_or(self.e.deadline[i], |k| k.0 + 1);
            self.e.deadline[i] = self.e.deadline[i].max(last);
        }
        self.e.insert(i);
        self.stop(i);
        if let Some(g) = self.group[i] {
            self.sync_group(g, c);
        }
        self.note_overload(c);
    }

    fn pick(&mut self, eligible: &mut dyn FnMut(ThreadId) -> bool) -> Option<ThreadId> {
        self.pick_on(0, i64::MAX / 2, Pull::Periodic, eligible)
    }

    fn pick_on(
        &mut self,
        c: u32,
        now: i64,
        pull: Pull,
        eligible: &mut dyn FnMut(ThreadId) -> bool,
    ) -> Option<ThreadId> {
        let c = self.cpu_index(c);
        self.settle(c);
        let found = match self.next.take() {
            Some(n) if self.e.is_ready(n as usize) && eligible(ThreadId(n)) => Some(n as usize),
            _ => None,
        };
        // own queues first; an idle CPU pulls from the busiest other CPU,
        // but not a thread that ran there within the migration cost
        let found = found
            .or_else(|| self.best_thread(c, &mut |t| eligible(ThreadId(t as u32))))
            .or_else(|| match pull {
                Pull::No => None,
                _ => self.idle_pull(c, now, pull, eligible),
            });
        let i = found?;
        if self.cpu[i] != c {
            self.balance_failed[c] = 0;
        }
        self.move_thread(i, c);
        self.start(i, c, now);
        Some(ThreadId(i as u32))
    }

    fn migrate(&mut self, t: ThreadId, c: u32) {
        let i = t.0 as usize;
        let c = self.cpu_index(c);
        if self.e.on_rq[i] {
            self.move_thread(i, c);
        } else {
            self.e.move_to(i, self.queue_of(i, c));
            self.cpu[i] = c;
        }
    }

    fn slice_ns(&self, t: ThreadId, _ready: usize) -> i64 {
        // run to parity: until the deadline, in real time at its weight,
        // or its group's, whichever comes first
        let i = t.0 as usize;
        let own = self.e.slice_left(i);
        match self.group[i] {
            Some(_) => own.min(self.e.slice_left(self.top(i))),
            None => own,
        }
    }

    fn charge(&mut self, t: ThreadId, ns: i64) {
        let i = t.0 as usize;
        self.ran_until[i] += ns;
        self.e.charge(i, ns);
        if self.group[i].is_some() {
            let top = self.top(i);
            self.e.charge(top, ns);
        }
    }

    fn per_cpu_queues(&self) -> bool {
        true
    }

    fn tick(&mut self, now: i64) {
        if self.ready() == 0 {
            // an idle CPU balances at every tick: with nothing waiting
            // anywhere it finds the system balanced (the engine does not
            // ask it for a pull then)
            for c in 0..self.cpus {
                if self.running[c].is_none() {
                    self.balance_failed[c] = 0;
                }
            }
        }
        if self.busy_balance > 0 && now >= self.next_busy_balance {
            self.next_busy_balance = now + self.busy_balance;
            self.balance_busy(now);
        }
    }

    fn clock(&mut self, now: i64) {
        self.now = now;
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
        if self.by_load {
            self.fold_load(i);
        }
        self.stop(i);
        self.e.sleep(i);
        if let Some(g) = self.group[i] {
            self.sync_group(g, self.cpu[i]);
        }
    }

    fn delayed(&self, t: ThreadId) -> bool {
        self.e.delayed[t.0 as usize]
    }

    fn boost(&mut self, t: ThreadId) {
        if self.e.is_ready(t.0 as usize) {
            self.next = Some(t.0);
        }
    }

    fn preempts(&self, woken: ThreadId, running: ThreadId) -> bool {
        let (w, r) = (woken.0 as usize, running.0 as usize);
        if self.cpu[w] != self.cpu[r] {
            return false;
        }
        // decided where the two meet: in their group's queue, else
        // between their top-level entities
        if self.group[w].is_some() && self.group[w] == self.group[r] {
            self.e.preempts(w, r)
        } else {
            self.e.preempts(self.top(w), self.top(r))
        }
    }

    fn ready(&self) -> usize {
        (0..self.cpus).map(|c| self.ready_on(c as u32)).sum()
    }

    fn ready_on(&self, c: u32) -> usize {
        let c = self.cpu_index(c);
        let top = self.e.rqs[c]
            .ready
            .iter()
            .filter(|k| (k.2 as usize) < self.threads)
            .count();
        top + (0..self.shares.len())
            .map(|g| self.e.rqs[self.group_queue(g, c)].ready.len())
            .sum::<usize>()
    }
}

#[cfg(test)]
mod tests;
