//! The two passes of the model's spin episodes that grow with the trace:
//! PAUSE exits clustered into episodes ([`pause_clusters`]) and each
//! episode's lock-holder candidate ([`lock_holders`]).
//!
//! Both were polars queries: a shift and a cumulative sum per thread over
//! every PAUSE exit, and an as-of join of every episode times its VM's
//! other vCPUs. At 100 M events (17 M PAUSE exits, 7.7 M episodes) they
//! were most of the model build's time and a GB of its peak; here each is
//! one pass that holds only its output and the preemptions.

use std::collections::HashMap;
use std::fmt;

/// Why the inputs cannot be read.
#[derive(Debug, PartialEq, Eq)]
pub enum SpinError {
    /// The columns of one input differ in length.
    Lengths(&'static str),
    /// Row `i` of the exits is earlier than the row before it.
    TimeOrder(usize),
}

impl fmt::Display for SpinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpinError::Lengths(what) => write!(f, "{what}: columns of different lengths"),
            SpinError::TimeOrder(i) => write!(f, "PAUSE exit row {i}: not in time order"),
        }
    }
}

impl std::error::Error for SpinError {}

/// Episodes of PAUSE exits, column by column, in the order they began
/// (ties: the order of their first exits' rows).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Clusters {
    /// The thread that spun.
    pub tid: Vec<i64>,
    /// Its first exit (ns).
    pub start: Vec<i64>,
    /// Its last exit, or 1 ns after the first when it had one (ns).
    pub end: Vec<i64>,
    /// How many exits it took.
    pub exits: Vec<u32>,
}

/// The PAUSE exits of vCPU threads (`tid`, `ts`, in time order) as spin
/// episodes: a thread's episode opens at its first exit and at every exit
/// more than `gap_ns` after its previous one, and lasts to its last exit.
pub fn pause_clusters(tid: &[i64], ts: &[i64], gap_ns: i64) -> Result<Clusters, SpinError> {
    if tid.len() != ts.len() {
        return Err(SpinError::Lengths("PAUSE exits"));
    }
    if let Some(i) = (1..ts.len()).find(|&i| ts[i] < ts[i - 1]) {
        return Err(SpinError::TimeOrder(i));
    }
    let mut out = Clusters::default();
    // each thread's open episode: its row in `out`
    let mut open: HashMap<i64, usize> = HashMap::new();
    for (&t, &at) in tid.iter().zip(ts) {
        match open.get(&t) {
            // gaps of a thread are >= 0: the rows are in time order
            Some(&row) if at - out.end[row] <= gap_ns => {
                out.end[row] = at;
                out.exits[row] += 1;
            }
            _ => {
                open.insert(t, out.tid.len());
                out.tid.push(t);
                out.start.push(at);
                out.end.push(at);
                out.exits.push(1);
            }
        }
    }
    for (s, e) in out.start.iter().zip(out.end.iter_mut()) {
        // an episode of one exit (or of exits at one instant) is not empty
        *e = (*e).max(s + 1);
    }
    Ok(out)
}

/// Spin episodes: the VM (a number standing for it) and vCPU that spun,
/// and when it began.
#[derive(Clone, Copy, Debug)]
pub struct Episodes<'a> {
    /// The VM.
    pub vm: &'a [u32],
    /// The vCPU.
    pub vcpu: &'a [i32],
    /// Start (ns).
    pub start: &'a [i64],
}

/// vCPUs' preempted segments (runnable, waiting for a CPU), in any order;
/// a vCPU's do not overlap.
#[derive(Clone, Copy, Debug)]
pub struct Preemptions<'a> {
    /// The VM (numbered as the episodes' are).
    pub vm: &'a [u32],
    /// The vCPU.
    pub vcpu: &'a [i32],
    /// Start (ns).
    pub start: &'a [i64],
    /// End (ns).
    pub end: &'a [i64],
}

/// Per episode, the lowest-numbered other vCPU of its VM that was
/// preempted when it began (a preemption `start <= t < end`), the
/// candidate lock holder; None when no sibling was. A sibling's segment
/// is its last to start at or before `t` (of two starting at one instant,
/// the later row).
pub fn lock_holders(ep: Episodes<'_>, pre: Preemptions<'_>) -> Result<Vec<Option<i32>>, SpinError> {
    let n = ep.vm.len();
    if ep.vcpu.len() != n || ep.start.len() != n {
        return Err(SpinError::Lengths("episodes"));
    }
    let m = pre.vm.len();
    if pre.vcpu.len() != m || pre.start.len() != m || pre.end.len() != m {
        return Err(SpinError::Lengths("preemptions"));
    }
    // by VM, vCPU and start; stable, so a tie keeps the rows' order
    let mut rows: Vec<(u32, i32, i64, i64)> = (0..m)
        .map(|i| (pre.vm[i], pre.vcpu[i], pre.start[i], pre.end[i]))
        .collect();
    rows.sort_by_key(|&(vm, vcpu, start, _)| (vm, vcpu, start));
    // each (VM, vCPU)'s rows, and each VM's vCPUs in increasing order
    let mut vcpus: Vec<(u32, i32, std::ops::Range<usize>)> = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        let (vm, vcpu) = (rows[i].0, rows[i].1);
        let j = i + rows[i..].partition_point(|r| (r.0, r.1) == (vm, vcpu));
        vcpus.push((vm, vcpu, i..j));
        i = j;
    }
    let held = |r: &std::ops::Range<usize>, t: i64| {
        let k = rows[r.clone()].partition_point(|row| row.2 <= t);
        k > 0 && rows[r.start + k - 1].3 > t
    };
    Ok((0..n)
        .map(|e| {
            let (vm, own, t) = (ep.vm[e], ep.vcpu[e], ep.start[e]);
            let from = vcpus.partition_point(|v| v.0 < vm);
            vcpus[from..]
                .iter()
                .take_while(|v| v.0 == vm)
                .find(|v| v.1 != own && held(&v.2, t))
                .map(|v| v.1)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_thread_spins_until_a_gap_longer_than_the_threshold() {
        // thread 1: 0, 10, 20 | 100; thread 2 between them: 5 | 200, 200
        let c = pause_clusters(&[1, 2, 1, 1, 1, 2, 2], &[0, 5, 10, 20, 100, 200, 200], 50).unwrap();
        assert_eq!(c.tid, vec![1, 2, 1, 2]);
        assert_eq!(c.start, vec![0, 5, 100, 200]);
        assert_eq!(c.end, vec![20, 6, 101, 201]);
        assert_eq!(c.exits, vec![3, 1, 1, 2]);
        assert_eq!(
            pause_clusters(&[1, 1], &[5, 4], 50),
            Err(SpinError::TimeOrder(1))
        );
    }

    #[test]
    fn the_lowest_preempted_sibling_holds_the_lock() {
        // VM 0: vCPU 2 preempted 0-100, vCPU 1 preempted 50-60, vCPU 0 spins
        let pre = Preemptions {
            vm: &[0, 0, 1],
            vcpu: &[2, 1, 0],
            start: &[0, 50, 0],
            end: &[100, 60, 1000],
        };
        let ep = Episodes {
            vm: &[0, 0, 0, 0, 0],
            vcpu: &[0, 0, 0, 2, 1],
            start: &[10, 55, 100, 55, 55],
        };
        // a segment ends before its end: 100 is no longer preempted; VM 1's
        // preemption is another VM's; a vCPU is not its own holder
        assert_eq!(
            lock_holders(ep, pre).unwrap(),
            vec![Some(2), Some(1), None, Some(1), Some(2)]
        );
    }

    /// Per thread in time order, a new episode at each gap over the
    /// threshold: the rule read off the rows one by one.
    fn clusters_brute(rows: &[(i64, i64)], gap: i64) -> Vec<(i64, i64, i64, u32)> {
        let mut out: Vec<(i64, i64, i64, u32)> = Vec::new();
        let mut tids: Vec<i64> = rows.iter().map(|r| r.0).collect();
        tids.sort_unstable();
        tids.dedup();
        for t in tids {
            let ts: Vec<i64> = rows.iter().filter(|r| r.0 == t).map(|r| r.1).collect();
            for (k, &x) in ts.iter().enumerate() {
                if k == 0 || x - ts[k - 1] > gap {
                    out.push((t, x, x, 1));
                } else {
                    let last = out.last_mut().unwrap();
                    last.2 = x;
                    last.3 += 1;
                }
            }
        }
        for e in out.iter_mut() {
            e.2 = e.2.max(e.1 + 1);
        }
        out.sort_unstable();
        out
    }

    proptest! {
        #[test]
        fn clusters_match_the_rule(mut rows in prop::collection::vec((0i64..4, 0i64..400), 0..80), gap in 0i64..60) {
            rows.sort_by_key(|r| r.1);
            let (tid, ts): (Vec<i64>, Vec<i64>) = rows.iter().copied().unzip();
            let c = pause_clusters(&tid, &ts, gap).unwrap();
            let mut got: Vec<(i64, i64, i64, u32)> = (0..c.tid.len()).map(|i| (c.tid[i], c.start[i], c.end[i], c.exits[i])).collect();
            prop_assert!(c.start.windows(2).all(|w| w[0] <= w[1]));
            got.sort_unstable();
            prop_assert_eq!(got, clusters_brute(&rows, gap));
        }

        #[test]
        fn holders_match_a_scan_of_every_sibling(
            // per (vm, vcpu): disjoint preemptions cut from gaps and lengths
            pre in prop::collection::vec((0u32..3, 0i32..4, prop::collection::vec((0i64..30, 1i64..30), 0..6)), 0..10),
            ep in prop::collection::vec((0u32..3, 0i32..4, 0i64..400), 0..60),
        ) {
            let mut seen = std::collections::HashSet::new();
            let mut p: Vec<(u32, i32, i64, i64)> = Vec::new();
            for (vm, vcpu, cuts) in pre {
                if !seen.insert((vm, vcpu)) {
                    continue;
                }
                let mut at = 0;
                for (gap, len) in cuts {
                    p.push((vm, vcpu, at + gap, at + gap + len));
                    at += gap + len;
                }
            }
            p.reverse(); // any order
            let col = |f: fn(&(u32, i32, i64, i64)) -> i64| p.iter().map(f).collect::<Vec<i64>>();
            let (pvm, pvcpu): (Vec<u32>, Vec<i32>) = p.iter().map(|r| (r.0, r.1)).unzip();
            let (ps, pe) = (col(|r| r.2), col(|r| r.3));
            let (evm, evcpu): (Vec<u32>, Vec<i32>) = ep.iter().map(|r| (r.0, r.1)).unzip();
            let es: Vec<i64> = ep.iter().map(|r| r.2).collect();
            let got = lock_holders(
                Episodes { vm: &evm, vcpu: &evcpu, start: &es },
                Preemptions { vm: &pvm, vcpu: &pvcpu, start: &ps, end: &pe },
            ).unwrap();
            for (k, &(vm, vcpu, t)) in ep.iter().enumerate() {
                let want = p.iter().filter(|r| r.0 == vm && r.1 != vcpu && r.2 <= t && t < r.3).map(|r| r.1).min();
                prop_assert_eq!(got[k], want);
            }
        }
    }
}
