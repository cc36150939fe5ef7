"""The model build's memory follows the trace, not its square. Three steps
once joined every row of one table with every row of another sharing a
thread or VM: a second of the kvm-heavy-spin scenario (146 k events)
peaked at 8.5 GB, three seconds ran out of 24 GB. A peak-RSS bound, not a
timing: the build now stays near 200 MB on it, the old code at 40 times
the bound. The same capture also checks that building twice gives
identical tables."""

from __future__ import annotations

import os
import subprocess
import sys

import polars as pl

BOUND_KIB = 1 << 20  # 1 GiB: generous over ~200 MB, far under 8.5 GB


def _peak_rss_kib(cmd: list[str]) -> int:
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, p.stderr.read().decode()[-500:]
    return usage.ru_maxrss


def test_a_second_of_heavy_spin_models_within_a_gigabyte(tmp_path):
    trace, cap = tmp_path / "spin.dat", tmp_path / "cap"
    py = [sys.executable, "-m", "cratrace"]
    subprocess.run([*py, "synth", "kvm-heavy-spin", "-o", trace, "--seed", "1", "--set", "duration_ms=1000"], check=True, capture_output=True)
    subprocess.run([*py, "import", trace, "-o", cap, "-q"], check=True, capture_output=True)
    kib = _peak_rss_kib([*py, "model", str(cap), "-q"])
    states = pl.read_parquet(cap / "model" / "vcpu_states.parquet")
    spins = pl.read_parquet(cap / "model" / "spin_episodes.parquet")
    # the scenario exercised what was quadratic: many runs, marks and episodes
    assert states.height > 50_000 and spins.height > 5_000 and spins["holder_vcpu"].drop_nulls().len() > 1_000
    assert kib < BOUND_KIB, f"model peak RSS {kib / 1024:.0f} MiB"
    # and a second build of the same capture gives the same tables, row for
    # row (two PV kicks ending one halt once came out in either order)
    first = {f.name: pl.read_parquet(f) for f in (cap / "model").glob("*.parquet")}
    subprocess.run([*py, "model", str(cap), "-q"], check=True, capture_output=True)
    for name, df in first.items():
        assert df.equals(pl.read_parquet(cap / "model" / name)), f"{name} differs between two builds"


def _spin_capture(tmp_path, seed: int):
    """300 ms of kvm-heavy-spin, imported and modelled whole."""
    from cratrace.model import build_model

    trace, cap = tmp_path / "spin.dat", tmp_path / "cap"
    py = [sys.executable, "-m", "cratrace"]
    subprocess.run([*py, "synth", "kvm-heavy-spin", "-o", trace, "--seed", str(seed), "--set", "duration_ms=300"], check=True, capture_output=True)
    subprocess.run([*py, "import", trace, "-o", cap, "-q"], check=True, capture_output=True)
    build_model(cap)
    return cap


def test_building_vcpu_timelines_in_batches_and_time_windows_changes_no_row(tmp_path, monkeypatch):
    # a long capture's vCPU timelines are built a few vCPUs at a time, or
    # one vCPU in time windows with its state carried across their edges,
    # and written as they are done (later steps read them back); the
    # tables must be the ones a build of all vCPUs at once, held whole,
    # gives: runs, KVM marks, wakeups and spin episodes straddle the edges
    import shutil

    from cratrace.model import build_model
    from cratrace.model import vcpu_states as vs

    cap = _spin_capture(tmp_path, seed=2)
    batches, cuts = vs._vcpu_batches, vs._window_cuts
    for limit, want in ((8_000, "batches"), (500, "windows")):
        seen: list = []
        monkeypatch.setattr(vs, "MARKS_PER_BATCH", limit)
        monkeypatch.setattr(vs, "_vcpu_batches", lambda marks: seen.append(("batches", b := batches(marks))) or b)
        monkeypatch.setattr(vs, "_window_cuts", lambda *a: seen.append(("cuts", c := cuts(*a))) or c)
        shutil.rmtree(tmp_path / want, ignore_errors=True)
        shutil.copytree(cap, tmp_path / want, ignore=shutil.ignore_patterns("model"))
        build_model(tmp_path / want)
        plan = [len(b) for kind, bs in seen if kind == "batches" for b in bs]
        windows = [len(c) + 1 for kind, c in seen if kind == "cuts" and c]
        if want == "batches":
            # 2 VMs of 4 vCPUs, several to a batch, none cut
            assert sum(plan) == 8 and 1 < len(plan) < 8 and not windows, seen
        else:
            # a vCPU a batch, each in several windows
            assert plan == [1] * 8 and len(windows) == 8 and min(windows) > 2, seen
        for name in ("vcpu_states", "spin_episodes", "threads"):
            whole = pl.read_parquet(cap / "model" / f"{name}.parquet")
            assert whole.height and whole.equals(pl.read_parquet(tmp_path / want / "model" / f"{name}.parquet")), (want, name)


def test_parked_frames_read_back_whole_or_in_batches_equal_the_frame(tmp_path, monkeypatch):
    # the spin episodes wait on disk while a long capture's vCPU timelines
    # are built, then are read back a few columns whole (for their holders)
    # and a batch at a time (to be written): both must give the frame back
    from cratrace.model import build

    monkeypatch.setattr(build, "PARKED_BATCH_ROWS", 3)
    df = pl.DataFrame({"vm": ["a", "b", None, "a", "c", "b", "a"], "vcpu": pl.Series([0, 1, 2, 3, 4, 5, 6], dtype=pl.Int32), "start": [7, 6, 5, 4, 3, 2, 1]})
    parked = build.Parked(tmp_path / "p", df)
    assert parked.columns("start", "vm").equals(df.select("start", "vm"))
    parts = list(parked.batches())
    assert [p.height for p in parts] == [3, 3, 1] and pl.concat(parts).equals(df)
    assert not (tmp_path / "p").exists()
    empty = build.Parked(tmp_path / "e", df.clear())
    assert empty.columns("vm").equals(df.clear().select("vm")) and pl.concat(list(empty.batches())).equals(df.clear())


def test_spin_episodes_written_in_batches_beside_their_holders_change_no_row(tmp_path, monkeypatch):
    # with its vCPU timelines built in batches, a capture's spin episodes
    # are parked, then written a batch at a time, each with its slice of
    # the holders found for all of them: the table must be the whole build's
    import shutil

    from cratrace.model import build, build_model
    from cratrace.model import vcpu_states as vs
    from cratrace.model.spin_episodes import holder_column

    cap = _spin_capture(tmp_path, seed=3)
    whole = pl.read_parquet(cap / "model" / "spin_episodes.parquet")
    parked: list = []
    monkeypatch.setattr(vs, "MARKS_PER_BATCH", 8_000)
    monkeypatch.setattr(build, "PARKED_BATCH_ROWS", 777)
    monkeypatch.setattr(build, "holder_column", lambda ep, st: parked.append(ep.height) or holder_column(ep, st))
    shutil.copytree(cap, tmp_path / "b", ignore=shutil.ignore_patterns("model"))
    build_model(tmp_path / "b")
    # parked, in several batches, holders in several places
    assert parked == [whole.height] and whole.height > 3 * 777 and whole["holder_vcpu"].drop_nulls().len() > 100
    assert whole.equals(pl.read_parquet(tmp_path / "b" / "model" / "spin_episodes.parquet"))
