"""Invariants of the model tables on real captures (a lab capture recorded
here, and the shared fixtures)."""

from __future__ import annotations

import json

import polars as pl
import pytest

import cratrace
from cratrace.model import build_model
from cratrace.tables import MODEL_TABLES
from tests.helpers import cratrace as run_cli


def _slices_ok(cap: cratrace.Capture) -> None:
    s = cap.model["cpu_slices"].collect().sort("cpu", "start")
    lo, hi = cap.meta["time_range_ns"]
    per = s.group_by("cpu").agg(
        pl.col("start").min().alias("first"),
        pl.col("end").max().alias("last"),
        ((pl.col("start") - pl.col("end").shift(1)).drop_nulls() == 0).all().alias("contiguous"),
        (pl.col("dur") > 0).all().alias("positive"),
    )
    assert per["contiguous"].all(), "slices on a CPU must neither overlap nor leave gaps"
    assert per["positive"].all()
    assert (per["first"] == lo).all() and (per["last"] == hi + 1).all(), "slices cover the captured span"


@pytest.mark.parametrize("name", ["lisa_sched_load.dat", "trappy_idle.dat"])
def test_fixture_slices_cover_the_span_without_overlap(fixtures_dir, tmp_path, name):
    run_cli("import", fixtures_dir / name, "-o", tmp_path / "cap", "-q", check=True)
    cap = cratrace.open(tmp_path / "cap")
    build_model(cap)
    _slices_ok(cratrace.open(tmp_path / "cap"))


def test_every_table_has_its_declared_schema(lab_capture):
    for name, t in MODEL_TABLES.items():
        got = lab_capture.model[name].collect_schema().names()
        assert got == t.column_names, name
    assert json.loads((lab_capture.path / "capture.json").read_text())["model"]["tables"]["vcpu_states"] > 0


def test_lab_slices_and_vcpu_timelines_are_gap_free(lab_capture):
    _slices_ok(lab_capture)
    vs = lab_capture.model["vcpu_states"].collect().sort("vm", "vcpu", "start")
    lo, hi = lab_capture.meta["time_range_ns"]
    g = vs.group_by("vm", "vcpu").agg(
        pl.col("start").min().alias("first"), pl.col("end").max().alias("last"), ((pl.col("start") - pl.col("end").shift(1)).drop_nulls() == 0).all().alias("gapless")
    )
    assert g.height == 6, "2 VMs x 3 vCPUs"
    assert g["gapless"].all() and (g["first"] == lo).all() and (g["last"] == hi + 1).all()
    assert set(vs["state"].unique()) >= {"guest", "preempted", "blocked", "spinning"}


def test_threads_know_the_lab_vms(lab_capture):
    th = lab_capture.model["threads"].collect()
    vcpus = th.filter(pl.col("role") == "vcpu").sort("vm", "vcpu")
    assert vcpus["vm"].to_list() == ["vm0"] * 3 + ["vm1"] * 3
    assert vcpus["comm"].to_list() == [f"CPU {i}/KVM" for i in range(3)] * 2
    assert th.filter(pl.col("tid") == 0)["role"].to_list() == ["idle"]


def test_run_time_from_slices_matches_sched_stat_runtime(lab_capture):
    if not lab_capture.has("sched_stat_runtime"):
        pytest.skip("kernel without sched_stat_runtime")
    rt = lab_capture.sql("SELECT pid AS tid, sum(runtime) AS rt FROM sched_stat_runtime GROUP BY 1")
    vc = lab_capture.model["threads"].collect().filter(pl.col("role") == "vcpu").select("tid")
    sl = lab_capture.model["cpu_slices"].collect().group_by("tid").agg(pl.col("dur").sum().alias("sl"))
    j = vc.join(rt, on="tid").join(sl, on="tid")
    assert j.height == 6
    # sched_stat_runtime is emitted at ticks and switches, so it trails the
    # slices by at most the last partial accounting period
    err = ((j["sl"] - j["rt"]).abs() / j["sl"]).max()
    assert err < 0.01, j


def test_marker_spin_episodes_match_marker_pairs(lab_capture):
    m = lab_capture.model["markers"].collect()
    begins = m.filter(pl.col("name") == "spin_begin").height
    ends = m.filter(pl.col("name") == "spin_end").height
    ep = lab_capture.model["spin_episodes"].collect().filter(pl.col("source") == "marker")
    # a vCPU may still be spinning when the capture stops: at most one open begin per vCPU
    assert ep.height == ends > 0 and 0 <= begins - ends <= 6
    assert (ep["dur"] > 0).all()
    txn = m.filter(pl.col("name") == "txn_end")
    assert txn.height > 100 and txn["vm"].null_count() == 0 and txn["vcpu"].null_count() == 0
