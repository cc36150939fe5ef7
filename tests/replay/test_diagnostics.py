"""fidelity.diagnostics: the same measurements on the recording and the
replay. Known answers on hand-built timelines, then their place in
metrics.json."""

from __future__ import annotations

import polars as pl
import pytest

from cratrace.replay.diagnostics import compare, measure, preempted_s, sibling_wakeup_preemption, vcpu_migrations, vm_cpu_concentration
from tests.model.conftest import lab_capture  # noqa: F401  (session fixture)


def _states(rows):
    return pl.DataFrame(rows, schema={"vm": pl.String, "tid": pl.Int64, "state": pl.String, "start": pl.Int64, "end": pl.Int64}, orient="row")


def test_a_wakeup_that_takes_the_cpu_from_a_running_sibling_counts_as_preemption():
    us = 1_000
    s = _states([
        # vCPU 1 runs (guest, then spinning: one stretch), is preempted 5 µs
        # after vCPU 2 wakes at 50 µs, runs again, and is not preempted by
        # the wakeup at 200 µs (it blocks 100 µs later, beyond 30 µs)
        ("a", 1, "guest", 0, 30 * us), ("a", 1, "spinning", 30 * us, 55 * us), ("a", 1, "preempted", 55 * us, 150 * us),
        ("a", 1, "guest", 150 * us, 300 * us), ("a", 1, "blocked", 300 * us, 400 * us),
        ("a", 2, "blocked", 0, 50 * us), ("a", 2, "preempted", 50 * us, 55 * us), ("a", 2, "guest", 55 * us, 150 * us),
        ("a", 2, "blocked", 150 * us, 200 * us), ("a", 2, "preempted", 200 * us, 300 * us), ("a", 2, "guest", 300 * us, 400 * us),
        # another VM's wakeup while vCPU 1 runs is not a sibling's
        ("b", 3, "blocked", 0, 20 * us), ("b", 3, "guest", 20 * us, 25 * us), ("b", 3, "blocked", 25 * us, 400 * us),
    ])
    assert sibling_wakeup_preemption(s) == {"wakeups": 2, "preempted_pct": 50.0}
    assert preempted_s(s) == {"a": pytest.approx((95 + 5 + 100) * us / 1e9)}
    d = compare(measure(s), measure(s.filter(pl.col("tid") != 2)))
    assert d["sibling_wakeup_preemption_pct"] == {"recorded": 50.0, "replayed": None}
    assert d["sibling_wakeups"] == {"recorded": 2, "replayed": 0}


def test_concentration_tells_vcpus_sharing_a_cpu_from_vcpus_spread_over_cpus():
    ms = 1_000_000

    def timeline(cpu_of_second_vcpu):
        rows = []
        for w in range(4):  # four 100 ms windows, both vCPUs running 60 ms of each
            at = w * 100 * ms
            rows += [("a", 1, "guest", at, at + 60 * ms, 0), ("a", 2, "guest", at, at + 60 * ms, cpu_of_second_vcpu(w))]
        # a one-vCPU VM does not count (it cannot be split)
        rows.append(("b", 3, "guest", 0, 400 * ms, 1))
        return pl.DataFrame(rows, schema={"vm": pl.String, "tid": pl.Int64, "state": pl.String, "start": pl.Int64, "end": pl.Int64, "pcpu": pl.Int32}, orient="row")

    assert vm_cpu_concentration(timeline(lambda w: 0)) == 100.0  # packed
    assert vm_cpu_concentration(timeline(lambda w: 1)) == 50.0  # spread
    assert vm_cpu_concentration(timeline(lambda w: 0 if w < 1 else 1)) == 62.5  # packed a quarter of the time
    assert vm_cpu_concentration(timeline(lambda w: 0).filter(pl.col("vm") == "b")) is None
    # moves: vCPU 2 changes CPU once in the third timeline, never in the others
    assert [vcpu_migrations(timeline(f)) for f in (lambda w: 0, lambda w: 1, lambda w: 0 if w < 1 else 1)] == [0, 0, 1]


def test_a_migration_is_a_stretch_on_another_cpu_than_the_vcpus_last():
    ms = 1_000_000
    rows = [
        # vCPU 1: CPU 0, then blocked, CPU 1 (a move), preempted, CPU 1, CPU 0 (a move)
        ("a", 1, "guest", 0, 1 * ms, 0), ("a", 1, "blocked", 1 * ms, 2 * ms, None), ("a", 1, "guest", 2 * ms, 3 * ms, 1),
        ("a", 1, "preempted", 3 * ms, 4 * ms, None), ("a", 1, "spinning", 4 * ms, 5 * ms, 1), ("a", 1, "guest", 5 * ms, 6 * ms, 0),
        # vCPU 2 stays on CPU 1; a thread that is no vCPU (no VM) is not counted
        ("a", 2, "guest", 0, 6 * ms, 1), (None, 9, "guest", 0, 1 * ms, 0), (None, 9, "guest", 2 * ms, 3 * ms, 1),
    ]
    s = pl.DataFrame(rows, schema={"vm": pl.String, "tid": pl.Int64, "state": pl.String, "start": pl.Int64, "end": pl.Int64, "pcpu": pl.Int32}, orient="row")
    assert vcpu_migrations(s) == 2
    # rows out of order count the same
    assert vcpu_migrations(s.reverse()) == 2
    assert measure(s)["vcpu_migrations"] == 2


def test_metrics_set_the_replay_beside_the_recording(lab_capture, tmp_path):  # noqa: F811
    from cratrace.replay import replay_capture

    # the measures themselves are checked on hand-made timelines above;
    # here, that each side of the comparison is measured on its own
    # timeline: the capture's, and the one the replay wrote
    res = replay_capture(lab_capture, ["fair"], tmp_path / "out")
    d = res["fair"]["fidelity"]["diagnostics"]
    replayed = pl.read_parquet(tmp_path / "out" / "fair" / "model" / "vcpu_states.parquet")
    rec = sibling_wakeup_preemption(lab_capture.model["vcpu_states"].collect())
    rep = sibling_wakeup_preemption(replayed)
    assert d["sibling_wakeups"]["recorded"] == rec["wakeups"] > 0
    assert d["sibling_wakeup_preemption_pct"]["recorded"] == rec["preempted_pct"]
    assert d["sibling_wakeups"]["replayed"] == rep["wakeups"] > 0
    assert d["sibling_wakeup_preemption_pct"]["replayed"] == rep["preempted_pct"]
    assert set(d["preempted_s"]["recorded"]) == set(res["fair"]["vms"])
    # the lab's VMs have 3 vCPUs on this machine's CPUs: between spread and packed
    cpus = lab_capture.meta["cpus"]
    for side in ("recorded", "replayed"):
        assert 100 / cpus <= d["vm_cpu_concentration_pct"][side] <= 100
    assert d["vcpu_migrations"]["recorded"] == vcpu_migrations(lab_capture.model["vcpu_states"].collect())
    assert d["vcpu_migrations"]["replayed"] == vcpu_migrations(replayed)


def test_model_and_replay_hand_tables_over_without_pyarrow(lab_capture, tmp_path):  # noqa: F811
    # the marker parse and the replay's results cross the Rust boundary
    # through the Arrow PyCapsule interface; pyarrow's import (about 50 ms)
    # is for the reference reader and the tests, not the pipeline
    import shutil
    import subprocess
    import sys

    cap = tmp_path / "cap"
    shutil.copytree(lab_capture.path, cap)
    code = (
        "import sys\n"
        "from cratrace.model import build_model\n"
        "from cratrace.replay import replay_capture\n"
        f"rows = build_model({str(cap)!r})\n"
        f"replay_capture({str(cap)!r}, ['fair'], {str(tmp_path / 'out')!r})\n"
        "print(rows['markers'] > 0, 'pyarrow' in sys.modules)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert p.stdout.split() == ["True", "False"], p.stdout
