//! The engine against answers that queueing theory gives independently of
//! its code: shares of one CPU by weight, and the mean response time of an
//! M/D/1 queue (Poisson arrivals, fixed service time, first come first
//! served) and of processor sharing.

use cratrace_replay::rng::SplitMix64;
use cratrace_replay::*;

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

fn thread(i: usize, vm: u32, start_ns: i64, phases: Vec<Phase>) -> ThreadSpec {
    ThreadSpec {
        tid: 1000 + i as i64,
        vm: Some(VmId(vm)),
        vcpu: Some(0),
        phases,
        start_ns,
        start_cpu: None,
        fine_accounting: false,
        work_cpu: Vec::new(),
        group: None,
        allowed_cpus: None,
        power_w: None,
    }
}

#[test]
fn two_cpu_bound_threads_of_weights_1_and_2_get_a_third_and_two_thirds() {
    // one CPU, each thread in a VM of its own, the second VM's share twice
    // the first's; both have far more work than the run lasts
    for policy in ["fair", "eevdf"] {
        let mut vms = vec![VmSpec::new("a", 256), VmSpec::new("b", 256)];
        vms[1].share = 2.0;
        let w = Workload {
            threads: (0..2)
                .map(|i| thread(i, i as u32, 0, vec![Phase::Work(1_000_000_000_000)]))
                .collect(),
            vms,
            groups: Vec::new(),
        };
        let out = replay(
            &w,
            &free_host(1),
            &Policy::parse(policy).unwrap(),
            10_000_000_000,
        );
        let total = (out.cpu_ns[0] + out.cpu_ns[1]) as f64;
        let share = out.cpu_ns[1] as f64 / total;
        assert!((share - 2.0 / 3.0).abs() < 0.001, "{policy}: {share}");
    }
}

/// Jobs of `service_ns` arriving as a Poisson process of rate `rho /
/// service_ns` on one CPU, a thread each: the mean time from arrival to
/// completion under `policy`.
fn mean_response(policy: &str, slice_ns: f64, rho: f64, service_ns: i64, jobs: usize) -> f64 {
    let mut rng = SplitMix64::seeded(7, 0);
    let mean_gap = service_ns as f64 / rho;
    let mut t = 0.0;
    let mut arrivals = Vec::with_capacity(jobs);
    for _ in 0..jobs {
        t += -mean_gap * (1.0 - rng.next_f64()).ln();
        arrivals.push(t.round() as i64);
    }
    let w = Workload {
        threads: arrivals
            .iter()
            .enumerate()
            .map(|(i, &a)| thread(i, 0, a, vec![Phase::Work(service_ns), Phase::Mark]))
            .collect(),
        vms: vec![VmSpec::new("vm0", 256)],
        groups: Vec::new(),
    };
    let mut p = Policy::parse(policy).unwrap();
    p.set("rr_slice_ns", slice_ns).unwrap();
    let out = replay(&w, &free_host(1), &p, i64::MAX);
    assert_eq!(out.mark_ts.len(), jobs);
    let sum: f64 = out
        .mark_thread
        .iter()
        .zip(&out.mark_ts)
        .map(|(&t, &done)| (done - arrivals[t as usize]) as f64)
        .sum();
    sum / jobs as f64
}

#[test]
fn first_come_first_served_gives_the_m_d_1_mean_response() {
    // Pollaczek-Khinchine for deterministic service: W = rho D / (2 (1 - rho))
    let d = 1_000_000;
    for rho in [0.3, 0.5, 0.8] {
        let want = d as f64 + rho * d as f64 / (2.0 * (1.0 - rho));
        // first come first served: a slice longer than any job
        let got = mean_response("rr", 1e15, rho, d, 200_000);
        assert!(
            (got / want - 1.0).abs() < 0.03,
            "rho {rho}: {got} vs {want}"
        );
    }
}

#[test]
fn round_robin_with_a_short_quantum_gives_processor_sharings_mean_response() {
    // M/G/1-PS: E[T] = D / (1 - rho), whatever the service distribution;
    // round robin tends to it as its quantum shrinks (100 us against 10 ms
    // jobs). (`fair` is not processor sharing: it places a woken thread
    // half a latency behind the others, so newcomers go first, which
    // costs fixed-size jobs about 7% at rho 0.3.)
    let d = 10_000_000;
    for rho in [0.3, 0.5] {
        let want = d as f64 / (1.0 - rho);
        let got = mean_response("rr", 100_000.0, rho, d, 20_000);
        assert!(
            (got / want - 1.0).abs() < 0.03,
            "rho {rho}: {got} vs {want}"
        );
    }
}
