"""The native trace.dat reader against trace-cmd's own view of real files.

Files: the shared fixtures (real ARM-board traces, v6 and v7 with zstd or
no compression), conversions of them made here with `trace-cmd convert`
(v6 → v7 zstd and uncompressed, v7 → v6), and traces recorded on this machine.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest

import cratrace
from cratrace import _native
from tests.helpers import cratrace as run_cli
from tests.helpers import report_counts, report_lines

pytestmark = pytest.mark.skipif(shutil.which("trace-cmd") is None, reason="trace-cmd is not installed")

FIXTURE_NAMES = ["lisa_sched_load.dat", "lisa_sched_load.v7zstd.dat", "trappy_raw.dat", "trappy_raw.v7.dat", "trappy_idle.dat"]


def _import(src: Path, out: Path) -> cratrace.Capture:
    run_cli("import", src, "-o", out, "-q", check=True)
    return cratrace.open(out)


@pytest.fixture(scope="module")
def variants(fixtures_dir, tmp_path_factory) -> list[Path]:
    """The fixtures plus trace-cmd conversions of them."""
    d = tmp_path_factory.mktemp("variants")
    files = [fixtures_dir / n for n in FIXTURE_NAMES]
    conv = [
        ("trappy_idle.dat", "7", "zstd"),
        ("trappy_idle.dat", "7", "none"),
        ("lisa_sched_load.v7zstd.dat", "6", None),
    ]
    for name, version, comp in conv:
        out = d / f"{Path(name).stem}.v{version}{comp or ''}.dat"
        cmd = ["trace-cmd", "convert", "-i", str(fixtures_dir / name), "--file-version", version]
        if comp:
            cmd += ["--compression", comp]
        r = subprocess.run([*cmd, "-o", str(out)], capture_output=True, text=True)
        if r.returncode == 0 and out.exists():
            files.append(out)
    return files


def test_row_counts_equal_trace_cmd_report_on_every_file(variants, tmp_path):
    assert len(variants) >= 6, "trace-cmd convert should have produced variants"
    for i, f in enumerate(variants):
        cap = _import(f, tmp_path / f"cap{i}")
        assert cap.meta["events"] == report_counts(f), f.name


def _report_ts(ns: int) -> str:
    # trace-cmd prints microseconds rounded to nearest
    us = (ns + 500) // 1000
    return f"{us // 1_000_000}.{us % 1_000_000:06d}"


def _render(v) -> str:
    return str(int(v)) if isinstance(v, bool) else str(v)


def test_every_scalar_field_equals_trace_cmd_report_raw(variants, tmp_path):
    """`trace-cmd report -R` prints each event's fields as name=value in
    format order; our rows must render to exactly those strings."""
    checked = 0
    for i, f in enumerate(variants[:5]):
        cap = _import(f, tmp_path / f"c{i}")
        expected: dict[str, list[tuple]] = {}
        for r in report_lines(f, raw=True):
            expected.setdefault(r["event"], []).append((r["ts"], int(r["cpu"]), int(r["pid"]), r["rest"].strip()))
        for name, lf in cap.events.items():
            df = lf.collect()
            own = [c for c in df.columns if c not in ("ts", "cpu", "pid", "instance")]
            if name in ("print", "bprint") or any(isinstance(df.schema[c], pl.List) for c in own):
                continue
            got = []
            for row in df.iter_rows(named=True):
                fields = " ".join(f"{c.removeprefix('field_')}={_render(row[c])}" for c in own)
                got.append((_report_ts(row["ts"]), row["cpu"], row["pid"], fields))
            assert sorted(got) == sorted(expected[name]), f"{f.name}:{name}"
            checked += len(got)
    assert checked > 3000


def test_bprint_text_is_rendered_from_the_stored_printk_formats(fixtures_dir, tmp_path):
    f = fixtures_dir / "trappy_raw.dat"
    cap = _import(f, tmp_path / "cap")
    texts = cap.events["bprint"].collect()["text"].to_list()
    shown = [r["rest"] for r in report_lines(f) if r["event"] == "bprint"]
    if not shown:  # see report_lines: one unexplained empty answer from trace-cmd in CI
        rows = report_lines(f)
        shown = [r["rest"] for r in rows if r["event"] == "bprint"]
        assert shown, f"trace-cmd report showed {len(rows)} events, none bprint, twice"
    assert len(texts) == len(shown) == 2
    for ours, theirs in zip(texts, shown):
        # trace-cmd prints "<symbol>: <text>"; the text is ours up to the first newline
        assert theirs.endswith(ours.splitlines()[0]), (ours, theirs)


def test_rows_are_sorted_by_ts_and_capture_json_is_complete(fixtures_dir, tmp_path):
    f = fixtures_dir / "lisa_sched_load.v7zstd.dat"
    cap = _import(f, tmp_path / "cap")
    for name, lf in cap.events.items():
        ts = lf.select("ts").collect()["ts"]
        assert ts.is_sorted(), name
    m = cap.meta
    assert m["schema_version"] == 1
    assert m["cpus"] == 6
    src = m["sources"][0]
    assert src["summary"]["version"] == 7 and src["summary"]["compression"] == "zstd"
    # a file imported on its own: BLAKE3 (tests/test_checksums.py holds it to the spec's vectors)
    assert src["blake3"] == _native.file_blake3(f) and "sha256" not in src
    lo, hi = m["time_range_ns"]
    assert lo < hi


def test_fields_named_like_common_columns_are_prefixed(fixtures_dir, tmp_path):
    cap = _import(fixtures_dir / "lisa_sched_load.dat", tmp_path / "cap")
    cols = cap.events["sched_migrate_task"].collect_schema().names()
    assert cols[:4] == ["ts", "cpu", "pid", "instance"]
    assert "field_pid" in cols and "dest_cpu" in cols


def test_python_api_gives_lazyframes_and_sql(fixtures_dir, tmp_path):
    cap = _import(fixtures_dir / "trappy_idle.dat", tmp_path / "cap")
    n = cap.events["sched_switch"].select(pl.len()).collect().item()
    assert cap.sql("SELECT count(*) AS n FROM sched_switch")["n"][0] == n > 0
    assert cap.table("cpu_idle").collect().height == report_counts(fixtures_dir / "trappy_idle.dat")["cpu_idle"]
