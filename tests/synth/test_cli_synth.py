"""`cratrace synth` from the command line: help, listing, outputs, refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cratrace.synth.scenarios import SCENARIOS
from tests.synth.conftest import trace_cmd_report


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cratrace.cli.main", "synth", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd, env={**os.environ, "COLUMNS": "200"})


def test_list_names_every_scenario_and_parameter():
    r = run("--list")
    assert r.returncode == 0, r.stderr
    for name, mod in SCENARIOS.items():
        assert name in r.stdout
        for k in mod.PARAMS:
            assert f"{k}=" in r.stdout


def test_list_json_is_data():
    r = run("--list", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert set(data) == set(SCENARIOS)
    assert data["kvm-heavy-spin"]["params"]["vms"]["default"] == SCENARIOS["kvm-heavy-spin"].PARAMS["vms"].default


def test_help_explains_scenarios():
    r = run("--help")
    assert r.returncode == 0
    for word in ("kvm-heavy-spin", "kvm-io-billing", "kvm-postcopy", "hetero", "thermal", "--seed", "--set", "--force"):
        assert word in r.stdout


def test_writes_file_and_truth_then_refuses_overwrite(tmp_path):
    out = tmp_path / "spin.dat"
    r = run("kvm-heavy-spin", "-o", str(out), "--seed", "5", "--set", "duration_ms=5", "--set", "vms=3", "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    truth = json.loads((tmp_path / "spin.dat.truth.json").read_text())
    assert truth["params"]["vms"] == 3 and truth["params"]["duration_ms"] == 5 and truth["seed"] == 5
    assert summary["events"] == truth["total_events"]
    assert len({t["vm"] for t in truth["threads"]}) == 3
    rep = trace_cmd_report(out)
    assert rep.rc == 0 and rep.counts() == truth["event_counts"]
    before = out.read_bytes()
    r = run("kvm-heavy-spin", "-o", str(out), "--seed", "6")
    assert r.returncode == 2
    assert "exists" in r.stderr and "--force" in r.stderr and "Traceback" not in r.stderr
    assert out.read_bytes() == before
    r = run("kvm-heavy-spin", "-o", str(out), "--seed", "6", "--set", "duration_ms=5", "--force")
    assert r.returncode == 0 and out.read_bytes() != before


@pytest.mark.parametrize("args,needle", [
    (["nosuch", "-o", "x.dat"], "unknown scenario 'nosuch'"),
    (["kvm-heavy-spin", "-o", "x.dat", "--set", "vms=many"], "--set vms=many: expected int"),
    (["kvm-heavy-spin", "-o", "x.dat", "--set", "nope=1"], "has no parameter 'nope'"),
    (["kvm-heavy-spin", "-o", "x.dat", "--set", "vms"], "expected key=value"),
    (["kvm-heavy-spin", "-o", "x.dat", "--set", "pcpus=0"], "must be a finite number > 0"),
    (["kvm-io-billing", "-o", "x.dat", "--set", "common_ms_per_s=nan"], "must be a finite number > 0"),
    (["kvm-io-billing", "-o", "x.dat", "--set", "common_growth=inf"], "must be a finite number >= 0"),
    (["kvm-io-billing", "-o", "x.dat", "--set", "common_growth=-0.5"], "must be a finite number >= 0"),
    (["kvm-io-billing", "-o", "x.dat", "--set", "workload=gpu"], "expected one of"),
    (["kvm-heavy-spin"], "-o FILE"),
    (["kvm-heavy-spin", "-o", "x.dat", "--compression", "lz4"], "--compression"),
    (["kvm-heavy-spin", "-o", "x.dat", "--file-version", "6", "--compression", "zstd"], "version 6 has no compression"),
    (["kvm-heavy-spin", "-o", ".", "--force"], "is a directory"),
    (["kvm-heavy-spin", "-o", "/proc/x.dat"], "cannot write /proc/x.dat"),
])
def test_bad_input_one_line_exit_2(tmp_path, args, needle):
    r = run(*args, cwd=tmp_path)
    assert r.returncode == 2
    assert needle in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "x.dat").exists()


def test_file_version_6(tmp_path):
    out = tmp_path / "v6.dat"
    r = run("thermal", "-o", str(out), "--file-version", "6", "--set", "duration_ms=10")
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[10:12] == b"6\0"
    rep = trace_cmd_report(out)
    assert rep.rc == 0 and rep.stderr == ""


def test_raw_capture_imports_with_truth_vm_names(tmp_path):
    """--raw writes a `cratrace record`-style directory; importing and modelling it names
    VMs and vCPUs as the truth does, and the model's per-thread CPU time equals oncpu_ns."""
    pytest.importorskip("cratrace._native")
    import polars as pl

    raw = tmp_path / "raw"
    r = run("kvm-heavy-spin", "-o", str(raw), "--raw", "--seed", "2", "--set", "duration_ms=20")
    assert r.returncode == 0, r.stderr
    assert {p.name for p in raw.iterdir()} == {"manifest.json", "host.json", "trace.dat", "trace.dat.truth.json"}
    truth = json.loads((raw / "trace.dat.truth.json").read_text())
    cap = tmp_path / "cap"
    for cmd in (["import", str(raw), "-o", str(cap), "-q"], ["model", str(cap)]):
        p = subprocess.run([sys.executable, "-m", "cratrace.cli.main", *cmd], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
    threads = pl.read_parquet(cap / "model" / "threads.parquet")
    vc = threads.filter(pl.col("role") == "vcpu").select("tid", "vm", "vcpu").sort("tid").rows()
    assert vc == sorted((t["tid"], t["vm"], t["vcpu"]) for t in truth["threads"] if t["role"] == "vcpu")
    slices = pl.read_parquet(cap / "model" / "cpu_slices.parquet").filter(pl.col("tid") != 0)
    on = dict(slices.group_by("tid").agg(pl.col("dur").sum()).rows())
    assert on == {t["tid"]: t["oncpu_ns"] for t in truth["threads"] if t["oncpu_ns"]}
    eps = pl.read_parquet(cap / "model" / "spin_episodes.parquet").filter(pl.col("source") == "marker")
    assert eps.height == truth["totals"]["spin_episodes"]
