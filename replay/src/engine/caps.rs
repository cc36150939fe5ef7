//! CPU caps: a VM may use at most its quota of CPU time per period (a
//! cgroup's cpu.max, Xen's credit cap). Its threads' running time is
//! counted as they run and checked every `cap_check_ns` (the kernel
//! checks at its ticks and switches); a VM past its quota is throttled,
//! its running threads taken off and none of its threads eligible, until
//! the period ends and every VM's count starts again (less any overrun).

use super::{Engine, Ev};
use crate::sched::Sub;

/// A capped VM's state.
#[derive(Clone, Debug, Default)]
pub(super) struct Cap {
    /// CPU time allowed per period (ns).
    pub quota: i64,
    /// Used in this period.
    pub used: i64,
    /// Past its quota: nothing of it runs until the period ends.
    pub throttled: bool,
}

impl Engine<'_> {
    /// Start the period and check events when any VM is capped.
    pub(super) fn start_caps(&mut self) {
        if self.caps.iter().all(Option::is_none) {
            return;
        }
        let (period, check) = (self.cap_period, self.cap_check);
        self.at(check, Ev::CapCheck);
        self.at(period, Ev::CapPeriod);
    }

    /// Count thread `t`'s running time up to `now` against its VM's cap.
    pub(super) fn cap_account(&mut self, t: u32, now: i64) {
        let Some(v) = self.w.threads[t as usize].vm else {
            return;
        };
        if let Some(cap) = self.caps[v.0 as usize].as_mut() {
            let from = self.cap_from[t as usize];
            cap.used += (now - from).max(0);
        }
        self.cap_from[t as usize] = now;
    }

    /// Whether thread `t` may not run now: its VM is throttled.
    pub(super) fn throttled(&self, t: u32) -> bool {
        self.w.threads[t as usize]
            .vm
            .and_then(|v| self.caps[v.0 as usize].as_ref())
            .is_some_and(|c| c.throttled)
    }

    /// Every `cap_check_ns`: throttle the VMs past their quota.
    pub(super) fn cap_check(&mut self) {
        for c in 0..self.cpus.len() {
            if let Some(t) = self.cpus[c].cur {
                self.cap_account(t, self.now);
            }
        }
        for c in 0..self.cpus.len() {
            let Some(t) = self.cpus[c].cur else { continue };
            let Some(v) = self.w.threads[t as usize].vm else {
                continue;
            };
            let Some(cap) = self.caps[v.0 as usize].as_mut() else {
                continue;
            };
            if cap.used >= cap.quota {
                cap.throttled = true;
            }
            if cap.throttled {
                self.preempt(c as u32, Sub::ProperReady);
                self.at(self.now, Ev::Dispatch(c as u32));
            }
        }
        let check = self.cap_check;
        self.at(self.now + check, Ev::CapCheck);
    }

    /// A period ends: every VM's count starts again, throttled ones run.
    pub(super) fn cap_period_end(&mut self) {
        for c in 0..self.cpus.len() {
            if let Some(t) = self.cpus[c].cur {
                self.cap_account(t, self.now);
            }
        }
        let mut released = false;
        for cap in self.caps.iter_mut().flatten() {
            // an overrun (the check comes after the quota is gone) is
            // paid out of the next period, as the kernel's runtime debt is
            cap.used = (cap.used - cap.quota).max(0);
            if cap.used < cap.quota {
                released |= std::mem::take(&mut cap.throttled);
            }
        }
        if released {
            // idle CPUs look again; busy ones take the released threads at
            // their next slice end
            for c in 0..self.cpus.len() {
                if self.cpus[c].cur.is_none() && !self.cpus[c].pending {
                    self.at(self.now, Ev::Dispatch(c as u32));
                }
            }
        }
        let period = self.cap_period;
        self.at(self.now + period, Ev::CapPeriod);
    }
}
