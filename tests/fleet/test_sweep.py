"""`cratrace sweep` on a 2-worker local cluster: the dataset's layout and
rows, its determinism (1 worker or 2, byte for byte), resuming, failures,
and `cratrace sql` over it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import polars as pl
import pytest

from cratrace.fleet.dataset import METRICS, RECORDING
from tests.fleet.conftest import HOSTS, SWEEP_ARGS, metrics_bytes
from tests.helpers import cratrace

pytestmark = pytest.mark.dask


def test_fleet_import_and_model_make_one_capture_per_host(fleet):
    imp, mod = json.loads(fleet["import"].stdout), json.loads(fleet["model"].stdout)
    assert sorted(imp["captures"]) == sorted(HOSTS) and imp["skipped"] == []
    assert all(c["events"] > 0 and c["problems"] == [] for c in imp["captures"].values())
    assert all(m["vms"] == ["vm0", "vm1"] and m["tables"]["cpu_slices"] > 0 for m in mod.values())
    # again: the captures there are kept, not imported twice
    again = cratrace("import", "--fleet", *sorted(fleet["raw"].iterdir()), "-o", fleet["caps"], "--workers", "1", "--json")
    assert again.returncode == 0, again.stderr
    assert sorted(json.loads(again.stdout)["skipped"]) == sorted(HOSTS)


def test_fleet_import_refuses_what_is_not_a_raw_capture(fleet, tmp_path):
    p = cratrace("import", "--fleet", fleet["caps"] / "h1", "-o", tmp_path / "x")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "raw capture" in p.stderr, p.stderr
    p = cratrace("import", fleet["raw"] / "h1", "-o", tmp_path / "y", "--workers", "2")
    assert p.returncode == 2 and "--fleet" in p.stderr


def test_sweep_writes_one_partitioned_dataset(swept, fleet):
    out, summary = swept["out"], swept["summary"]
    # per capture: 2 policies x 2 grid values x (as recorded, drop-vm, 2 headroom copies)
    assert summary["runs"] == 3 * 2 * 2 * 4 and summary["failed"] == 0 and summary["ran"] == summary["runs"]
    own = {c["label"]: c["own_policy"] for c in json.loads((out / "sweep.json").read_text())["captures"]}
    assert own == {"h1": "rr", "h2": "rr", "h3": "fair"}  # as the generated captures declare
    parts = sorted(str(p.relative_to(out / "metrics")) for p in (out / "metrics").rglob("*.parquet"))
    assert parts == sorted(f"capture={h}/policy={p}/part-0.parquet" for h in HOSTS for p in (RECORDING, "fair+wapd", own[h]))
    m = pl.scan_parquet(out / "metrics" / "**" / "*.parquet", hive_partitioning=True).collect()
    cols = [c for c in m.columns if not c.startswith("param_")]
    assert cols == [c.name for c in METRICS.columns[2:]] + ["capture", "policy"]
    assert "param_ple_window_ns" in m.columns and m.schema["param_ple_window_ns"] == pl.Float64
    assert m.schema["param_pcpus"] == pl.Float64 and m.schema["param_affinity"] == pl.String and set(m.filter(pl.col("policy") != RECORDING)["param_affinity"]) == {"off"}
    # one host row and one row per VM per run
    per_run = m.group_by("run_id").agg((pl.col("kind") == "host").sum().alias("hosts"), (pl.col("kind") == "vm").sum().alias("vms"), pl.col("what_if").first(), pl.col("added_copies").first())
    assert (per_run["hosts"] == 1).all()
    assert (per_run["vms"] == 2 + per_run["added_copies"] - per_run["what_if"].str.contains("drop-vm").cast(pl.UInt32)).all()
    assert per_run.height == summary["runs"] + 3  # and the recordings
    # the recording: what `cratrace report` says of it
    rec = m.filter((pl.col("policy") == RECORDING) & (pl.col("capture") == "h1") & (pl.col("kind") == "vm")).sort("vm")
    rep = json.loads(cratrace("report", fleet["caps"] / "h1", "-o", fleet["dir"] / "h1.html", "--json", "--force", check=True).stdout)
    bills = {r["vm"]: r for r in rep["billing"] if r["run"] == "recorded"}
    for row in rec.iter_rows(named=True):
        assert row["bill_cpu_s"] == pytest.approx(bills[row["vm"]]["bill"], rel=1e-6)
        assert row["direct_ms_per_s"] == pytest.approx(bills[row["vm"]]["direct_ms_per_s"], rel=1e-6)
    energy = {r["owner"]: r["joules"] for r in rep["energy"] if r["run"] == "recorded"}
    assert rec["energy_j"].to_list() == pytest.approx([energy["vm0"], energy["vm1"]], rel=1e-6)
    # runs keep their model tables and metrics
    rid = m.filter(pl.col("policy") == "fair+wapd")["run_id"][0]
    assert (out / "runs" / rid / "model" / "vcpu_states.parquet").is_file() and (out / "runs" / rid / "metrics.json").is_file()
    # a what-if naming a VM a capture lacks is not run there (all have vm1 here)
    assert summary["notes"] == []


def test_sql_over_a_sweep(swept):
    p = cratrace("sql", swept["out"], "SELECT capture, count(*) AS runs FROM hosts WHERE policy <> 'recording' GROUP BY capture ORDER BY capture", "--format", "csv")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["capture,runs", "h1,16", "h2,16", "h3,16"]
    p = cratrace("sql", swept["out"], "SELECT count(*) AS n FROM failures", "--format", "csv")
    assert p.stdout.splitlines() == ["n", "0"]
    bad = cratrace("sql", swept["out"], "SELECT nope FROM metrics")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_one_worker_or_two_give_byte_identical_metrics(swept, fleet, tmp_path):
    one = tmp_path / "one"
    p = cratrace(*SWEEP_ARGS, fleet["caps"], "-o", one, "--workers", "1", "-q")
    assert p.returncode == 0, p.stderr
    a, b = metrics_bytes(swept["out"]), metrics_bytes(one)
    assert sorted(a) == sorted(b) and all(a[k] == b[k] for k in a)
    assert (swept["out"] / "sweep.json").read_text().replace(str(swept["out"]), "") == (one / "sweep.json").read_text().replace(str(one), "")


def test_finished_runs_are_skipped_and_a_lost_one_is_run_again(swept, fleet, tmp_path):
    out = tmp_path / "resumed"
    shutil.copytree(swept["out"], out)
    runs = sorted(p for p in (out / "runs").iterdir())
    lost = next(p for p in runs if (p / "spec.json").is_file())
    shutil.rmtree(lost)
    (out / "runs" / ".half-written").mkdir()  # a temporary a killed worker left
    p = cratrace(*SWEEP_ARGS, fleet["caps"], "-o", out, "--workers", "2", "--json")
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    assert s["ran"] == 1 and s["skipped_finished"] == s["runs"] - 1
    assert not (out / "runs" / ".half-written").exists()
    assert metrics_bytes(out) == metrics_bytes(swept["out"])


def test_ctrl_c_keeps_finished_runs_and_the_same_command_resumes(fleet, tmp_path):
    out = tmp_path / "interrupted"
    args = [sys.executable, "-m", "cratrace", *SWEEP_ARGS, str(fleet["caps"]), "-o", str(out), "--workers", "2", "-q"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        # interrupted at its first finished run: waiting for three, the
        # sweep sometimes finished before the signal came (exit 0)
        while time.monotonic() < deadline and not [p for p in (out / "runs").glob("*") if (p / "spec.json").is_file()]:
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    # one line, no traceback: the workers, in a session of their own, never
    # see the terminal's signal
    assert "Traceback" not in err and "cratrace/" not in err, err
    lines = err.splitlines()
    assert len([x for x in lines if x.startswith("interrupted")]) == 1 and "resume" in lines[-1], err
    done = [p for p in (out / "runs").glob("[!.]*") if (p / "rows.parquet").is_file()]
    assert done and all((p / "spec.json").is_file() or (p / "scan.json").is_file() for p in done)
    # what finished is in the dataset already
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["complete"] is False
    again = cratrace(*SWEEP_ARGS, fleet["caps"], "-o", out, "--workers", "2", "--json")
    assert again.returncode == 0, again.stderr
    s = json.loads(again.stdout)
    assert s["skipped_finished"] >= len([p for p in done if (p / "spec.json").is_file()]) and s["failed"] == 0
    assert json.loads((out / "sweep.json").read_text())["complete"] is True


def test_a_broken_capture_is_a_failure_and_the_sweep_goes_on(fleet, tmp_path):
    caps = tmp_path / "caps"
    shutil.copytree(fleet["caps"] / "h1", caps / "good")
    shutil.copytree(fleet["caps"] / "h2", caps / "broken")
    cut = caps / "broken" / "model" / "vcpu_states.parquet"
    cut.write_bytes(cut.read_bytes()[:200])  # truncated: no footer
    out = tmp_path / "sweep"
    p = cratrace("sweep", caps, "-p", "fair", "-o", out, "--workers", "2")
    assert p.returncode == 1, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len([line for line in lines if "failed" in line]) == 1 and "broken" in p.stderr and "Traceback" not in p.stderr
    f = pl.read_parquet(out / "failures.parquet")
    assert f["capture"].to_list() == ["broken"] and f["stage"].to_list() == ["scan"] and "vcpu_states" in f["error"][0]
    m = pl.scan_parquet(out / "metrics" / "**" / "*.parquet", hive_partitioning=True).collect()
    assert set(m["capture"]) == {"good"} and set(m["policy"]) == {RECORDING, "fair"}


@pytest.mark.parametrize("args, words", [
    (["--grid", "balance_k"], "--grid"),
    (["--grid", "nope=1,2"], "unknown setting"),
    (["--what-if", "drop-vm"], "--what-if"),
    (["--what-if", "add-vm=vm0:0"], "add-vm"),
    (["--headroom", "100"], "--headroom"),
    (["--glob", "/nowhere/*/capture"], "matches no capture"),
])
def test_bad_input_is_one_line_and_exit_2(fleet, tmp_path, args, words):
    p = cratrace("sweep", fleet["caps"], *args, "-o", tmp_path / "s")
    assert p.returncode == 2 and words in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (tmp_path / "s").exists()


def test_a_directory_that_is_not_a_sweep_is_not_written_into(fleet, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    p = cratrace("sweep", fleet["caps"] / "h1", "-o", tmp_path / "mine", "--workers", "1")
    assert p.returncode == 2 and "not a sweep" in p.stderr
