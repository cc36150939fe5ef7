"""The benchmark's reading of where a running vCPU was preempted
(benchmarks/lock_holder_preemption.py): by its guest time left until its
next txn_end, so that time spent off the CPU does not count."""

from __future__ import annotations

import polars as pl

from benchmarks.lock_holder_preemption import preemption_positions, spins


def _states(rows):
    return pl.DataFrame(
        [{"vm": "vm0", "vcpu": 0, "tid": 7, "state": s, "start": a, "end": b, "dur": b - a, "pcpu": 0 if s == "guest" else None} for s, a, b in rows],
        schema={"vm": pl.String, "vcpu": pl.Int32, "tid": pl.Int64, "state": pl.String, "start": pl.Int64, "end": pl.Int64, "dur": pl.Int64, "pcpu": pl.Int32},
    )


def _marks(ts):
    return pl.DataFrame({"ts": ts, "tid": [7] * len(ts), "name": ["txn_end"] * len(ts)}, schema={"ts": pl.Int64, "tid": pl.Int64, "name": pl.String})


def test_a_preemption_10_ns_of_guest_time_before_the_mark_is_inside_the_critical_section():
    # cycle 1: 300 ns of guest, off the CPU for 1000, 10 more and the mark:
    # preempted with 10 ns left. Cycle 2: preempted 100 ns in, 300 left.
    states = _states([
        ("guest", 0, 300), ("preempted", 300, 1300), ("guest", 1300, 1310), ("blocked", 1310, 2000),
        ("guest", 2000, 2100), ("preempted", 2100, 2200), ("guest", 2200, 2500), ("blocked", 2500, 3000),
    ])
    n, in_cs, share = preemption_positions(states, _marks([1310, 2500]), {"vm0": 100})
    assert (n, in_cs) == (2, 1)
    # two critical sections of 100 ns in 710 ns of guest time
    assert abs(share - 200 / 710) < 1e-9


def test_the_critical_section_bound_is_inclusive_and_preemptions_after_the_last_mark_are_left_out():
    states = _states([("guest", 0, 200), ("preempted", 200, 300), ("guest", 300, 400), ("blocked", 400, 500), ("guest", 500, 550), ("preempted", 550, 600)])
    n, in_cs, _ = preemption_positions(states, _marks([400]), {"vm0": 100})
    assert (n, in_cs) == (1, 1)
    n, in_cs, _ = preemption_positions(states, _marks([400]), {"vm0": 99})
    assert (n, in_cs) == (1, 0)


def test_long_spins_count_from_one_millisecond():
    episodes = pl.DataFrame({"dur": [999_999, 1_000_000, 3_000_000, 5]})
    assert spins(episodes) == (2, (999_999 + 1_000_000 + 3_000_000 + 5) / 1e9)
