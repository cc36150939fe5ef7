"""`xen-io-billing`: a xentrace file xenalyze reads without complaint, whose
per-domain running time xenalyze agrees with, and whose dom0 work the model
charges to the guests by their grant page exchanges, the rest common, as
the truth says."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import polars as pl
import pytest

from cratrace.synth.generate import synthesize
from tests.helpers import cratrace as run_cli
from tests.helpers import xenalyze_running_cycles

SMALL = {"duration_ms": "60"}


def _xenalyze(path, hz) -> subprocess.CompletedProcess:
    if shutil.which("xenalyze") is None:
        pytest.skip("xenalyze is not installed (Debian: xen-utils-common)")
    return subprocess.run(["xenalyze", "--summary", f"--cpu-hz={hz / 1e9}G", str(path)], capture_output=True, text=True)


def test_xenalyze_reads_it_and_agrees_on_running_time(tmp_path):
    truth = synthesize("xen-io-billing", tmp_path / "x.bin", seed=7, overrides=SMALL)
    p = _xenalyze(tmp_path / "x.bin", truth["cpu_hz"])
    assert p.returncode == 0
    # xenalyze's diagnostics: only its progress chatter, no complaint
    odd = [ln for ln in p.stderr.splitlines() if re.search(r"(?i)error|warn|fatal|strange|unexpected|bad |invalid|out of order", ln)]
    assert not odd, odd
    running = {d: c / truth["cpu_hz"] * 1e9 for (d, v), c in xenalyze_running_cycles(tmp_path / "x.bin", f"{truth['cpu_hz'] / 1e9}G").items() if v == 0}
    # dom0 and the networking guest block at the end of every burst: all
    # their intervals are closed, so xenalyze sees their whole running time
    assert running[0] == pytest.approx(truth["dom0"]["running_ns"], rel=0.01)
    assert running[2] == pytest.approx(truth["per_vm"]["dom2"]["running_ns"], rel=0.01)
    assert truth["dom0"]["running_ns"] == pytest.approx(truth["dom0"]["netback_ns"] + truth["dom0"]["common_ns"], rel=0.001)


def test_same_seed_same_bytes(tmp_path):
    a = synthesize("xen-io-billing", tmp_path / "a.bin", seed=3, overrides=SMALL)
    synthesize("xen-io-billing", tmp_path / "b.bin", seed=3, overrides=SMALL)
    synthesize("xen-io-billing", tmp_path / "c.bin", seed=4, overrides=SMALL)
    assert (tmp_path / "a.bin").read_bytes() == (tmp_path / "b.bin").read_bytes()
    assert (tmp_path / "a.bin").read_bytes() != (tmp_path / "c.bin").read_bytes()
    assert a["total_records"] == sum(a["record_counts"].values()) > 0


@pytest.mark.parametrize("workload", ["cpu-net", "net3"])
def test_model_charges_each_guest_its_netback_work_and_keeps_the_rest_common(tmp_path, workload):
    raw = tmp_path / "raw"
    run_cli("synth", "xen-io-billing", "-o", raw, "--raw", "--seed", "5", "--set", f"workload={workload}", "--set", "duration_ms=300", check=True)
    truth = json.loads((raw / "xentrace.bin.truth.json").read_text())
    cap = tmp_path / "cap"
    run_cli("import", raw, "-o", cap, "-q", check=True)
    run_cli("model", cap, "-q", check=True)
    io = pl.read_parquet(cap / "model" / "io_work.parquet")
    got = {(vm, d): n for vm, d, n in io.group_by("vm", "direction").agg(pl.col("cpu_ns").sum()).iter_rows()}
    ex = {(vm, d): n for vm, d, n in io.group_by("vm", "direction").agg(pl.col("packets").sum()).iter_rows()}
    net = {vm: v for vm, v in truth["per_vm"].items() if v["kind"] == "net"}
    assert {vm for vm, _ in got} == set(net) | {None}
    for vm, v in net.items():
        # a grant transfer per guest-Rx packet, a grant map per guest-Tx packet
        assert ex[(vm, "rx")] == v["grants"]["transfer"] == v["rx_packets"]
        assert ex[(vm, "tx")] == v["grants"]["map"] == v["tx_packets"]
        # each guest is charged the netback work its packets cost, per direction
        assert got[(vm, "rx")] == pytest.approx(v["netback_rx_ns"], rel=0.01), (vm, "rx")
        assert got[(vm, "tx")] == pytest.approx(v["netback_tx_ns"], rel=0.01), (vm, "tx")
    # what does not grow with packets is common; together they are dom0's time
    assert got[(None, None)] == pytest.approx(truth["dom0"]["common_ns"], rel=0.01)
    assert sum(got.values()) == pytest.approx(truth["dom0"]["running_ns"], rel=0.001)


def test_report_bills_xen_guests_for_dom0_work(tmp_path):
    raw = tmp_path / "raw"
    run_cli("synth", "xen-io-billing", "-o", raw, "--raw", "--set", "workload=cpu-net", "--set", "duration_ms=200", check=True)
    truth = json.loads((raw / "xentrace.bin.truth.json").read_text())
    cap = tmp_path / "cap"
    run_cli("import", raw, "-o", cap, "-q", check=True)
    run_cli("model", cap, "-q", check=True)
    run_cli("report", cap, "-o", tmp_path / "r.md", "--format", "md", "--tables", tmp_path / "t", check=True)
    bill = pl.read_parquet(tmp_path / "t" / "billing.parquet")
    rows = {r["vm"]: r for r in bill.iter_rows(named=True)}
    dur_s = (truth["end_ns"] - truth["start_ns"]) / 1e9
    # dom1 (CPU-bound) causes no dom0 work; dom2 is charged its netback work
    # and, the only guest with traffic, all of the common work
    assert rows["dom1"]["attributed_ms_per_s"] == 0 and rows["dom1"]["common_share_ms_per_s"] == 0
    assert rows["dom2"]["attributed_ms_per_s"] == pytest.approx(truth["per_vm"]["dom2"]["netback_ns"] / 1e6 / dur_s, rel=0.02)
    assert rows["dom2"]["common_share_ms_per_s"] == pytest.approx(truth["dom0"]["common_ns"] / 1e6 / dur_s, rel=0.02)
    assert rows["dom2"]["direct_ms_per_s"] == pytest.approx(truth["per_vm"]["dom2"]["running_ns"] / 1e6 / dur_s, rel=0.02)


def test_every_truth_key_is_documented(tmp_path):
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "synth.md").read_text()
    t = synthesize("xen-io-billing", tmp_path / "x.bin", seed=1, overrides={"duration_ms": "5"})
    missing = [k for k in t if f"`{k}" not in doc] + [f"per_vm.{k}" for k in t["per_vm"]["dom1"] if f"`{k}`" not in doc]
    assert not missing, missing
