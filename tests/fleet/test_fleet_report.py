"""`cratrace fleet-report` over the tests' sweep: figures against the
metrics they come from, every output format, a page that renders in
headless Chromium; and a sweep against a separately started `dask
scheduler` + `dask worker` pair."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

import polars as pl
import pytest

from cratrace.fleet.dataset import RECORDING
from tests.fleet.conftest import free_port, metrics_bytes
from tests.helpers import cratrace

pytestmark = pytest.mark.dask

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def fleet_report(swept, tmp_path_factory):
    d = tmp_path_factory.mktemp("fleet-report")
    p = cratrace("fleet-report", swept["out"], "-o", d / "fleet.html", "--tables", d / "tables", "--json")
    assert p.returncode == 0, p.stderr
    return d, json.loads(p.stdout)


def test_scenarios_compare_each_host_with_its_recording(fleet_report, swept):
    _, rep = fleet_report
    m = pl.scan_parquet(swept["out"] / "metrics" / "**" / "*.parquet", hive_partitioning=True).collect()
    hosts = m.filter(pl.col("kind") == "host")
    rec = {r["capture"]: r for r in hosts.filter(pl.col("policy") == RECORDING).iter_rows(named=True)}
    for row in rep["hosts"]:
        run = hosts.filter(pl.col("run_id") == row["run_id"]).row(0, named=True)
        assert row["throughput_change_pct"] == pytest.approx(100 * (run["throughput_per_s"] / rec[row["capture"]]["throughput_per_s"] - 1), abs=1e-3)
        assert row["energy_change_pct"] == pytest.approx(100 * (run["energy_j"] / rec[row["capture"]]["energy_j"] - 1), abs=1e-3)
    # one scenario per policy x grid value x what-if, each over the hosts it ran on
    assert len(rep["scenarios"]) == 2 * 2 * 4
    assert all(s["hosts"] == 3 for s in rep["scenarios"])
    for s in rep["scenarios"]:
        mine = [h for h in rep["hosts"] if h["scenario"] == s["scenario"]]
        assert s["hosts hurt"] == sum(h["hurts"] for h in mine)
        assert s["energy J"] == pytest.approx(sum(h["energy_j"] for h in mine), abs=1e-2)
    assert {h["scenario"] for h in rep["hurts"]} <= {s["scenario"] for s in rep["scenarios"]}


def test_headroom_finds_room_on_the_host_that_has_it(fleet_report):
    _, rep = fleet_report
    room = {(h["capture"], h["policy"]): h for h in rep["headroom"]}
    assert {c for c, _ in room} == {"h1", "h2", "h3"}
    # h1 runs 4 vCPUs on 2 CPUs: a copy of a VM slows every VM down
    assert all(room[("h1", p)]["headroom"] == 0 and room[("h1", p)]["limited by"] for p in ("rr", "fair+wapd"))
    # h3's VMs leave the CPUs idle most of the time: two more fit
    assert all(room[("h3", p)]["headroom"] == 2 and room[("h3", p)]["at least"] and room[("h3", p)]["typical_vm"] for p in ("fair", "fair+wapd"))
    # the limit is the SLO's: at a 50% drop h1 takes a copy
    assert all(room[("h1", p)]["its Δ% then"] > -50 for p in ("rr", "fair+wapd"))


def test_tenant_bills_sum_across_hosts(fleet_report, swept):
    _, rep = fleet_report
    m = pl.scan_parquet(swept["out"] / "metrics" / "**" / "*.parquet", hive_partitioning=True).collect()
    rec = m.filter((pl.col("policy") == RECORDING) & (pl.col("kind") == "vm"))
    bills = {t["tenant"]: t for t in rep["tenants"] if t["scenario"] == RECORDING}
    for vm in ("vm0", "vm1"):
        mine = rec.filter(pl.col("vm") == vm)
        assert bills[vm]["hosts"] == 3 and bills[vm]["bill_cpu_s"] == pytest.approx(mine["bill_cpu_s"].sum(), abs=1e-3)
        parts = bills[vm]["direct_ms_per_s"] + bills[vm]["attributed_ms_per_s"] + bills[vm]["common_share_ms_per_s"]
        assert bills[vm]["usage_ms_per_s"] == pytest.approx(parts, abs=1e-2)
    # h3's networking VM has host work billed to it
    assert bills["vm1"]["attributed_ms_per_s"] > 0 or bills["vm0"]["attributed_ms_per_s"] > 0


def test_every_output_format(fleet_report, swept, tmp_path):
    d, rep = fleet_report
    for name in ("scenarios", "hosts", "hurts", "tenants", "headroom"):
        assert (d / "tables" / f"{name}.csv").is_file() and pl.read_parquet(d / "tables" / f"{name}.parquet").height == len(rep[name])
    md = cratrace("fleet-report", swept["out"], "--format", "md", "-o", "-")
    assert md.returncode == 0 and "## Headroom" in md.stdout and "## Tenant bills across hosts" in md.stdout
    again = cratrace("fleet-report", swept["out"], "-o", d / "fleet.html")
    assert again.returncode == 2 and "--force" in again.stderr
    slo = cratrace("fleet-report", swept["out"], "--slo-drop", "50%", "-o", tmp_path / "f.html", "--json")
    assert slo.returncode == 0
    loose = json.loads(slo.stdout)
    assert len(loose["hurts"]) < len(rep["hurts"])
    assert {(h["capture"], h["policy"]): h["headroom"] for h in loose["headroom"]}[("h1", "rr")] >= 1
    for bad, words in ((["--slo-drop", "x"], "--slo-drop"), (["--format", "pdf"], "--format")):
        p = cratrace("fleet-report", swept["out"], *bad, "-o", tmp_path / "g.html")
        assert p.returncode == 2 and words in p.stderr and len(p.stderr.strip().splitlines()) == 1
    p = cratrace("fleet-report", tmp_path, "-o", tmp_path / "h.html")
    assert p.returncode == 2 and "not a sweep" in p.stderr


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install chromium)")
def test_fleet_report_renders_in_headless_chromium(fleet_report, tmp_path):
    d, _ = fleet_report
    page = (d / "fleet.html").as_uri()
    prof = tmp_path / "profile"
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={prof}", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", "--dump-dom", page], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-500:]
    assert dom.stdout.count('class="main-svg"') >= 4, "charts did not render"
    console_errors = [line for line in dom.stderr.splitlines() if "CONSOLE" in line and ("Error" in line or "Uncaught" in line)]
    assert console_errors == []
    # offline: no script or style from elsewhere
    html = (d / "fleet.html").read_text()
    assert "<script src=" not in html and 'src="http' not in html


def _start(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dask", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.fixture
def scheduler_and_worker(tmp_path):
    """A `dask scheduler` and one `dask worker` as processes on free
    ports of this machine; stopped at the end."""
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [_start(["scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"])]
    try:
        procs.append(_start(["worker", address, "--nthreads", "1", "--nworkers", "1", "--no-dashboard", "--local-directory", str(tmp_path / "worker")]))
        from distributed import Client

        deadline = time.monotonic() + 60
        while True:
            try:
                with Client(address, timeout="2s") as c:
                    if c.scheduler_info()["workers"]:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the dask scheduler and worker did not come up"
            time.sleep(0.5)
        yield address
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_sweep_on_a_separately_started_scheduler(scheduler_and_worker, fleet, swept, tmp_path, monkeypatch):
    out = tmp_path / "remote"
    # captures named by URL (fsspec's file://) and by path
    caps = [f"file://{fleet['caps'] / 'h1'}", str(fleet["caps"] / "h2")]
    p = cratrace("sweep", *caps, "-p", "fair+wapd", "--set", "affinity=off", "--grid", "ple_window_ns=4000,16000", "-o", out, "--scheduler", scheduler_and_worker, "--json")
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    assert s["workers"] == 1 and s["runs"] == 4 and s["failed"] == 0
    # the same runs as the local cluster's, to the byte
    mine = {k: v for k, v in metrics_bytes(out).items()}
    assert sorted(mine) == ["metrics/capture=h1/policy=fair+wapd/part-0.parquet", "metrics/capture=h1/policy=recording/part-0.parquet",
                            "metrics/capture=h2/policy=fair+wapd/part-0.parquet", "metrics/capture=h2/policy=recording/part-0.parquet"]
    local = pl.read_parquet(swept["out"] / "metrics" / "capture=h2" / "policy=fair+wapd" / "part-0.parquet").filter(pl.col("what_if") == "").drop("capture_ref", "param_pcpus").sort("run_id", "kind", "vm", nulls_last=True)
    remote = pl.read_parquet(out / "metrics" / "capture=h2" / "policy=fair+wapd" / "part-0.parquet").drop("capture_ref").sort("run_id", "kind", "vm", nulls_last=True)
    assert local.equals(remote)
    # DASK_SCHEDULER_ADDRESS does as --scheduler; fleet model too
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", scheduler_and_worker)
    again = cratrace("sweep", *caps, "-p", "fair+wapd", "--set", "affinity=off", "--grid", "ple_window_ns=4000,16000", "-o", out, "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["skipped_finished"] == 4
    work = tmp_path / "caps"
    for h in ("h1", "h2"):
        shutil.copytree(fleet["caps"] / h, work / h)
    mod = cratrace("model", work / "h1", work / "h2", "--json")
    assert mod.returncode == 0, mod.stderr
    assert sorted(json.loads(mod.stdout)) == [str(work / "h1"), str(work / "h2")]


def test_an_unreachable_scheduler_is_one_line(fleet, tmp_path):
    p = cratrace("sweep", fleet["caps"] / "h1", "-o", tmp_path / "s", "--scheduler", f"tcp://127.0.0.1:{free_port()}")
    assert p.returncode == 2 and "cannot connect" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
