//! Interval operations on the model's per-vCPU timelines.
//!
//! A timeline is a run of disjoint segments per key (a vCPU), sorted by
//! key and start. [`overlay`] lays intervals over it (spin episodes over
//! guest time): every eligible segment is cut at each interval boundary
//! strictly inside it, and each piece is marked covered when the union of
//! its key's intervals covers it. The pieces come out in the timeline's
//! order, so the caller gathers its other columns by segment index and
//! needs no sort; one pass over the segments and the cuts.
//!
//! [`vcpu::vcpu_timelines`] builds the timelines themselves from the vCPU
//! threads' running stretches, switches, KVM entries and exits and
//! wakeups; [`spins`] clusters PAUSE exits into spin episodes and finds
//! each episode's candidate lock holder.
#![deny(missing_docs)]

pub mod spins;
pub mod vcpu;

use std::fmt;

/// A timeline's segments, column by column (one index per segment).
#[derive(Clone, Copy, Debug)]
pub struct Segments<'a> {
    /// The timeline each segment belongs to, non-decreasing.
    pub key: &'a [u32],
    /// Start (ns); within a key, increasing and at or after the previous
    /// segment's end.
    pub start: &'a [i64],
    /// End (ns), after the start.
    pub end: &'a [i64],
    /// Whether intervals may cover the segment (others pass through whole).
    pub eligible: &'a [bool],
}

/// Intervals to lay over the segments, in any order; a key's may overlap.
#[derive(Clone, Copy, Debug)]
pub struct Intervals<'a> {
    /// The timeline each interval belongs to.
    pub key: &'a [u32],
    /// Start (ns).
    pub start: &'a [i64],
    /// End (ns).
    pub end: &'a [i64],
}

/// The overlaid timeline's pieces, column by column, in the segments'
/// order: the segment each is part of (its index in [`Segments`]), its
/// start and end (ns), and whether an interval covers the whole piece.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pieces {
    /// The segment each piece is part of.
    pub seg: Vec<u32>,
    /// Start (ns).
    pub start: Vec<i64>,
    /// End (ns).
    pub end: Vec<i64>,
    /// An interval covers the whole piece.
    pub covered: Vec<bool>,
}

impl Pieces {
    fn with_capacity(n: usize) -> Pieces {
        Pieces {
            seg: Vec::with_capacity(n),
            start: Vec::with_capacity(n),
            end: Vec::with_capacity(n),
            covered: Vec::with_capacity(n),
        }
    }

    fn push(&mut self, seg: u32, start: i64, end: i64, covered: bool) {
        self.seg.push(seg);
        self.start.push(start);
        self.end.push(end);
        self.covered.push(covered);
    }
}

/// Why the inputs cannot be overlaid.
#[derive(Debug, PartialEq, Eq)]
pub enum OverlayError {
    /// The columns of one input differ in length.
    Lengths(&'static str),
    /// Segment `i` breaks the order (key, then start after the previous
    /// end) or ends before it starts.
    Order(usize),
    /// More segments than a `u32` index counts.
    TooMany,
}

impl fmt::Display for OverlayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OverlayError::Lengths(what) => write!(f, "{what}: columns of different lengths"),
            OverlayError::Order(i) => write!(
                f,
                "segment {i}: not in key and time order, or ends before it starts"
            ),
            OverlayError::TooMany => write!(f, "more than 2^32 segments"),
        }
    }
}

impl std::error::Error for OverlayError {}

/// Intervals grouped by key, read out one key at a time in increasing key
/// order (the order of the segments or instants they are laid over).
struct KeyedIntervals {
    rows: Vec<(u32, i64, i64)>,
    next: usize,
}

impl KeyedIntervals {
    fn of(over: &Intervals<'_>) -> KeyedIntervals {
        let mut rows: Vec<(u32, i64, i64)> = (0..over.key.len())
            .map(|i| (over.key[i], over.start[i], over.end[i]))
            .collect();
        rows.sort_unstable();
        KeyedIntervals { rows, next: 0 }
    }

    /// Key `k`'s intervals (start, end); keys asked in increasing order.
    fn of_key(&mut self, k: u32) -> Vec<(i64, i64)> {
        let rows = &self.rows;
        while self.next < rows.len() && rows[self.next].0 < k {
            self.next += 1;
        }
        let from = self.next;
        while self.next < rows.len() && rows[self.next].0 == k {
            self.next += 1;
        }
        rows[from..self.next]
            .iter()
            .map(|&(_, s, e)| (s, e))
            .collect()
    }
}

/// One key's intervals, prepared: every boundary (sorted, once each) and
/// the union as disjoint runs (sorted; touching intervals merge).
struct Prepared {
    cuts: Vec<i64>,
    runs: Vec<(i64, i64)>,
}

impl Prepared {
    fn of(iv: &mut [(i64, i64)]) -> Prepared {
        iv.sort_unstable();
        let mut cuts: Vec<i64> = iv.iter().flat_map(|&(s, e)| [s, e]).collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut runs: Vec<(i64, i64)> = Vec::new();
        for &(s, e) in iv.iter() {
            match runs.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => runs.push((s, e)),
            }
        }
        Prepared { cuts, runs }
    }
}

/// A walk over one key's prepared intervals with its segments, which come
/// in time order: both pointers only move forward (a segment begins at or
/// after the previous one's end), so a key costs its segments and cuts once.
struct Walk<'a> {
    p: &'a Prepared,
    /// the first cut not yet at or before the segments seen
    cut: usize,
    /// the union run that begins last at or before the pieces seen (or 0)
    run: usize,
}

impl<'a> Walk<'a> {
    /// The union covers [start, end]: the last run to begin at or before
    /// `start` reaches `end`. Starts must not decrease between calls.
    fn covers(&mut self, start: i64, end: i64) -> bool {
        let runs = &self.p.runs;
        while self.run + 1 < runs.len() && runs[self.run + 1].0 <= start {
            self.run += 1;
        }
        runs.get(self.run)
            .is_some_and(|r| r.0 <= start && r.1 >= end)
    }

    /// The cuts strictly inside (start, end), as a range of `p.cuts`.
    fn inside(&mut self, start: i64, end: i64) -> std::ops::Range<usize> {
        let cuts = &self.p.cuts;
        while self.cut < cuts.len() && cuts[self.cut] <= start {
            self.cut += 1;
        }
        let from = self.cut;
        while self.cut < cuts.len() && cuts[self.cut] < end {
            self.cut += 1;
        }
        from..self.cut
    }
}

/// The segments with the intervals laid over them (see the crate's
/// documentation), in the segments' order.
pub fn overlay(seg: Segments<'_>, over: Intervals<'_>) -> Result<Pieces, OverlayError> {
    let n = seg.key.len();
    if seg.start.len() != n || seg.end.len() != n || seg.eligible.len() != n {
        return Err(OverlayError::Lengths("segments"));
    }
    if over.start.len() != over.key.len() || over.end.len() != over.key.len() {
        return Err(OverlayError::Lengths("intervals"));
    }
    if u32::try_from(n).is_err() {
        return Err(OverlayError::TooMany);
    }
    for i in 0..n {
        let ordered = i == 0
            || seg.key[i - 1] < seg.key[i]
            || (seg.key[i - 1] == seg.key[i] && seg.end[i - 1] <= seg.start[i]);
        if !ordered || seg.end[i] <= seg.start[i] {
            return Err(OverlayError::Order(i));
        }
    }
    let mut keys = KeyedIntervals::of(&over);
    let mut out = Pieces::with_capacity(n);
    let mut i = 0usize;
    while i < n {
        // one key's segments, [i, j), and its intervals
        let k = seg.key[i];
        let j = i + seg.key[i..].partition_point(|&x| x == k);
        let prepared = Prepared::of(&mut keys.of_key(k));
        let mut walk = Walk {
            p: &prepared,
            cut: 0,
            run: 0,
        };
        for s in i..j {
            let (start, end, idx) = (seg.start[s], seg.end[s], s as u32);
            if !seg.eligible[s] || walk.p.runs.is_empty() {
                out.push(idx, start, end, false);
                continue;
            }
            let mut a = start;
            for c in walk.inside(start, end) {
                let b = walk.p.cuts[c];
                let covered = walk.covers(a, b);
                out.push(idx, a, b, covered);
                a = b;
            }
            let covered = walk.covers(a, end);
            out.push(idx, a, end, covered);
        }
        i = j;
    }
    Ok(out)
}

/// Instants on timelines, sorted by key, then time.
#[derive(Clone, Copy, Debug)]
pub struct Instants<'a> {
    /// The timeline each instant is on, non-decreasing.
    pub key: &'a [u32],
    /// When (ns), non-decreasing within a key.
    pub at: &'a [i64],
}

/// For each instant, the start of the run of its key's intervals (their
/// union, touching ones merged) that holds it, `start <= at < end`; None
/// when none does. The model's timelines ask it of each segment's start:
/// which stretch of waiting (overlapping spin episodes merged) it began
/// in. One pass over the instants and the runs; the polars form (an as-of
/// join after sorting every segment by time, then sorting them back) took
/// two sorts of the whole timeline.
pub fn enclosing(
    inst: Instants<'_>,
    over: Intervals<'_>,
) -> Result<Vec<Option<i64>>, OverlayError> {
    let n = inst.key.len();
    if inst.at.len() != n {
        return Err(OverlayError::Lengths("instants"));
    }
    if over.start.len() != over.key.len() || over.end.len() != over.key.len() {
        return Err(OverlayError::Lengths("intervals"));
    }
    if let Some(i) = (1..n).find(|&i| (inst.key[i], inst.at[i]) < (inst.key[i - 1], inst.at[i - 1]))
    {
        return Err(OverlayError::Order(i));
    }
    let mut keys = KeyedIntervals::of(&over);
    let mut out = Vec::with_capacity(n);
    let mut i = 0usize;
    while i < n {
        let k = inst.key[i];
        let j = i + inst.key[i..].partition_point(|&x| x == k);
        let runs = Prepared::of(&mut keys.of_key(k)).runs;
        let mut r = 0usize;
        for &t in &inst.at[i..j] {
            while r + 1 < runs.len() && runs[r + 1].0 <= t {
                r += 1;
            }
            out.push(
                runs.get(r)
                    .filter(|&&(s, e)| s <= t && t < e)
                    .map(|&(s, _)| s),
            );
        }
        i = j;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run(seg: &[(u32, i64, i64, bool)], over: &[(u32, i64, i64)]) -> Vec<(u32, i64, i64, bool)> {
        let (k, s, e, g): (Vec<u32>, Vec<i64>, Vec<i64>, Vec<bool>) = (
            seg.iter().map(|x| x.0).collect(),
            seg.iter().map(|x| x.1).collect(),
            seg.iter().map(|x| x.2).collect(),
            seg.iter().map(|x| x.3).collect(),
        );
        let (ok, os, oe): (Vec<u32>, Vec<i64>, Vec<i64>) = (
            over.iter().map(|x| x.0).collect(),
            over.iter().map(|x| x.1).collect(),
            over.iter().map(|x| x.2).collect(),
        );
        let seg = Segments {
            key: &k,
            start: &s,
            end: &e,
            eligible: &g,
        };
        let p = overlay(
            seg,
            Intervals {
                key: &ok,
                start: &os,
                end: &oe,
            },
        )
        .unwrap();
        (0..p.seg.len())
            .map(|i| (p.seg[i], p.start[i], p.end[i], p.covered[i]))
            .collect()
    }

    #[test]
    fn cuts_at_boundaries_and_marks_what_is_covered() {
        // guest 0-100 with spins 10-20 and 15-30 (overlapping: one run
        // 10-30) and 30-40 (touching: merged too); vmm 100-150 untouched
        let got = run(
            &[(0, 0, 100, true), (0, 100, 150, false)],
            &[(0, 10, 20), (0, 15, 30), (0, 30, 40)],
        );
        assert_eq!(
            got,
            vec![
                (0, 0, 10, false),
                (0, 10, 15, true),
                (0, 15, 20, true),
                (0, 20, 30, true),
                (0, 30, 40, true),
                (0, 40, 100, false),
                (1, 100, 150, false)
            ]
        );
    }

    #[test]
    fn another_keys_intervals_do_not_apply() {
        let got = run(
            &[(0, 0, 10, true), (2, 0, 10, true)],
            &[(1, 0, 10), (2, 5, 20)],
        );
        assert_eq!(
            got,
            vec![(0, 0, 10, false), (1, 0, 5, false), (1, 5, 10, true)]
        );
    }

    #[test]
    fn out_of_order_segments_are_refused() {
        let k = [0u32, 0];
        let r = overlay(
            Segments {
                key: &k,
                start: &[5, 0],
                end: &[10, 5],
                eligible: &[true, true],
            },
            Intervals {
                key: &[],
                start: &[],
                end: &[],
            },
        );
        assert_eq!(r, Err(OverlayError::Order(1)));
    }

    fn enclosing_of(inst: &[(u32, i64)], over: &[(u32, i64, i64)]) -> Vec<Option<i64>> {
        let (k, t): (Vec<u32>, Vec<i64>) = inst.iter().copied().unzip();
        let ok: Vec<u32> = over.iter().map(|x| x.0).collect();
        let os: Vec<i64> = over.iter().map(|x| x.1).collect();
        let oe: Vec<i64> = over.iter().map(|x| x.2).collect();
        enclosing(
            Instants { key: &k, at: &t },
            Intervals {
                key: &ok,
                start: &os,
                end: &oe,
            },
        )
        .unwrap()
    }

    #[test]
    fn an_instant_takes_the_start_of_the_merged_run_holding_it() {
        // key 0: 10-20 and 15-30 overlap, 30-40 touches: one run 10-40;
        // 50-60 apart. Key 1: none.
        let over = [(0, 15, 30), (0, 10, 20), (0, 30, 40), (0, 50, 60)];
        let got = enclosing_of(
            &[(0, 5), (0, 10), (0, 35), (0, 40), (0, 55), (1, 12)],
            &over,
        );
        assert_eq!(got, vec![None, Some(10), Some(10), None, Some(50), None]);
        let r = enclosing(
            Instants {
                key: &[0, 0],
                at: &[5, 4],
            },
            Intervals {
                key: &[],
                start: &[],
                end: &[],
            },
        );
        assert_eq!(r, Err(OverlayError::Order(1)));
    }

    proptest! {
        /// Against a brute force: an instant is held when some interval
        /// of its key holds it, and its run starts at the earliest point
        /// from which the key's intervals reach it without a gap.
        #[test]
        fn enclosing_matches_a_pointwise_union(
            inst in proptest::collection::vec((0u32..3, 0i64..100), 0..30),
            over in proptest::collection::vec((0u32..3, 0i64..90, 0i64..20), 0..12),
        ) {
            let mut inst = inst;
            inst.sort_unstable();
            let over: Vec<(u32, i64, i64)> = over.into_iter().map(|(k, s, l)| (k, s, s + l)).collect();
            let got = enclosing_of(&inst, &over);
            let held = |k: u32, x: i64| over.iter().any(|&(ok, s, e)| ok == k && s <= x && x < e);
            for (&(k, t), g) in inst.iter().zip(&got) {
                // the run's start: walk back while the unit step before is
                // held (touching intervals leave no unheld step between)
                let want = held(k, t).then(|| {
                    let mut s = t;
                    while held(k, s - 1) {
                        s -= 1;
                    }
                    s
                });
                prop_assert_eq!(*g, want, "instant {:?}", (k, t));
            }
        }

        /// Against a brute force: the pieces tile each segment, and a
        /// piece is covered exactly when every point of it lies in some
        /// interval of its key.
        #[test]
        fn pieces_tile_the_segments_and_coverage_is_pointwise(
            lens in proptest::collection::vec((0u32..3, 1i64..20, 0i64..5, any::<bool>()), 1..20),
            over in proptest::collection::vec((0u32..3, 0i64..150, 0i64..30), 0..15),
        ) {
            let mut seg = Vec::new();
            let mut lens = lens;
            lens.sort_by_key(|x| x.0);
            let (mut key, mut t) = (u32::MAX, 0i64);
            for (k, len, gap, g) in lens {
                if k != key { key = k; t = 0; }
                t += gap;
                seg.push((k, t, t + len, g));
                t += len;
            }
            let over: Vec<(u32, i64, i64)> = over.into_iter().map(|(k, s, l)| (k, s, s + l)).collect();
            let got = run(&seg, &over);
            for (i, &(k, s, e, g)) in seg.iter().enumerate() {
                let pieces: Vec<_> = got.iter().filter(|p| p.0 == i as u32).collect();
                prop_assert_eq!(pieces.first().unwrap().1, s);
                prop_assert_eq!(pieces.last().unwrap().2, e);
                for w in pieces.windows(2) { prop_assert_eq!(w[0].2, w[1].1); }
                for p in pieces {
                    // a piece [a, b) is covered when each unit step in it is
                    let all = (p.1..p.2).all(|x| over.iter().any(|&(ok, os, oe)| ok == k && os <= x && x < oe));
                    prop_assert_eq!(p.3, g && all, "segment {:?} piece {:?}", (k, s, e, g), p);
                }
            }
        }
    }
}
