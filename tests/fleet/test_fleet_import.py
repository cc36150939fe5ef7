"""`cratrace import --fleet`'s options reach every host's import, which
runs on a Dask worker: a fleet import refuses what a single import of
the same raw capture refuses, with the same line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers import cratrace

pytestmark = pytest.mark.dask


def _raw(root: Path, name: str, trace: Path) -> Path:
    """A raw capture directory holding one trace.dat."""
    d = root / name
    d.mkdir(parents=True)
    shutil.copyfile(trace, d / "trace.dat")
    (d / "manifest.json").write_text(json.dumps({"format": "cratrace-raw", "files": [{"path": "trace.dat", "kind": "tracedat"}]}))
    return d


def _error_lines(stderr: str) -> list[str]:
    assert "Traceback" not in stderr and "panicked" not in stderr, stderr
    return [line for line in stderr.splitlines() if line.strip()]


def test_fleet_import_passes_max_memory_to_every_host(fixtures_dir, tmp_path):
    # issue 42: --max-memory was accepted with --fleet and then dropped, so
    # the workers imported with the default budget
    raw = tmp_path / "raw"
    zstd = _raw(raw, "zstd", fixtures_dir / "lisa_sched_load.v7zstd.dat")
    plain = _raw(raw, "plain", fixtures_dir / "lisa_sched_load.dat")

    single = cratrace("import", zstd, "-o", tmp_path / "single", "--max-memory", "4K")
    assert single.returncode == 2, single.stderr
    (refusal,) = _error_lines(single.stderr)
    assert "ERR:over-budget" in refusal and "--max-memory" in refusal
    # the single import names the file as given, a worker by its full path
    reason = refusal.split("trace.dat: ", 1)[1]

    # every host refused: nothing imported, exit 2 as for the single import
    p = cratrace("import", "--fleet", zstd, "-o", tmp_path / "caps1", "--max-memory", "4K", "--workers", "1")
    assert p.returncode == 2, p.stderr
    (line,) = _error_lines(p.stderr)
    assert line == f"error: zstd: {zstd.resolve() / 'trace.dat'}: {reason}"
    # and no empty output directory left where there was none
    assert not (tmp_path / "caps1").exists()

    # one of two refused: the other is imported (an uncompressed trace.dat
    # holds nothing decompressed), exit 1, the same line for the refused one
    p = cratrace("import", "--fleet", zstd, plain, "-o", tmp_path / "caps2", "--max-memory", "4K", "--workers", "2", "--json")
    assert p.returncode == 1, p.stderr
    (line,) = _error_lines(p.stderr)
    assert line == f"error: zstd: {zstd.resolve() / 'trace.dat'}: {reason}"
    out = json.loads(p.stdout)["captures"]
    assert out["zstd"] == {"error": f"{zstd.resolve() / 'trace.dat'}: {reason}"}
    assert out["plain"]["events"] == 3724 and out["plain"]["problems"] == []
    assert (tmp_path / "caps2" / "plain" / "capture.json").is_file() and not (tmp_path / "caps2" / "zstd").exists()

    # a budget the file fits in imports it; a size that is not one is
    # refused before any cluster starts
    p = cratrace("import", "--fleet", zstd, "-o", tmp_path / "caps3", "--max-memory", "64M", "--workers", "1", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["captures"]["zstd"]["events"] == 3724
    p = cratrace("import", "--fleet", zstd, "-o", tmp_path / "caps4", "--max-memory", "lots")
    assert p.returncode == 2 and _error_lines(p.stderr) == ["error: --max-memory lots: expected a size such as 512M or 4G"], p.stderr
    assert not (tmp_path / "caps4").exists()


def test_fleet_import_passes_cpu_hz_to_every_host(fixtures_dir, tmp_path):
    # the same gap as --max-memory: a xentrace host without host.json was
    # refused on the worker although --cpu-hz was given
    d = tmp_path / "raw" / "xen"
    d.mkdir(parents=True)
    shutil.copyfile(fixtures_dir / "xen_credit2.bin", d / "xentrace.bin")
    (d / "manifest.json").write_text(json.dumps({"format": "cratrace-raw", "files": [{"path": "xentrace.bin", "kind": "xentrace"}]}))
    single = cratrace("import", d, "-o", tmp_path / "single", "--cpu-hz", "2.4e9", "--json")
    assert single.returncode == 0, single.stderr
    p = cratrace("import", "--fleet", d, "-o", tmp_path / "caps", "--cpu-hz", "2.4e9", "--workers", "1", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["captures"]["xen"]["events"] == sum(json.loads(single.stdout)["events"].values())
    meta = json.loads((tmp_path / "caps" / "xen" / "capture.json").read_text())
    assert meta["events"] == json.loads((tmp_path / "single" / "capture.json").read_text())["events"]


def test_model_of_many_captures_exits_2_when_every_one_failed(fleet, tmp_path):
    # a capture whose event tables are gone cannot be modelled: alone among
    # good ones the command goes on (exit 1); when every one fails nothing
    # was done (exit 2, as import --fleet)
    from tests.fleet.conftest import copy_capture

    good = copy_capture(sorted(fleet["caps"].iterdir())[0], tmp_path / "good")
    broken = []
    for name in ("b1", "b2"):
        c = copy_capture(good, tmp_path / name)
        shutil.rmtree(c / "events")
        broken.append(c)
    some = cratrace("model", good, broken[0], "--workers", "1")
    assert some.returncode == 1, some.stderr
    assert any("b1" in line for line in _error_lines(some.stderr))
    assert (good / "model" / "vcpu_states.parquet").is_file()
    every = cratrace("model", *broken, "--workers", "1")
    assert every.returncode == 2, every.stderr
    assert sum(("b1" in line) or ("b2" in line) for line in _error_lines(every.stderr)) >= 2


def test_a_refusal_comes_back_as_a_result_so_it_is_not_tried_again(fixtures_dir, tmp_path):
    # Dask retries a task that raises; cratrace's own refusals (over
    # budget here) would be the same on the second try, so the task
    # returns them instead, and only other failures raise
    from cratrace.fleet.tasks import TaskError, import_one, refused

    zstd = _raw(tmp_path / "raw", "zstd", fixtures_dir / "lisa_sched_load.v7zstd.dat")
    r = import_one(str(zstd), str(tmp_path / "cap"), False, "lz4", max_memory=4096)
    assert "ERR:over-budget" in refused(r) and "\n" not in refused(r), r
    assert not (tmp_path / "cap").exists()
    ok = import_one(str(zstd), str(tmp_path / "cap"), False, "lz4")
    assert refused(ok) is None and ok["events"] == 3724
    with pytest.raises(TaskError):
        import_one(None, str(tmp_path / "cap2"), False, "lz4")  # not a path: a bug, not a refusal
