//! The engine's per-CPU run-queue mechanics, for schedulers that keep a
//! queue per pCPU as Linux does (`eevdf`): where a woken thread goes, the
//! host utilisation that decides whether it may look for an idle CPU, and
//! slices that end at scheduler ticks.

use super::{Engine, Ev};
use crate::model::ThreadId;
use crate::sched::Sub;

impl Engine<'_> {
    /// Per-CPU run queues (Linux's select_task_rq): the thread's previous
    /// CPU if idle; another idle CPU only when the host is not so busy
    /// that the kernel skips the search (SIS_UTIL); else it queues on its
    /// previous CPU and preempts there if the scheduler says so.
    pub(super) fn wake_on_own_cpu(&mut self, t: u32) {
        // a pinned thread's queue is on its pin (the balancer moves both)
        let prev = self.home_cpu(t).map(|c| c as usize);
        // select_idle_sibling: the previous CPU, then the CPU it used
        // before that (recent_used_cpu, checked however busy the host),
        // then a scan if SIS_UTIL allows one
        let recent = std::mem::replace(&mut self.th[t as usize].recent_cpu, prev.map(|c| c as u32));
        let found = self
            .idle_cpu_for(t, false)
            .or_else(|| {
                recent
                    .map(|c| c as usize)
                    .filter(|&c| Some(c) != prev && self.usable_idle(t, c))
            })
            .or_else(|| {
                if prev.is_none() || self.idle_scan() {
                    self.idle_cpu_for(t, true)
                } else {
                    None
                }
            });
        if let Some(c) = found {
            self.sched.migrate(ThreadId(t), c as u32);
            self.at(self.now, Ev::Dispatch(c as u32));
            return;
        }
        let Some(home) = prev else { return };
        if self.cpus[home].pending {
            return;
        }
        let Some(r) = self.cpus[home].cur else { return };
        // bring the running thread's virtual time up to now first
        self.charge_running(r);
        if self.sched.preempts(ThreadId(t), ThreadId(r)) {
            self.preempt(home as u32, Sub::ProperReady);
            self.at(self.now, Ev::Dispatch(home as u32));
        }
    }

    /// The CPU whose run queue `t` is on: its pin, else where it last ran.
    pub(super) fn home_cpu(&self, t: u32) -> Option<u32> {
        self.pin[t as usize].or(self.th[t as usize].last_cpu)
    }

    /// Charge running thread `r` its time since it was last charged.
    pub(super) fn charge_running(&mut self, r: u32) {
        let th = &mut self.th[r as usize];
        let ns = self.now - th.charged_at;
        if ns > 0 {
            th.charged_at = self.now;
            self.sched.charge(ThreadId(r), ns);
        }
    }

    /// An idle CPU `t` may run on (its pool and pin): its pin or previous
    /// CPU if that one is idle, else, if `search`, the first idle one.
    pub(super) fn idle_cpu_for(&self, t: u32, search: bool) -> Option<usize> {
        let usable = |c: usize| self.usable_idle(t, c);
        let prev = self.home_cpu(t).map(|c| c as usize).filter(|&c| usable(c));
        prev.or_else(|| {
            if search {
                (0..self.cpus.len()).find(|&c| usable(c))
            } else {
                None
            }
        })
    }

    /// CPU `c` is idle, not about to dispatch, and in `t`'s pool, pin and
    /// affinity.
    fn usable_idle(&self, t: u32, c: usize) -> bool {
        let (pool, pin) = (self.pool[t as usize], self.pin[t as usize]);
        self.cpus[c].cur.is_none()
            && !self.cpus[c].pending
            && pool.is_none_or(|p| self.cpu_pool[c] == p)
            && pin.is_none_or(|p| p as usize == c)
            && self.allowed[t as usize]
                .as_ref()
                .is_none_or(|s| s.contains(&(c as u32)))
    }

    /// SIS_UTIL: whether a waking thread may look for an idle CPU, from
    /// the host's recent utilisation u: the kernel scans
    /// ⌊CPUs × (1 − (1.17 u)²)⌋ CPUs and none when that is 0.
    fn idle_scan(&self) -> bool {
        let x = self.util_avg * 1.17;
        (self.cpus.len() as f64 * (1.0 - x * x)).floor() >= 1.0
    }

    /// Fold the last tick's busy share into the utilisation average
    /// (PELT-like: halves in 32 ms).
    pub(super) fn update_util(&mut self, period: i64) {
        let mut busy = self.win_busy;
        for c in 0..self.cpus.len() {
            if let Some(r) = self.cpus[c].cur {
                busy += (self.now - self.th[r as usize].dispatched_at.max(self.win_start)).max(0);
            }
        }
        let frac = (busy as f64 / (self.cpus.len() as f64 * period.max(1) as f64)).min(1.0);
        let decay = 0.5f64.powf(period as f64 / 32e6);
        self.util_avg = self.util_avg * decay + frac * (1.0 - decay);
        self.win_busy = 0;
        self.win_start = self.now;
    }

    /// When thread `t`'s slice due at `due` is noticed: at once if the
    /// kernel re-read its runtime every few µs in the capture
    /// (`fine_accounting`; the SliceEnd handler still waits for the tick
    /// while it spins), else as [`slice_end_at`](Self::slice_end_at) says.
    pub(super) fn slice_end_for(&self, t: u32, due: i64) -> i64 {
        if self.w.threads[t as usize].fine_accounting {
            due
        } else {
            self.slice_end_at(due)
        }
    }

    /// When a slice due at `due` is noticed: at once, or at the next
    /// scheduler tick for schedulers that only look at slices on ticks.
    pub(super) fn slice_end_at(&self, due: i64) -> i64 {
        match self.sched.slice_tick_ns() {
            Some(tick) if tick > 0 => (due + tick - 1).div_euclid(tick) * tick,
            _ => due,
        }
    }
}
