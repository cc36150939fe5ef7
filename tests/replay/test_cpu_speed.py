"""Each CPU's speed read from the vCPUs' transactions (cratrace.replay.
cpu_speed), and the replay that counts work in it: a transaction that
took twice as long on one CPU as the same work on another reads as half
the speed, and a replay with `cpu_speed=markers` says what it read."""

from __future__ import annotations

import polars as pl

from cratrace.replay import replay_capture
from cratrace.replay.cpu_speed import speed_column, speed_profile, transactions
from tests.helpers import cratrace as run_cli
from tests.model.conftest import lab_capture  # noqa: F401  (session fixture)

US = 1_000


def _timeline(cycles: int, work_us: dict[int, int], slow_from: int | None = None):
    """vm0's vCPU k on CPU k: `work_us[k]` of guest time, 100 µs blocked,
    a txn_end at the end of the work; from cycle `slow_from` on, CPU 1's
    work takes twice as long."""
    rows, marks = [], []
    for k, w in work_us.items():
        t = 0
        for i in range(cycles):
            d = w * US * (2 if k == 1 and slow_from is not None and i >= slow_from else 1)
            rows += [("vm0", k, "guest", t, t + d, k), ("vm0", k, "blocked", t + d, t + d + 100 * US, None)]
            marks.append(("vm0", k, t + d - 1))
            t += d + 100 * US
    states = pl.DataFrame(rows, schema={"vm": pl.String, "vcpu": pl.Int32, "state": pl.String, "start": pl.Int64, "end": pl.Int64, "pcpu": pl.Int32}, orient="row")
    return states, pl.DataFrame(marks, schema={"vm": pl.String, "vcpu": pl.Int32, "ts": pl.Int64}, orient="row")


def test_a_cpu_that_takes_twice_as_long_for_the_same_work_reads_as_half_the_speed():
    states, marks = _timeline(400, {0: 100, 1: 200})
    prof = speed_profile(states.filter(pl.col("state") == "guest"), marks, 0)
    assert set(prof) == {0, 1}
    (_, fast), = prof[0]
    (_, slow), = prof[1]
    assert abs(fast / slow - 2) < 0.05
    # scaled to a median of 1 over the windows read: CPU 1 ran 120 ms of
    # transactions (6 windows of 20 ms), CPU 0 80 ms (4): CPU 1's is the 1
    assert slow == 1.0


def test_a_cpu_that_slows_down_reads_as_a_step_in_its_speed():
    states, marks = _timeline(600, {0: 100, 1: 100}, slow_from=300)
    prof = speed_profile(states.filter(pl.col("state") == "guest"), marks, 0)
    assert len(prof[0]) == 1, "CPU 0 kept its speed"
    first, last = prof[1][0], prof[1][-1]
    assert first[0] == 0 and abs(first[1] / last[1] - 2) < 0.05
    # the step comes in the window where CPU 1's 300th transaction ended
    assert 0 < last[0] <= 300 * 200 * US


def test_transactions_spread_over_two_cpus_or_before_the_first_mark_are_not_read():
    states = pl.DataFrame(
        [("vm0", 0, "guest", 0, 50, 0), ("vm0", 0, "guest", 100, 200, 0), ("vm0", 0, "guest", 300, 400, 0), ("vm0", 0, "guest", 500, 600, 1)],
        schema={"vm": pl.String, "vcpu": pl.Int32, "state": pl.String, "start": pl.Int64, "end": pl.Int64, "pcpu": pl.Int32}, orient="row",
    )
    marks = pl.DataFrame({"vm": ["vm0"] * 3, "vcpu": [0] * 3, "ts": [60, 250, 700]}, schema={"vm": pl.String, "vcpu": pl.Int32, "ts": pl.Int64})
    tx = transactions(states, marks)
    # up to 60: began before the capture; up to 250: 100 ns on CPU 0;
    # up to 700: on CPUs 0 and 1
    assert tx.select("cpu", "guest_ns").rows() == [(0, 100)]


def test_each_row_takes_its_cpus_speed_at_its_start_in_its_own_order():
    prof = {0: [(0, 1.0), (1000, 0.5)], 1: [(0, 2.0)]}
    frame = pl.DataFrame({"start": [1500, 10, 999, 20, 30], "pcpu": [0, 1, 0, None, 0]})
    out = speed_column(frame, prof, t0=0, cpu="pcpu")
    assert out["start"].to_list() == [1500, 10, 999, 20, 30]
    assert out["speed"].to_list() == [0.5, 2.0, 1.0, 1.0, 1.0]
    assert speed_column(frame, {}, 0, "pcpu")["speed"].to_list() == [1.0] * 5


def test_a_replay_counting_work_in_cpu_speed_says_what_it_read(lab_capture, tmp_path):  # noqa: F811
    m = replay_capture(lab_capture, ["eevdf"], tmp_path / "on", settings={"cpu_speed": "markers"})["eevdf"]
    s = m["host"]["cpu_speed"]
    assert s["mode"] == "markers"
    # the lab's vCPUs end a transaction every fraction of a ms: every 20 ms
    # window of a CPU has enough of them to read its speed from
    assert s["read"] is True
    assert 0 < s["min"] <= 1 <= s["max"] and s["changes"] >= 0
    off = replay_capture(lab_capture, ["eevdf"], tmp_path / "off")["eevdf"]
    assert off["host"]["cpu_speed"] == {"mode": "off", "read": False}
    bad = run_cli("replay", lab_capture.path, "-o", tmp_path / "bad", "--set", "cpu_speed=fast")
    assert bad.returncode == 2 and "cpu_speed=fast" in bad.stderr and bad.stderr.strip().count("\n") == 0
