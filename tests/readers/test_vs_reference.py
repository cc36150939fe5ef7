"""Every field of every row of the native reader equals the reference
reader's (libtracecmd + libtraceevent through ctypes)."""

from __future__ import annotations

import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

import cratrace
from cratrace.reference import libtracecmd
from tests.helpers import cratrace as run_cli

pytestmark = pytest.mark.skipif(not libtracecmd.available(), reason="libtracecmd/libtraceevent not installed")


def _native_rows(cap: cratrace.Capture) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for name, lf in cap.events.items():
        df = lf.collect()
        own = [c for c in df.columns if c not in ("ts", "cpu", "pid", "instance") and not (name == "bprint" and c == "text")]
        out[name] = sorted(
            (r["ts"], r["cpu"], r["pid"], r["instance"], tuple((c.removeprefix("field_"), r[c]) for c in own)) for r in df.iter_rows(named=True)
        )
    return out


def _reference_rows(path: Path) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = defaultdict(list)
    with libtracecmd.ReferenceReader(str(path)) as r:
        for e in r.events():
            fields = tuple((k, v) for k, v in e.fields.items() if not k.startswith("common_"))
            out[e.name].append((e.ts, e.cpu, e.pid, e.instance, fields))
    return {k: sorted(v) for k, v in out.items()}


def _compare(path: Path, tmp: Path) -> int:
    run_cli("import", path, "-o", tmp, "-q", check=True)
    ours = _native_rows(cratrace.open(tmp))
    ref = _reference_rows(path)
    assert sorted(ours) == sorted(ref), path.name
    n = 0
    for name in ref:
        assert len(ours[name]) == len(ref[name]), f"{path.name}:{name}"
        for a, b in zip(ours[name], ref[name]):
            assert a == b, f"{path.name}:{name}: native {a} != reference {b}"
        n += len(ref[name])
    return n


@pytest.mark.parametrize("name", ["lisa_sched_load.dat", "lisa_sched_load.v7zstd.dat", "trappy_raw.dat", "trappy_raw.v7.dat", "trappy_idle.dat"])
def test_fixture_fields_equal_reference(fixtures_dir, tmp_path, name):
    assert _compare(fixtures_dir / name, tmp_path / "cap") > 0


def test_zstd_conversion_fields_equal_reference(fixtures_dir, tmp_path):
    # Debian's trace-cmd compresses with zstd only; zlib files come from
    # cratrace's own writer (tests/synth).
    out = tmp_path / "z.dat"
    r = subprocess.run(["trace-cmd", "convert", "-i", str(fixtures_dir / "trappy_raw.dat"), "--file-version", "7", "--compression", "zstd", "-o", str(out)], capture_output=True)
    assert r.returncode == 0, r.stderr
    assert _compare(out, tmp_path / "cap") == 757
