//! The published postcopy check (issue #6, postcopy.md §4): four threads
//! each read 200 MB sequentially in a 1 GB, 1-vCPU VM over a link with
//! ~100 µs per fetch. Originally: with async PF ≈ 9.8 s per thread vs
//! 17.6 s without (−44%), guest time 55% vs 38%; the benefit shrinks as
//! fewer tasks are runnable. We assert the direction and print our
//! numbers; the constants are the documented defaults, not tuned here.
//! The guest compute per page is the one input taken from the paper's
//! results (its baseline's 38% guest share, issue #41); the speed-up and
//! the async-PF guest share are outputs.

use cratrace_replay::postcopy::{
    simulate, PostcopyParams, TaskSpec, Touches, PAPER_BASELINE_GUEST_SHARE,
};

const PAGE: u64 = 4096;
const VM_PAGES: u64 = (1 << 30) / PAGE;
const PER_TASK: u64 = 200 * 1_000_000 / PAGE;
fn read_ns() -> i64 {
    PostcopyParams::default().compute_for_guest_share(PAPER_BASELINE_GUEST_SHARE)
}

fn run(tasks: u64, async_pf: bool) -> (f64, f64) {
    let specs: Vec<TaskSpec> = (0..tasks)
        .map(|i| TaskSpec {
            vcpu: 0,
            touches: Touches::Sequential {
                first: i * PER_TASK,
                count: PER_TASK,
            },
            compute_ns: read_ns(),
        })
        .collect();
    let p = PostcopyParams {
        async_pf,
        ..Default::default()
    };
    // as the CLI does: the VM grows to hold 16 readers of 200 MB
    let out = simulate(&p, VM_PAGES.max(tasks * PER_TASK), 1, &specs, &[]).unwrap();
    let mean_s = out.task_done_ns.iter().map(|&t| t as f64).sum::<f64>() / tasks as f64 / 1e9;
    (mean_s, out.vcpu_guest_fraction[0])
}

#[test]
fn async_pf_speeds_up_four_sequential_readers_and_less_with_fewer_tasks() {
    let (apf4, g_apf4) = run(4, true);
    let (base4, g_base4) = run(4, false);
    let (apf1, _) = run(1, true);
    let (base1, _) = run(1, false);
    let gain4 = 1.0 - apf4 / base4;
    let gain1 = 1.0 - apf1 / base1;
    println!(
        "postcopy 4 readers: with async PF {apf4:.2} s (guest {:.0}%), without {base4:.2} s (guest {:.0}%), {:.0}% faster; 1 reader: {:.0}%",
        g_apf4 * 100.0,
        g_base4 * 100.0,
        gain4 * 100.0,
        gain1 * 100.0
    );
    assert!(
        gain4 > 0.2,
        "async PF should help 4 readers substantially: {gain4}"
    );
    assert!(g_apf4 > g_base4 && g_apf4 <= 1.0);
    // the input: the baseline spends the paper's 38% in the guest
    assert!(
        (g_base4 - PAPER_BASELINE_GUEST_SHARE).abs() < 0.005,
        "{g_base4}"
    );
    // one vCPU can do no better than compute plus async-PF overhead per
    // page: the gain saturates there however many tasks wait
    let p = PostcopyParams::default();
    let apf_cost = p.exit_entry_ns + p.not_present_ns + p.guest_switch_ns + p.guest_wake_ns;
    let bound = 1.0 - (read_ns() + apf_cost) as f64 / (read_ns() + p.idle_stall_ns()) as f64;
    let (apf16, _) = run(16, true);
    let (base16, _) = run(16, false);
    let gain16 = 1.0 - apf16 / base16;
    println!(
        "16 readers: {:.1}% faster (one vCPU's bound {:.1}%)",
        gain16 * 100.0,
        bound * 100.0
    );
    assert!(
        gain16 <= bound + 0.005 && gain16 >= gain4 - 0.005,
        "{gain16} {gain4} {bound}"
    );
    assert!(
        gain1 < gain4,
        "benefit must shrink with fewer runnable tasks: 1 task {gain1}, 4 tasks {gain4}"
    );
}
