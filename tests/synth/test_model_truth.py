"""The model (issue #3) recovers a generated scenario's truth from the trace
alone: VMs from the fork events, per-thread CPU time, transactions and the
marker-delimited spin episodes. (Without host.json; `--raw` is covered in
test_cli_synth.py.)"""

from __future__ import annotations

import polars as pl
import pytest

import cratrace
from cratrace.synth.generate import synthesize
from tests.helpers import cratrace as run_cli


@pytest.fixture(scope="module")
def heavy_spin(tmp_path_factory):
    pytest.importorskip("cratrace._native")
    from cratrace.model import build_model

    d = tmp_path_factory.mktemp("synth-model")
    f = d / "hs.dat"
    truth = synthesize("kvm-heavy-spin", f, seed=3, overrides={"duration_ms": "50"})
    run_cli("import", f, "-o", d / "cap", "-q", check=True)
    build_model(d / "cap")
    return truth, cratrace.open(d / "cap")


def _name(truth):
    return {vm["name"]: f"qemu-{vm['pid']}" for vm in truth["vms"]}


def test_vms_and_vcpus_inferred_from_forks(heavy_spin):
    truth, cap = heavy_spin
    th = cap.model["threads"].collect().filter(pl.col("role") == "vcpu").select("tid", "vm", "vcpu").sort("tid")
    name = _name(truth)
    want = sorted((t["tid"], name[t["vm"]], t["vcpu"]) for t in truth["threads"] if t["role"] == "vcpu")
    assert th.rows() == want


def test_cpu_slices_equal_true_on_cpu_time(heavy_spin):
    truth, cap = heavy_spin
    cs = cap.model["cpu_slices"].collect().filter(pl.col("tid") != 0)
    got = dict(cs.group_by("tid").agg(pl.col("dur").sum()).rows())
    assert got == {t["tid"]: t["oncpu_ns"] for t in truth["threads"] if t["oncpu_ns"]}


def test_transactions_and_marker_spin_episodes(heavy_spin):
    truth, cap = heavy_spin
    name = _name(truth)
    mk = cap.model["markers"].collect().filter(pl.col("name") == "txn_end")
    # The lines say `vm=vm0` (the guest's own name); with no inventory the
    # host's VMs are qemu-<pid>, and the lines take their writer's VM: they
    # were counted for a VM the threads table does not have.
    by_vm = dict(mk.group_by("vm").len().rows())
    assert by_vm == {name[vm]: v["txns"] for vm, v in truth["per_vm"].items()}
    ep = cap.model["spin_episodes"].collect().filter(pl.col("source") == "marker")
    got = sorted(zip(ep["vm"], ep["vcpu"], ep["start"], ep["end"]))
    want = sorted((name[e["vm"]], e["vcpu"], e["start"], e["end"]) for e in truth["spin_episodes"])
    assert got == want


def test_replay_counts_the_transactions_of_each_vm(heavy_spin, tmp_path):
    truth, cap = heavy_spin
    name = _name(truth)
    run_cli("replay", cap.path, "--policy", "fair", "-o", tmp_path / "r", check=True)
    import json

    vms = json.loads((tmp_path / "r" / "fair" / "metrics.json").read_text())["vms"]
    assert {vm: (m["throughput_unit"], m["marks"]) for vm, m in vms.items()} == {name[vm]: ("marks/s", v["txns"]) for vm, v in truth["per_vm"].items()}
