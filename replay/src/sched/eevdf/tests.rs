//! The EEVDF queues: flat behaviour (slices, lag, delayed dequeue,
//! wakeup preemption, pulls) and group scheduling.

use super::*;

fn pick(s: &mut Eevdf) -> Option<u32> {
    s.pick(&mut |_| true).map(|t| t.0)
}

#[test]
fn the_slice_is_linux_default_for_the_cpu_count() {
    assert_eq!(Eevdf::default_slice_ns(1), 750_000);
    assert_eq!(Eevdf::default_slice_ns(2), 1_500_000);
    assert_eq!(Eevdf::default_slice_ns(4), 2_250_000);
    assert_eq!(Eevdf::default_slice_ns(64), 3_000_000);
}

#[test]
fn equal_threads_take_turns_by_deadline() {
    let mut s = Eevdf::new(vec![1024; 2], 1, 1_000_000, 0, 0);
    s.enqueue(ThreadId(0), Sub::ProperReady, true);
    s.enqueue(ThreadId(1), Sub::ProperReady, true);
    assert_eq!(pick(&mut s), Some(0));
    assert_eq!(s.slice_ns(ThreadId(0), 1), 1_000_000);
    s.charge(ThreadId(0), 1_000_000);
    s.enqueue(ThreadId(0), Sub::SliceEnd, false);
    // 0 is ahead of the average now, 1 is not
    assert_eq!(pick(&mut s), Some(1));
    s.charge(ThreadId(1), 1_000_000);
    s.enqueue(ThreadId(1), Sub::SliceEnd, false);
    assert_eq!(pick(&mut s), Some(0));
}

#[test]
fn a_partly_used_slice_resumes_where_it_stopped() {
    let mut s = Eevdf::new(vec![1024; 2], 1, 1_000_000, 0, 0);
    s.enqueue(ThreadId(0), Sub::ProperReady, true);
    assert_eq!(pick(&mut s), Some(0));
    s.charge(ThreadId(0), 300_000);
    s.enqueue(ThreadId(0), Sub::ProperReady, false);
    assert_eq!(pick(&mut s), Some(0));
    assert_eq!(s.slice_ns(ThreadId(0), 0), 700_000);
}

#[test]
fn an_owed_sleeper_comes_back_owed_and_one_ahead_stays_ahead() {
    let ms = 1_000_000;
    let mut s = Eevdf::new(vec![1024; 3], 1, ms, 0, 0);
    for t in 0..3 {
        s.enqueue(ThreadId(t), Sub::ProperReady, true);
    }
    // 0 runs 2 ms and sleeps ahead of its share: it stays counted
    assert_eq!(pick(&mut s), Some(0));
    s.charge(ThreadId(0), 2 * ms);
    s.sleep(ThreadId(0));
    assert!(s.e.delayed[0]);
    // 1 runs 1 ms (average now 1 ms); 2 sleeps unrun: owed 1 ms
    assert_eq!(pick(&mut s), Some(1));
    s.charge(ThreadId(1), ms);
    s.enqueue(ThreadId(1), Sub::SliceEnd, false);
    assert_eq!(s.e.rqs[0].avg(), ms);
    assert_eq!(pick(&mut s), Some(2));
    s.sleep(ThreadId(2));
    assert_eq!(s.e.slept[2], Some(ms));
    // 0 wakes before the average (1.5 ms) reaches it: resumes at 2 ms
    s.enqueue(ThreadId(0), Sub::ProperReady, true);
    assert_eq!(s.e.vruntime[0], 2 * ms);
    // 2 is placed its lag behind, scaled by (W + w) / W = 3/2
    s.enqueue(ThreadId(2), Sub::ProperReady, true);
    assert_eq!(s.e.vruntime[2], 3 * ms / 2 - 3 * ms / 2);
    assert_eq!(pick(&mut s), Some(2));
}

/// One CPU: thread 0 ran 2 ms and went to sleep ahead of its share (a
/// delayed sleeper), then thread 1 ran 3 ms, taking the queue's average
/// past it.
fn a_delayed_sleeper_the_average_passed(ms: i64) -> Eevdf {
    let mut s = Eevdf::new(vec![1024; 2], 1, ms, 0, 0);
    s.enqueue(ThreadId(0), Sub::ProperReady, true);
    s.enqueue(ThreadId(1), Sub::ProperReady, true);
    assert_eq!(pick(&mut s), Some(0));
    s.charge(ThreadId(0), 2 * ms);
    s.sleep(ThreadId(0));
    assert!(s.e.delayed[0]);
    assert_eq!(pick(&mut s), Some(1));
    s.charge(ThreadId(1), 3 * ms);
    s
}

#[test]
fn a_delayed_sleeper_leaves_level_once_the_average_reaches_it() {
    let ms = 1_000_000;
    let mut s = a_delayed_sleeper_the_average_passed(ms);
    // the average (2.5 ms) passed 0's 2 ms, but 0 stays in it until the
    // CPU next chooses (Linux removes a delayed sleeper when it is picked
    // or woken, not when another thread is queued) ...
    s.enqueue(ThreadId(1), Sub::SliceEnd, false);
    assert!(s.e.delayed[0] && s.e.on_rq[0]);
    assert_eq!(s.e.rqs[0].avg(), 5 * ms / 2);
    // ... and, woken now, comes back level with the others (1 alone, at
    // 3 ms), not owed (DELAY_ZERO)
    s.enqueue(ThreadId(0), Sub::ProperReady, true);
    assert_eq!(s.e.vruntime[0], 3 * ms);
    // the next choice removes a delayed sleeper the average has passed
    let mut s2 = a_delayed_sleeper_the_average_passed(ms);
    s2.enqueue(ThreadId(1), Sub::SliceEnd, false);
    assert_eq!(pick(&mut s2), Some(1));
    assert!(!s2.e.delayed[0] && !s2.e.on_rq[0]);
}

#[test]
fn a_wakeup_preempts_only_a_thread_ahead_of_its_share_or_past_its_slice() {
    let us = 1_000;
    let mut s = Eevdf::new(vec![1024; 2], 1, 1000 * us, 0, 0);
    s.enqueue(ThreadId(0), Sub::ProperReady, true);
    assert_eq!(pick(&mut s), Some(0));
    s.charge(ThreadId(0), 500 * us);
    s.enqueue(ThreadId(1), Sub::ProperReady, true);
    // 1 is placed at the average, which is 0's own time: 0 is still
    // eligible and inside its slice (RUN_TO_PARITY)
    assert_eq!(s.e.vruntime[1], 500 * us);
    assert!(!s.preempts(ThreadId(1), ThreadId(0)));
    // 0 runs on past the average: 1 is the eligible one now
    s.charge(ThreadId(0), 200 * us);
    assert!(!s.e.eligible(0));
    assert!(s.preempts(ThreadId(1), ThreadId(0)));
    // past its protected slice, any wakeup makes the CPU choose again
    let mut s = Eevdf::new(vec![1024; 2], 1, 1000 * us, 0, 0);
    s.enqueue(ThreadId(0), Sub::ProperReady, true);
    assert_eq!(pick(&mut s), Some(0));
    s.charge(ThreadId(0), 1000 * us);
    s.enqueue(ThreadId(1), Sub::ProperReady, true);
    assert!(s.preempts(ThreadId(1), ThreadId(0)));
}

#[test]
fn an_idle_cpu_pulls_only_when_allowed_and_not_a_cache_hot_thread() {
    let ms = 1_000_000;
    let mut s = Eevdf::new(vec![1024; 2], 2, ms, 0, ms / 2);
    s.migrate(ThreadId(0), 1);
    s.migrate(ThreadId(1), 1);
    s.enqueue(ThreadId(0), Sub::ProperReady, true);
    s.enqueue(ThreadId(1), Sub::ProperReady, true);
    assert_eq!(
        s.pick_on(1, 0, Pull::Periodic, &mut |_| true),
        Some(ThreadId(0))
    );
    s.charge(ThreadId(0), ms);
    s.enqueue(ThreadId(0), Sub::SliceEnd, false);
    assert_eq!(
        s.pick_on(1, ms, Pull::Periodic, &mut |_| true),
        Some(ThreadId(1))
    );
    assert_eq!(s.ready_on(1), 1);
    // CPU 0 is idle: no pull unless balancing is allowed, and 0 ran
    // until 1 ms, so it is cache-hot until 1.5 ms
    assert_eq!(s.pick_on(0, ms + ms / 4, Pull::No, &mut |_| true), None);
    assert_eq!(
        s.pick_on(0, ms + ms / 4, Pull::Periodic, &mut |_| true),
        None
    );
    let rel = s.e.deadline[0] - s.e.vruntime[0];
    assert_eq!(
        s.pick_on(0, 2 * ms, Pull::Periodic, &mut |_| true),
        Some(ThreadId(0))
    );
    assert_eq!(s.cpu[0], 0);
    assert_eq!((s.ready_on(0), s.ready_on(1)), (0, 0));
    // it keeps its relative deadline (PLACE_REL_DEADLINE)
    assert_eq!(s.e.deadline[0] - s.e.vruntime[0], rel);
}

#[test]
fn yield_picks_the_target() {
    let mut s = Eevdf::new(vec![1024; 3], 1, 1_000_000, 0, 0);
    for t in 0..3 {
        s.enqueue(ThreadId(t), Sub::ProperReady, true);
    }
    s.boost(ThreadId(2));
    assert_eq!(pick(&mut s), Some(2));
    assert_eq!(s.slice_tick_ns(), None);
    assert_eq!(
        Eevdf::new(vec![1024], 1, 1, 4_000_000, 0).slice_tick_ns(),
        Some(4_000_000)
    );
}

/// Run CPU 0 for `rounds` stretches of `ns`, each time picking the
/// next thread and putting it back; CPU time per thread.
fn share(s: &mut Eevdf, threads: usize, rounds: usize, ns: i64) -> Vec<i64> {
    let mut ran = vec![0; threads];
    for k in 0..rounds {
        let t = s
            .pick_on(0, k as i64 * ns, Pull::No, &mut |_| true)
            .unwrap();
        s.charge(t, ns);
        ran[t.0 as usize] += ns;
        s.enqueue(t, Sub::SliceEnd, false);
    }
    ran
}

#[test]
fn groups_share_a_cpu_before_their_threads_do() {
    let us = 1_000;
    // threads 0 and 1 in group 0, thread 2 alone in group 1
    let mut s = Eevdf::with_groups(
        vec![1024; 3],
        vec![Some(0), Some(0), Some(1)],
        vec![1024, 1024],
        1,
        750 * us,
        0,
        0,
    );
    for t in 0..3 {
        s.enqueue(ThreadId(t), Sub::ProperReady, true);
    }
    let ran = share(&mut s, 3, 3000, 100 * us);
    let total: i64 = ran.iter().sum();
    // half the CPU to each group, not a third to each thread
    assert!((ran[2] * 100 / total - 50).abs() <= 2, "{ran:?}");
    assert!((ran[0] * 100 / total - 25).abs() <= 2, "{ran:?}");
    assert!((ran[1] * 100 / total - 25).abs() <= 2, "{ran:?}");
    // without groups: a third each
    let mut s = Eevdf::new(vec![1024; 3], 1, 750 * us, 0, 0);
    for t in 0..3 {
        s.enqueue(ThreadId(t), Sub::ProperReady, true);
    }
    let ran = share(&mut s, 3, 3000, 100 * us);
    assert!(
        ran.iter().all(|&r| (r * 100 / total - 33).abs() <= 2),
        "{ran:?}"
    );
}

#[test]
fn a_wakeup_is_decided_where_the_threads_meet() {
    let us = 1_000;
    // 0 and 1 siblings in group 0, 2 in group 1
    let mut s = Eevdf::with_groups(
        vec![1024; 3],
        vec![Some(0), Some(0), Some(1)],
        vec![1024, 1024],
        1,
        1000 * us,
        0,
        0,
    );
    s.enqueue(ThreadId(0), Sub::ProperReady, true);
    assert_eq!(s.pick_on(0, 0, Pull::No, &mut |_| true), Some(ThreadId(0)));
    s.charge(ThreadId(0), 300 * us);
    // a sibling waking is compared with 0 in their group's queue: 0
    // is eligible and protected there
    s.enqueue(ThreadId(1), Sub::ProperReady, true);
    assert!(!s.preempts(ThreadId(1), ThreadId(0)));
    // the other group's thread is compared with group 0 as a whole:
    // placed at the top level's average, which group 0 alone set,
    // it does not preempt while group 0 is within its protection ...
    s.enqueue(ThreadId(2), Sub::ProperReady, true);
    assert!(!s.preempts(ThreadId(2), ThreadId(0)));
    // ... but once group 0 is ahead of its share, it does, although 0
    // is still within its own slice in its group
    s.charge(ThreadId(0), 100 * us);
    assert!(!s.e.eligible(s.top(0)));
    assert!(s.e.vruntime[0] < s.e.vprot[0]);
    assert!(s.preempts(ThreadId(2), ThreadId(0)));
}

#[test]
fn a_group_weighs_on_each_cpu_its_part_of_its_load() {
    let ms = 1_000_000;
    let mut s = Eevdf::with_groups(vec![1024; 3], vec![Some(0); 3], vec![1024], 2, ms, 0, 0);
    s.migrate(ThreadId(2), 1);
    for t in 0..3 {
        s.enqueue(ThreadId(t), Sub::ProperReady, true);
    }
    let (g0, g1) = (s.group_entity(0, 0), s.group_entity(0, 1));
    assert_eq!((s.e.weight[g0], s.e.weight[g1]), (682, 341));
    assert_eq!((s.ready_on(0), s.ready_on(1)), (2, 1));
    // 1 moves to CPU 1: even halves; the average of CPU 0's top level
    // does not move when its group entity is reweighted
    let avg = s.e.rqs[0].avg();
    s.migrate(ThreadId(1), 1);
    assert_eq!((s.e.weight[g0], s.e.weight[g1]), (341, 682));
    assert_eq!(s.e.rqs[0].avg(), avg);
    // the last thread on CPU 0 sleeps: the group leaves CPU 0
    assert_eq!(s.pick_on(0, 0, Pull::No, &mut |_| true), Some(ThreadId(0)));
    s.sleep(ThreadId(0));
    assert!(!s.e.on_rq[g0] || s.e.delayed[g0]);
    assert_eq!(s.ready_on(0), 0);
    assert_eq!(s.pick_on(0, 0, Pull::No, &mut |_| true), None);
}

#[test]
fn busy_cpus_balance_two_threads_apart_but_not_one_and_not_hot_at_first() {
    let ms = 1_000_000;
    let mut s = Eevdf::new(vec![1024; 4], 2, ms, 4 * ms, 2 * ms);
    s.set_busy_balance(32 * ms);
    for t in 0..3 {
        s.migrate(ThreadId(t), 1);
        s.enqueue(ThreadId(t), Sub::ProperReady, true);
    }
    s.migrate(ThreadId(3), 0);
    s.enqueue(ThreadId(3), Sub::ProperReady, true);
    assert_eq!(s.pick_on(0, 0, Pull::No, &mut |_| true), Some(ThreadId(3)));
    // CPU 1 runs 0, 1 and 2 a slice each: 1 and 2 are hot until 4 and 5 ms
    for (k, t) in [0u32, 1, 2].into_iter().enumerate() {
        assert_eq!(
            s.pick_on(1, k as i64 * ms, Pull::No, &mut |_| true),
            Some(ThreadId(t))
        );
        s.charge(ThreadId(t), ms);
        s.enqueue(ThreadId(t), Sub::SliceEnd, false);
    }
    assert_eq!(
        s.pick_on(1, 3 * ms, Pull::No, &mut |_| true),
        Some(ThreadId(0))
    );
    assert_eq!((s.ready_on(0), s.ready_on(1)), (0, 2));
    // not yet due; then due, but only cache-hot threads wait (one failure
    // is allowed, as cache_nice_tries says)
    s.tick(3 * ms);
    assert_eq!((s.ready_on(0), s.ready_on(1)), (0, 2));
    s.busy_balance_due_now();
    s.tick(3 * ms + ms / 4);
    assert_eq!((s.ready_on(0), s.ready_on(1)), (0, 2));
    assert_eq!(s.balance_failed[0], 1);
    // past the migration cost one moves: three against one becomes two
    // and two, and the failures start again from none
    s.busy_balance_due_now();
    s.tick(5 * ms);
    assert_eq!((s.ready_on(0), s.ready_on(1)), (1, 1));
    assert_eq!(s.balance_failed[0], 0);
    // two against two: nothing to gain, nothing moves
    s.busy_balance_due_now();
    s.tick(40 * ms);
    assert_eq!((s.ready_on(0), s.ready_on(1)), (1, 1));
}

#[test]
fn busy_balancing_is_off_unless_set() {
    let ms = 1_000_000;
    let mut s = Eevdf::new(vec![1024; 3], 2, ms, 4 * ms, 0);
    for t in 0..3 {
        s.migrate(ThreadId(t), 1);
        s.enqueue(ThreadId(t), Sub::ProperReady, true);
    }
    assert_eq!(s.pick_on(1, 0, Pull::No, &mut |_| true), Some(ThreadId(0)));
    s.tick(100 * ms);
    assert_eq!((s.ready_on(0), s.ready_on(1)), (0, 2));
    s.set_busy_balance(32 * ms);
    s.tick(100 * ms);
    assert_eq!((s.ready_on(0), s.ready_on(1)), (1, 1));
}

#[test]
fn a_threads_load_averages_its_runnable_time_with_a_32_ms_half_life() {
    let ms = 1_000_000;
    let mut s = Eevdf::new(vec![1024; 1], 2, ms, 4 * ms, 0);
    s.set_balance_by_load(true);
    s.migrate(ThreadId(0), 1);
    // no load before it first becomes runnable, then its full weight
    s.clock(10 * ms);
    assert_eq!(s.cpu_load(1), 0.0);
    s.enqueue(ThreadId(0), Sub::ProperReady, true);
    assert_eq!(
        s.pick_on(1, 10 * ms, Pull::No, &mut |_| true),
        Some(ThreadId(0))
    );
    assert_eq!(s.cpu_load(1), 1024.0);
    // asleep for one half-life: half, and still CPU 1's (blocked load)
    s.clock(20 * ms);
    s.charge(ThreadId(0), 10 * ms);
    s.sleep(ThreadId(0));
    s.clock(52 * ms);
    assert!((s.cpu_load(1) - 512.0).abs() < 1e-6, "{}", s.cpu_load(1));
    assert_eq!(s.cpu_load(0), 0.0);
    // runnable again for a half-life: half way back to its weight
    s.enqueue(ThreadId(0), Sub::ProperReady, true);
    s.clock(84 * ms);
    assert!((s.cpu_load(1) - 768.0).abs() < 1e-6, "{}", s.cpu_load(1));
}

/// Two CPUs with two threads each, CPU 0's always runnable (load 1024
/// each) and CPU 1's mostly asleep until now (300 each): equal counts,
/// unequal loads. Thread 0 runs on CPU 0 and 2 on CPU 1; 1 and 3 wait.
fn two_by_two(by_load: bool, now: i64) -> Eevdf {
    let ms = 1_000_000;
    let mut s = Eevdf::new(vec![1024; 4], 2, ms, 4 * ms, ms / 2);
    s.set_busy_balance(32 * ms);
    s.set_balance_by_load(by_load);
    s.clock(0);
    for t in 0..4 {
        s.migrate(ThreadId(t), t / 2);
        s.enqueue(ThreadId(t), Sub::ProperReady, true);
    }
    assert_eq!(s.pick_on(0, 0, Pull::No, &mut |_| true), Some(ThreadId(0)));
    assert_eq!(s.pick_on(1, 0, Pull::No, &mut |_| true), Some(ThreadId(2)));
    s.clock(now);
    s.load = vec![1024.0, 1024.0, 300.0, 300.0];
    s.load_at = vec![now; 4];
    s
}

#[test]
fn busy_balancing_by_load_moves_what_thread_counts_do_not_see() {
    let ms = 1_000_000;
    let now = 100 * ms;
    // by counts two and two is balanced
    let mut s = two_by_two(false, now);
    s.busy_balance_due_now();
    s.tick(now);
    assert_eq!((s.ready_on(0), s.ready_on(1)), (1, 1));
    // by load CPU 1 (600) is below the average (1324) and CPU 0 (2048) is
    // over 117% of it; the imbalance is 724, which thread 1's load (1024)
    // does not fit: nothing moves, and the attempt counts as failed
    let mut s = two_by_two(true, now);
    s.busy_balance_due_now();
    s.tick(now);
    assert_eq!((s.ready_on(0), s.ready_on(1)), (1, 1));
    assert_eq!(s.balance_failed, vec![0, 1]);
    // after a failed attempt its load counts half (512) and it moves
    s.busy_balance_due_now();
    s.tick(now);
    assert_eq!((s.ready_on(0), s.ready_on(1)), (0, 2));
    assert_eq!(s.balance_failed, vec![0, 0]);
}

#[test]
fn busy_balancing_by_load_leaves_a_cache_hot_thread_until_attempts_fail() {
    let ms = 1_000_000;
    let now = 100 * ms;
    let mut s = two_by_two(true, now);
    // thread 1 ran until just now: hot for the migration cost (0.5 ms)
    s.ran_until[1] = now;
    s.balance_failed[1] = 1;
    s.busy_balance_due_now();
    s.tick(now);
    assert_eq!(
        (s.ready_on(0), s.ready_on(1)),
        (1, 1),
        "hot, and one failure is allowed (cache_nice_tries)"
    );
    assert_eq!(s.balance_failed[1], 2);
    s.busy_balance_due_now();
    s.tick(now);
    assert_eq!(
        (s.ready_on(0), s.ready_on(1)),
        (0, 2),
        "past cache_nice_tries a hot thread moves"
    );
}

#[test]
fn only_failed_periodic_pulls_let_an_idle_cpu_take_a_cache_hot_thread() {
    let ms = 1_000_000;
    let setup = || {
        let mut s = Eevdf::new(vec![1024; 2], 2, ms, 0, ms / 2);
        s.migrate(ThreadId(0), 1);
        s.migrate(ThreadId(1), 1);
        s.enqueue(ThreadId(0), Sub::ProperReady, true);
        s.enqueue(ThreadId(1), Sub::ProperReady, true);
        assert_eq!(s.pick_on(1, 0, Pull::No, &mut |_| true), Some(ThreadId(0)));
        // thread 1 ran until 10 ms: hot until 10.5 ms
        s.ran_until[1] = 10 * ms;
        s
    };
    // newidle pulls, however many, never take it (they do not count)
    let mut s = setup();
    for _ in 0..5 {
        assert_eq!(s.pick_on(0, 10 * ms, Pull::NewIdle, &mut |_| true), None);
    }
    assert_eq!(s.balance_failed[0], 0);
    // periodic ones do: the third takes it, and a move resets the count
    let mut s = setup();
    assert_eq!(s.pick_on(0, 10 * ms, Pull::Periodic, &mut |_| true), None);
    assert_eq!(s.pick_on(0, 10 * ms, Pull::Periodic, &mut |_| true), None);
    assert_eq!(s.balance_failed[0], 2);
    assert_eq!(
        s.pick_on(0, 10 * ms, Pull::Periodic, &mut |_| true),
        Some(ThreadId(1))
    );
    assert_eq!(s.balance_failed[0], 0);
    // periodic failures let a newidle pull take a hot thread as well
    let mut s = setup();
    s.balance_failed[0] = 2;
    assert_eq!(
        s.pick_on(0, 10 * ms, Pull::NewIdle, &mut |_| true),
        Some(ThreadId(1))
    );
}

#[test]
fn newidle_odds_halve_with_every_512_failed_balances() {
    let mut s = Eevdf::new(vec![1024; 1], 2, 1_000_000, 0, 0);
    s.set_newidle_odds(Some(0));
    let odds = s.newidle.as_mut().unwrap();
    // Linux starts a domain at 50%: 256 successes in 512 calls
    assert_eq!(odds.ratio[0], 512);
    for _ in 0..512 {
        odds.record(0, 0);
    }
    assert_eq!(
        (odds.ratio[0], odds.call[0], odds.success[0]),
        (256, 512, 128)
    );
    for _ in 0..512 {
        odds.record(0, 0);
    }
    assert_eq!(odds.ratio[0], 128);
    // a success counts with its weight: 512 balances each worth 4
    for _ in 0..512 {
        odds.record(0, 4);
    }
    assert_eq!(odds.ratio[0], 64 + 2048);
    assert_eq!(odds.ratio[1], 512, "each CPU keeps its own");
}

/// CPU 1 runs thread 0 with thread 1 waiting, which ran long ago (cold),
/// and CPU 0 has just gone idle.
fn one_waiting_beside_a_running_one(ms: i64) -> Eevdf {
    let mut s = Eevdf::new(vec![1024; 2], 2, ms, 0, ms / 2);
    s.set_newidle_odds(Some(7));
    s.migrate(ThreadId(0), 1);
    s.migrate(ThreadId(1), 1);
    s.enqueue(ThreadId(0), Sub::ProperReady, true);
    s.enqueue(ThreadId(1), Sub::ProperReady, true);
    assert_eq!(s.pick_on(1, 0, Pull::No, &mut |_| true), Some(ThreadId(0)));
    s
}

#[test]
fn a_newidle_balance_runs_about_as_often_as_its_ratio_says() {
    let ms = 1_000_000;
    let mut s = one_waiting_beside_a_running_one(ms);
    let mut pulled = 0;
    let trials = 4000;
    for k in 0..trials {
        let odds = s.newidle.as_mut().unwrap();
        // hold the ratio at 256 (runs on a die of 0..=257 of 1024: 25.2%)
        (odds.ratio[0], odds.call[0], odds.success[0]) = (256, 0, 0);
        if s.pick_on(0, 10 * ms + k, Pull::NewIdle, &mut |_| true) == Some(ThreadId(1)) {
            pulled += 1;
            // put it back, waiting on CPU 1
            s.charge(ThreadId(1), 1);
            s.enqueue(ThreadId(1), Sub::SliceEnd, false);
            s.migrate(ThreadId(1), 1);
            s.ran_until[1] = 0;
        }
    }
    let share = pulled as f64 / trials as f64;
    assert!((0.22..0.285).contains(&share), "pulled in {share} of tries");
    // periodic balancing throws no die
    let mut s = one_waiting_beside_a_running_one(ms);
    s.newidle.as_mut().unwrap().ratio[0] = 0;
    assert_eq!(
        s.pick_on(0, 10 * ms, Pull::Periodic, &mut |_| true),
        Some(ThreadId(1))
    );
}

#[test]
fn a_stale_overloaded_flag_costs_one_failed_newidle_balance_and_counts_as_balanced() {
    let ms = 1_000_000;
    let mut s = one_waiting_beside_a_running_one(ms);
    assert!(s.newidle.as_ref().unwrap().overloaded);
    // the waiting thread runs after all: nothing waits any more
    s.charge(ThreadId(0), ms);
    s.sleep(ThreadId(0));
    assert_eq!(s.pick_on(1, ms, Pull::No, &mut |_| true), Some(ThreadId(1)));
    let calls = |s: &Eevdf| s.newidle.as_ref().unwrap().call[0];
    let before = calls(&s);
    // ratio 1024: the die always lets it run
    s.newidle.as_mut().unwrap().ratio[0] = 1024;
    s.balance_failed[0] = 2;
    assert_eq!(s.pick_on(0, ms, Pull::NewIdle, &mut |_| true), None);
    assert_eq!(
        s.balance_failed[0], 0,
        "no busiest CPU: out_balanced starts the failure count again"
    );
    assert_eq!(
        calls(&s),
        before + 1,
        "the stale flag: a balance that failed"
    );
    assert!(!s.newidle.as_ref().unwrap().overloaded);
    assert_eq!(s.pick_on(0, ms, Pull::NewIdle, &mut |_| true), None);
    assert_eq!(calls(&s), before + 1, "a fresh flag: no balance at all");
}

#[test]
fn an_idle_cpu_that_finds_nothing_waiting_at_a_tick_starts_its_count_again() {
    let ms = 1_000_000;
    let mut s = Eevdf::new(vec![1024; 2], 2, ms, 4 * ms, ms / 2);
    s.migrate(ThreadId(0), 1);
    s.enqueue(ThreadId(0), Sub::ProperReady, true);
    assert_eq!(s.pick_on(1, 0, Pull::No, &mut |_| true), Some(ThreadId(0)));
    s.balance_failed = vec![2, 2];
    s.tick(4 * ms);
    assert_eq!(s.balance_failed, vec![0, 2], "only the idle CPU balanced");
    // with a thread waiting, the tick leaves the count to the pull
    s.migrate(ThreadId(1), 1);
    s.enqueue(ThreadId(1), Sub::ProperReady, true);
    s.balance_failed = vec![2, 2];
    s.tick(8 * ms);
    assert_eq!(s.balance_failed, vec![2, 2]);
}
