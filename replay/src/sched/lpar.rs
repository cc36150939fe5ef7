//! The dispatcher of Umeno et al.'s hypervisor (../shared/papers/spin.md
//! §1), the scheduler the WAPD/WOPD/RSLP comparison was measured under:
//! one global ready queue in three FIFO subqueues, proper-ready (PR),
//! time-slice-end (TSE) and out-service (OS), and a service quantity per
//! VM per epoch in proportion to its service ratio.
//!
//! A free CPU takes the first thread in PR it may run (a parked spinner,
//! which the engine's `eligible` refuses, keeps its place but is skipped).
//! With none, all of TSE moves to PR; with TSE empty too, all of OS moves
//! to PR and a new service epoch begins (every VM's used service back to
//! zero). A thread that used its slice goes to TSE, a woken one to the PR
//! tail (G2), one a spin response requeues where the response says; any of
//! them goes to OS instead when its VM has used its quantity (the quota
//! check first: G1). A wakeup never preempts, and nothing is per CPU: the
//! paper's guests floated.
//!
//! The quantity of VM v in an epoch is `s_v / Σ s × CPUs × epoch`; the
//! paper gives neither the slice nor the epoch (G1), so both are inputs
//! (`lpar_slice_ns`, `lpar_epoch_ns`). Threads of no VM (host threads)
//! have no quantity and never go out of service.

use super::{Scheduler, Sub};
use crate::model::ThreadId;
use std::collections::VecDeque;

/// The three-subqueue dispatcher with per-VM service quantities.
pub struct Lpar {
    pr: VecDeque<u32>,
    tse: VecDeque<u32>,
    os: VecDeque<u32>,
    /// Which subqueue each thread waits in, if any.
    queued: Vec<Option<Sub>>,
    /// Each thread's VM (an index into `used`/`quota`), None: host thread.
    vm: Vec<Option<usize>>,
    /// Service used by each VM in this epoch, ns.
    used: Vec<i64>,
    /// Each VM's service quantity per epoch, ns.
    quota: Vec<i64>,
    slice: i64,
    epochs: u64,
}

impl Lpar {
    /// A dispatcher for threads of these VMs (`vm_of[t]`), the VMs'
    /// service ratios `ratio[v]`, on `cpus` CPUs.
    pub fn new(
        vm_of: Vec<Option<usize>>,
        ratio: &[f64],
        cpus: usize,
        slice: i64,
        epoch: i64,
    ) -> Self {
        let total: f64 = ratio.iter().sum::<f64>().max(f64::MIN_POSITIVE);
        let quota = ratio
            .iter()
            .map(|r| ((r / total) * cpus as f64 * epoch as f64).round().max(1.0) as i64)
            .collect();
        Lpar {
            pr: VecDeque::new(),
            tse: VecDeque::new(),
            os: VecDeque::new(),
            queued: vec![None; vm_of.len()],
            vm: vm_of,
            used: vec![0; ratio.len()],
            quota,
            slice: slice.max(1),
            epochs: 0,
        }
    }

    /// Service epochs begun so far (OS refills).
    pub fn epochs(&self) -> u64 {
        self.epochs
    }

    fn over_quota(&self, t: usize) -> bool {
        self.vm[t].is_some_and(|v| self.used[v] >= self.quota[v])
    }

    fn remove(&mut self, t: ThreadId) {
        if let Some(sub) = self.queued[t.0 as usize].take() {
            self.queue(sub).retain(|&x| x != t.0);
        }
    }

    fn queue(&mut self, sub: Sub) -> &mut VecDeque<u32> {
        match sub {
            Sub::ProperReady => &mut self.pr,
            Sub::SliceEnd => &mut self.tse,
            Sub::OutService => &mut self.os,
        }
    }

    /// Move all of `from` to the PR tail.
    fn refill(&mut self, from: Sub) {
        let moved: Vec<u32> = self.queue(from).drain(..).collect();
        for &t in &moved {
            self.queued[t as usize] = Some(Sub::ProperReady);
        }
        self.pr.extend(moved);
    }
}

impl Scheduler for Lpar {
    fn enqueue(&mut self, t: ThreadId, sub: Sub, _woken: bool) {
        self.remove(t);
        let i = t.0 as usize;
        // a VM that has used its quantity waits out of service, however
        // its thread came back: at its slice's end (the paper's rule, and
        // before time-slice end: G1), woken (G2), or requeued by a spin
        // response (cratrace's reading: the paper names only the slice
        // end, but a spinner requeued to PR over and over would otherwise
        // run its VM past its quantity and, PR never empty, keep the
        // slice-end queue from ever refilling)
        let sub = if self.over_quota(i) {
            Sub::OutService
        } else {
            sub
        };
        self.queue(sub).push_back(t.0);
        self.queued[i] = Some(sub);
    }

    fn pick(&mut self, eligible: &mut dyn FnMut(ThreadId) -> bool) -> Option<ThreadId> {
        loop {
            if let Some(pos) = self.pr.iter().position(|&x| eligible(ThreadId(x))) {
                let t = self.pr.remove(pos).expect("position is valid");
                self.queued[t as usize] = None;
                return Some(ThreadId(t));
            }
            // "PR empty" is no dispatchable entry in PR (G8)
            if !self.tse.is_empty() {
                self.refill(Sub::SliceEnd);
            } else if !self.os.is_empty() {
                self.refill(Sub::OutService);
                self.used.iter_mut().for_each(|u| *u = 0);
                self.epochs += 1;
            } else {
                return None;
            }
        }
    }

    fn any_ready(&self, eligible: &mut dyn FnMut(ThreadId) -> bool) -> bool {
        self.pr
            .iter()
            .chain(&self.tse)
            .chain(&self.os)
            .any(|&x| eligible(ThreadId(x)))
    }

    fn slice_ns(&self, _t: ThreadId, _ready: usize) -> i64 {
        self.slice
    }

    fn charge(&mut self, t: ThreadId, ns: i64) {
        if let Some(v) = self.vm[t.0 as usize] {
            self.used[v] += ns.max(0);
        }
    }

    fn boost(&mut self, t: ThreadId) {
        if self.queued[t.0 as usize].is_some() {
            self.remove(t);
            self.pr.push_front(t.0);
            self.queued[t.0 as usize] = Some(Sub::ProperReady);
        }
    }

    fn preempts(&self, _woken: ThreadId, _running: ThreadId) -> bool {
        false
    }

    fn ready(&self) -> usize {
        self.pr.len() + self.tse.len() + self.os.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(_: ThreadId) -> bool {
        true
    }

    #[test]
    fn proper_ready_first_then_slice_end_then_out_service_with_a_new_epoch() {
        // threads 0, 1 of VM 0; thread 2 of VM 1; equal ratios, 1 CPU,
        // 10 ms epoch: 5 ms each
        let mut s = Lpar::new(
            vec![Some(0), Some(0), Some(1)],
            &[1.0, 1.0],
            1,
            1_000_000,
            10_000_000,
        );
        s.charge(ThreadId(0), 6_000_000); // VM 0 over its 5 ms
        s.enqueue(ThreadId(0), Sub::SliceEnd, false); // -> OS
        s.enqueue(ThreadId(2), Sub::SliceEnd, false); // -> TSE
        s.enqueue(ThreadId(1), Sub::ProperReady, true); // woken, VM 0 over -> OS
        assert_eq!(s.pick(&mut all), Some(ThreadId(2)));
        assert_eq!(s.epochs(), 0);
        // PR and TSE empty: OS refills PR in its order, a new epoch
        assert_eq!(s.pick(&mut all), Some(ThreadId(0)));
        assert_eq!(s.epochs(), 1);
        // VM 0's service was reset: woken again, it is proper-ready
        s.enqueue(ThreadId(0), Sub::ProperReady, true);
        assert_eq!(s.pick(&mut all), Some(ThreadId(1)));
        assert_eq!(s.pick(&mut all), Some(ThreadId(0)));
        assert_eq!(s.pick(&mut all), None);
    }

    #[test]
    fn a_skipped_entry_keeps_its_place_and_does_not_stall_the_refill() {
        let mut s = Lpar::new(
            vec![Some(0), Some(0), None],
            &[1.0],
            2,
            1_000_000,
            10_000_000,
        );
        s.enqueue(ThreadId(0), Sub::ProperReady, false); // a parked spinner
        s.enqueue(ThreadId(1), Sub::SliceEnd, false);
        s.enqueue(ThreadId(2), Sub::OutService, false); // RSLP's requeue: stays OS
        let mut not0 = |t: ThreadId| t.0 != 0;
        assert_eq!(s.pick(&mut not0), Some(ThreadId(1)));
        assert_eq!(s.pick(&mut not0), Some(ThreadId(2)));
        assert_eq!(s.epochs(), 1);
        assert_eq!(s.pick(&mut not0), None);
        // unparked, it is first in PR
        assert_eq!(s.pick(&mut all), Some(ThreadId(0)));
    }

    #[test]
    fn quantities_follow_the_service_ratios() {
        // 30:70 on 2 CPUs, 100 ms epoch: 60 and 140 ms
        let s = Lpar::new(vec![Some(0), Some(1)], &[30.0, 70.0], 2, 1, 100_000_000);
        assert_eq!(s.quota, vec![60_000_000, 140_000_000]);
    }
}
