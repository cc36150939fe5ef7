"""The collector: real captures of the workload lab here (trace-cmd and
perf), and stand-ins for the tools that cannot run on this machine
(xentrace, xl, virsh: no Xen or libvirt here)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collectors import cratrace_collect as cc
from cratrace.lab import LabParams, executable, start
from tests.helpers import cratrace as run_cli

STANDINS = Path(__file__).with_name("standins")


def _lab_cmd(seconds: float) -> list[str]:
    return LabParams(vms=2, vcpus=2, duration_s=seconds).argv(executable())


def test_kvm_sched_capture_of_the_lab_imports_with_inventory_and_markers(tracing_lock, tmp_path):
    tfs = cc.tracefs()
    before = cc.snapshot_state(tfs)
    raw = tmp_path / "raw"
    m = cc.collect(raw, "kvm-sched", duration=6, command=_lab_cmd(2.0))
    assert cc.snapshot_state(tfs) == before, "tracing state must be restored"
    assert m["tracing_state_restored"] and m["stop_reason"] == "command exited"
    assert {f["kind"] for f in m["files"]} >= {"tracedat", "host"}
    host = json.loads((raw / "host.json").read_text())
    vms = {v["name"]: v for v in host["vms"]}
    assert set(vms) == {"vm0", "vm1"} and all(len(v["vcpus"]) == 2 for v in vms.values())
    cap = tmp_path / "cap"
    run_cli("import", raw, "-o", cap, "-q", check=True)
    import cratrace

    c = cratrace.open(cap)
    vcpu_tids = [t["tid"] for v in vms.values() for t in v["vcpus"]]
    n = c.sql(f"SELECT count(*) AS n FROM sched_switch WHERE next_pid IN ({','.join(map(str, vcpu_tids))})")["n"][0]
    assert n > 50
    texts = c.events["print"].collect()["buf"]
    assert texts.str.starts_with("txn_end vm=vm").sum() > 100
    assert c.meta["vms"] and c.meta["sources"][0]["kind"] == "tracedat"


def test_perf_backend_records_tracepoints_and_counters(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root")
    raw = tmp_path / "raw"
    m = cc.collect(raw, "kvm-sched", events=["sched:sched_switch", "sched:sched_wakeup"], duration=5, perf_record=True, command=_lab_cmd(1.0))
    kinds = {f["kind"] for f in m["files"]}
    assert "perfdata" in kinds
    out = subprocess.run(["perf", "script", "-i", str(raw / "perf.data")], capture_output=True, text=True).stdout
    assert "CPU 0/KVM" in out and "sched:sched_switch" in out
    if "perfstat" in kinds:
        lines = (raw / "perf-stat.csv").read_text().splitlines()
        assert any(",CPU0," in line for line in lines)


def test_sigint_mid_capture_leaves_an_importable_output(tracing_lock, tmp_path):
    raw = tmp_path / "raw"
    p = subprocess.Popen(
        [sys.executable, str(Path(cc.__file__)), "-o", str(raw), "--duration", "30", "--no-perf-stat", "--", *_lab_cmd(30)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(2.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    m = json.loads((raw / "manifest.json").read_text())
    assert m["stop_reason"] == "signal" and m["duration_s"] < 20
    r = run_cli("import", raw, "-o", tmp_path / "cap", "-q")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "cap" / "capture.json").read_text())["events"]["sched_switch"] > 0


def test_host_snapshot_reads_xl_and_virsh_standins(monkeypatch):
    monkeypatch.setenv("PATH", f"{STANDINS}:{os.environ['PATH']}")
    xen = cc.xen_host()
    assert xen["cpu_mhz"] == 2394 and abs(xen["cpu_hz"] - 2394.454e6) < 1
    assert [d["name"] for d in xen["domains"]] == ["Domain-0", "guest14"] and xen["domains"][1]["vcpus"] == 4
    lv = cc.libvirt_domains()
    assert lv["domains"][0]["name"] == "web1" and lv["domains"][0]["uuid"].startswith("1b4e28ba")


def test_absent_tools_are_recorded_as_absent(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert "absent" in cc.xen_host() and "absent" in cc.libvirt_domains()


def test_xentrace_command_uses_the_preset_class_mask_and_duration(tmp_path, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("needs root")
    log = tmp_path / "xentrace.argv"
    monkeypatch.setenv("PATH", f"{STANDINS}:{os.environ['PATH']}")
    monkeypatch.setenv("STANDIN_LOG", str(log))
    m = cc.collect(tmp_path / "raw", "xen", duration=1, use_xentrace=True, perf_stat=False)
    argv = log.read_text().split()
    mask = int(argv[argv.index("-e") + 1], 16)
    assert mask == cc.XEN_CLASSES["sched"] | cc.XEN_CLASSES["hvm"] | cc.XEN_CLASSES["pm"] | cc.XEN_CLASSES["mem"]
    assert argv[argv.index("-T") + 1] == "2" and argv[-1] == "xentrace.bin"
    assert "xentrace" in {f["kind"] for f in m["files"]}
    assert m["cpu_hz"] and abs(m["cpu_hz"] - 2394.454e6) < 1


def test_bad_options_are_one_line_errors(tmp_path, monkeypatch):
    with pytest.raises(cc.CollectError, match="invalid event name"):
        cc.validate_events(["sched:sched_switch; rm -rf /"])
    with pytest.raises(cc.CollectError, match="unknown preset"):
        cc.load_preset("nope")
    with pytest.raises(cc.CollectError, match="max-size"):
        cc.parse_size("lots")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(cc.CollectError, match="needs root"):
        cc.collect(tmp_path / "x", duration=1)
    p = subprocess.run([sys.executable, str(Path(cc.__file__)), "-o", str(tmp_path / "y"), "--preset", "nope"], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "unknown preset" in p.stderr


def test_missing_events_are_reported_and_skipped(tracing_lock, tmp_path):
    m = cc.collect(tmp_path / "raw", "kvm-sched", events=["sched:sched_switch", "nosuchsys:nosuchevent"], duration=0.5, perf_stat=False)
    assert m["events"]["missing"] == ["nosuchsys:nosuchevent"] and m["events"]["recorded"] == ["sched:sched_switch"]


def test_zipapp_runs_stand_alone(tmp_path):
    target = tmp_path / "collect.pyz"
    cc.build_zipapp(target)
    p = subprocess.run([sys.executable, str(target), "--help"], capture_output=True, text=True, env={"PATH": os.environ["PATH"]})
    assert p.returncode == 0 and "--preset" in p.stdout
