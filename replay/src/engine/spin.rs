//! Spinning and the spin responses: a vCPU that finds its lock held
//! spins, yields to a sibling (KVM's directed yield) or calls the
//! hypervisor (Umeno et al.'s WAPD, WOPD and RSLP), and the bookkeeping
//! that releases a parked spinner when its partners have been dispatched.

use super::{vm_of, Engine, Ev, St};
use crate::model::ThreadId;
use crate::output::StateCode;
use crate::policy::SpinResponse;
use crate::sched::Sub;

impl Engine<'_> {
    /// WAPD/WOPD bookkeeping when `j` is dispatched.
    pub(super) fn on_dispatch_policy(&mut self, j: u32) {
        let Some(vm) = vm_of(self.w, j) else { return };
        let v = vm.0 as usize;
        if self.gspw[v] == 0 {
            return;
        }
        let n = self.siblings[v].len() as i64;
        match self.p.spin {
            SpinResponse::Wapd => {
                self.out.overhead(self.h.costs.scan_per_partner_ns * n);
                for k in self.siblings[v].clone() {
                    let kt = &mut self.th[k as usize];
                    if kt.aspw && kt.dmask.contains(&j) {
                        kt.dmask.retain(|&x| x != j);
                        if kt.dmask.is_empty() {
                            kt.aspw = false;
                            self.gspw[v] -= 1;
                            self.kick_idle_for(k);
                        }
                    }
                }
            }
            SpinResponse::Wopd => {
                for k in self.siblings[v].clone() {
                    if std::mem::take(&mut self.th[k as usize].aspw) {
                        self.kick_idle_for(k);
                    }
                }
                self.gspw[v] = 0;
            }
            _ => {}
        }
    }

    /// The unparked, ready thread `k` may run again: an idle CPU it may
    /// use (its pin and pool; its previous CPU first) looks for work.
    fn kick_idle_for(&mut self, k: u32) {
        if self.th[k as usize].st != St::Ready {
            return;
        }
        if let Some(c) = self.idle_cpu_for(k, true) {
            self.sched.migrate(ThreadId(k), c as u32);
            self.at(self.now, Ev::Dispatch(c as u32));
        }
    }

    pub(super) fn start_spin(&mut self, t: u32, c: u32, li: usize) {
        let ti = t as usize;
        self.th[ti].spin = Some((li, self.now));
        self.th[ti].retries = 0;
        self.th[ti].redispatched = false;
        self.th[ti].excessive_counted = false;
        self.th[ti].pv_spun = 0;
        self.out
            .spin_episode_start(t, self.now, self.lock_holder[li]);
        self.set_state(t, StateCode::Spinning, Some(c));
        let window = match self.p.spin {
            SpinResponse::Spin => None,
            SpinResponse::Yield => Some(self.p.params.ple_window_ns as i64),
            SpinResponse::Pv => Some(self.p.params.pv_spin_ns as i64),
            _ => Some(self.p.params.spin_budget_ns as i64),
        };
        if let Some(wd) = window {
            self.rearm(t, self.now + wd.max(0));
        }
    }

    pub(super) fn wake_spinners(&mut self, li: usize) {
        // running spinners on this lock re-check now, in CPU order
        for c in 0..self.cpus.len() {
            if let Some(s) = self.cpus[c].cur {
                if self.th[s as usize].spin.is_some_and(|(l, _)| l == li) {
                    let when = self.now.max(self.th[s as usize].run_start);
                    self.rearm(s, when);
                }
            }
        }
    }

    /// The spinner `t` (running on `c`) re-checks its lock. Returns true
    /// when it must stop stepping (still spinning, or left the CPU).
    pub(super) fn retry_spin(&mut self, t: u32, c: u32) -> bool {
        let ti = t as usize;
        let (li, since) = self.th[ti].spin.expect("spinning");
        // a barrier's spinner goes on when its barrier is released, and
        // takes nothing (every waiter passes)
        let barrier = self.bars.lock_vm[li];
        let free = match barrier {
            Some(v) => self.bars.open_for(t, v),
            None => self.lock_holder[li].is_none(),
        };
        if free {
            if barrier.is_some() {
                self.pass_barrier(t);
            } else {
                self.lock_holder[li] = Some(t);
            }
            self.out
                .spin(t, self.now - since.max(self.th[ti].run_start));
            self.out.spin_episode_end(t, self.now);
            self.th[ti].spin = None;
            self.complete_phase(t);
            self.set_state(t, StateCode::Guest, Some(c));
            return false;
        }
        // still held: it spins here (after a re-dispatch too: a kicked or
        // requeued spinner that finds the lock taken again), and the spin
        // response decides what next
        self.set_state(t, StateCode::Spinning, Some(c));
        match self.p.spin {
            SpinResponse::Spin => true,
            SpinResponse::Yield => {
                // a PAUSE-loop exit comes after a window of spinning in
                // the guest: a spinner re-dispatched (after a yield its
                // target could not take up, e.g. pinned elsewhere or in
                // another pool) spins its window again first. Exiting at
                // once looped forever at one instant on hosts whose
                // switches cost nothing (generated captures declare 0).
                let spun = self.now - since.max(self.th[ti].run_start);
                let window = self.p.params.ple_window_ns as i64;
                if spun < window {
                    self.respin(t, window - spun);
                    return true;
                }
                self.hypercall(t);
                self.directed_yield(t, c);
                true
            }
            SpinResponse::Wapd | SpinResponse::Wopd | SpinResponse::Rslp => {
                self.suspend_spin_call(t, c);
                true
            }
            SpinResponse::Pv => {
                self.pv_spin_or_halt(t, c, li);
                true
            }
        }
    }

    /// pv: spin on until `pv_spin_ns` of spinning since the episode began
    /// or the last kick (time off CPU does not count: the guest counts
    /// PAUSE loops), then halt until a release kicks this thread.
    fn pv_spin_or_halt(&mut self, t: u32, c: u32, li: usize) {
        let ti = t as usize;
        let (_, since) = self.th[ti].spin.expect("spinning");
        let spun = self.th[ti].pv_spun + (self.now - since.max(self.th[ti].run_start)).max(0);
        let left = self.p.params.pv_spin_ns as i64 - spun;
        if left > 0 {
            // woken by a release someone else won, or re-dispatched: the
            // window's end
            self.rearm(t, self.now + left);
            return;
        }
        self.hypercall(t);
        self.halted[li].push_back(t);
        self.block(t, c, None, StateCode::Halted);
    }

    /// pv: the unlock of `li` by `t` kicks the longest-halted waiter
    /// (a KVM_HC_KICK_CPU hypercall by the releaser); the waiter spins
    /// afresh when it runs.
    pub(super) fn kick_halted(&mut self, t: u32, li: usize) {
        let Some(w) = self.halted[li].pop_front() else {
            return;
        };
        self.hypercall(t);
        let wt = &mut self.th[w as usize];
        wt.pv_spun = 0;
        if let Some((l, _)) = wt.spin {
            wt.spin = Some((l, self.now));
        }
        wt.gen += 1;
        let g = wt.gen;
        self.at(self.now, Ev::Unblock(w, g));
    }

    fn hypercall(&mut self, t: u32) {
        self.out.hypercall(t, self.h.costs.hypercall_ns);
    }

    fn respin(&mut self, t: u32, ns: i64) {
        self.rearm(t, self.now + ns.max(1));
    }

    /// The running spinner `t` re-checks its lock at `when`, and only
    /// then: a step armed before (a spin window's end, an earlier
    /// release's wakeup) is dropped by `gen`. Without this every release
    /// while a re-check was pending left one more pending, and a spinner
    /// re-checked (and called) once per release ever seen, all at once.
    fn rearm(&mut self, t: u32, when: i64) {
        self.th[t as usize].gen += 1;
        let g = self.th[t as usize].gen;
        self.at(when, Ev::Step(t, g));
    }

    fn leave_cpu_ready(&mut self, t: u32, c: u32, sub: Sub) {
        let ti = t as usize;
        self.th[ti].redispatched = true;
        self.put_off_cpu(c, self.now);
        self.th[ti].st = St::Ready;
        self.th[ti].sub = sub;
        self.sched.enqueue(ThreadId(t), sub, false);
        self.set_state(t, StateCode::Preempted, None);
        self.at(self.now, Ev::Dispatch(c));
    }

    /// KVM: yield to one eligible sibling (preempted, not itself spinning).
    fn directed_yield(&mut self, t: u32, c: u32) {
        let Some(vm) = vm_of(self.w, t) else {
            return self.respin(t, self.p.params.ple_window_ns as i64);
        };
        let v = vm.0 as usize;
        let sib = &self.siblings[v];
        let n = sib.len();
        let start = self.last_boosted[v];
        let target = (1..=n).map(|k| (start + k) % n).find(|&k| {
            let s = sib[k];
            s != t && self.th[s as usize].st == St::Ready && self.th[s as usize].spin.is_none()
        });
        match target {
            Some(k) => {
                self.last_boosted[v] = k;
                let s = sib[k];
                self.sched.boost(ThreadId(s));
                self.leave_cpu_ready(t, c, Sub::ProperReady);
            }
            None => self.respin(t, self.p.params.ple_window_ns as i64),
        }
    }

    fn note_redispatch(&mut self, t: u32) {
        let ti = t as usize;
        self.th[ti].retries += 1;
        self.out.uncleared_redispatch(t);
        if self.th[ti].retries as f64 > self.p.params.excess_retries
            && !self.th[ti].excessive_counted
        {
            self.th[ti].excessive_counted = true;
            self.out.excessive_spin(t);
        }
    }

    /// Umeno et al.'s suspend-spin call and the three responses.
    fn suspend_spin_call(&mut self, t: u32, c: u32) {
        let ti = t as usize;
        let Some(vm) = vm_of(self.w, t) else {
            return self.respin(t, self.p.params.respin_ns as i64);
        };
        let v = vm.0 as usize;
        if self.th[ti].redispatched {
            // dispatched again, and the lock is still held: an uncleared
            // re-dispatch (Umeno et al.'s retry). The dispatch returned
            // from the call, so the guest re-checks its lock for
            // `respin_ns` before calling again, as after any call that
            // resumed it
            self.th[ti].redispatched = false;
            self.note_redispatch(t);
            return self.respin(t, self.p.params.respin_ns as i64);
        }
        self.hypercall(t);
        let partners: Vec<u32> = self.siblings[v]
            .iter()
            .copied()
            .filter(|&s| s != t)
            .collect();
        self.out
            .overhead(self.h.costs.scan_per_partner_ns * partners.len() as i64);
        let ready = |e: &Self, s: u32| e.th[s as usize].st == St::Ready && !e.th[s as usize].aspw;
        match self.p.spin {
            SpinResponse::Wapd => {
                let dmask: Vec<u32> = partners
                    .iter()
                    .copied()
                    .filter(|&s| ready(self, s))
                    .collect();
                if dmask.is_empty() {
                    return self.respin(t, self.p.params.respin_ns as i64);
                }
                self.th[ti].dmask = dmask;
                self.th[ti].aspw = true;
                self.gspw[v] += 1;
                self.leave_cpu_ready(t, c, Sub::ProperReady);
            }
            SpinResponse::Wopd => {
                if partners
                    .iter()
                    .any(|&s| matches!(self.th[s as usize].st, St::Running(_)))
                {
                    return self.respin(t, self.p.params.respin_ns as i64);
                }
                if partners.iter().any(|&s| ready(self, s)) {
                    self.th[ti].aspw = true;
                    self.gspw[v] += 1;
                    self.leave_cpu_ready(t, c, Sub::ProperReady);
                } else {
                    self.respin(t, self.p.params.respin_ns as i64);
                }
            }
            _ => {
                // RSLP: requeue at the tail of the subqueue the ready
                // partners are in (out-service before slice-end before
                // proper-ready), so the spinner runs after them.
                let subs: Vec<Sub> = partners
                    .iter()
                    .filter(|&&s| self.th[s as usize].st == St::Ready)
                    .map(|&s| self.th[s as usize].sub)
                    .collect();
                let sub = if subs.contains(&Sub::OutService) {
                    Sub::OutService
                } else if subs.contains(&Sub::SliceEnd) {
                    Sub::SliceEnd
                } else {
                    Sub::ProperReady
                };
                self.leave_cpu_ready(t, c, sub);
            }
        }
    }
}
