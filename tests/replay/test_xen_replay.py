"""Replaying a Xen capture: the bundled xen-io-billing sample (a generated
xentrace file with known per-domain running time). A domain's vCPUs are
no host threads; they replayed as nothing at all (0% guest time) while the
fidelity gate passed for want of anything to compare."""

from __future__ import annotations

import json

import polars as pl
import pytest

from tests.helpers import cratrace as run_cli


@pytest.fixture(scope="module")
def xen_replay(repo_root, tmp_path_factory):
    d = tmp_path_factory.mktemp("xen-replay")
    src = repo_root / "sample-traces" / "xen-io-billing.bin"
    truth = json.loads(src.with_name(src.name + ".truth.json").read_text())
    run_cli("import", src, "-o", d / "cap", "-q", "--cpu-hz", str(truth["cpu_hz"]), check=True)
    run_cli("model", d / "cap", check=True)
    run_cli("replay", d / "cap", "-p", "credit", "-p", "fair", "-o", d / "out", check=True)
    return truth, d


def test_each_domain_replays_its_recorded_running_time(xen_replay):
    truth, d = xen_replay
    want = {"dom0": truth["dom0"]["running_ns"], **{vm: v["running_ns"] for vm, v in truth["per_vm"].items()}}
    for policy in ("credit", "fair"):
        m = json.loads((d / "out" / policy / "metrics.json").read_text())
        got = {vm: v["cpu_s"] * 1e9 for vm, v in m["vms"].items()}
        assert set(got) == set(want)
        for vm, ns in want.items():
            assert got[vm] == pytest.approx(ns, rel=0.01), (policy, vm)
        assert m["host"]["guest_util_pct"] > 0
    gate = json.loads((d / "out" / "credit" / "metrics.json").read_text())["fidelity"]
    assert gate["gate_applies"] and gate["passed"] and gate["cpu_time_err_pct"] < 1


def test_replayed_tables_name_the_domains(xen_replay):
    _, d = xen_replay
    model = d / "out" / "credit" / "model"
    st = pl.read_parquet(model / "vcpu_states.parquet")
    assert st["tid"].null_count() == st.height  # as in the recording
    sl = pl.read_parquet(model / "cpu_slices.parquet").filter(pl.col("tid") != 0)
    th = pl.read_parquet(model / "threads.parquet")
    owners = sl.join(th.select("tid", "vm", "role"), on="tid", how="left")
    assert owners["role"].to_list() == ["vcpu"] * sl.height
    assert set(owners["vm"]) == {"dom0", "dom1", "dom2"}
    assert (sl["tid"] < 0).all()


def test_the_report_counts_the_recorded_cpus(xen_replay):
    # with no host threads' slices the recorded run had 1 CPU, not 2: its
    # guest utilisation read twice the replays'
    from cratrace.report import build_report

    truth, d = xen_replay
    rep = build_report(d / "cap", d / "out", d / "r.md", fmt="md")
    lo, hi = json.loads((d / "cap" / "capture.json").read_text())["time_range_ns"]
    running = truth["dom0"]["running_ns"] + sum(v["running_ns"] for v in truth["per_vm"].values())
    util = dict(zip(rep["summary"]["run"], rep["summary"]["guest util %"]))
    assert util["recorded"] == pytest.approx(100 * running / (truth["file"]["cpus"] * (hi - lo)), rel=0.01)
    assert util["credit"] == pytest.approx(util["recorded"], rel=0.01)


def test_the_recorded_run_has_energy_per_domain(xen_replay):
    # a recorded Xen run has no host slices: its energy was 0 J beside the
    # replays' (which ran the same domains for the same time)
    from cratrace.report import build_report

    _, d = xen_replay
    rep = build_report(d / "cap", d / "out", d / "e.md", fmt="md", force=True)
    e = {(run, owner): j for run, owner, j in rep["energy"].iter_rows()}
    for owner in ("dom0", "dom1", "dom2", "idle"):
        assert e[("recorded", owner)] > 0
        assert e[("recorded", owner)] == pytest.approx(e[("credit", owner)], rel=0.01), owner


def test_a_real_credit2_host_replays_within_the_gate(fixtures_dir, tmp_path):
    # dom0 and an HVM guest on a real credit2 host (xenalyze's TSC rate)
    run_cli("import", fixtures_dir / "xen_credit2.bin", "-o", tmp_path / "cap", "-q", "--cpu-hz", "2.4e9", check=True)
    run_cli("model", tmp_path / "cap", check=True)
    run_cli("replay", tmp_path / "cap", "-p", "credit", "-o", tmp_path / "out", check=True)
    m = json.loads((tmp_path / "out" / "credit" / "metrics.json").read_text())
    assert len(m["vms"]) >= 2 and all(v["cpu_s"] > 0 for v in m["vms"].values())
    assert m["fidelity"]["gate_applies"] and m["fidelity"]["passed"]
