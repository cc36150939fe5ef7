"""The replay's phases live in a temporary spill (`cratrace.replay.spill`),
not in the Python process: the engine reads the spill's files as it read
the in-memory columns, and the spill goes with the command, however the
command ends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from array import array
from pathlib import Path

import polars as pl
import pytest

from cratrace import _native
from cratrace.cli.signals import Stopped
from cratrace.errors import UsageError
from cratrace.replay import replay_capture, run
from cratrace.replay.spill import PhaseSpill
from cratrace.replay.workload import BLOCK, MARK, WORK, Workload
from tests.helpers import cratrace
from tests.replay.test_phase_columns import _run, _workload


@pytest.fixture()
def spill_dir(tmp_path, monkeypatch) -> Path:
    """Where this test's spills go (TMPDIR, as the docstring says)."""
    d = tmp_path / "spills"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


def test_the_spill_gives_back_what_was_appended_as_bytes_or_ints(spill_dir):
    s = PhaseSpill()
    assert len(s) == 0 and [len(c) for c in s.columns()] == [0, 0, 0, 0] and s.dir is None
    s.extend((array("I", [1, 2]).tobytes(), bytes([WORK, MARK]), array("q", [-5, 2**40]).tobytes(), [0, 3]))
    s.extend(([7], [BLOCK], [9], [0]))
    cols = s.columns()
    assert [c.tolist() for c in cols] == [[1, 2, 7], [WORK, MARK, BLOCK], [-5, 2**40, 9], [0, 3, 0]]
    assert [c.typecode for c in cols] == ["I", "B", "q", "q"] and len(s) == 3
    assert sorted(os.listdir(spill_dir)) == [os.path.basename(s.dir)]
    with pytest.raises(ValueError, match="not one number of phases"):
        s.extend(([1, 2], [WORK], [0], [0]))
    with pytest.raises(ValueError, match="not one number of phases"):
        s.extend(([1], [WORK], b"\0" * 7, [0]))
    s.close()
    s.close()
    assert s.closed and os.listdir(spill_dir) == []


def test_a_forgotten_spill_goes_when_collected(spill_dir):
    s = PhaseSpill()
    s.extend(([0], [WORK], [1], [0]))
    assert os.listdir(spill_dir)
    del s
    assert os.listdir(spill_dir) == []


def _same_replay(a: dict, b: dict) -> None:
    for k in ("states", "slices", "marks", "episodes"):
        assert pl.DataFrame(a[k]).equals(pl.DataFrame(b[k])), k
    for k, v in a.items():
        if k not in ("states", "slices", "marks", "episodes", "wall_s"):
            assert v == b[k], k


def test_the_engine_reads_the_spills_files_as_it_read_the_columns(spill_dir):
    w = _workload()
    # recorded CPUs on the work phases (b = 1 + CPU), for the recorded placement
    t, k, a, _ = w.phase_columns()
    b = [1 + (i % 2) if kind == WORK else 0 for i, kind in enumerate(k)]
    w2 = Workload(t0=0, duration_ns=10**9, vm_names=w.vm_names)
    for i in range(len(w.tids)):
        w2.add_thread(w.tids[i], w.vm_of[i], w.vcpu_of[i], 0, 0)
    w2.extend_phases(t, k, a, b)
    for policy in ("fair+wapd", "eevdf+recorded"):
        cols = _run(w2, w2.phase_columns(), policy)
        files = _run(w2, None, policy, phase_files=w2.phases.paths())
        assert files["events"] > 0
        _same_replay(cols, files)


def test_broken_spill_files_are_refused_in_one_line(spill_dir):
    w = _workload()
    cols = w.phase_columns()
    paths = w.phases.paths()
    with pytest.raises(ValueError, match=r"^replay: phase_files: 3 paths; expected 4 \(thread, kind, a, b\)$"):
        _run(w, None, phase_files=paths[:3])
    with open(paths[2], "r+b") as f:
        f.truncate(os.path.getsize(paths[2]) - 8)
    with pytest.raises(ValueError, match=r"^replay: phase_files: .*a\.i64 holds \d+ bytes; expected \d+ \(\d+ phases of 8 bytes\)$"):
        _run(w, None, phase_files=paths)
    os.remove(paths[0])
    with pytest.raises(ValueError, match=r"^replay: phase_files: .*thread\.u32: "):
        _run(w, None, phase_files=paths)
    with pytest.raises(ValueError, match="^replay: give the phases as phase_thread, phase_kind, phase_a and phase_b, or as phase_files$"):
        _run(w, cols, phase_files=paths)


def test_a_capture_replays_alike_from_the_spill_and_from_columns(two_hogs, tmp_path, spill_dir, monkeypatch):
    spilled = replay_capture(two_hogs, ["fair", "eevdf+recorded"], tmp_path / "spilled", seed=3)
    # the phases handed over as the in-memory columns the replay used before
    monkeypatch.setattr(PhaseSpill, "native_args", lambda self: dict(zip(("phase_thread", "phase_kind", "phase_a", "phase_b"), self.columns())))
    columns = replay_capture(two_hogs, ["fair", "eevdf+recorded"], tmp_path / "columns", seed=3)
    assert json.dumps(spilled, sort_keys=True) == json.dumps(columns, sort_keys=True)
    for policy in ("fair", "eevdf+recorded"):
        for table in (tmp_path / "spilled" / policy / "model").iterdir():
            assert pl.read_parquet(table).equals(pl.read_parquet(tmp_path / "columns" / policy / "model" / table.name)), (policy, table.name)
    assert os.listdir(spill_dir) == []


def test_the_spill_is_gone_after_a_what_if_replay(two_hogs, tmp_path, spill_dir):
    gone, copied = sorted(replay_capture(two_hogs, ["fair"], tmp_path / "base")["fair"]["vms"])
    # one workload dropped a VM, the next added a copy of the other
    m = replay_capture(two_hogs, ["fair"], tmp_path / "more", add_vms=[copied], drop_vms=[gone])["fair"]
    assert sorted(m["vms"]) == [copied, f"{copied}+1"]
    assert os.listdir(spill_dir) == []


def test_the_spill_is_gone_after_an_error_or_a_signal(two_hogs, tmp_path, spill_dir, monkeypatch):
    with pytest.raises(UsageError, match="no VM named 'nope'"):
        replay_capture(two_hogs, ["fair"], tmp_path / "bad", settings={"cap.nope": "50"})
    assert os.listdir(spill_dir) == []
    seen = []

    def stopped(w, *args, **kw):
        seen.append(os.listdir(spill_dir))
        raise Stopped(15)

    monkeypatch.setattr(run, "_run_engine", stopped)
    with pytest.raises(Stopped):
        replay_capture(two_hogs, ["fair"], tmp_path / "stopped")
    # the spill was there while the engine ran, and went with the stop
    assert len(seen) == 1 and len(seen[0]) == 1
    assert os.listdir(spill_dir) == []


def test_the_cli_leaves_no_spill_behind(two_hogs, tmp_path):
    spills = tmp_path / "tmp"
    spills.mkdir()
    env = {**os.environ, "TMPDIR": str(spills)}
    ok = subprocess.run([sys.executable, "-m", "cratrace", "replay", str(two_hogs), "-p", "fair", "-o", str(tmp_path / "out")], capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([sys.executable, "-m", "cratrace", "replay", str(two_hogs), "-p", "fair", "-o", str(tmp_path / "out2"), "--set", "cap.nope=50"], capture_output=True, text=True, env=env)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert list(spills.iterdir()) == []


def test_a_scope_removes_its_own_threads_spills_only(spill_dir):
    import threading

    from cratrace.replay.spill import removing_spills

    theirs = PhaseSpill()
    entered, leave = threading.Event(), threading.Event()

    def beside():
        # a replay running in another thread (the fleet's workers), whose
        # spill is made while this thread's scope is open
        with removing_spills():
            theirs.extend(([0], [WORK], [1], [0]))
            entered.set()
            leave.wait(10)

    other = threading.Thread(target=beside)
    other.start()
    with removing_spills():
        ours = PhaseSpill()
        ours.extend(([0], [WORK], [1], [0]))
        entered.wait(10)
    assert ours.closed and not theirs.closed and os.path.isdir(theirs.dir)
    leave.set()
    other.join()
    assert theirs.closed and os.listdir(spill_dir) == []


def test_jobs_0_runs_no_more_engines_than_the_memory_holds():
    from cratrace.replay.concurrency import REPLAY_BYTES_PER_PHASE, engines_at_once

    gib = 1 << 30
    phases = 100_000_000
    # a CPU each, at most one per policy, while memory is plenty
    assert engines_at_once(3, phases, cpus=2, memory=64 * gib) == 2
    assert engines_at_once(1, phases, cpus=8, memory=64 * gib) == 1
    # two replays' worth of memory: two of four policies at once
    assert engines_at_once(4, phases, cpus=8, memory=2 * phases * REPLAY_BYTES_PER_PHASE + 1) == 2
    # never none (the memory available now read when not given)
    assert engines_at_once(4, phases, cpus=8, memory=gib) == 1
    assert engines_at_once(4, 0, cpus=8, memory=0) == 1
    assert engines_at_once(3, phases, cpus=2) >= 1
