//! The published postcopy check (issue #6, postcopy.md §4): four threads
//! each read 200 MB sequentially in a 1 GB, 1-vCPU VM over a link with
//! ~100 µs per fetch. Originally: with async PF ≈ 9.8 s per thread vs
//! 17.6 s without (−44%), guest time 55% vs 38%; the benefit shrinks as
//! fewer tasks are runnable. We assert the direction and print our
//! numbers; the constants are the documented defaults, not tuned here.

use cratrace_replay::postcopy::{simulate, PostcopyParams, TaskSpec, Touches};

const PAGE: u64 = 4096;
const VM_PAGES: u64 = (1 << 30) / PAGE;
const PER_TASK: u64 = 200 * 1_000_000 / PAGE;
/// Guest time per 4 KiB read: copy to user plus read(2) path, ~2 µs.
const READ_NS: i64 = 2_000;

fn run(tasks: u64, async_pf: bool) -> (f64, f64) {
    let specs: Vec<TaskSpec> = (0..tasks)
        .map(|i| TaskSpec {
            vcpu: 0,
            touches: Touches::Sequential {
                first: i * PER_TASK,
                count: PER_TASK,
            },
            compute_ns: READ_NS,
        })
        .collect();
    let p = PostcopyParams {
        async_pf,
        ..Default::default()
    };
    let out = simulate(&p, VM_PAGES, 1, &specs, &[]).unwrap();
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
    assert!(g_apf4 > g_base4);
    assert!(
        gain1 < gain4,
        "benefit must shrink with fewer runnable tasks: 1 task {gain1}, 4 tasks {gain4}"
    );
}
