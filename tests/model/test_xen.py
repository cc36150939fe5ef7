"""Xen captures: vCPU timelines from xentrace runstates, held against
xenalyze on the real credit2 fixture."""

from __future__ import annotations

import shutil

import polars as pl
import pytest

import cratrace
from cratrace.model import build_model
from tests.helpers import cratrace as run_cli
from tests.helpers import xenalyze_running_cycles


@pytest.mark.skipif(shutil.which("xenalyze") is None, reason="xenalyze is not installed (Debian: xen-utils-common)")
def test_xen_guest_time_per_vcpu_matches_xenalyze(fixtures_dir, tmp_path):
    src = fixtures_dir / "xen_credit2.bin"
    run_cli("import", src, "-o", tmp_path / "cap", "--cpu-hz", "2.4e9", "-q", check=True)
    build_model(tmp_path / "cap")
    cap = cratrace.open(tmp_path / "cap")
    vs = cap.model["vcpu_states"].collect()
    lo, hi = cap.meta["time_range_ns"]
    gapless = vs.sort("vm", "vcpu", "start").group_by("vm", "vcpu").agg(((pl.col("start") - pl.col("end").shift(1)).drop_nulls() == 0).all().alias("ok"), pl.col("start").min().alias("a"), pl.col("end").max().alias("b"))
    assert gapless["ok"].all() and (gapless["a"] == lo).all() and (gapless["b"] == hi + 1).all()
    guest = vs.filter(pl.col("state") == "guest")
    ours = {(int(vm[3:]), v): ns * 2.4 for vm, v, ns in guest.group_by("vm", "vcpu").agg(pl.col("dur").sum()).iter_rows()}
    # the same without the intervals cut by the trace's edges
    inner = guest.filter((pl.col("start") != lo) & (pl.col("end") != hi + 1))
    closed = {(int(vm[3:]), v): ns * 2.4 for vm, v, ns in inner.group_by("vm", "vcpu").agg(pl.col("dur").sum()).iter_rows()}
    theirs = xenalyze_running_cycles(src)
    exact = 0
    for (dom, vcpu), cycles in theirs.items():
        if dom == 32767:
            continue  # the idle domain: idle time, not a VM's (the model has no such VM)
        # xenalyze counts an interval left open at a trace edge only when
        # a continue-running record proves it; the model's timeline runs
        # edge to edge. So every vCPU's xenalyze figure lies between ours
        # without the edge intervals and ours with them
        assert closed.get((dom, vcpu), 0) * 0.999 <= cycles <= ours[(dom, vcpu)] * 1.001, (dom, vcpu)
        exact += ours[(dom, vcpu)] == pytest.approx(cycles, rel=0.001)
    # and for most, nothing was cut: the same to 0.1%
    assert exact >= 10
