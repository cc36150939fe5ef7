"""The benchmark's xentrace tiler (benchmarks/xentrace_tile.py): each copy
of a file comes back later in time and otherwise unchanged, as the
reader sees it."""

from __future__ import annotations

import polars as pl

from benchmarks.xentrace_tile import tile
from cratrace.synth.xentrace_writer import XentraceWriter
from tests.helpers import cratrace as run_cli


def _events(src, out):
    run_cli("import", src, "-o", out, "--cpu-hz", "2.4e9", "-q", check=True)
    return out / "events"


def test_each_copy_is_the_file_again_after_its_last_tsc(tmp_path):
    w = XentraceWriter()
    w.record(0, 0x00021011, [(14 << 16) | 2], tsc=1000)
    w.record(0, 0x00081001)  # no TSC: inherits 1000 in every copy
    w.record(1, 0x0002800A, [0, 1, 0x7FFF, 0], tsc=500)
    w.record(1, 0x0001F001, [5, 0, 300, 0], tsc=900)  # lost records: first lost TSC 300
    w.record(1, 0x0003_1234, [7, 8, 9], tsc=2000)  # the last TSC: copies start at 2001
    src = tmp_path / "one.bin"
    w.write(src, window_records=2)
    (tmp_path / "three.bin").write_bytes(tile(src.read_bytes(), 3))
    one, three = _events(src, tmp_path / "one"), _events(tmp_path / "three.bin", tmp_path / "three")
    for table, cols in {
        "xen_runstate_change": ["dom", "vcpu", "old_state", "new_state"],
        "xen_hvm_vmentry": [],
        "xen_switch": ["prev_dom", "prev_vcpu", "next_dom", "next_vcpu"],
        "xen_lost_records": ["lost", "first_tsc"],
        "xen_record": ["id", "words"],
    }.items():
        a = pl.read_parquet(one / f"{table}.parquet").select("cpu", "tsc", *cols)
        b = pl.read_parquet(three / f"{table}.parquet").select("cpu", "tsc", *cols)
        want = pl.concat([a.with_columns(pl.col("tsc") + k * 2001) for k in range(3)])
        if "first_tsc" in cols:
            want = want.with_columns(first_tsc=pl.col("tsc") - 600)
        assert b.sort("tsc", "cpu").rows() == want.sort("tsc", "cpu").rows(), table
