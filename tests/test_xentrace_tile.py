"""The benchmark's xentrace tiler (benchmarks/xentrace_tile.py): each copy
of a file comes back later in time and otherwise unchanged, as the reader
sees it, after a lost-records record per pCPU at the seam."""

from __future__ import annotations

import shutil
import subprocess

import polars as pl
import pytest

from benchmarks.xentrace_tile import tile
from cratrace.synth.xentrace_writer import XentraceWriter
from tests.helpers import cratrace as run_cli


def _events(src, out):
    run_cli("import", src, "-o", out, "--cpu-hz", "2.4e9", "-q", check=True)
    return out / "events"


def _known(path):
    w = XentraceWriter()
    w.record(0, 0x00021011, [(14 << 16) | 2], tsc=1000)
    w.record(0, 0x00081001)  # no TSC: inherits 1000 in every copy
    w.record(1, 0x0002800A, [0, 1, 0x7FFF, 0], tsc=500)  # the first TSC
    w.record(1, 0x0001F001, [5, 0, 300, 0], tsc=900)  # lost records: first lost TSC 300
    w.record(1, 0x0004_1234, [7, 8, 9], tsc=2000)  # the last TSC: a span of 1501 (a TRC_DOM0OP id, not decoded)
    w.write(path, window_records=2)


def test_each_copy_is_the_file_again_after_its_last_tsc(tmp_path):
    src = tmp_path / "one.bin"
    _known(src)
    (tmp_path / "three.bin").write_bytes(tile(src.read_bytes(), 3))
    one, three = _events(src, tmp_path / "one"), _events(tmp_path / "three.bin", tmp_path / "three")
    step = 1501
    for table, cols in {
        "xen_runstate_change": ["dom", "vcpu", "old_state", "new_state"],
        "xen_hvm_vmentry": [],
        "xen_switch": ["prev_dom", "prev_vcpu", "next_dom", "next_vcpu"],
        "xen_record": ["id", "words"],
    }.items():
        a = pl.read_parquet(one / f"{table}.parquet").select("cpu", "tsc", *cols)
        b = pl.read_parquet(three / f"{table}.parquet").select("cpu", "tsc", *cols)
        want = pl.concat([a.with_columns(pl.col("tsc") + k * step) for k in range(3)])
        assert b.sort("tsc", "cpu").rows() == want.sort("tsc", "cpu").rows(), table
    lost = pl.read_parquet(three / "xen_lost_records.parquet").select("cpu", "tsc", "lost", "first_tsc", "dom", "vcpu").sort("tsc", "cpu")
    # the file's own record in each copy, and at each seam one per pCPU:
    # one record lost since the previous copy's last TSC, stamped with this
    # copy's first
    own = [(1, 900 + k * step, 5, 300 + k * step, 0, 0) for k in range(3)]
    seams = [(cpu, 500 + k * step, 1, 2000 + (k - 1) * step, 0x7FFF, cpu) for k in (1, 2) for cpu in (0, 1)]
    assert lost.rows() == sorted(own + seams, key=lambda r: (r[1], r[0]))


@pytest.mark.skipif(shutil.which("xenalyze") is None, reason="xenalyze (xen-utils-common) not installed")
def test_xenalyze_reads_a_tiled_file_to_its_end(tmp_path, fixtures_dir):
    # without the seams' lost records it stops with FATAL at the first seam
    tiled = tmp_path / "x3.bin"
    xen_fixture = fixtures_dir / "xen_credit2.bin"
    tiled.write_bytes(tile(xen_fixture.read_bytes(), 3))
    r = subprocess.run(["xenalyze", "--summary", "--cpu-hz=2.4G", str(tiled)], capture_output=True, text=True)
    assert r.returncode == 0 and "FATAL" not in r.stdout + r.stderr
    one = subprocess.run(["xenalyze", "--summary", "--cpu-hz=2.4G", str(xen_fixture)], capture_output=True, text=True).stdout
    secs = [float(x) for x in (one.split("Total time: ")[1].split()[0], r.stdout.split("Total time: ")[1].split()[0])]
    assert secs[1] == pytest.approx(3 * secs[0], rel=0.01)
