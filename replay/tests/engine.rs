//! Known-answer tests of the replay engine.

use cratrace_replay::*;

/// Recorded CPUs of a thread's phases (None: not work, or unknown).
fn recorded(cpus: &[Option<u32>]) -> Vec<RecordedCpu> {
    cpus.iter().map(|&c| c.into()).collect()
}

fn vm_thread(vm: u32, vcpu: u32, phases: Vec<Phase>) -> ThreadSpec {
    ThreadSpec {
        tid: (100 + vm * 10 + vcpu) as i64,
        vm: Some(VmId(vm)),
        vcpu: Some(vcpu),
        phases,
        start_ns: 0,
        start_cpu: None,
        fine_accounting: false,
        work_cpu: Vec::new(),
        group: None,
        allowed_cpus: None,
        power_w: None,
    }
}

fn free_host(n: usize) -> Host {
    let mut h = Host::uniform(n, 2_000_000);
    h.costs = Costs {
        context_switch_ns: 0,
        hypercall_ns: 0,
        scan_per_partner_ns: 0,
        migration_ns: 0,
    };
    h
}

fn workload(threads: Vec<ThreadSpec>, vms: usize) -> Workload {
    Workload {
        threads,
        vms: (0..vms)
            .map(|i| VmSpec::new(format!("vm{i}"), 256))
            .collect(),
        groups: Vec::new(),
    }
}

/// One VM of one vCPU with these phases.
fn one_vcpu(phases: Vec<Phase>) -> Workload {
    workload(vec![vm_thread(0, 0, phases)], 1)
}

#[test]
fn single_thread_runs_its_work_and_blocks_open_loop() {
    let w = one_vcpu(vec![
        Phase::Work(1_000_000),
        Phase::Block(5_000_000),
        Phase::Work(1_000_000),
        Phase::Mark,
    ]);
    let out = replay(&w, &free_host(1), &Policy::parse("fair").unwrap(), i64::MAX);
    assert_eq!(out.cpu_ns[0], 2_000_000);
    assert_eq!(out.mark_ts, vec![7_000_000]);
}

#[test]
fn a_switch_costs_the_cpu_time_of_the_thread_switched_to() {
    // a trace puts the switch inside the incoming thread's slice, and so
    // does the replay: its work starts after the cost, its slice before
    let w = one_vcpu(vec![
        Phase::Work(1_000_000),
        Phase::Block(1_000_000),
        Phase::Work(1_000_000),
    ]);
    let mut h = free_host(1);
    h.costs.context_switch_ns = 2_000;
    let out = replay(&w, &h, &Policy::parse("fair").unwrap(), i64::MAX);
    assert_eq!(out.slice_start, vec![0, 2_002_000]);
    assert_eq!(out.slice_end, vec![1_002_000, 3_004_000]);
    assert_eq!(out.cpu_ns[0], 2_004_000);
}

#[test]
fn two_threads_share_one_cpu_fairly() {
    let w = workload(
        vec![
            vm_thread(0, 0, vec![Phase::Work(10_000_000)]),
            vm_thread(0, 1, vec![Phase::Work(10_000_000)]),
        ],
        1,
    );
    let out = replay(&w, &free_host(1), &Policy::parse("fair").unwrap(), i64::MAX);
    assert_eq!(out.cpu_ns, vec![10_000_000, 10_000_000]);
    assert_eq!(out.end_ns, 20_000_000);
    assert!(
        out.slice_cpu.len() > 2,
        "fair must interleave, got {} slices",
        out.slice_cpu.len()
    );
}

#[test]
fn half_frequency_doubles_cpu_bound_work() {
    let w = workload(
        vec![vm_thread(0, 0, vec![Phase::Work(1_000_000), Phase::Mark])],
        1,
    );
    let mut h = free_host(1);
    h.freq_khz = vec![1_000_000];
    let out = replay(&w, &h, &Policy::parse("fair").unwrap(), i64::MAX);
    assert_eq!(out.mark_ts, vec![2_000_000]);
}

#[test]
fn work_runs_at_each_cpus_recorded_speed_as_it_changes() {
    // 1 ms of work units: the first 1 ms at speed 0.5 does half, the rest
    // at speed 2 takes 0.25 ms
    let w = one_vcpu(vec![Phase::Work(1_000_000), Phase::Mark]);
    let mut h = free_host(1);
    h.cpu_speed = vec![vec![(0, 0.5), (1_000_000, 2.0)]];
    let out = replay(&w, &h, &Policy::parse("eevdf").unwrap(), i64::MAX);
    assert_eq!(out.mark_ts, vec![1_250_000]);
    // a change while the thread is off the CPU needs no re-timing: it
    // blocks through it and its later work runs at the new speed
    let w = one_vcpu(vec![
        Phase::Work(100_000),
        Phase::Block(1_000_000),
        Phase::Work(100_000),
        Phase::Mark,
    ]);
    let out = replay(&w, &h, &Policy::parse("eevdf").unwrap(), i64::MAX);
    assert_eq!(out.mark_ts, vec![200_000 + 1_000_000 + 50_000]);
}

fn contended() -> Workload {
    // vcpu0 holds the lock 5 ms; vcpu1 wants it after 1 ms
    workload(
        vec![
            vm_thread(
                0,
                0,
                vec![
                    Phase::Acquire(0),
                    Phase::Work(5_000_000),
                    Phase::Release(0),
                    Phase::Mark,
                ],
            ),
            vm_thread(
                0,
                1,
                vec![
                    Phase::Work(1_000_000),
                    Phase::Acquire(0),
                    Phase::Work(1_000_000),
                    Phase::Release(0),
                    Phase::Mark,
                ],
            ),
        ],
        1,
    )
}

#[test]
fn native_spin_burns_cpu_until_the_holder_releases() {
    let out = replay(
        &contended(),
        &free_host(2),
        &Policy::parse("spin").unwrap(),
        i64::MAX,
    );
    assert_eq!(out.spin_ns[1], 4_000_000);
    assert_eq!(out.mark_ts, vec![5_000_000, 6_000_000]);
    assert_eq!(out.ep_thread, vec![1]);
    assert_eq!(
        (out.ep_start[0], out.ep_end[0], out.ep_holder[0]),
        (1_000_000, 5_000_000, 0)
    );
}

#[test]
fn wapd_parks_the_spinner_until_its_ready_partner_runs() {
    // one pCPU: the holder is preempted at its slice end while the spinner
    // spins; WAPD parks the spinner until the holder has been dispatched
    let p = Policy::parse("fair+wapd").unwrap();
    let out = replay(&contended(), &free_host(1), &p, i64::MAX);
    let spin_policy = replay(
        &contended(),
        &free_host(1),
        &Policy::parse("spin").unwrap(),
        i64::MAX,
    );
    assert!(out.calls[1] >= 1);
    assert!(
        out.spin_ns[1] < spin_policy.spin_ns[1],
        "wapd {} vs spin {}",
        out.spin_ns[1],
        spin_policy.spin_ns[1]
    );
    assert_eq!(out.mark_ts.len(), 2);
}

#[test]
fn causal_wait_completes_when_the_waker_reaches_its_phase() {
    let w = workload(
        vec![
            vm_thread(0, 0, vec![Phase::Work(3_000_000), Phase::Mark]),
            vm_thread(
                0,
                1,
                vec![
                    Phase::WaitFor {
                        thread: ThreadId(0),
                        phase: 0,
                    },
                    Phase::Work(1_000_000),
                    Phase::Mark,
                ],
            ),
        ],
        1,
    );
    let out = replay(&w, &free_host(2), &Policy::parse("fair").unwrap(), i64::MAX);
    let mut marks: Vec<_> = out.mark_thread.iter().zip(&out.mark_ts).collect();
    marks.sort();
    assert_eq!(marks, vec![(&0, &3_000_000), (&1, &4_000_000)]);
}

#[test]
fn every_policy_is_deterministic_and_conserves_work() {
    let mut threads = Vec::new();
    for v in 0..3 {
        for c in 0..3 {
            let mut ph = Vec::new();
            for k in 0..50 {
                ph.extend([
                    Phase::Work(200_000 + 10_000 * ((v + c + k) % 7) as i64),
                    Phase::Acquire(0),
                    Phase::Work(80_000),
                    Phase::Release(0),
                    Phase::Mark,
                    Phase::Block(150_000),
                ]);
            }
            threads.push(vm_thread(v, c, ph));
        }
    }
    let w = workload(threads, 3);
    for name in [
        "fair+spin",
        "fair+yield",
        "fair+wapd",
        "fair+wopd",
        "fair+rslp",
        "fair+pv",
        "eevdf+spin",
        "eevdf+wapd",
        "eevdf+rslp",
        "eevdf+pv",
        "credit+spin",
        "credit+wapd",
        "credit+rslp",
        "credit+pv",
    ] {
        let p = Policy::parse(name).unwrap();
        let a = replay(&w, &Host::uniform(2, 2_000_000), &p, i64::MAX);
        let b = replay(&w, &Host::uniform(2, 2_000_000), &p, i64::MAX);
        assert_eq!(a, b, "{name} must be deterministic");
        assert_eq!(
            a.mark_ts.len(),
            9 * 50,
            "{name}: every transaction completes"
        );
        for t in 0..9 {
            let work: i64 = w.threads[t]
                .phases
                .iter()
                .map(|p| if let Phase::Work(n) = p { *n } else { 0 })
                .sum();
            assert!(
                a.cpu_ns[t] - a.spin_ns[t] >= work,
                "{name}: thread {t} did its work: cpu {} spin {} work {}",
                a.cpu_ns[t],
                a.spin_ns[t],
                work
            );
        }
    }
}

fn eevdf(tick_hz: f64) -> Policy {
    let mut p = Policy::parse("eevdf").unwrap();
    p.set("base_slice_ns", 1_500_000.0).unwrap();
    p.set("tick_hz", tick_hz).unwrap();
    p
}

/// vcpu0 computes 1.4 ms, then holds the lock 1 ms; vcpu1 wakes at
/// 0.1 ms and wants the lock at once. One pCPU, 1.5 ms slices.
fn holder_past_its_slice() -> Workload {
    let mut late = vm_thread(
        0,
        1,
        vec![
            Phase::Acquire(0),
            Phase::Work(100_000),
            Phase::Release(0),
            Phase::Mark,
        ],
    );
    late.start_ns = 100_000;
    workload(
        vec![
            vm_thread(
                0,
                0,
                vec![
                    Phase::Work(1_400_000),
                    Phase::Acquire(0),
                    Phase::Work(1_000_000),
                    Phase::Release(0),
                    Phase::Mark,
                ],
            ),
            late,
        ],
        1,
    )
}

#[test]
fn eevdf_lets_the_running_thread_finish_its_slice_and_notices_its_end_at_a_tick() {
    // HZ=250: the 1.5 ms slice ends unnoticed until the 4 ms tick, by
    // when the holder has released: no wakeup preemption, no spin
    let out = replay(
        &holder_past_its_slice(),
        &free_host(1),
        &eevdf(250.0),
        i64::MAX,
    );
    assert_eq!(out.spin_ns, vec![0, 0]);
    assert_eq!(out.mark_ts, vec![2_400_000, 2_500_000]);
    // slices ending exactly (HRTICK): the holder loses the CPU at 1.5 ms
    // holding the lock, and its sibling spins out a whole slice
    let out = replay(
        &holder_past_its_slice(),
        &free_host(1),
        &eevdf(0.0),
        i64::MAX,
    );
    assert_eq!(out.spin_ns[1], 1_500_000);
    assert_eq!(out.mark_ts, vec![3_900_000, 4_000_000]);
}

#[test]
fn eevdf_keeps_threads_on_their_cpu_while_it_is_busy() {
    // two CPUs; each thread alternates work and short sleeps, starting on
    // CPU 1: the wakeups find CPU 1 idle or busy, and the waiting thread
    // has always run within the migration cost, so CPU 0 stays unused
    // unless its periodic balancing (a tick, 4 ms) fails more than
    // cache_nice_tries (1) times in a row (a tick that finds nothing
    // waiting starts the count again): then at a tick, 12 ms at the
    // earliest
    let mut threads = Vec::new();
    for c in 0..2 {
        let mut t = vm_thread(
            0,
            c,
            (0..40)
                .flat_map(|_| [Phase::Work(300_000), Phase::Block(100_000)])
                .collect(),
        );
        t.start_cpu = Some(1);
        threads.push(t);
    }
    let w = workload(threads, 1);
    let out = replay(&w, &free_host(2), &eevdf(250.0), i64::MAX);
    let first_on_0 = out
        .slice_cpu
        .iter()
        .zip(&out.slice_start)
        .filter(|(c, _)| **c == 0)
        .map(|(_, s)| *s)
        .min();
    if let Some(first) = first_on_0 {
        assert!(
            first >= 12_000_000 && first % 4_000_000 == 0,
            "CPU 0 first used at {first} ns"
        );
    }
    assert_eq!(out.cpu_ns, vec![12_000_000, 12_000_000]);
}

#[test]
fn eevdf_ends_the_slice_of_a_thread_that_makes_system_calls_at_once_but_of_a_spinner_at_the_tick() {
    // both vCPUs had their runtime re-read every few µs in the capture
    // (fine accounting): the holder loses the CPU exactly at 1.5 ms,
    // holding the lock; its sibling then spins, and a spinner makes no
    // calls, so its own slice end waits for the 4 ms tick
    let mut w = holder_past_its_slice();
    for t in &mut w.threads {
        t.fine_accounting = true;
    }
    let out = replay(&w, &free_host(1), &eevdf(250.0), i64::MAX);
    assert_eq!(out.spin_ns[1], 2_500_000);
    assert_eq!(out.mark_ts, vec![4_900_000, 5_000_000]);
}

fn pv(spin_ns: f64) -> Policy {
    let mut p = Policy::parse("pv").unwrap();
    p.params.pv_spin_ns = spin_ns;
    p
}

#[test]
fn pv_spinlock_halts_after_its_spin_window_and_the_release_kicks_it() {
    // vcpu1 spins 1 ms (1 → 2 ms), halts, and is kicked by the release at 5 ms
    let out = replay(&contended(), &free_host(2), &pv(1e6), i64::MAX);
    assert_eq!(out.spin_ns[1], 1_000_000);
    assert_eq!(out.mark_ts, vec![5_000_000, 6_000_000]);
    assert_eq!(
        (out.calls[0], out.calls[1]),
        (1, 1),
        "one kick by the holder, one halt by the waiter"
    );
    let s = &out.states;
    let halted: Vec<_> = (0..s.thread.len())
        .filter(|&i| s.state[i] == 5)
        .map(|i| (s.thread[i], s.start[i], s.end[i]))
        .collect();
    assert_eq!(halted, vec![(1, 2_000_000, 5_000_000)]);
    assert_eq!(
        (out.ep_start[0], out.ep_end[0]),
        (1_000_000, 5_000_000),
        "one episode, halt included"
    );
}

#[test]
fn pv_spinlock_with_a_window_longer_than_the_hold_is_native_spinning() {
    let out = replay(&contended(), &free_host(2), &pv(10e6), i64::MAX);
    let native = replay(
        &contended(),
        &free_host(2),
        &Policy::parse("spin").unwrap(),
        i64::MAX,
    );
    assert_eq!(
        (out.spin_ns.clone(), out.mark_ts.clone()),
        (native.spin_ns, native.mark_ts)
    );
    assert_eq!(out.calls, vec![0, 0]);
}

#[test]
fn pv_spin_time_off_cpu_does_not_count_toward_the_window() {
    // one CPU: the spinner's window is only its time on the CPU, so it
    // halts after 1 ms of spinning however long it waited for the CPU
    let out = replay(&contended(), &free_host(1), &pv(1e6), i64::MAX);
    assert_eq!(out.spin_ns[1], 1_000_000);
    assert_eq!(out.mark_ts.len(), 2);
    assert_eq!(
        out.cpu_ns[1], 3_000_000,
        "1 ms work, 1 ms spin, 1 ms critical section"
    );
}

#[test]
fn eevdf_wakes_a_thread_on_the_cpu_it_used_before_when_its_last_one_is_busy() {
    // H0 and T start on CPU 0; idle CPU 1 pulls T, which runs 1 ms and
    // sleeps. H1 takes CPU 1, H0 leaves CPU 0. T's wakeup finds its last
    // CPU (1) busy and the host too busy for an idle-CPU scan (SIS_UTIL),
    // but the CPU it used before (0, Linux's recent_used_cpu) idle, and
    // runs there at once instead of preempting H1 on CPU 1.
    let mut h0 = vm_thread(1, 0, vec![Phase::Work(6_000_000)]);
    h0.start_cpu = Some(0);
    let mut t = vm_thread(
        0,
        0,
        vec![
            Phase::Work(1_000_000),
            Phase::Block(2_500_000),
            Phase::Work(1_000_000),
            Phase::Mark,
        ],
    );
    t.start_cpu = Some(0);
    let mut h1 = vm_thread(2, 0, vec![Phase::Work(20_000_000)]);
    h1.start_cpu = Some(1);
    h1.start_ns = 5_500_000;
    let w = workload(vec![h0, t, h1], 3);
    let out = replay(&w, &free_host(2), &eevdf(250.0), i64::MAX);
    let runs: Vec<(u32, i64, i64)> = (0..out.slice_cpu.len())
        .filter(|&i| out.slice_thread[i] == 1)
        .map(|i| (out.slice_cpu[i], out.slice_start[i], out.slice_end[i]))
        .collect();
    assert_eq!(
        runs,
        vec![(1, 4_000_000, 5_000_000), (0, 7_500_000, 8_500_000)]
    );
    assert_eq!(out.mark_ts, vec![8_500_000]);
}

#[test]
fn eevdf_gives_a_cpu_to_groups_before_threads() {
    // two vCPUs of one VM in one group, a host thread in another, all CPU
    // bound on one CPU: the host thread's group gets half the CPU, not a
    // third; without groups, a third
    let host = |w| ThreadSpec {
        vm: None,
        vcpu: None,
        ..vm_thread(9, 0, vec![Phase::Work(w)])
    };
    // long enough that 4 ms ticks even out
    let busy = 300_000_000;
    let grouped = |g: [Option<u32>; 3]| {
        let mut w = workload(
            vec![
                vm_thread(0, 0, vec![Phase::Work(busy)]),
                vm_thread(0, 1, vec![Phase::Work(busy)]),
                host(busy),
            ],
            1,
        );
        for (t, g) in w.threads.iter_mut().zip(g) {
            t.group = g;
        }
        w.groups = vec![
            GroupSpec {
                name: "vms".into(),
                shares: 1024,
            },
            GroupSpec {
                name: "tools".into(),
                shares: 1024,
            },
        ];
        w
    };
    let share = |w: &Workload| {
        let out = replay(w, &free_host(1), &eevdf(250.0), busy);
        let total: i64 = out.cpu_ns.iter().sum();
        out.cpu_ns
            .iter()
            .map(|&c| c * 100 / total)
            .collect::<Vec<_>>()
    };
    let s = share(&grouped([Some(0), Some(0), Some(1)]));
    assert!(
        (s[2] - 50).abs() <= 3 && (s[0] - 25).abs() <= 3 && (s[1] - 25).abs() <= 3,
        "{s:?}"
    );
    let s = share(&grouped([None, None, None]));
    assert!(s.iter().all(|&x| (x - 33).abs() <= 3), "{s:?}");
}

#[test]
fn recorded_placement_runs_each_stretch_of_work_where_the_capture_did() {
    // a thread worked on CPU 1, slept, worked on CPU 0, then on CPU 1
    // without sleeping in between (the kernel moved it); a second one
    // stays on CPU 0. Floating, both would share out the two CPUs.
    let mut mover = vm_thread(
        0,
        0,
        vec![
            Phase::Work(1_000_000),
            Phase::Block(1_000_000),
            Phase::Work(1_000_000),
            Phase::Work(1_000_000),
        ],
    );
    mover.work_cpu = recorded(&[Some(1), None, Some(0), Some(1)]);
    let mut stay = vm_thread(0, 1, vec![Phase::Work(500_000), Phase::Block(10_000_000)]);
    stay.work_cpu = recorded(&[Some(0), None]);
    let w = workload(vec![mover, stay], 1);
    let mut p = Policy::parse("eevdf+recorded").unwrap();
    p.set("tick_hz", 0.0).unwrap();
    let out = replay(&w, &free_host(2), &p, i64::MAX);
    let ran: Vec<(u32, u32, i64, i64)> = (0..out.slice_cpu.len())
        .map(|k| {
            (
                out.slice_thread[k],
                out.slice_cpu[k],
                out.slice_start[k],
                out.slice_end[k],
            )
        })
        .collect();
    let mover_cpus: Vec<u32> = ran.iter().filter(|r| r.0 == 0).map(|r| r.1).collect();
    assert_eq!(mover_cpus, vec![1, 0, 1], "{ran:?}");
    assert!(ran.iter().filter(|r| r.0 == 1).all(|r| r.1 == 0), "{ran:?}");
    assert_eq!(out.cpu_ns, vec![3_000_000, 500_000]);
}

#[test]
fn host_placement_runs_host_threads_where_the_capture_did_and_leaves_vcpus_free() {
    // a host thread that worked on CPU 1, starting from CPU 0, and a vCPU
    // with the same recording: with host_placement=1 the host thread's
    // work goes to CPU 1 and the vCPU's stays where the scheduler puts it
    let host = |cpus: Vec<Option<u32>>| {
        let mut t = ThreadSpec {
            vm: None,
            vcpu: None,
            ..vm_thread(
                9,
                0,
                vec![
                    Phase::Work(1_000_000),
                    Phase::Block(1_000_000),
                    Phase::Work(1_000_000),
                ],
            )
        };
        t.start_cpu = Some(0);
        t.work_cpu = recorded(&cpus);
        t
    };
    let mut vcpu = vm_thread(0, 0, vec![Phase::Work(3_000_000)]);
    vcpu.start_cpu = Some(0);
    vcpu.work_cpu = recorded(&[Some(1)]);
    vcpu.start_ns = 10_000_000;
    let w = workload(vec![host(vec![Some(1), None, Some(1)]), vcpu], 1);
    let cpus_of = |on: f64, t: u32| {
        let mut p = eevdf(0.0);
        p.set("host_placement", on).unwrap();
        let out = replay(&w, &free_host(2), &p, i64::MAX);
        let mut c: Vec<u32> = (0..out.slice_cpu.len())
            .filter(|&k| out.slice_thread[k] == t)
            .map(|k| out.slice_cpu[k])
            .collect();
        c.dedup();
        c
    };
    assert_eq!(cpus_of(1.0, 0), vec![1], "the host thread where it ran");
    assert_eq!(cpus_of(0.0, 0), vec![0], "free: it stays on its first CPU");
    assert_eq!(
        cpus_of(1.0, 1),
        vec![0],
        "a vCPU is placed by the scheduler"
    );
}

#[test]
fn a_replay_that_takes_over_its_demand_gives_the_same_output() {
    // 4 VMs x 2 vCPUs, 6,000 transactions each (36,000 phases a thread:
    // enough for the engine to let go of passed demand a few times), with
    // recorded CPUs for the recorded placement and a causal wait
    let mut threads = Vec::new();
    for v in 0..4 {
        for c in 0..2 {
            let mut ph = Vec::new();
            let mut cpus = Vec::new();
            for k in 0..6_000u32 {
                ph.extend([
                    Phase::Work(20_000 + 1_000 * ((v + c + k) % 5) as i64),
                    Phase::Acquire(0),
                    Phase::Work(8_000),
                    Phase::Release(0),
                    Phase::Mark,
                    Phase::Block(15_000),
                ]);
                cpus.extend([Some((v + k) % 3), None, Some(c % 3), None, None, None]);
            }
            let mut t = vm_thread(v, c, ph);
            t.work_cpu = recorded(&cpus);
            threads.push(t);
        }
    }
    // a block of thread 1 becomes a wait for thread 0's 20,000th phase
    threads[1].phases[4_001] = Phase::WaitFor {
        thread: ThreadId(0),
        phase: 20_000,
    };
    let w = workload(threads, 4);
    for name in [
        "fair+spin",
        "fair+wapd",
        "eevdf+wopd",
        "eevdf+rslp",
        "credit+pv",
        "eevdf+recorded",
        "credit+asymmetric",
        "fair+energy-balance",
    ] {
        let p = Policy::parse(name).unwrap();
        let h = Host::uniform(3, 2_000_000);
        let kept = replay(&w, &h, &p, i64::MAX);
        let mut given = w.clone();
        let consumed = replay_consuming(&mut given, &h, &p, i64::MAX);
        assert_eq!(kept, consumed, "{name}");
        assert_eq!(
            kept.mark_ts.len(),
            8 * 6_000,
            "{name}: every transaction completes"
        );
        assert!(
            given.threads.iter().all(|t| t.phases.is_empty()),
            "{name}: the phases were taken over"
        );
    }
}

/// CPU 0: a thread that works and sleeps 100 µs at a time, `cycles`
/// times, so CPU 0 goes idle again and again; CPU 1: `workers` long
/// workers of `work_ns` each, all but one waiting.
fn idler_beside_workers(cycles: usize, workers: u32, work_ns: i64) -> Workload {
    let mut a = vm_thread(
        0,
        0,
        (0..cycles)
            .flat_map(|_| [Phase::Work(100_000), Phase::Block(100_000)])
            .collect(),
    );
    a.start_cpu = Some(0);
    let mut threads = vec![a];
    for v in 1..=workers {
        let mut t = vm_thread(0, v, vec![Phase::Work(work_ns)]);
        t.start_cpu = Some(1);
        threads.push(t);
    }
    workload(threads, 1)
}

#[test]
fn eevdf_pulls_at_newidle_only_when_idle_periods_average_the_newidle_cost() {
    // two workers on CPU 1, one waiting; no ticks, so only a CPU going
    // idle looks for work
    let w = idler_beside_workers(50, 2, 20_000_000);
    let cpus_of_waiter = |newidle_ns: f64| {
        let mut p = eevdf(0.0);
        p.set("newidle_cost_ns", newidle_ns).unwrap();
        // every newidle balance runs: the gate alone decides
        p.set("newidle_odds", 0.0).unwrap();
        let out = replay(&w, &free_host(2), &p, i64::MAX);
        let mut cpus: Vec<u32> = out
            .slice_thread
            .iter()
            .zip(&out.slice_cpu)
            .filter(|(t, _)| **t == 2)
            .map(|(_, c)| *c)
            .collect();
        cpus.dedup();
        cpus
    };
    // a CPU's average idle period starts at twice the migration cost (1 ms)
    assert_eq!(
        cpus_of_waiter(10e6),
        vec![1],
        "a 10 ms newidle cost: never pulled"
    );
    assert_eq!(
        cpus_of_waiter(0.0)[0],
        0,
        "no newidle cost: pulled by CPU 0 the first time it idles"
    );
}

#[test]
fn eevdf_newidle_odds_draw_from_the_seed() {
    // CPU 0 idles again and again beside CPU 1's three long workers, so
    // its newidle balances throw many dice; no ticks, so only they pull
    let w = idler_beside_workers(400, 3, 40_000_000);
    let run = |seed: u64, odds: f64| {
        let mut p = eevdf(0.0);
        p.set("newidle_odds", odds).unwrap();
        p.seed = seed;
        let out = replay(&w, &free_host(2), &p, i64::MAX);
        (out.slice_cpu, out.slice_thread, out.slice_start)
    };
    assert_eq!(run(1, 1.0), run(1, 1.0), "one seed, one replay");
    assert_ne!(run(1, 1.0), run(2, 1.0), "another seed, other dice");
    assert_eq!(run(1, 0.0), run(2, 0.0), "no odds: nothing drawn");
}

#[test]
fn eevdf_places_a_woken_thread_against_the_running_ones_time_as_set() {
    // one CPU, 3 ms slices, no tick: A runs from 0, B first becomes
    // runnable at 1 ms and is placed at the queue's average. With
    // wake_update_curr=1 (the default, Linux's order), A is charged up to
    // 1 ms first and is at that average: eligible, inside its slice, it
    // keeps the CPU until 3 ms. With 0, A is charged as of its dispatch,
    // the average lags it by 1 ms, A is ineligible and B takes the CPU at
    // once.
    let mut a = vm_thread(0, 0, vec![Phase::Work(5_000_000)]);
    a.start_cpu = Some(0);
    let mut b = vm_thread(0, 1, vec![Phase::Work(1_000_000)]);
    b.start_cpu = Some(0);
    b.start_ns = 1_000_000;
    let w = workload(vec![a, b], 1);
    let first_of_b = |charge: f64| {
        let mut p = eevdf(0.0);
        p.set("base_slice_ns", 3_000_000.0).unwrap();
        p.set("wake_update_curr", charge).unwrap();
        let out = replay(&w, &free_host(1), &p, i64::MAX);
        out.slice_thread
            .iter()
            .zip(&out.slice_start)
            .filter(|(t, _)| **t == 1)
            .map(|(_, s)| *s)
            .min()
    };
    assert_eq!(first_of_b(1.0), Some(3_000_000), "Linux's order");
    assert_eq!(first_of_b(0.0), Some(1_000_000), "the old order");
}

/// Thread `t`'s CPUs in the replay's slices.
fn cpus_of(out: &Output, t: u32) -> std::collections::BTreeSet<u32> {
    out.slice_thread
        .iter()
        .zip(&out.slice_cpu)
        .filter(|(&x, _)| x == t)
        .map(|(_, &c)| c)
        .collect()
}

#[test]
fn affinity_holds_under_every_scheduler() {
    // 2 CPUs, three CPU-bound threads of 10 ms: two pinned to CPU 0, one
    // to CPU 1. Pinned, CPU 1 idles after 10 ms while CPU 0 runs 20 ms;
    // floating, the three would finish in 15 ms.
    for policy in ["fair", "eevdf", "credit", "rr"] {
        let mut threads: Vec<ThreadSpec> = (0..3)
            .map(|v| vm_thread(0, v, vec![Phase::Work(10_000_000)]))
            .collect();
        for (t, c) in threads.iter_mut().zip([0u32, 0, 1]) {
            t.allowed_cpus = Some(vec![c]);
        }
        let w = workload(threads, 1);
        let out = replay(&w, &free_host(2), &Policy::parse(policy).unwrap(), i64::MAX);
        assert_eq!(out.cpu_ns, vec![10_000_000; 3], "{policy}");
        assert_eq!(out.end_ns, 20_000_000, "{policy}");
        assert_eq!(cpus_of(&out, 0), [0].into(), "{policy}");
        assert_eq!(cpus_of(&out, 1), [0].into(), "{policy}");
        assert_eq!(cpus_of(&out, 2), [1].into(), "{policy}");
    }
}

#[test]
fn a_set_of_cpus_keeps_threads_inside_it_and_cpus_beyond_the_host_are_dropped() {
    // 3 CPUs; four threads of 6 ms allowed {1, 2}: they share those two
    // CPUs (12 ms) and never touch CPU 0, which a fifth, free thread uses
    for policy in ["fair", "eevdf", "credit", "rr"] {
        let mut threads: Vec<ThreadSpec> = (0..5)
            .map(|v| vm_thread(0, v, vec![Phase::Work(6_000_000)]))
            .collect();
        for t in threads.iter_mut().take(4) {
            t.allowed_cpus = Some(vec![1, 2, 7]);
        }
        let w = workload(threads, 1);
        let out = replay(&w, &free_host(3), &Policy::parse(policy).unwrap(), i64::MAX);
        for t in 0..4 {
            let on = cpus_of(&out, t);
            assert!(
                !on.is_empty() && on.iter().all(|&c| c == 1 || c == 2),
                "{policy}: thread {t} ran on {on:?}"
            );
        }
        assert_eq!(out.cpu_ns, vec![6_000_000; 5], "{policy}");
        if policy != "eevdf" {
            // one global queue: the two CPUs share the four threads at
            // once (eevdf's per-CPU queues start them where they woke and
            // spread them by its balancing)
            assert_eq!(out.end_ns, 12_000_000, "{policy}");
        }
        // affinity only to CPUs the host lacks: any CPU, as Linux falls back
        let mut t = vm_thread(0, 0, vec![Phase::Work(1_000_000)]);
        t.allowed_cpus = Some(vec![5]);
        let out = replay(
            &workload(vec![t], 1),
            &free_host(2),
            &Policy::parse(policy).unwrap(),
            i64::MAX,
        );
        assert_eq!(out.cpu_ns, vec![1_000_000], "{policy}");
    }
}

#[test]
fn round_robin_runs_fixed_slices_in_arrival_order_and_a_wakeup_waits_its_turn() {
    // one CPU, slices of 1 ms: A and B (3 ms each) alternate; C arrives
    // at 2.5 ms and queues behind B, without preempting A
    let mut p = Policy::parse("rr").unwrap();
    p.set("rr_slice_ns", 1e6).unwrap();
    let w = workload(
        vec![
            vm_thread(0, 0, vec![Phase::Work(3_000_000)]),
            vm_thread(0, 1, vec![Phase::Work(3_000_000)]),
            ThreadSpec {
                start_ns: 2_500_000,
                ..vm_thread(0, 2, vec![Phase::Work(1_000_000)])
            },
        ],
        1,
    );
    let out = replay(&w, &free_host(1), &p, i64::MAX);
    let order: Vec<(u32, i64, i64)> = out
        .slice_thread
        .iter()
        .zip(out.slice_start.iter().zip(&out.slice_end))
        .map(|(&t, (&s, &e))| (t, s, e))
        .collect();
    assert_eq!(
        order,
        vec![
            (0, 0, 1_000_000),
            (1, 1_000_000, 2_000_000),
            (0, 2_000_000, 3_000_000),
            (1, 3_000_000, 4_000_000),
            (2, 4_000_000, 5_000_000),
            (0, 5_000_000, 6_000_000),
            (1, 6_000_000, 7_000_000),
        ]
    );
}

#[test]
fn a_kicked_pv_waiter_that_finds_the_lock_taken_again_spins_its_window_again() {
    // CPU 0: H holds the lock 3 ms from t=0, then X (same CPU, FIFO behind
    // H) takes it for 2 ms. CPU 1: W arrives at 0.1 ms, spins 1 ms and
    // halts; H's release at 3 ms kicks W, but X (running on CPU 0 right
    // after H) holds the lock by the time W runs again: W spins another
    // 1 ms window, halts, and X's release at 5 ms kicks it to take it.
    let mut p = Policy::parse("rr+pv").unwrap();
    p.set("pv_spin_ns", 1e6).unwrap();
    p.set("rr_slice_ns", 100e6).unwrap();
    let cs = |hold: i64| vec![Phase::Acquire(0), Phase::Work(hold), Phase::Release(0)];
    let mut h = vm_thread(0, 0, cs(3_000_000));
    h.allowed_cpus = Some(vec![0]);
    let mut x = vm_thread(0, 1, cs(2_000_000));
    x.allowed_cpus = Some(vec![0]);
    let mut w = ThreadSpec {
        start_ns: 100_000,
        ..vm_thread(0, 2, cs(10_000))
    };
    w.allowed_cpus = Some(vec![1]);
    let out = replay(&workload(vec![h, x, w], 1), &free_host(2), &p, i64::MAX);
    // two full windows of spinning, no more, each shown as spinning
    assert_eq!(out.spin_ns[2], 2_000_000);
    assert_eq!(out.cpu_ns[2], 2_000_000 + 10_000);
    let st = &out.states;
    let spinning: i64 = (0..st.thread.len())
        .filter(|&i| st.thread[i] == 2 && st.state[i] == StateCode::Spinning as u8)
        .map(|i| st.end[i] - st.start[i])
        .sum();
    assert_eq!(spinning, 2_000_000);
}

/// `n` CPU-bound VMs of one vCPU, `work` ns each.
fn hogs(n: u32, work: i64) -> Workload {
    workload(
        (0..n)
            .map(|v| vm_thread(v, 0, vec![Phase::Work(work), Phase::Mark]))
            .collect(),
        n as usize,
    )
}

#[test]
fn dropping_one_of_two_cpu_bound_vms_on_one_cpu_doubles_the_others_rate() {
    // two hogs share one CPU: each finishes its 10 ms of work at ~20 ms;
    // alone it finishes at 10 ms (the what-if's workload has the other's
    // demand taken out, as `cratrace replay --drop-vm` does)
    for policy in ["fair", "eevdf", "credit", "rr"] {
        let both = replay(
            &hogs(2, 10_000_000),
            &free_host(1),
            &Policy::parse(policy).unwrap(),
            i64::MAX,
        );
        let alone = replay(
            &hogs(1, 10_000_000),
            &free_host(1),
            &Policy::parse(policy).unwrap(),
            i64::MAX,
        );
        assert_eq!(alone.mark_ts, vec![10_000_000], "{policy}");
        let first = *both.mark_ts.iter().min().unwrap();
        assert!(
            first >= 10_000_000 && *both.mark_ts.iter().max().unwrap() == 20_000_000,
            "{policy}: {:?}",
            both.mark_ts
        );
    }
}

#[test]
fn a_cap_holds_a_vm_to_its_share_of_a_cpu_and_weights_split_what_is_left() {
    // one CPU, 100 ms: VM 0 capped at 25% of a CPU beside an uncapped hog
    // gets 25 ms under the short-slice schedulers, at most that under
    // credit and rr, whose 30 and 100 ms slices hold the CPU for the hog
    // past the period's end (a cap bounds, it does not guarantee); alone,
    // capped at 50%, it gets 50 ms and the CPU idles
    let mut p = Policy::parse("fair").unwrap();
    p.set("cap_period_ns", 10e6).unwrap();
    for policy in ["fair", "eevdf", "credit", "rr"] {
        let mut p = p.clone();
        let parsed = Policy::parse(policy).unwrap();
        p.scheduler = parsed.scheduler;
        let mut w = hogs(2, 1_000_000_000);
        w.vms[0].cap = Some(0.25);
        let out = replay(&w, &free_host(1), &p, 100_000_000);
        let share = out.cpu_ns[0] as f64 / 100e6;
        if matches!(policy, "fair" | "eevdf") {
            assert!(
                (share - 0.25).abs() <= 0.011,
                "{policy}: capped VM ran {share}"
            );
        } else {
            assert!(share <= 0.26, "{policy}: capped VM ran {share}");
        }
        assert!(
            out.cpu_ns[1] as f64 / 100e6 >= 0.74,
            "{policy}: the other ran {}",
            out.cpu_ns[1]
        );
        let mut w = hogs(1, 1_000_000_000);
        w.vms[0].cap = Some(0.5);
        let out = replay(&w, &free_host(1), &p, 100_000_000);
        assert!(
            (out.cpu_ns[0] as f64 / 100e6 - 0.5).abs() <= 0.011,
            "{policy}: alone {}",
            out.cpu_ns[0]
        );
    }
    // weights: 3:1 on one CPU under the proportional-share schedulers (3 s:
    // credit's 30 ms slices split it only over many accounting periods)
    for policy in ["fair", "eevdf", "credit"] {
        let mut w = hogs(2, 10_000_000_000);
        w.vms[0].share = 3.0;
        let out = replay(
            &w,
            &free_host(1),
            &Policy::parse(policy).unwrap(),
            3_000_000_000,
        );
        // within a slice and a half of 3:1 (credit's slice is 1% of the run)
        let share = out.cpu_ns[0] as f64 / (out.cpu_ns[0] + out.cpu_ns[1]) as f64;
        assert!(
            (share - 0.75).abs() <= 0.015,
            "{policy}: weight 3:1 ran {share} of the CPU"
        );
    }
}

#[test]
fn r41_credit_yield_on_pinned_vcpus_with_free_switches_moves_on() {
    // a 2-vCPU VM, vCPU i pinned to CPU i, and a CPU-bound VM on CPU 0;
    // switches free (as a generated capture's host declares). When the
    // CPU-bound VM preempts the lock holder on CPU 0, the spinner on CPU 1
    // yields to it, cannot hand CPU 1 to it (pinned elsewhere), is
    // dispatched again at once, and used to PLE-exit and yield again at
    // the same instant, forever
    let mut ph = Vec::new();
    for k in 0..300 {
        ph.extend([
            Phase::Work(40_000 + 7_000 * (k % 5) as i64),
            Phase::Acquire(0),
            Phase::Work(30_000),
            Phase::Release(0),
            Phase::Mark,
        ]);
    }
    let pinned = |t: ThreadSpec, c| ThreadSpec {
        allowed_cpus: Some(vec![c]),
        ..t
    };
    let w = workload(
        vec![
            pinned(vm_thread(0, 0, ph.clone()), 0),
            pinned(vm_thread(0, 1, ph), 1),
            pinned(vm_thread(1, 0, vec![Phase::Work(100_000_000)]), 0),
        ],
        2,
    );
    let mut p = Policy::parse("credit+yield").unwrap();
    p.set("credit_slice_ns", 1e6).unwrap();
    let out = replay(&w, &free_host(2), &p, 10_000_000_000);
    assert_eq!(out.mark_ts.len(), 600, "every transaction completes");
    assert!(out.events < 1_000_000, "{} events", out.events);
}
