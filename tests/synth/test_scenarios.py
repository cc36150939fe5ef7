"""Scenario files: read by trace-cmd without complaint, deterministic per
seed, and the model recovers their truth exactly."""

from __future__ import annotations

import json
import shutil
import subprocess

import polars as pl
import pytest

import cratrace
from cratrace.model import build_model
from cratrace.synth.run import synth
from tests.helpers import cratrace as run_cli


@pytest.fixture(scope="module")
def heavy_spin(tmp_path_factory):
    d = tmp_path_factory.mktemp("synth")
    f = d / "hs.dat"
    truth = synth("kvm-heavy-spin", f, seed=3)
    run_cli("import", f, "-o", d / "cap", "-q", check=True)
    build_model(d / "cap")
    return f, truth, cratrace.open(d / "cap")


@pytest.mark.skipif(shutil.which("trace-cmd") is None, reason="trace-cmd is not installed")
def test_trace_cmd_reads_the_scenario_cleanly(heavy_spin):
    f, _, cap = heavy_spin
    r = subprocess.run(["trace-cmd", "report", str(f)], capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr.strip() == ""
    assert sum(" kvm_exit:" in line for line in r.stdout.splitlines()) == cap.meta["events"]["kvm_exit"]


def test_same_seed_same_bytes_other_seed_other_trace(tmp_path):
    a, b, c = tmp_path / "a.dat", tmp_path / "b.dat", tmp_path / "c.dat"
    synth("kvm-heavy-spin", a, seed=5, params={"duration_ms": "50"})
    synth("kvm-heavy-spin", b, seed=5, params={"duration_ms": "50"})
    synth("kvm-heavy-spin", c, seed=6, params={"duration_ms": "50"})
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()


def test_model_recovers_the_true_spin_episodes_and_transactions(heavy_spin):
    _, truth, cap = heavy_spin
    ep = cap.model["spin_episodes"].collect().filter(pl.col("source") == "pause-exit").sort("vm", "vcpu", "start")
    got = list(zip(ep["vm"], ep["vcpu"], ep["start"], ep["end"]))
    # without an inventory the model names VMs after their QEMU pid
    name = {vm: f"qemu-{v['pid']}" for vm, v in truth["vms"].items()}
    want = sorted((name[s["vm"]], s["vcpu"], s["start"], max(s["end"], s["start"] + 1)) for s in truth["spin_episodes"])
    assert got == want
    th = cap.model["threads"].collect().filter(pl.col("role") == "vcpu")
    assert sorted(th["vm"].unique()) == ["qemu-1000", "qemu-1100"], "VMs inferred from fork events"
    mk = cap.model["markers"].collect().filter(pl.col("name") == "txn_end")
    assert {vm: n for vm, n in mk.group_by("vm").len().iter_rows()} == {k: v["txns"] for k, v in truth["vms"].items()}
    assert ep["holder_vcpu"].is_not_null().sum() > 0, "lock-holder preemption must be visible"


def test_kvm_states_are_derived_from_entries_and_exits(heavy_spin):
    _, truth, cap = heavy_spin
    vs = cap.model["vcpu_states"].collect()
    assert {"guest", "vmm", "halted", "preempted", "spinning"} <= set(vs["state"].unique())
    # running time per vCPU equals the generator's CPU time, within the
    # dispatch/exit bookkeeping of a few µs per switch
    run = vs.filter(pl.col("state").is_in(["guest", "vmm", "spinning"])).group_by("tid").agg(pl.col("dur").sum())
    for tid, ns in run.iter_rows():
        assert abs(ns - truth["cpu_ns"][str(tid)]) / truth["cpu_ns"][str(tid)] < 0.02


def test_cli_lists_and_refuses_unknown_parameters(tmp_path):
    p = run_cli("synth", "--list")
    assert p.returncode == 0 and "kvm-heavy-spin" in p.stdout
    bad = run_cli("synth", "kvm-heavy-spin", "-o", tmp_path / "x.dat", "--set", "nope=1")
    assert bad.returncode == 2 and "unknown parameter" in bad.stderr
