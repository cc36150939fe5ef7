//! vCPU threads' timelines from their scheduling and KVM events, in one
//! pass per thread (the model's `vcpu_states` before spin episodes).
//!
//! A thread's running stretches (its CPU slices) are `guest` throughout
//! when it has no KVM marks; otherwise each begins in the state of its
//! last mark at or before it (`vmm` when none) and changes at every
//! `kvm_entry` (to guest) and `kvm_exit` (to vmm) inside it. Between two
//! stretches (and after the last, to the capture's end) the thread is
//! `preempted` when the switch that took it off the CPU says it was
//! runnable (`prev_state & 0xff == 0`), `halted` when its last exit at or
//! before leaving was a halt, `blocked` otherwise; a halted or blocked gap
//! becomes `preempted` (waiting for a CPU) from the first wakeup strictly
//! inside it. Before its first stretch (or throughout, without one) it is
//! `blocked`. Segments that would be empty are left out.
//!
//! The pieces come out in the order the table is stored in, by the
//! thread's key (its vCPU) and start, so the caller needs no sort: that
//! sort of every segment, and the joins this pass replaces, were half of
//! the model build's time.

use std::fmt;

/// The states of a timeline; a segment's state is its code (`as u8`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum State {
    /// Running guest code (entered with kvm_entry, or any run of a thread
    /// without KVM events).
    Guest,
    /// Running in the host for the guest (after kvm_exit).
    Vmm,
    /// Runnable, waiting for a CPU.
    Preempted,
    /// Sleeping.
    Blocked,
    /// Sleeping after the guest halted (its last exit was HLT).
    Halted,
    /// Guest time inside a spin episode (laid over by the caller).
    Spinning,
}

/// Every [`State`]'s name, indexed by its code.
pub const STATE_NAMES: [&str; 6] = ["guest", "vmm", "preempted", "blocked", "halted", "spinning"];

/// The vCPU threads and the timeline each belongs to (its key, a vCPU):
/// the output holds each pair's thread under that key.
#[derive(Clone, Copy, Debug)]
pub struct Threads<'a> {
    /// The thread.
    pub tid: &'a [i64],
    /// Its timeline.
    pub key: &'a [u32],
}

/// Running stretches, sorted by thread then start; a thread's are
/// disjoint. Stretches of threads not in [`Threads`] are ignored.
#[derive(Clone, Copy, Debug)]
pub struct Stretches<'a> {
    /// The thread, non-decreasing.
    pub tid: &'a [i64],
    /// Start (ns).
    pub start: &'a [i64],
    /// End (ns), after the start.
    pub end: &'a [i64],
    /// The CPU it ran on.
    pub cpu: &'a [i32],
}

/// Instants of a thread with a value: switches out (`value`: the switch's
/// prev_state), KVM exits (the exit reason), entries and wakeups (value
/// unused). Any order unless a function says otherwise.
#[derive(Clone, Copy, Debug)]
pub struct Events<'a> {
    /// The thread.
    pub tid: &'a [i64],
    /// When (ns).
    pub ts: &'a [i64],
    /// What the event says; empty when it says nothing.
    pub value: &'a [i64],
}

/// Everything a timeline is built from.
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    /// Which threads, for which keys.
    pub threads: Threads<'a>,
    /// Their running stretches.
    pub runs: Stretches<'a>,
    /// Switches that took a thread off its CPU, with prev_state. Several
    /// at one instant of one thread: the first listed counts.
    pub outs: Events<'a>,
    /// kvm_entry, in time order (no value).
    pub entries: Events<'a>,
    /// kvm_exit with the exit reason, in time order. An entry and an exit
    /// of one thread at one instant: the exit is the later.
    pub exits: Events<'a>,
    /// Wakeups of the threads (no value).
    pub wakeups: Events<'a>,
    /// The capture's [start, end) (ns), or a time window's: from a run's
    /// start to the next window's first run (or the capture's end).
    pub span: (i64, i64),
    /// Whether the span begins the timelines: each thread is `blocked`
    /// from it to its first run (throughout, without one). False for a
    /// later time window of a timeline built in windows: its threads
    /// begin at their first run in it, and one without a run there has
    /// no segment in it. Such a window needs, besides its span's events,
    /// each thread's last entry and last exit before it.
    pub lead: bool,
    /// Every thread has KVM marks, whether or not any is among these
    /// inputs: a time window may hold none of a thread's marks, and its
    /// runs are then in the state of the last mark before it (`vmm`
    /// before any), not `guest` as a thread's without marks.
    pub marked: bool,
    /// Exit reasons that halt the vCPU.
    pub halts: &'a [i64],
}

/// The timelines, column by column, sorted by key, then start (then
/// thread, when a key has several).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Timeline {
    /// The timeline (vCPU).
    pub key: Vec<u32>,
    /// The thread.
    pub tid: Vec<i64>,
    /// The [`State`] code.
    pub state: Vec<u8>,
    /// Start (ns).
    pub start: Vec<i64>,
    /// End (ns), after the start.
    pub end: Vec<i64>,
    /// The CPU, for running states; [`NO_CPU`] otherwise.
    pub cpu: Vec<i32>,
}

/// [`Timeline::cpu`] of a segment off any CPU.
pub const NO_CPU: i32 = -1;

/// Why the inputs cannot make timelines.
#[derive(Debug, PartialEq, Eq)]
pub enum TimelineError {
    /// The columns of one input differ in length.
    Lengths(&'static str),
    /// Stretch `i` breaks the order (thread, then start after the thread's
    /// previous stretch ended) or ends before it starts.
    RunOrder(usize),
    /// Row `i` of an input said to be in time order is not.
    TimeOrder(&'static str, usize),
}

impl fmt::Display for TimelineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimelineError::Lengths(what) => write!(f, "{what}: columns of different lengths"),
            TimelineError::RunOrder(i) => write!(
                f,
                "running stretch {i}: not in thread and start order, or ends before it starts"
            ),
            TimelineError::TimeOrder(what, i) => write!(f, "{what} row {i}: not in time order"),
        }
    }
}

impl std::error::Error for TimelineError {}

impl Events<'_> {
    fn check(&self, what: &'static str, valued: bool, sorted: bool) -> Result<(), TimelineError> {
        let n = self.tid.len();
        if self.ts.len() != n || (valued && self.value.len() != n) {
            return Err(TimelineError::Lengths(what));
        }
        match (1..n).find(|&i| sorted && self.ts[i] < self.ts[i - 1]) {
            Some(i) => Err(TimelineError::TimeOrder(what, i)),
            None => Ok(()),
        }
    }
}

/// Each thread's events in time order (stable: at one instant the inputs'
/// order, then each input's own), `(ts, value)`: an input's own values, or
/// the one given beside it; `tids` sorted and unique.
fn buckets(tids: &[i64], ev: &[(Events<'_>, Option<i64>)]) -> Vec<Vec<(i64, i64)>> {
    let mut per: Vec<Vec<(i64, i64)>> = vec![Vec::new(); tids.len()];
    for (e, fixed) in ev {
        for i in 0..e.tid.len() {
            if let Ok(k) = tids.binary_search(&e.tid[i]) {
                let value = fixed.unwrap_or_else(|| e.value.get(i).copied().unwrap_or(0));
                per[k].push((e.ts[i], value));
            }
        }
    }
    for p in per.iter_mut() {
        p.sort_by_key(|&(ts, _)| ts);
    }
    per
}

/// One thread's segments (start, end, state, cpu), in time order.
struct Thread<'a> {
    runs: std::ops::Range<usize>,
    /// KVM marks: (ts, exit reason), entries with [`ENTRY`]
    marks: &'a [(i64, i64)],
    outs: &'a [(i64, i64)],
    wakeups: &'a [(i64, i64)],
}

/// The value of an entry among a thread's KVM marks (exit reasons are
/// u32s, so never this).
const ENTRY: i64 = i64::MIN;

fn segments(t: &Thread<'_>, inp: &Inputs<'_>, out: &mut Vec<(i64, i64, u8, i32)>) {
    let (span_start, span_end) = inp.span;
    let runs = &inp.runs;
    let mut push = |start: i64, end: i64, state: State, cpu: i32| {
        if end > start {
            out.push((start, end, state as u8, cpu));
        }
    };
    if t.runs.is_empty() {
        if inp.lead {
            push(span_start, span_end, State::Blocked, NO_CPU);
        }
        return;
    }
    if inp.lead {
        push(span_start, runs.start[t.runs.start], State::Blocked, NO_CPU);
    }
    let mark_state = |v: i64| if v == ENTRY { State::Guest } else { State::Vmm };
    let (mut state, mut next) = (State::Vmm, 0usize);
    // the last exit's reason at or before a gap, and the walks over the
    // switches out and the wakeups: every pointer only moves forward
    let (mut exit_at, mut reason) = (0usize, None);
    let (mut out_at, mut wake_at) = (0usize, 0usize);
    for r in t.runs.clone() {
        let (start, end, cpu) = (runs.start[r], runs.end[r], runs.cpu[r]);
        if t.marks.is_empty() && !inp.marked {
            push(start, end, State::Guest, cpu);
        } else {
            while next < t.marks.len() && t.marks[next].0 <= start {
                state = mark_state(t.marks[next].1);
                next += 1;
            }
            let mut from = start;
            while next < t.marks.len() && t.marks[next].0 < end {
                push(from, t.marks[next].0, state, cpu);
                (from, state) = (t.marks[next].0, mark_state(t.marks[next].1));
                next += 1;
            }
            push(from, end, state, cpu);
        }
        // the gap after it
        let gap_end = if r + 1 < t.runs.end {
            runs.start[r + 1]
        } else {
            span_end
        };
        if gap_end <= end {
            continue;
        }
        while exit_at < t.marks.len() && t.marks[exit_at].0 <= end {
            if t.marks[exit_at].1 != ENTRY {
                reason = Some(t.marks[exit_at].1);
            }
            exit_at += 1;
        }
        while out_at < t.outs.len() && t.outs[out_at].0 < end {
            out_at += 1;
        }
        let prev_state = t.outs.get(out_at).filter(|o| o.0 == end).map(|o| o.1);
        let gap = if prev_state.is_some_and(|s| s & 0xff == 0) {
            State::Preempted
        } else if reason.is_some_and(|x| inp.halts.contains(&x)) {
            State::Halted
        } else {
            State::Blocked
        };
        while wake_at < t.wakeups.len() && t.wakeups[wake_at].0 < end {
            wake_at += 1;
        }
        match t.wakeups.get(wake_at).map(|w| w.0) {
            Some(w) if gap != State::Preempted && w > end && w < gap_end => {
                push(end, w, gap, NO_CPU);
                push(w, gap_end, State::Preempted, NO_CPU);
            }
            _ => push(end, gap_end, gap, NO_CPU),
        }
    }
}

/// The timelines of [`Inputs::threads`] (see the module's documentation).
pub fn vcpu_timelines(inp: Inputs<'_>) -> Result<Timeline, TimelineError> {
    let th = &inp.threads;
    if th.key.len() != th.tid.len() {
        return Err(TimelineError::Lengths("threads"));
    }
    let r = &inp.runs;
    let n = r.tid.len();
    if r.start.len() != n || r.end.len() != n || r.cpu.len() != n {
        return Err(TimelineError::Lengths("runs"));
    }
    for i in 0..n {
        let ordered = i == 0
            || r.tid[i - 1] < r.tid[i]
            || (r.tid[i - 1] == r.tid[i] && r.end[i - 1] <= r.start[i]);
        if !ordered || r.end[i] <= r.start[i] {
            return Err(TimelineError::RunOrder(i));
        }
    }
    inp.outs.check("switches out", true, false)?;
    inp.entries.check("kvm entries", false, true)?;
    inp.exits.check("kvm exits", true, true)?;
    inp.wakeups.check("wakeups", false, false)?;
    let mut tids: Vec<i64> = th.tid.to_vec();
    tids.sort_unstable();
    tids.dedup();
    // entries carry ENTRY; at one instant the exit comes after the entry
    let marks = buckets(&tids, &[(inp.entries, Some(ENTRY)), (inp.exits, None)]);
    let outs = buckets(&tids, &[(inp.outs, None)]);
    let wakeups = buckets(&tids, &[(inp.wakeups, None)]);
    let runs_of = |tid: i64| {
        let from = r.tid.partition_point(|&t| t < tid);
        from..from + r.tid[from..].partition_point(|&t| t == tid)
    };
    // (key, tid) pairs in output order
    let mut pairs: Vec<(u32, i64)> = th.key.iter().copied().zip(th.tid.iter().copied()).collect();
    pairs.sort_unstable();
    pairs.dedup();
    let mut tl = Timeline::default();
    let mut rows: Vec<(i64, i64, i64, u8, i32)> = Vec::new();
    let mut one: Vec<(i64, i64, u8, i32)> = Vec::new();
    let mut i = 0;
    while i < pairs.len() {
        let key = pairs[i].0;
        let j = i + pairs[i..].partition_point(|p| p.0 == key);
        rows.clear();
        for &(_, tid) in &pairs[i..j] {
            let k = tids.binary_search(&tid).expect("every thread is in tids");
            one.clear();
            let t = Thread {
                runs: runs_of(tid),
                marks: &marks[k],
                outs: &outs[k],
                wakeups: &wakeups[k],
            };
            segments(&t, &inp, &mut one);
            rows.extend(one.iter().map(|&(s, e, st, c)| (s, tid, e, st, c)));
        }
        if j - i > 1 {
            // several threads of one vCPU: by start, then thread
            rows.sort_by_key(|&(s, tid, ..)| (s, tid));
        }
        for &(s, tid, e, st, c) in &rows {
            tl.key.push(key);
            tl.tid.push(tid);
            tl.state.push(st);
            tl.start.push(s);
            tl.end.push(e);
            tl.cpu.push(c);
        }
        i = j;
    }
    Ok(tl)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The inputs as rows: runs (tid, start, end, cpu), outs (tid, ts,
    /// prev_state), entries (tid, ts), exits (tid, ts, reason), wakeups
    /// (tid, ts).
    #[derive(Clone, Debug, Default)]
    struct Rows {
        threads: Vec<(i64, u32)>,
        runs: Vec<(i64, i64, i64, i32)>,
        outs: Vec<(i64, i64, i64)>,
        entries: Vec<(i64, i64)>,
        exits: Vec<(i64, i64, i64)>,
        wakeups: Vec<(i64, i64)>,
        span: (i64, i64),
        /// a time window after the first (`Inputs::lead` false)
        later_window: bool,
        /// `Inputs::marked`
        marked: bool,
    }

    const HALT: i64 = 12;

    /// A segment: key, thread, state, start, end, CPU.
    type Row = (u32, i64, u8, i64, i64, i32);

    fn build(r: &Rows) -> Result<Vec<Row>, TimelineError> {
        let c2 = |v: &[(i64, i64)]| -> (Vec<i64>, Vec<i64>) { v.iter().copied().unzip() };
        let c3 = |v: &[(i64, i64, i64)]| -> (Vec<i64>, Vec<i64>, Vec<i64>) {
            (
                v.iter().map(|x| x.0).collect(),
                v.iter().map(|x| x.1).collect(),
                v.iter().map(|x| x.2).collect(),
            )
        };
        let (ttid, tkey): (Vec<i64>, Vec<u32>) = r.threads.iter().copied().unzip();
        let rt: Vec<i64> = r.runs.iter().map(|x| x.0).collect();
        let rs: Vec<i64> = r.runs.iter().map(|x| x.1).collect();
        let re: Vec<i64> = r.runs.iter().map(|x| x.2).collect();
        let rc: Vec<i32> = r.runs.iter().map(|x| x.3).collect();
        let (ot, os, ov) = c3(&r.outs);
        let (et, es) = c2(&r.entries);
        let (xt, xs, xv) = c3(&r.exits);
        let (wt, ws) = c2(&r.wakeups);
        let t = vcpu_timelines(Inputs {
            threads: Threads {
                tid: &ttid,
                key: &tkey,
            },
            runs: Stretches {
                tid: &rt,
                start: &rs,
                end: &re,
                cpu: &rc,
            },
            outs: Events {
                tid: &ot,
                ts: &os,
                value: &ov,
            },
            entries: Events {
                tid: &et,
                ts: &es,
                value: &[],
            },
            exits: Events {
                tid: &xt,
                ts: &xs,
                value: &xv,
            },
            wakeups: Events {
                tid: &wt,
                ts: &ws,
                value: &[],
            },
            span: r.span,
            lead: !r.later_window,
            marked: r.marked,
            halts: &[HALT],
        })?;
        Ok((0..t.key.len())
            .map(|i| {
                (
                    t.key[i], t.tid[i], t.state[i], t.start[i], t.end[i], t.cpu[i],
                )
            })
            .collect())
    }

    const G: u8 = State::Guest as u8;
    const V: u8 = State::Vmm as u8;
    const P: u8 = State::Preempted as u8;
    const B: u8 = State::Blocked as u8;
    const H: u8 = State::Halted as u8;

    #[test]
    fn runs_split_at_kvm_marks_and_gaps_named_by_how_the_thread_left() {
        // thread 5 (key 1): runs 10-20 on CPU 0 and 30-40 on CPU 1; exit
        // at 3 (reason 1), entry at 12, HLT exit at 15 inside the first
        // run; switched out at 20 sleeping (prev_state 1), woken at 25;
        // switched out at 40 runnable. Thread 7 (key 0): no KVM marks, one
        // run 0-4, then asleep to the end. Thread 9 (key 2): never ran.
        let rows = Rows {
            threads: vec![(5, 1), (7, 0), (9, 2)],
            runs: vec![(5, 10, 20, 0), (5, 30, 40, 1), (7, 0, 4, 0)],
            outs: vec![(5, 20, 1), (5, 40, 0), (7, 4, 1)],
            entries: vec![(5, 12)],
            exits: vec![(5, 3, 1), (5, 15, HALT)],
            wakeups: vec![(5, 25), (5, 26)],
            span: (0, 50),
            later_window: false,
            marked: false,
        };
        assert_eq!(
            build(&rows).unwrap(),
            vec![
                (0, 7, G, 0, 4, 0),
                (0, 7, B, 4, 50, NO_CPU),
                (1, 5, B, 0, 10, NO_CPU),
                (1, 5, V, 10, 12, 0),
                (1, 5, G, 12, 15, 0),
                (1, 5, V, 15, 20, 0),
                (1, 5, H, 20, 25, NO_CPU),
                (1, 5, P, 25, 30, NO_CPU),
                (1, 5, V, 30, 40, 1),
                (1, 5, P, 40, 50, NO_CPU),
                (2, 9, B, 0, 50, NO_CPU),
            ]
        );
    }

    #[test]
    fn two_threads_of_one_vcpu_interleave_by_start() {
        let rows = Rows {
            threads: vec![(3, 0), (4, 0)],
            runs: vec![(3, 0, 5, 0), (4, 5, 9, 1)],
            span: (0, 10),
            ..Rows::default()
        };
        assert_eq!(
            build(&rows).unwrap(),
            vec![
                (0, 3, G, 0, 5, 0),
                (0, 4, B, 0, 5, NO_CPU),
                (0, 3, B, 5, 10, NO_CPU),
                (0, 4, G, 5, 9, 1),
                (0, 4, B, 9, 10, NO_CPU),
            ]
        );
    }

    #[test]
    fn inputs_out_of_order_are_refused() {
        let mut rows = Rows {
            threads: vec![(1, 0)],
            runs: vec![(1, 5, 9, 0), (1, 0, 4, 0)],
            span: (0, 10),
            ..Rows::default()
        };
        assert_eq!(build(&rows), Err(TimelineError::RunOrder(1)));
        rows.runs = vec![(1, 0, 9, 0)];
        rows.exits = vec![(1, 5, 0), (1, 4, 0)];
        assert_eq!(build(&rows), Err(TimelineError::TimeOrder("kvm exits", 1)));
    }

    /// The state of `tid` at instant `x`, from the rules in the module's
    /// documentation applied to that instant alone.
    fn brute(r: &Rows, tid: i64, x: i64) -> (u8, i32) {
        let runs: Vec<_> = r.runs.iter().filter(|u| u.0 == tid).collect();
        // marks in time order, an exit after an entry at one instant
        let mut marks: Vec<(i64, bool, i64)> = r
            .entries
            .iter()
            .filter(|e| e.0 == tid)
            .map(|e| (e.1, false, 0))
            .collect();
        marks.extend(
            r.exits
                .iter()
                .filter(|e| e.0 == tid)
                .map(|e| (e.1, true, e.2)),
        );
        marks.sort_by_key(|m| (m.0, m.1));
        if let Some(u) = runs.iter().find(|u| u.1 <= x && x < u.2) {
            if marks.is_empty() {
                return (G, u.3);
            }
            let last = marks.iter().rfind(|m| m.0 <= x);
            return (if last.is_none_or(|m| m.1) { V } else { G }, u.3);
        }
        let Some(before) = runs.iter().rfind(|u| u.2 <= x) else {
            return (B, NO_CPU);
        };
        let left = before.2;
        let until = runs.iter().find(|u| u.1 > x).map_or(r.span.1, |u| u.1);
        let out = r.outs.iter().find(|o| o.0 == tid && o.1 == left);
        if out.is_some_and(|o| o.2 & 0xff == 0) {
            return (P, NO_CPU);
        }
        let halted = marks
            .iter()
            .rfind(|m| m.1 && m.0 <= left)
            .is_some_and(|m| m.2 == HALT);
        let wake = r
            .wakeups
            .iter()
            .filter(|w| w.0 == tid && w.1 >= left)
            .map(|w| w.1)
            .min();
        if wake.is_some_and(|w| w > left && w < until && x >= w) {
            return (P, NO_CPU);
        }
        (if halted { H } else { B }, NO_CPU)
    }

    proptest! {
        /// A thread's timeline built in two time windows, cut at one of
        /// its runs' starts (each window given its span's events, the
        /// later one also the last entry and exit before it), is the
        /// timeline built whole.
        #[test]
        fn windows_glue_into_the_whole_timeline(
            lens in proptest::collection::vec((1i64..12, 0i64..4), 2..12),
            outs in proptest::collection::vec((0i64..190, 0i64..3), 0..12),
            marks in proptest::collection::vec((0i64..190, any::<bool>(), prop_oneof![Just(HALT), Just(1i64)]), 0..25),
            wakeups in proptest::collection::vec(0i64..190, 0..10),
            cut_at in 0usize..12,
        ) {
            let (mut t, mut runs) = (0i64, Vec::new());
            for (len, gap) in lens {
                t += gap;
                runs.push((0, t, t + len, (t % 2) as i32));
                t += len;
            }
            let mut marks = marks;
            marks.sort_by_key(|m| m.0);
            let entries: Vec<(i64, i64)> = marks.iter().filter(|m| !m.1).map(|m| (0, m.0)).collect();
            let exits: Vec<(i64, i64, i64)> = marks.iter().filter(|m| m.1).map(|m| (0, m.0, m.2)).collect();
            let whole = Rows {
                threads: vec![(0, 0)],
                runs: runs.clone(),
                outs: outs.iter().map(|o| (0, o.0, o.1)).collect(),
                entries: entries.clone(),
                exits: exits.clone(),
                wakeups: wakeups.iter().map(|&w| (0, w)).collect(),
                span: (0, 200),
                later_window: false,
                marked: false,
            };
            let k = 1 + cut_at % (runs.len() - 1);
            let cut = runs[k].1;
            // the windows know the thread has marks, if it has
            let marked = !marks.is_empty();
            let first = Rows {
                marked,
                runs: runs[..k].to_vec(),
                outs: whole.outs.iter().copied().filter(|o| o.1 <= cut).collect(),
                entries: entries.iter().copied().filter(|e| e.1 <= cut).collect(),
                exits: exits.iter().copied().filter(|e| e.1 <= cut).collect(),
                wakeups: whole.wakeups.iter().copied().filter(|w| w.1 <= cut).collect(),
                span: (0, cut),
                ..whole.clone()
            };
            let carried_entry = entries.iter().copied().rfind(|e| e.1 < cut);
            let carried_exit = exits.iter().copied().rfind(|e| e.1 < cut);
            let later = Rows {
                runs: runs[k..].to_vec(),
                outs: whole.outs.iter().copied().filter(|o| o.1 >= cut).collect(),
                entries: carried_entry.into_iter().chain(entries.iter().copied().filter(|e| e.1 >= cut)).collect(),
                exits: carried_exit.into_iter().chain(exits.iter().copied().filter(|e| e.1 >= cut)).collect(),
                wakeups: whole.wakeups.iter().copied().filter(|w| w.1 >= cut).collect(),
                span: (cut, 200),
                later_window: true,
                marked,
                ..whole.clone()
            };
            let mut glued = build(&first).unwrap();
            glued.extend(build(&later).unwrap());
            prop_assert_eq!(glued, build(&whole).unwrap());
        }

        /// Against a brute force: each thread's segments tile the span in
        /// order, and each instant is in the state the rules give it.
        #[test]
        fn each_instant_is_in_the_state_the_rules_give(
            lens in proptest::collection::vec((0i64..3, 1i64..12, 0i64..4), 0..12),
            outs in proptest::collection::vec((0i64..3, 0i64..190, 0i64..3), 0..12),
            marks in proptest::collection::vec((0i64..3, 0i64..190, any::<bool>(), prop_oneof![Just(HALT), Just(1i64)]), 0..25),
            wakeups in proptest::collection::vec((0i64..3, 0i64..190), 0..10),
        ) {
            let mut lens = lens;
            lens.sort_by_key(|x| x.0);
            let (mut tid, mut t, mut runs) = (-1, 0i64, Vec::new());
            for (k, len, gap) in lens {
                if k != tid { tid = k; t = 0; }
                // a gap of 0: the thread ran again at once (on another CPU)
                t += gap;
                runs.push((k, t, t + len, (k % 2) as i32));
                t += len;
            }
            let mut marks = marks;
            marks.sort_by_key(|m| m.1);
            let rows = Rows {
                threads: vec![(0, 0), (1, 1), (2, 2)],
                runs,
                outs,
                entries: marks.iter().filter(|m| !m.2).map(|m| (m.0, m.1)).collect(),
                exits: marks.iter().filter(|m| m.2).map(|m| (m.0, m.1, m.3)).collect(),
                wakeups,
                // past the longest the runs can reach (12 of at most 15 ns
                // each, gaps included): a capture's slices end in its span
                span: (0, 200),
                later_window: false,
                marked: false,
            };
            let got = build(&rows).unwrap();
            for tid in 0..3i64 {
                let mine: Vec<_> = got.iter().filter(|g| g.1 == tid).collect();
                prop_assert!(mine.iter().all(|g| g.0 == tid as u32));
                prop_assert_eq!(mine.first().unwrap().3, 0);
                prop_assert_eq!(mine.last().unwrap().4, 200);
                for w in mine.windows(2) { prop_assert_eq!(w[0].4, w[1].3); }
                for g in mine {
                    prop_assert!(g.3 < g.4);
                    for x in g.3..g.4 {
                        prop_assert_eq!((g.2, g.5), brute(&rows, tid, x), "thread {} at {}: {:?}", tid, x, g);
                    }
                }
            }
        }
    }
}
