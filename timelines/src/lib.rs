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
//! [`split_runs`] cuts a thread's running stretches at its state marks
//! (KVM entry and exit): each stretch begins in the state of the last mark
//! at or before it and changes at every mark inside it.
#![deny(missing_docs)]

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
    // the intervals grouped by key, in key order (the segments' order)
    let mut by_key: Vec<(u32, i64, i64)> = (0..over.key.len())
        .map(|i| (over.key[i], over.start[i], over.end[i]))
        .collect();
    by_key.sort_unstable();
    let mut out = Pieces::with_capacity(n);
    let (mut next, mut i) = (0usize, 0usize);
    while i < n {
        // one key's segments, [i, j), and its intervals
        let k = seg.key[i];
        let j = i + seg.key[i..].partition_point(|&x| x == k);
        while next < by_key.len() && by_key[next].0 < k {
            next += 1;
        }
        let from = next;
        while next < by_key.len() && by_key[next].0 == k {
            next += 1;
        }
        let mut iv: Vec<(i64, i64)> = by_key[from..next].iter().map(|&(_, s, e)| (s, e)).collect();
        let prepared = Prepared::of(&mut iv);
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

/// Running stretches, column by column: sorted by thread, then start; a
/// thread's do not overlap.
#[derive(Clone, Copy, Debug)]
pub struct Runs<'a> {
    /// The thread, non-decreasing.
    pub tid: &'a [i64],
    /// Start (ns), increasing within a thread.
    pub start: &'a [i64],
    /// End (ns), after the start.
    pub end: &'a [i64],
}

/// State marks (a thread entered `state` at `ts`), in time order; marks of
/// threads with no runs are ignored.
#[derive(Clone, Copy, Debug)]
pub struct Marks<'a> {
    /// The thread.
    pub tid: &'a [i64],
    /// When (ns), non-decreasing.
    pub ts: &'a [i64],
    /// The state entered (the caller's code).
    pub state: &'a [u8],
}

/// The stretches' pieces in the runs' order (the run each is part of: its
/// index in [`Runs`]), each in one state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Split {
    /// The run each piece is part of.
    pub run: Vec<u32>,
    /// Start (ns).
    pub start: Vec<i64>,
    /// End (ns).
    pub end: Vec<i64>,
    /// The state (the marks' code).
    pub state: Vec<u8>,
}

/// Why runs cannot be split.
#[derive(Debug, PartialEq, Eq)]
pub enum SplitError {
    /// The columns of one input differ in length.
    Lengths(&'static str),
    /// Run `i` breaks the order (thread, then start after the thread's
    /// previous run ended) or ends before it starts.
    RunOrder(usize),
    /// Mark `i` is earlier than the one before it.
    MarkOrder(usize),
    /// More runs than a `u32` index counts.
    TooMany,
}

impl fmt::Display for SplitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SplitError::Lengths(what) => write!(f, "{what}: columns of different lengths"),
            SplitError::RunOrder(i) => write!(
                f,
                "run {i}: not in thread and start order, or ends before it starts"
            ),
            SplitError::MarkOrder(i) => write!(f, "mark {i}: not in time order"),
            SplitError::TooMany => write!(f, "more than 2^32 runs"),
        }
    }
}

impl std::error::Error for SplitError {}

/// Each run cut at the marks of its thread strictly inside it: a piece
/// from the run's start in the state of the thread's last mark at or
/// before it (`initial` if none), then one from each such mark in its
/// state. Marks at the same instant of one thread apply in their order
/// (the earlier gives an empty piece).
pub fn split_runs(runs: Runs<'_>, marks: Marks<'_>, initial: u8) -> Result<Split, SplitError> {
    let n = runs.tid.len();
    if runs.start.len() != n || runs.end.len() != n {
        return Err(SplitError::Lengths("runs"));
    }
    if marks.ts.len() != marks.tid.len() || marks.state.len() != marks.tid.len() {
        return Err(SplitError::Lengths("marks"));
    }
    if u32::try_from(n).is_err() {
        return Err(SplitError::TooMany);
    }
    for i in 0..n {
        // a thread's runs one after another (a CPU runs it once at a time)
        let ordered = i == 0
            || runs.tid[i - 1] < runs.tid[i]
            || (runs.tid[i - 1] == runs.tid[i] && runs.end[i - 1] <= runs.start[i]);
        if !ordered || runs.end[i] <= runs.start[i] {
            return Err(SplitError::RunOrder(i));
        }
    }
    if let Some(i) = (1..marks.ts.len()).find(|&i| marks.ts[i] < marks.ts[i - 1]) {
        return Err(SplitError::MarkOrder(i));
    }
    // each run thread's marks, in time order (a bucket per thread keeps it)
    let mut tids: Vec<i64> = runs.tid.to_vec();
    tids.dedup();
    let mut per: Vec<Vec<(i64, u8)>> = vec![Vec::new(); tids.len()];
    for i in 0..marks.tid.len() {
        if let Ok(k) = tids.binary_search(&marks.tid[i]) {
            per[k].push((marks.ts[i], marks.state[i]));
        }
    }
    let mut out = Split::default();
    let mut push = |run: usize, start: i64, end: i64, state: u8| {
        out.run.push(run as u32);
        out.start.push(start);
        out.end.push(end);
        out.state.push(state);
    };
    let mut i = 0;
    for (k, mine) in per.iter().enumerate() {
        // the thread's state as of the marks passed so far
        let (mut state, mut next) = (initial, 0usize);
        while i < n && runs.tid[i] == tids[k] {
            let (start, end) = (runs.start[i], runs.end[i]);
            while next < mine.len() && mine[next].0 <= start {
                state = mine[next].1;
                next += 1;
            }
            let mut from = start;
            while next < mine.len() && mine[next].0 < end {
                push(i, from, mine[next].0, state);
                (from, state) = mine[next];
                next += 1;
            }
            push(i, from, end, state);
            i += 1;
        }
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

    fn split(runs: &[(i64, i64, i64)], marks: &[(i64, i64, u8)]) -> Vec<(u32, i64, i64, u8)> {
        let col = |f: fn(&(i64, i64, i64)) -> i64| runs.iter().map(f).collect::<Vec<_>>();
        let (t, s, e) = (col(|r| r.0), col(|r| r.1), col(|r| r.2));
        let mt: Vec<i64> = marks.iter().map(|m| m.0).collect();
        let ms: Vec<i64> = marks.iter().map(|m| m.1).collect();
        let mc: Vec<u8> = marks.iter().map(|m| m.2).collect();
        let p = split_runs(
            Runs {
                tid: &t,
                start: &s,
                end: &e,
            },
            Marks {
                tid: &mt,
                ts: &ms,
                state: &mc,
            },
            9,
        )
        .unwrap();
        (0..p.run.len())
            .map(|i| (p.run[i], p.start[i], p.end[i], p.state[i]))
            .collect()
    }

    #[test]
    fn runs_begin_in_the_last_state_before_them_and_change_at_marks_inside() {
        // thread 5: exit (1) at 3, entry (0) at 12 and exit at 15 inside the
        // run 10-20, entry at 20 (its end: the next run's state), a mark of
        // thread 6 (no runs) ignored; thread 7 has no marks: initial (9)
        let marks = [(5, 3, 1), (6, 11, 0), (5, 12, 0), (5, 15, 1), (5, 20, 0)];
        let got = split(&[(5, 10, 20), (5, 20, 30), (7, 0, 4)], &marks);
        assert_eq!(
            got,
            vec![
                (0, 10, 12, 1),
                (0, 12, 15, 0),
                (0, 15, 20, 1),
                (1, 20, 30, 0),
                (2, 0, 4, 9)
            ]
        );
    }

    #[test]
    fn runs_and_marks_out_of_order_are_refused() {
        let r = split_runs(
            Runs {
                tid: &[1, 1],
                start: &[5, 0],
                end: &[9, 4],
            },
            Marks {
                tid: &[],
                ts: &[],
                state: &[],
            },
            0,
        );
        assert_eq!(r, Err(SplitError::RunOrder(1)));
        let r = split_runs(
            Runs {
                tid: &[1],
                start: &[0],
                end: &[9],
            },
            Marks {
                tid: &[1, 1],
                ts: &[5, 4],
                state: &[0, 1],
            },
            0,
        );
        assert_eq!(r, Err(SplitError::MarkOrder(1)));
    }

    proptest! {
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

        /// Against a brute force: every instant of a run is in the state of
        /// its thread's last mark at or before that instant.
        #[test]
        fn each_instant_is_in_the_last_marks_state(
            lens in proptest::collection::vec((0i64..3, 1i64..20, 0i64..5), 1..15),
            marks in proptest::collection::vec((0i64..4, 0i64..120, 0u8..3), 0..30),
        ) {
            let mut lens = lens;
            lens.sort_by_key(|x| x.0);
            let (mut tid, mut t, mut runs) = (-1, 0i64, Vec::new());
            for (k, len, gap) in lens {
                if k != tid { tid = k; t = 0; }
                t += gap + 1;
                runs.push((k, t, t + len));
                t += len;
            }
            let mut marks = marks;
            // in time order; one mark per thread and instant (ties have no
            // single answer): a thread's marks at one instant made adjacent
            // by the order, then all but one dropped
            marks.sort_by_key(|m| (m.1, m.0));
            marks.dedup_by_key(|m| (m.0, m.1));
            let got = split(&runs, &marks);
            for (i, &(k, s, e)) in runs.iter().enumerate() {
                let pieces: Vec<_> = got.iter().filter(|p| p.0 == i as u32).collect();
                prop_assert_eq!(pieces.first().unwrap().1, s);
                prop_assert_eq!(pieces.last().unwrap().2, e);
                for w in pieces.windows(2) { prop_assert_eq!(w[0].2, w[1].1); }
                for p in pieces {
                    prop_assert!(p.1 < p.2);
                    for x in p.1..p.2 {
                        let want = marks.iter().rfind(|m| m.0 == k && m.1 <= x).map_or(9, |m| m.2);
                        prop_assert_eq!(p.3, want, "run {:?} piece {:?} at {}", (k, s, e), p, x);
                    }
                }
            }
        }
    }
}
