//! Recorded demand as replay phases: one vCPU's state timeline (from the
//! model's `vcpu_states`) and its throughput marks turned into the phases
//! the engine replays. `cratrace.replay.workload` says what each state
//! becomes and why; this is that rule, run once per vCPU over its
//! segments (a Python loop per phase was most of a replay command's time).
//!
//! Phases come out as [`PhaseRow`]s, the binding's columns (kind, a, b),
//! because Python keeps them beside the host threads' phases it builds.

/// A segment's state, as far as demand is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentState {
    /// Running guest code.
    Guest,
    /// Running in the hypervisor or host on the vCPU's behalf.
    Vmm,
    /// Running, but spinning on a lock: not demand.
    Spinning,
    /// Off CPU, waiting for I/O or a timer.
    Blocked,
    /// Off CPU after a halt.
    Halted,
    /// Unknown (lost events): kept as a block.
    Lost,
    /// Anything else (preempted: the replayed scheduler recreates it).
    Other,
    /// Waiting at a gang barrier (from the guest's `barrier_wait` to its
    /// `barrier_done` marker, whatever the vCPU did meanwhile): not
    /// demand, the replay's barrier recreates it. `spin`: the wait stayed
    /// on the CPU (busy-waiting), else it slept.
    Barrier {
        /// Busy-waited.
        spin: bool,
    },
}

impl SegmentState {
    /// On a CPU (the states a run is made of).
    fn running(self) -> bool {
        matches!(
            self,
            Self::Guest | Self::Vmm | Self::Spinning | Self::Barrier { spin: true }
        )
    }
}

/// `segs` (in time order) with each barrier wait `(arrival, release)`
/// (sorted, not overlapping) in place of what the vCPU did during it: the
/// segments are cut at the waits' edges and the parts inside one become
/// a single `Barrier` segment, a spinning one unless a part was blocked or
/// halted. A wait past the last segment (a capture cut while the vCPU
/// waited) is kept: the vCPU arrived.
pub fn with_barriers(segs: &[Segment], waits: &[(i64, i64)]) -> Vec<Segment> {
    if waits.is_empty() {
        return segs.to_vec();
    }
    let mut out = Vec::with_capacity(segs.len() + waits.len());
    // the wait being passed: whether a part of it slept, its last CPU
    let (mut w, mut slept, mut cpu) = (0usize, false, None);
    let close = |out: &mut Vec<Segment>, (a, b): (i64, i64), slept: bool, cpu| {
        out.push(Segment {
            start: a,
            end: b.max(a),
            state: SegmentState::Barrier { spin: !slept },
            in_spin: false,
            cpu,
            speed: 1.0,
        });
    };
    for s in segs {
        let mut start = s.start;
        while start < s.end {
            while w < waits.len() && waits[w].1 <= start && waits[w].0 <= start {
                close(&mut out, waits[w], slept, cpu);
                (w, slept) = (w + 1, false);
            }
            match waits.get(w) {
                Some(&(a, b)) if a <= start => {
                    let end = s.end.min(b);
                    slept |= matches!(s.state, SegmentState::Blocked | SegmentState::Halted);
                    start = end;
                }
                next => {
                    let end = next.map_or(s.end, |&(a, _)| s.end.min(a));
                    out.push(Segment { start, end, ..*s });
                    if s.state.running() {
                        cpu = s.cpu.or(cpu);
                    }
                    start = end;
                }
            }
        }
    }
    for &wait in &waits[w..] {
        close(&mut out, wait, slept, cpu);
        slept = false;
    }
    out
}

/// One segment of a vCPU's timeline.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Segment {
    /// Start (ns).
    pub start: i64,
    /// End (ns).
    pub end: i64,
    /// Its state.
    pub state: SegmentState,
    /// It began inside one of the vCPU's spin episodes: an off-CPU segment
    /// there is a paravirtual lock's halt, a lock wait, not a block.
    pub in_spin: bool,
    /// The CPU it was on, when known.
    pub cpu: Option<i64>,
    /// That CPU's speed then (`model::Host::cpu_speed`): its work counts
    /// as its ns times this (1: as long as it took).
    pub speed: f64,
}

/// `ns` of work at `speed`, in work units.
fn at_speed(ns: i64, speed: f64) -> i64 {
    if speed == 1.0 {
        ns
    } else {
        (ns as f64 * speed).round() as i64
    }
}

/// Phase kind codes, as in the binding's `phase_kind` column.
pub mod kind {
    /// Work of `a` ns; `b` is the recorded CPU + 1 (0: unknown).
    pub const WORK: u8 = 0;
    /// Off CPU for `a` ns.
    pub const BLOCK: u8 = 1;
    /// Take the VM's lock.
    pub const ACQUIRE: u8 = 2;
    /// Release it.
    pub const RELEASE: u8 = 3;
    /// A throughput mark.
    pub const MARK: u8 = 4;
    /// A gang barrier; `b` is 1 when the waiter spins, 0 when it sleeps
    /// (5 is the engine's wait-for, which no recorded demand makes).
    pub const BARRIER: u8 = 6;
}

/// One phase as a column row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhaseRow {
    /// A [`kind`] code.
    pub kind: u8,
    /// Its first operand.
    pub a: i64,
    /// Its second operand.
    pub b: i64,
}

/// What the engine charges at each dispatch, which recorded runs already
/// paid once: taken off their first work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwitchCosts {
    /// A context switch (ns).
    pub switch_ns: i64,
    /// A move to another CPU (ns).
    pub migration_ns: i64,
}

impl SwitchCosts {
    /// What a recorded run paid to get on `cpu`: the switch, and the move
    /// when it left another CPU.
    fn paid(self, prev: Option<i64>, cpu: Option<i64>) -> i64 {
        let moved = matches!((prev, cpu), (Some(p), Some(c)) if p != c);
        self.switch_ns + if moved { self.migration_ns } else { 0 }
    }
}

/// The segments left once the leading off-CPU ones are dropped (a vCPU
/// that starts blocked or halted starts when that ends), and that start:
/// None when nothing was dropped.
pub fn trim_leading_blocks(segs: &[Segment]) -> (&[Segment], Option<i64>) {
    let n = segs
        .iter()
        .take_while(|s| matches!(s.state, SegmentState::Blocked | SegmentState::Halted))
        .count();
    (&segs[n..], n.checked_sub(1).map(|i| segs[i].end))
}

/// Append the phases of one vCPU's timeline `segs` (in time order) and its
/// marks (sorted times) to `out`. When `critical_ns` > 0, the last that
/// many ns of work before each mark run under the VM's lock.
pub fn vcpu_phases(
    segs: &[Segment],
    marks: &[i64],
    critical_ns: i64,
    costs: SwitchCosts,
    out: &mut Vec<PhaseRow>,
) {
    let mut p = Pending {
        work: Vec::new(),
        tail: Vec::new(),
        critical_ns,
        out,
    };
    let mut mi = 0;
    let (mut on_cpu, mut last_cpu, mut owed) = (false, None, 0i64);
    for s in segs {
        if s.state.running() && !on_cpu {
            // a new run: its first work paid what the replay charges again
            owed = costs.paid(last_cpu, s.cpu);
            last_cpu = s.cpu.or(last_cpu);
        }
        on_cpu = s.state.running();
        match s.state {
            // paid while spinning, which is not demand; nor are the exits
            // a spin takes (PAUSE-loop exits, interrupts while it waits):
            // the spin response recreates the wait, exits and all
            SegmentState::Spinning => owed = 0,
            SegmentState::Vmm if s.in_spin => owed = 0,
            SegmentState::Guest | SegmentState::Vmm => {
                let pay = owed.min(s.end - s.start);
                owed -= pay;
                let mut pos = s.start + pay;
                while mi < marks.len() && marks[mi] <= s.end {
                    // a mark stamped while the thread was off CPU
                    // (preempted between its work and the write) lands at
                    // the next run
                    let at = marks[mi].max(pos);
                    p.work.push((at_speed(at - pos, s.speed), s.cpu));
                    pos = at;
                    p.mark();
                    mi += 1;
                }
                p.work.push((at_speed(s.end - pos, s.speed), s.cpu));
            }
            SegmentState::Barrier { spin } => {
                owed = 0;
                while mi < marks.len() && marks[mi] <= s.start {
                    p.mark();
                    mi += 1;
                }
                p.flush();
                p.out.push(PhaseRow {
                    kind: kind::BARRIER,
                    a: 0,
                    b: spin as i64,
                });
            }
            SegmentState::Blocked | SegmentState::Halted | SegmentState::Lost if !s.in_spin => {
                while mi < marks.len() && marks[mi] <= s.start {
                    p.mark();
                    mi += 1;
                }
                p.flush();
                p.out.push(PhaseRow {
                    kind: kind::BLOCK,
                    a: s.end - s.start,
                    b: 0,
                });
            }
            // preempted time, and lock waits, are not demand
            _ => {}
        }
    }
    for _ in mi..marks.len() {
        p.mark();
    }
    p.flush();
}

/// One stretch of a host thread on a CPU (from the model's `cpu_slices`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slice {
    /// Start (ns).
    pub start: i64,
    /// End (ns).
    pub end: i64,
    /// The CPU.
    pub cpu: i64,
    /// The CPU's speed then, as `Segment::speed`.
    pub speed: f64,
}

/// Append the phases of a host thread (not a vCPU) that ran in `slices`
/// (in time order): a block for each gap between two of them, and work
/// for each, net of the switch (and move) the replay charges again; a
/// slice no longer than that is work of 0 ns (kept: it is a dispatch).
pub fn host_phases(slices: &[Slice], costs: SwitchCosts, out: &mut Vec<PhaseRow>) {
    let mut prev: Option<&Slice> = None;
    for s in slices {
        if let Some(p) = prev.filter(|p| s.start > p.end) {
            out.push(PhaseRow {
                kind: kind::BLOCK,
                a: s.start - p.end,
                b: 0,
            });
        }
        let paid = costs.paid(prev.map(|p| p.cpu), Some(s.cpu));
        out.push(PhaseRow {
            kind: kind::WORK,
            a: at_speed((s.end - s.start - paid).max(0), s.speed),
            b: s.cpu + 1,
        });
        prev = Some(s);
    }
}

/// Work since the last boundary, not yet written: the lock's critical
/// section is cut from its end when a mark comes.
struct Pending<'a> {
    work: Vec<(i64, Option<i64>)>,
    tail: Vec<(i64, Option<i64>)>,
    critical_ns: i64,
    out: &'a mut Vec<PhaseRow>,
}

impl Pending<'_> {
    fn push_work(out: &mut Vec<PhaseRow>, a: i64, cpu: Option<i64>) {
        if a > 0 {
            out.push(PhaseRow {
                kind: kind::WORK,
                a,
                b: cpu.map_or(0, |c| c + 1),
            });
        }
    }

    fn flush(&mut self) {
        for &(a, cpu) in &self.work {
            Self::push_work(self.out, a, cpu);
        }
        self.work.clear();
    }

    fn mark(&mut self) {
        if self.critical_ns > 0 {
            // the last `critical_ns` of work ran under the lock
            let mut need = self.critical_ns;
            self.tail.clear();
            while need > 0 {
                let Some((a, cpu)) = self.work.pop() else {
                    break;
                };
                let take = a.min(need);
                self.tail.push((take, cpu));
                if a > take {
                    self.work.push((a - take, cpu));
                    break;
                }
                need -= take;
            }
            self.flush();
            let lock = |kind| PhaseRow { kind, a: 0, b: 0 };
            self.out.push(lock(kind::ACQUIRE));
            // taken from the end: written in time order
            for &(a, cpu) in self.tail.iter().rev() {
                Self::push_work(self.out, a, cpu);
            }
            self.out.push(lock(kind::RELEASE));
        } else {
            self.flush();
        }
        self.out.push(PhaseRow {
            kind: kind::MARK,
            a: 0,
            b: 0,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use SegmentState::*;

    fn seg(start: i64, end: i64, state: SegmentState, cpu: Option<i64>) -> Segment {
        Segment {
            start,
            end,
            state,
            in_spin: false,
            cpu,
            speed: 1.0,
        }
    }

    fn phases(
        segs: &[Segment],
        marks: &[i64],
        crit: i64,
        costs: SwitchCosts,
    ) -> Vec<(u8, i64, i64)> {
        let mut out = Vec::new();
        vcpu_phases(segs, marks, crit, costs, &mut out);
        out.into_iter().map(|p| (p.kind, p.a, p.b)).collect()
    }

    #[test]
    fn a_barrier_wait_replaces_what_the_vcpu_did_while_it_waited() {
        // work 0-100, a spin wait 100-160 (guest, then spinning), work to
        // 200, a wait 200-300 that slept (halted) in part, work to 350,
        // and a wait from 340 the capture cut (past its last segment)
        let segs = [
            seg(0, 120, Guest, Some(0)),
            seg(120, 160, Spinning, Some(0)),
            seg(160, 220, Guest, Some(0)),
            seg(220, 280, Halted, None),
            seg(280, 350, Guest, Some(1)),
        ];
        let waits = [(100, 160), (200, 300), (340, 400)];
        let cut = with_barriers(&segs, &waits);
        let spans: Vec<_> = cut.iter().map(|s| (s.start, s.end, s.state)).collect();
        assert_eq!(
            spans,
            vec![
                (0, 100, Guest),
                (100, 160, Barrier { spin: true }),
                (160, 200, Guest),
                (200, 300, Barrier { spin: false }),
                (300, 340, Guest),
                (340, 400, Barrier { spin: true }),
            ]
        );
        assert_eq!(
            phases(&cut, &[], 0, SwitchCosts::default()),
            vec![
                (0, 100, 1),
                (6, 0, 1),
                (0, 40, 1),
                (6, 0, 0),
                (0, 40, 2),
                (6, 0, 1)
            ]
        );
    }

    #[test]
    fn work_and_blocks_in_order_with_their_cpus() {
        let segs = [
            seg(0, 100, Guest, Some(2)),
            seg(100, 150, Other, None),
            seg(150, 170, Vmm, Some(3)),
            seg(170, 400, Blocked, None),
            seg(400, 410, Guest, None),
        ];
        assert_eq!(
            phases(&segs, &[], 0, SwitchCosts::default()),
            vec![(0, 100, 3), (0, 20, 4), (1, 230, 0), (0, 10, 0)]
        );
    }

    #[test]
    fn work_on_a_slow_cpu_counts_as_less_but_blocks_stay_as_long() {
        // 100 ns at speed 0.5 is 50 units; a mark 40 ns into it cuts 20
        // units off; the block stays 230 ns; the switch paid comes off the
        // ns before they are scaled; a host slice at speed 2 doubles
        let slow = |a, b, st| Segment {
            speed: 0.5,
            ..seg(a, b, st, Some(1))
        };
        let segs = [slow(0, 100, Guest), slow(100, 330, Blocked)];
        assert_eq!(
            phases(&segs, &[40], 0, SwitchCosts::default()),
            vec![(0, 20, 2), (4, 0, 0), (0, 30, 2), (1, 230, 0)]
        );
        let costs = SwitchCosts {
            switch_ns: 10,
            migration_ns: 0,
        };
        assert_eq!(phases(&segs[..1], &[], 0, costs), vec![(0, 45, 2)]);
        let mut out = Vec::new();
        let fast = Slice {
            start: 0,
            end: 100,
            cpu: 0,
            speed: 2.0,
        };
        host_phases(&[fast], costs, &mut out);
        assert_eq!((out[0].kind, out[0].a), (kind::WORK, 180));
    }

    #[test]
    fn a_mark_cuts_work_and_takes_the_critical_tail_under_the_lock() {
        // 100 ns on CPU 0 then 50 on CPU 1, a mark at 140 and another
        // stamped while preempted (at 200), landing at the next run
        let segs = [
            seg(0, 100, Guest, Some(0)),
            seg(100, 150, Guest, Some(1)),
            seg(150, 300, Other, None),
            seg(300, 330, Guest, Some(1)),
        ];
        let got = phases(&segs, &[140, 200], 60, SwitchCosts::default());
        assert_eq!(
            got,
            vec![
                (0, 80, 1),
                (2, 0, 0),
                (0, 20, 1),
                (0, 40, 2),
                (3, 0, 0),
                (4, 0, 0),
                // 10 ns after the first mark, then the run from 300 (the
                // mark lands at its start, with no work): the lock holds
                // the 10 ns
                (2, 0, 0),
                (0, 10, 2),
                (3, 0, 0),
                (4, 0, 0),
                (0, 30, 2),
            ]
        );
    }

    #[test]
    fn a_run_pays_the_switch_and_the_move_once() {
        let c = SwitchCosts {
            switch_ns: 5,
            migration_ns: 7,
        };
        let segs = [
            seg(0, 100, Guest, Some(0)),
            seg(100, 120, Vmm, Some(0)),
            seg(120, 200, Blocked, None),
            seg(200, 203, Guest, Some(1)),
            seg(203, 300, Guest, Some(1)),
        ];
        // first run: a switch (no earlier CPU); second: switch + move (12),
        // 3 ns from its first segment, 9 from the next
        assert_eq!(
            phases(&segs, &[], 0, c),
            vec![(0, 95, 1), (0, 20, 1), (1, 80, 0), (0, 88, 2)]
        );
    }

    #[test]
    fn spinning_and_halts_inside_a_spin_are_not_demand() {
        let mut halt = seg(50, 80, Halted, None);
        halt.in_spin = true;
        let segs = [
            seg(0, 20, Guest, Some(0)),
            seg(20, 50, Spinning, Some(0)),
            halt,
            seg(80, 85, Spinning, Some(0)),
            seg(85, 95, Guest, Some(0)),
        ];
        let c = SwitchCosts {
            switch_ns: 4,
            migration_ns: 0,
        };
        // the second run began spinning: its switch was paid then
        assert_eq!(phases(&segs, &[], 0, c), vec![(0, 16, 1), (0, 10, 1)]);
    }

    #[test]
    fn the_exits_a_spin_takes_are_not_demand() {
        // a spin with PAUSE-loop exits (vmm) between its stretches; an exit
        // outside the spin is the thread's work
        let mut exit = seg(30, 31, Vmm, Some(0));
        exit.in_spin = true;
        let segs = [
            seg(0, 20, Guest, Some(0)),
            seg(20, 30, Spinning, Some(0)),
            exit,
            seg(31, 40, Spinning, Some(0)),
            seg(40, 50, Guest, Some(0)),
            seg(50, 51, Vmm, Some(0)),
        ];
        assert_eq!(
            phases(&segs, &[], 0, SwitchCosts::default()),
            vec![(0, 20, 1), (0, 10, 1), (0, 1, 1)]
        );
    }

    #[test]
    fn marks_after_the_last_segment_still_count() {
        let segs = [
            seg(0, 10, Guest, None),
            seg(10, 12, Other, None),
            seg(12, 20, Blocked, None),
        ];
        let got = phases(&segs, &[11, 30], 0, SwitchCosts::default());
        // the mark stamped while preempted is written before the block
        assert_eq!(got, vec![(0, 10, 0), (4, 0, 0), (1, 8, 0), (4, 0, 0)]);
    }

    #[test]
    fn a_host_thread_works_its_slices_and_blocks_between_them() {
        let c = SwitchCosts {
            switch_ns: 3,
            migration_ns: 10,
        };
        let sl = |start, end, cpu| Slice {
            start,
            end,
            cpu,
            speed: 1.0,
        };
        let mut out = Vec::new();
        // back to back on CPU 1, a gap, then CPU 0 (a move), then a slice
        // shorter than the switch
        host_phases(
            &[
                sl(0, 50, 1),
                sl(50, 60, 1),
                sl(100, 200, 0),
                sl(300, 302, 0),
            ],
            c,
            &mut out,
        );
        let got: Vec<_> = out.into_iter().map(|p| (p.kind, p.a, p.b)).collect();
        assert_eq!(
            got,
            vec![
                (0, 47, 2),
                (0, 7, 2),
                (1, 40, 0),
                (0, 87, 1),
                (1, 100, 0),
                (0, 0, 1)
            ]
        );
    }

    #[test]
    fn leading_blocks_are_trimmed() {
        let segs = [
            seg(0, 5, Blocked, None),
            seg(5, 9, Halted, None),
            seg(9, 12, Guest, None),
        ];
        let (rest, start) = trim_leading_blocks(&segs);
        assert_eq!((rest.len(), start), (1, Some(9)));
        assert_eq!(trim_leading_blocks(&segs[2..]).1, None);
    }
}
