//! The postcopy event loop: guest tasks on vCPUs, pages on a link.
//!
//! Events are ordered by (time, seq) with a monotonic seq, so equal-time
//! events run in the order they were scheduled and a run is a pure
//! function of its inputs and seed.

use super::network::Link;
use super::params::PostcopyParams;
use crate::rng::SplitMix64;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Which pages a task touches, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Touches {
    /// `count` consecutive pages from `first` (a sequential read).
    Sequential {
        /// First page index.
        first: u64,
        /// Number of pages.
        count: u64,
    },
    /// An explicit list (e.g. from a capture's fault records).
    List(Vec<u64>),
}

impl Touches {
    fn len(&self) -> u64 {
        match self {
            Touches::Sequential { count, .. } => *count,
            Touches::List(v) => v.len() as u64,
        }
    }
    fn get(&self, i: u64) -> u64 {
        match self {
            Touches::Sequential { first, .. } => first + i,
            Touches::List(v) => v[i as usize],
        }
    }
}

/// One guest task (a process or thread of the migrated VM).
#[derive(Clone, Debug, PartialEq)]
pub struct TaskSpec {
    /// vCPU the task runs on.
    pub vcpu: usize,
    /// Pages it touches.
    pub touches: Touches,
    /// Guest CPU time between touches, ns.
    pub compute_ns: i64,
}

/// What a postcopy run measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PostcopyOutcome {
    /// Completion time of each task since the switch, ns.
    pub task_done_ns: Vec<i64>,
    /// Fraction of each vCPU's elapsed time spent in guest mode.
    pub vcpu_guest_fraction: Vec<f64>,
    /// Touches of pages already present.
    pub present_touches: u64,
    /// Faults that stalled the vCPU (no async PF).
    pub sync_faults: u64,
    /// Async faults: page-not-present injected.
    pub apf_not_present: u64,
    /// Async faults: page-ready delivered.
    pub apf_ready: u64,
    /// Faults that blocked despite async PF: kernel mode.
    pub blocked_kernel: u64,
    /// ... on a page already awaited by this vCPU (double fault).
    pub blocked_double: u64,
    /// ... because the vCPU had too many async faults outstanding.
    pub blocked_limit: u64,
    /// Times a vCPU halted with no runnable task.
    pub halts: u64,
    /// When every page was present (None if some never arrived).
    pub migration_done_ns: Option<i64>,
    /// Bytes fetched on demand.
    pub demand_bytes: u64,
    /// Bytes fetched in the background stream.
    pub background_bytes: u64,
    /// Events processed.
    pub events: u64,
}

/// Why a scenario cannot run.
#[derive(Clone, Debug, PartialEq)]
pub enum PostcopyError {
    /// A task touches a page past the VM's memory.
    PageOutOfRange {
        /// Task index.
        task: usize,
        /// The page.
        page: u64,
        /// Pages in the VM.
        vm_pages: u64,
    },
    /// A task names a vCPU the VM does not have.
    NoSuchVcpu {
        /// Task index.
        task: usize,
        /// The vCPU.
        vcpu: usize,
    },
}

impl std::fmt::Display for PostcopyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PostcopyError::PageOutOfRange {
                task,
                page,
                vm_pages,
            } => {
                write!(
                    f,
                    "postcopy: task {task} touches page {page}, VM has {vm_pages} pages"
                )
            }
            PostcopyError::NoSuchVcpu { task, vcpu } => write!(
                f,
                "postcopy: task {task} runs on vcpu {vcpu}, which does not exist"
            ),
        }
    }
}
impl std::error::Error for PostcopyError {}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// The vCPU finished what it was doing; run/choose its next step.
    VcpuStep(usize),
    /// A page arrived (bool: background stream).
    Arrive(u64, bool),
    /// A page-ready notification reached the task's vCPU.
    TaskReady(usize),
    /// The background stream starts.
    BackgroundStart,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum PageState {
    Absent,
    Inflight,
    Present,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum VcpuState {
    /// Running `task`.
    Running(usize),
    /// Between tasks (parking one, or waking from halt); picks on its next step.
    Switching,
    Stalled(usize),
    Halted,
    Finished,
}

struct World<'a> {
    p: &'a PostcopyParams,
    tasks: &'a [TaskSpec],
    next_touch: Vec<u64>,
    pages: Vec<PageState>,
    /// Tasks parked in async-PF wait, per page (sparse: only awaited pages).
    apf_waiters: std::collections::BTreeMap<u64, Vec<usize>>,
    stalled_on: std::collections::BTreeMap<u64, Vec<usize>>,
    vcpus: Vec<VcpuState>,
    runq: Vec<VecDeque<usize>>,
    outstanding_apf: Vec<usize>,
    parked: Vec<usize>,
    guest_ns: Vec<i64>,
    picked_at: Vec<i64>,
    end_ns: Vec<i64>,
    heap: BinaryHeap<Reverse<(i64, u64, Ev)>>,
    seq: u64,
    rng: SplitMix64,
    link: Link,
    absent_left: u64,
    bg_cursor: u64,
    out: PostcopyOutcome,
}

impl World<'_> {
    fn at(&mut self, t: i64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq, ev)));
    }

    /// A separate stream, so adding events never shifts draws.
    fn draw(&mut self) -> f64 {
        self.rng.next_f64()
    }

    fn request(&mut self, now: i64, page: u64) {
        if self.pages[page as usize] == PageState::Absent {
            self.pages[page as usize] = PageState::Inflight;
            if let Some(arrival) = self.link.demand(now, page) {
                self.at(arrival, Ev::Arrive(page, false));
            }
        }
    }

    fn pick_next(&mut self, v: usize, now: i64) {
        if let Some(t) = self.runq[v].pop_front() {
            self.vcpus[v] = VcpuState::Running(t);
            self.picked_at[v] = now;
            self.at(now, Ev::VcpuStep(v));
        } else if self.parked[v] > 0 {
            self.vcpus[v] = VcpuState::Halted;
            self.out.halts += 1;
        } else {
            self.vcpus[v] = VcpuState::Finished;
            self.end_ns[v] = now;
        }
    }

    fn step(&mut self, v: usize, now: i64) {
        let VcpuState::Running(t) = self.vcpus[v] else {
            return;
        };
        let spec = &self.tasks[t];
        let i = self.next_touch[t];
        if i >= spec.touches.len() {
            self.out.task_done_ns[t] = now;
            self.pick_next(v, now);
            return;
        }
        if now - self.picked_at[v] >= self.p.guest_slice_ns && !self.runq[v].is_empty() {
            self.runq[v].push_back(t);
            self.guest_ns[v] += self.p.guest_switch_ns;
            self.vcpus[v] = VcpuState::Switching;
            self.at(now + self.p.guest_switch_ns, Ev::VcpuStep(v));
            return;
        }
        let page = spec.touches.get(i);
        let compute = spec.compute_ns;
        if self.pages[page as usize] == PageState::Present {
            self.out.present_touches += 1;
            self.next_touch[t] += 1;
            self.guest_ns[v] += compute;
            self.at(now + compute, Ev::VcpuStep(v));
            return;
        }
        let kernel =
            self.p.kernel_fault_fraction > 0.0 && self.draw() < self.p.kernel_fault_fraction;
        let double = self
            .apf_waiters
            .get(&page)
            .is_some_and(|w| w.iter().any(|&o| self.tasks[o].vcpu == v));
        self.request(now, page);
        let eligible =
            self.p.async_pf && !kernel && !double && self.outstanding_apf[v] < self.p.apf_per_vcpu;
        if !eligible {
            if self.p.async_pf {
                if kernel {
                    self.out.blocked_kernel += 1;
                } else if double {
                    self.out.blocked_double += 1;
                } else {
                    self.out.blocked_limit += 1;
                }
            } else {
                self.out.sync_faults += 1;
            }
            self.vcpus[v] = VcpuState::Stalled(t);
            self.stalled_on.entry(page).or_default().push(v);
            return;
        }
        // Park the task, inject not-present, switch to another task.
        self.out.apf_not_present += 1;
        self.outstanding_apf[v] += 1;
        self.parked[v] += 1;
        self.apf_waiters.entry(page).or_default().push(t);
        self.guest_ns[v] += self.p.guest_switch_ns;
        let resume = now + self.p.exit_entry_ns + self.p.not_present_ns + self.p.guest_switch_ns;
        // The choice happens when the switch completes, so a task made
        // ready meanwhile can be picked.
        self.vcpus[v] = VcpuState::Switching;
        self.at(resume, Ev::VcpuStep(v));
    }

    fn arrive(&mut self, page: u64, background: bool, now: i64) {
        if !background {
            if let Some((next, arrival)) = self.link.demand_done(now) {
                self.at(arrival, Ev::Arrive(next, false));
            }
        }
        if self.pages[page as usize] != PageState::Present {
            self.pages[page as usize] = PageState::Present;
            self.absent_left -= 1;
            if self.absent_left == 0 {
                self.out.migration_done_ns = Some(now);
            }
        }
        if background {
            self.background_next(now);
        }
        for v in self.stalled_on.remove(&page).unwrap_or_default() {
            if let VcpuState::Stalled(t) = self.vcpus[v] {
                self.vcpus[v] = VcpuState::Running(t);
                self.at(now + self.p.exit_entry_ns, Ev::VcpuStep(v));
            }
        }
        for t in self.apf_waiters.remove(&page).unwrap_or_default() {
            let v = self.tasks[t].vcpu;
            // Case B (halted): KVM unblocks the vCPU at once; case A waits
            // for the delivery delay.
            let delay = if self.vcpus[v] == VcpuState::Halted {
                0
            } else {
                self.p.ready_delay.ns()
            };
            self.at(now + delay, Ev::TaskReady(t));
        }
    }

    fn task_ready(&mut self, t: usize, now: i64) {
        let v = self.tasks[t].vcpu;
        self.out.apf_ready += 1;
        self.outstanding_apf[v] -= 1;
        self.parked[v] -= 1;
        self.guest_ns[v] += self.p.guest_wake_ns;
        self.runq[v].push_back(t);
        if self.vcpus[v] == VcpuState::Halted {
            self.vcpus[v] = VcpuState::Switching;
            self.at(now + self.p.guest_wake_ns, Ev::VcpuStep(v));
        }
    }

    fn background_next(&mut self, now: i64) {
        while self.bg_cursor < self.pages.len() as u64 {
            let page = self.bg_cursor;
            self.bg_cursor += 1;
            if self.pages[page as usize] == PageState::Absent {
                self.pages[page as usize] = PageState::Inflight;
                let arrival = self.link.background(now);
                self.at(arrival, Ev::Arrive(page, true));
                return;
            }
        }
    }
}

/// Run the scenario: `vm_pages` pages, `vcpus` vCPUs, the tasks, and the
/// pages already present at the switch (the precopy remainder's complement).
pub fn simulate(
    p: &PostcopyParams,
    vm_pages: u64,
    vcpus: usize,
    tasks: &[TaskSpec],
    present_at_switch: &[u64],
) -> Result<PostcopyOutcome, PostcopyError> {
    for (i, task) in tasks.iter().enumerate() {
        if task.vcpu >= vcpus {
            return Err(PostcopyError::NoSuchVcpu {
                task: i,
                vcpu: task.vcpu,
            });
        }
        let max = match &task.touches {
            Touches::Sequential { first, count } => (*count > 0).then(|| first + count - 1),
            Touches::List(v) => v.iter().copied().max(),
        };
        if let Some(m) = max.filter(|&m| m >= vm_pages) {
            return Err(PostcopyError::PageOutOfRange {
                task: i,
                page: m,
                vm_pages,
            });
        }
    }
    let mut pages = vec![PageState::Absent; vm_pages as usize];
    let mut absent_left = vm_pages;
    for &pg in present_at_switch {
        if let Some(s) = pages.get_mut(pg as usize) {
            if *s == PageState::Absent {
                *s = PageState::Present;
                absent_left -= 1;
            }
        }
    }
    let mut w = World {
        p,
        tasks,
        next_touch: vec![0; tasks.len()],
        pages,
        apf_waiters: Default::default(),
        stalled_on: Default::default(),
        vcpus: vec![VcpuState::Halted; vcpus],
        runq: vec![VecDeque::new(); vcpus],
        outstanding_apf: vec![0; vcpus],
        parked: vec![0; vcpus],
        guest_ns: vec![0; vcpus],
        picked_at: vec![0; vcpus],
        end_ns: vec![0; vcpus],
        heap: BinaryHeap::new(),
        seq: 0,
        rng: SplitMix64(p.seed),
        link: Link::new(p),
        absent_left,
        bg_cursor: 0,
        out: PostcopyOutcome {
            task_done_ns: vec![0; tasks.len()],
            ..Default::default()
        },
    };
    if absent_left == 0 {
        w.out.migration_done_ns = Some(0);
    }
    for (t, task) in tasks.iter().enumerate() {
        w.runq[task.vcpu].push_back(t);
    }
    for v in 0..vcpus {
        w.pick_next(v, 0);
    }
    if let Some(start) = p.background_start_ns {
        w.at(start.max(0), Ev::BackgroundStart);
    }
    while let Some(Reverse((now, _, ev))) = w.heap.pop() {
        w.out.events += 1;
        match ev {
            Ev::VcpuStep(v) => {
                if w.vcpus[v] == VcpuState::Switching {
                    w.pick_next(v, now);
                } else {
                    w.step(v, now);
                }
            }
            Ev::Arrive(page, bg) => w.arrive(page, bg, now),
            Ev::TaskReady(t) => w.task_ready(t, now),
            Ev::BackgroundStart => {
                for _ in 0..p.background_depth.max(1) {
                    w.background_next(now);
                }
            }
        }
    }
    w.out.demand_bytes = w.link.demand_bytes;
    w.out.background_bytes = w.link.background_bytes;
    w.out.vcpu_guest_fraction = (0..vcpus)
        .map(|v| {
            if w.end_ns[v] > 0 {
                w.guest_ns[v] as f64 / w.end_ns[v] as f64
            } else {
                0.0
            }
        })
        .collect();
    Ok(w.out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(vcpu: usize, first: u64, count: u64, compute_ns: i64) -> TaskSpec {
        TaskSpec {
            vcpu,
            touches: Touches::Sequential { first, count },
            compute_ns,
        }
    }

    #[test]
    fn one_task_without_async_pf_pays_a_full_fetch_per_page() {
        let p = PostcopyParams {
            async_pf: false,
            ..Default::default()
        };
        let fetch = Link::new(&p).idle_fetch_ns();
        let out = simulate(&p, 100, 1, &[reader(0, 0, 10, 1_000)], &[]).unwrap();
        // each page: stall for the fetch, exit/entry, then compute
        assert_eq!(out.task_done_ns[0], 10 * (fetch + p.exit_entry_ns + 1_000));
        assert_eq!(out.sync_faults, 10);
        assert_eq!(out.present_touches, 10); // the retried touch after arrival
        assert_eq!(out.demand_bytes, 10 * 4096);
        assert_eq!(out.migration_done_ns, None); // 90 pages never fetched
    }

    #[test]
    fn async_pf_overlaps_fetches_of_several_tasks() {
        let tasks: Vec<_> = (0..4).map(|i| reader(0, i * 1000, 200, 10_000)).collect();
        let base = simulate(
            &PostcopyParams {
                async_pf: false,
                ..Default::default()
            },
            4000,
            1,
            &tasks,
            &[],
        )
        .unwrap();
        let apf = simulate(&PostcopyParams::default(), 4000, 1, &tasks, &[]).unwrap();
        let last = |o: &PostcopyOutcome| *o.task_done_ns.iter().max().unwrap();
        assert!(
            last(&apf) < last(&base),
            "apf {} base {}",
            last(&apf),
            last(&base)
        );
        assert!(apf.vcpu_guest_fraction[0] > base.vcpu_guest_fraction[0]);
        assert_eq!(apf.apf_not_present, 800);
        assert_eq!(apf.apf_ready, 800);
    }

    #[test]
    fn a_single_task_gains_nothing_but_halts_instead_of_stalling() {
        let t = [reader(0, 0, 50, 5_000)];
        let apf = simulate(&PostcopyParams::default(), 50, 1, &t, &[]).unwrap();
        assert_eq!(apf.halts, 50);
        let base = simulate(
            &PostcopyParams {
                async_pf: false,
                ..Default::default()
            },
            50,
            1,
            &t,
            &[],
        )
        .unwrap();
        assert!(apf.task_done_ns[0] >= base.task_done_ns[0]);
    }

    #[test]
    fn kernel_mode_faults_block_and_background_stream_completes_migration() {
        let p = PostcopyParams {
            kernel_fault_fraction: 1.0,
            background_start_ns: Some(0),
            ..Default::default()
        };
        let out = simulate(
            &p,
            64,
            1,
            &[reader(0, 0, 8, 1_000), reader(0, 8, 8, 1_000)],
            &[],
        )
        .unwrap();
        assert_eq!(out.apf_not_present, 0);
        assert!(out.blocked_kernel > 0);
        assert!(out.migration_done_ns.is_some());
        assert_eq!(out.demand_bytes + out.background_bytes, 64 * 4096);
    }

    #[test]
    fn precopied_pages_never_fault_and_bad_inputs_are_refused() {
        let present: Vec<u64> = (0..10).collect();
        let out = simulate(
            &PostcopyParams::default(),
            10,
            1,
            &[reader(0, 0, 10, 1)],
            &present,
        )
        .unwrap();
        assert_eq!(out.present_touches, 10);
        assert_eq!(out.migration_done_ns, Some(0));
        assert!(matches!(
            simulate(
                &PostcopyParams::default(),
                10,
                1,
                &[reader(0, 5, 10, 1)],
                &[]
            ),
            Err(PostcopyError::PageOutOfRange { page: 14, .. })
        ));
        assert!(matches!(
            simulate(
                &PostcopyParams::default(),
                10,
                1,
                &[reader(2, 0, 1, 1)],
                &[]
            ),
            Err(PostcopyError::NoSuchVcpu { .. })
        ));
    }

    #[test]
    fn same_inputs_same_outcome() {
        let p = PostcopyParams {
            kernel_fault_fraction: 0.3,
            seed: 7,
            ..Default::default()
        };
        let tasks: Vec<_> = (0..3).map(|i| reader(0, i * 100, 100, 3_000)).collect();
        assert_eq!(
            simulate(&p, 300, 1, &tasks, &[]).unwrap(),
            simulate(&p, 300, 1, &tasks, &[]).unwrap()
        );
    }
}
