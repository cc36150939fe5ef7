//! The energy-balance placement (issue #6): the mechanism-cost check with
//! forced swaps, and the rule evening out per-core energy.

use cratrace_replay::*;

fn vcpu(vm: u32, c: u32, phases: Vec<Phase>) -> ThreadSpec {
    ThreadSpec {
        tid: (10 * vm + c) as i64,
        vm: Some(VmId(vm)),
        vcpu: Some(c),
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

/// A kernel-build-like load: one VM, 2 vCPUs, long CPU bursts with short
/// blocks (compiler processes reading files), ~2 s of work each.
fn build_like() -> Workload {
    let t = |c: u32| {
        vcpu(
            0,
            c,
            (0..400)
                .flat_map(|k| {
                    [
                        Phase::Work(4_800_000 + 10_000 * ((k + c as i64) % 5)),
                        Phase::Block(200_000),
                        Phase::Mark,
                    ]
                })
                .collect(),
        )
    };
    Workload {
        threads: vec![t(0), t(1)],
        vms: vec![VmSpec::new("vm0", 512)],
        groups: Vec::new(),
    }
}

fn run(w: &Workload, set: &[(&str, f64)]) -> Output {
    let mut p = Policy::parse("fair+energy-balance").unwrap();
    for (k, v) in set {
        p.set(k, *v).unwrap();
    }
    replay(w, &Host::uniform(2, 3_000_000), &p, i64::MAX)
}

#[test]
fn forced_swaps_cost_what_their_moves_cost_and_wait_for_safe_points() {
    // Klee 2007's check: swap every pair at 1-1000 Hz, a vCPU swappable
    // at each 1 ms VM timeslice. Decisions follow the rate; a swap waits
    // for both vCPUs' safe points, so at 1 kHz some decisions find the last
    // one still pending (the paper: 66% realised at 1 kHz, all up to
    // 20 Hz); each realised swap costs its two vCPUs a move to another CPU
    // (`migration_ns`), and that is all it costs here: the throughput loss
    // is realised swaps x 2 x migration_ns over the run.
    let w = build_like();
    let h = Host::uniform(2, 3_000_000);
    let base = run(&w, &[("balance_k", 1e12), ("safe_point_ns", 1e6)]);
    let t0 = base.end_ns as f64;
    let mut last = -1.0;
    let mut report = Vec::new();
    for hz in [1.0, 10.0, 20.0, 100.0, 1000.0] {
        let out = run(&w, &[("force_swap_hz", hz), ("safe_point_ns", 1e6)]);
        let loss = 100.0 * (out.end_ns as f64 / t0 - 1.0);
        let expect = (hz * out.end_ns as f64 / 1e9).floor();
        report.push(format!(
            "{hz} Hz: loss {loss:.2}%, decided {}, realised {}",
            out.swaps_decided, out.swaps_realised
        ));
        assert!(
            (out.swaps_decided as f64 - expect).abs() <= expect * 0.01 + 1.0,
            "{hz} Hz: decided {} vs {expect}",
            out.swaps_decided
        );
        assert!(out.swaps_realised <= out.swaps_decided);
        if hz <= 20.0 {
            assert!(
                out.swaps_realised + 1 >= out.swaps_decided,
                "{hz} Hz: {report:?}"
            );
        }
        // each realised swap waited at most one safe-point interval
        assert!(
            out.swap_latency_ns
                .iter()
                .all(|&l| (0..=1_000_000).contains(&l)),
            "{hz} Hz: {:?}",
            out.swap_latency_ns
        );
        // the loss is the moves' cost, about (the vCPUs also block and
        // wake, so the moves land on two CPUs' worth of work)
        let moves_ns = out.swaps_realised as f64 * 2.0 * h.costs.migration_ns as f64;
        assert!(
            (out.end_ns as f64 - t0) <= moves_ns + 1e5,
            "{hz} Hz: {report:?}"
        );
        assert!(
            loss >= last - 0.05,
            "loss must not fall as swaps get more frequent: {report:?}"
        );
        assert_eq!(out.mark_ts.len(), 800);
        last = loss;
    }
    println!("published loss: 2.1, 2.1, 3.2, 6.4, 11.8 %; replay: {report:?}");
}

#[test]
fn the_rule_evens_out_per_core_energy() {
    // one busy and one mostly idle vCPU: pinned still, one core gets hot
    let busy = vcpu(
        0,
        0,
        (0..200)
            .flat_map(|_| [Phase::Work(5_000_000), Phase::Block(100_000)])
            .collect(),
    );
    let lazy = vcpu(
        0,
        1,
        (0..200)
            .flat_map(|_| [Phase::Work(500_000), Phase::Block(4_600_000)])
            .collect(),
    );
    let w = Workload {
        threads: vec![busy, lazy],
        vms: vec![VmSpec::new("vm0", 512)],
        groups: Vec::new(),
    };
    let spread = |o: &Output| {
        let mut per = [0.0f64; 2];
        for (c, j) in o.bal_core.iter().zip(&o.bal_energy_j) {
            per[*c as usize] += j;
        }
        (per[0] - per[1]).abs() / (per[0] + per[1])
    };
    let pinned = run(&w, &[("balance_k", 1e12)]);
    let balanced = run(&w, &[]);
    assert_eq!(pinned.swaps_decided, 0);
    assert!(balanced.swaps_realised > 0);
    assert!(
        spread(&balanced) < spread(&pinned) / 2.0,
        "balanced {} vs pinned {}",
        spread(&balanced),
        spread(&pinned)
    );
    let max_t = |o: &Output| o.bal_temp_c.iter().cloned().fold(0.0, f64::max);
    assert!(max_t(&balanced) <= max_t(&pinned));
}

#[test]
fn with_per_cpu_run_queues_each_vcpu_queues_on_its_core_and_follows_swaps() {
    // eevdf keeps a run queue per core: a pinned vCPU's queue must be its
    // core's, at the start and after every swap, or the core it is pinned
    // to never finds it
    let w = build_like();
    let mut p = Policy::parse("eevdf+energy-balance").unwrap();
    p.set("balance_k", 1e12).unwrap();
    let still = replay(&w, &Host::uniform(2, 3_000_000), &p, i64::MAX);
    p.set("force_swap_hz", 100.0).unwrap();
    let swapped = replay(&w, &Host::uniform(2, 3_000_000), &p, i64::MAX);
    let fair = run(&w, &[("balance_k", 1e12)]);
    for out in [&still, &swapped] {
        assert_eq!(out.mark_ts.len(), 800);
    }
    // two vCPUs on two cores, no contention: as fast as the fair scheduler
    let ratio = still.end_ns as f64 / fair.end_ns as f64;
    assert!(
        (ratio - 1.0).abs() < 0.01,
        "eevdf {} vs fair {} ns",
        still.end_ns,
        fair.end_ns
    );
    assert!(swapped.swaps_realised > 0 && swapped.end_ns > still.end_ns);
    assert!(
        (swapped.end_ns as f64) < 1.2 * still.end_ns as f64,
        "swaps cost {} → {} ns",
        still.end_ns,
        swapped.end_ns
    );
}
