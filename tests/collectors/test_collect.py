"""The collector: real captures of the workload lab here (trace-cmd and
perf), and stand-ins for the tools that cannot run on this machine
(xentrace, xl, virsh: no Xen or libvirt here)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cratrace_collect as cc
from cratrace.lab import LabParams, executable
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


def test_restore_reenables_the_events_and_keeps_the_instances_the_host_had(tracing_lock, tmp_path):
    # trace-cmd clears set_event when it stops; the host's own events must
    # come back (tracefs refuses the seek of Python's append mode)
    tfs = cc.tracefs()
    original = cc.snapshot_state(tfs)
    inst = tfs / "instances" / "cratrace-test-keep"
    try:
        (tfs / "set_event").write_text("sched:sched_process_exec\n")
        inst.mkdir()
        before = cc.snapshot_state(tfs)
        (tfs / "set_event").write_text("")
        assert cc.restore_state(tfs, before) == []
        after = cc.snapshot_state(tfs)
        assert after["set_event"] == "sched:sched_process_exec\n" and "cratrace-test-keep" in after["instances"]
    finally:
        inst.rmdir()
        assert cc.restore_state(tfs, original) == []


#: set before a capture by the tests below (issue 42): filters on a
#: recorded event and on one that is not, and triggers whose filters never
#: match (a traceoff that fired would stop the capture itself)
FILTERS = {"sched/sched_switch": "prev_pid != 0", "irq/irq_handler_entry": "irq > 5"}
TRIGGERS = {"sched/sched_process_fork": ["traceoff:3 if child_pid == -1", "enable_event:sched:sched_wakeup:2 if child_pid == -2"],
            "irq/irq_handler_exit": ["stacktrace if irq == -1"]}
#: ... and as tracefs lists them back
LISTED = {"sched/sched_process_fork": ["enable_event:sched:sched_wakeup:count=2 if child_pid == -2", "traceoff:count=3 if child_pid == -1"],
          "irq/irq_handler_exit": ["stacktrace:unlimited if irq == -1"]}


#: what removes each of TRIGGERS
REMOVALS = {"sched/sched_process_fork": ["!traceoff", "!enable_event:sched:sched_wakeup"], "irq/irq_handler_exit": ["!stacktrace"]}


def _append(path: Path, line: str) -> None:
    # tracefs takes a trigger per write(2) and refuses the seek of "a" mode
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


@pytest.fixture
def host_filters_and_triggers(tracing_lock):
    """tracefs with FILTERS and TRIGGERS set, as a host's own tracing
    would leave them; cleared by hand afterwards (not by the code under
    test)."""
    tfs = cc.tracefs()
    ev = tfs / "events"
    try:
        for key, text in FILTERS.items():
            (ev / key / "filter").write_text(text + "\n")
        for key, lines in TRIGGERS.items():
            for line in lines:
                _append(ev / key / "trigger", line)
        yield tfs
    finally:
        for key in FILTERS:
            (ev / key / "filter").write_text("0\n")
        for key, lines in REMOVALS.items():
            for line in lines:
                _append(ev / key / "trigger", line)
        (ev / "sched/sched_switch/trigger").write_text("!traceon\n")
        (ev / "sched/sched_waking/filter").write_text("0\n")
        for key in (*FILTERS, "sched/sched_waking"):
            assert (ev / key / "filter").read_text() == "none\n"
        for key in (*TRIGGERS, "sched/sched_switch"):
            assert (ev / key / "trigger").read_text().startswith("# Available triggers")


def test_filters_and_triggers_set_before_a_capture_are_restored(host_filters_and_triggers, tmp_path):
    # issue 42: trace-cmd clears every event filter when it starts; they
    # came back as none while the manifest said the state was restored
    tfs = host_filters_and_triggers
    before = cc.snapshot_state(tfs)
    m = cc.collect(tmp_path / "raw", "kvm-sched", events=["sched:sched_switch", "irq:irq_handler_entry"], duration=0.5, perf_stat=False)
    assert m["files"] and (tmp_path / "raw" / "trace.dat").stat().st_size > 0
    for key, text in FILTERS.items():
        assert (tfs / "events" / key / "filter").read_text() == text + "\n"
    for key, lines in LISTED.items():
        assert sorted((tfs / "events" / key / "trigger").read_text().splitlines()) == lines
    # the events the triggers hook stay in soft mode: set_event lists them,
    # but restoring it must not make them record
    assert (tfs / "events/irq/irq_handler_exit/enable").read_text() == "0*\n"
    assert m["tracing_state_restored"] and m["restore_problems"] == []
    assert before["filters"] == FILTERS and before["triggers"] == LISTED
    assert before["enable"] == {"irq:irq_handler_exit": "0*", "sched:sched_process_fork": "0*", "sched:sched_wakeup": "0*"}
    assert cc.snapshot_state(tfs) == before


def test_restore_puts_back_triggers_a_tool_removed_and_removes_those_it_added(host_filters_and_triggers):
    tfs = host_filters_and_triggers
    before = cc.snapshot_state(tfs)
    ev = tfs / "events"
    _append(ev / "sched/sched_process_fork/trigger", "!traceoff")
    _append(ev / "irq/irq_handler_exit/trigger", "!stacktrace")
    _append(ev / "sched/sched_switch/trigger", "traceon if prev_pid == -3")
    (ev / "sched/sched_waking/filter").write_text("pid == 1\n")
    # (set_event's line is left out: it lists whatever this host enables)
    assert [d for d in cc.state_differences(before, cc.snapshot_state(tfs)) if not d.startswith("set_event:")] == [
        "events/irq/irq_handler_exit/enable: none after restoring, was '0*'",
        "events/sched/sched_waking/filter: 'pid == 1' after restoring, was none",
        "events/irq/irq_handler_exit/trigger: none after restoring, was 'stacktrace:unlimited if irq == -1'",
        "events/sched/sched_process_fork/trigger: 'enable_event:sched:sched_wakeup:count=2 if child_pid == -2' after restoring, "
        "was 'enable_event:sched:sched_wakeup:count=2 if child_pid == -2; traceoff:count=3 if child_pid == -1'",
        "events/sched/sched_switch/trigger: 'traceon:unlimited if prev_pid == -3' after restoring, was none",
    ]
    assert cc.restore_state(tfs, before) == []
    assert cc.snapshot_state(tfs) == before


def test_the_manifest_says_what_restoring_could_not_put_back(host_filters_and_triggers, tmp_path, monkeypatch):
    # tracing_state_restored comes from reading back every saved file, not
    # from the writes having raised nothing: a write the kernel took but
    # did not apply (here: one that does nothing) is caught
    monkeypatch.setattr(cc, "_write_tracefs", lambda path, text: None)
    m = cc.collect(tmp_path / "raw", "kvm-sched", events=["sched:sched_switch"], duration=0.5, perf_stat=False)
    assert m["tracing_state_restored"] is False
    assert m["restore_problems"] == ["events/irq/irq_handler_entry/filter: none after restoring, was 'irq > 5'",
                                     "events/sched/sched_switch/filter: none after restoring, was 'prev_pid != 0'"]
    saved = json.loads((tmp_path / "raw" / "manifest.json").read_text())
    assert saved["tracing_state_restored"] is False and saved["restore_problems"] == m["restore_problems"]


@pytest.mark.parametrize("listed, command, removal", [
    ("traceoff:unlimited", "traceoff", "!traceoff"),
    ("traceoff:count=3 if child_pid == -1", "traceoff:3 if child_pid == -1", "!traceoff"),
    ("enable_event:sched:sched_wakeup:count=2 if child_pid == -2", "enable_event:sched:sched_wakeup:2 if child_pid == -2", "!enable_event:sched:sched_wakeup"),
    ("disable_event:irq:irq_handler_entry:unlimited", "disable_event:irq:irq_handler_entry", "!disable_event:irq:irq_handler_entry"),
    ("hist:keys=pid:vals=hitcount:sort=hitcount:size=2048 [active]", "hist:keys=pid:vals=hitcount:sort=hitcount:size=2048", "!hist:keys=pid:vals=hitcount:sort=hitcount:size=2048"),
    ("hist:keys=pid:vals=hitcount:sort=hitcount:size=2048 if pid > 1 [paused]", "hist:keys=pid:vals=hitcount:sort=hitcount:size=2048:pause if pid > 1", "!hist:keys=pid:vals=hitcount:sort=hitcount:size=2048:pause"),
])
def test_a_trigger_as_listed_is_written_back_as_set(listed, command, removal):
    assert cc._trigger_command(listed) == command
    assert cc._trigger_removal(listed) == removal


def test_a_ring_buffer_never_traced_into_is_restored_at_the_size_it_grows_to(tmp_path):
    # A freshly booted kernel's buffer reads "7 (expanded: 1408)" until the
    # first recording grows it; it never shrinks back, so restoring means
    # writing the grown size (a tracefs lookalike: only the file matters).
    (tmp_path / "buffer_size_kb").write_text("7 (expanded: 1408)\n")
    before = cc.snapshot_state(tmp_path)
    assert before["buffer_size_kb"] == "1408\n"
    (tmp_path / "buffer_size_kb").write_text("8195\n")  # what a recording left
    assert cc.restore_state(tmp_path, before) == []
    assert (tmp_path / "buffer_size_kb").read_text() == "1408\n"
    assert cc.snapshot_state(tmp_path) == before


def test_perf_backend_records_tracepoints_and_counters(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root")
    raw = tmp_path / "raw"
    m = cc.collect(raw, "kvm-sched", events=["sched:sched_switch", "sched:sched_wakeup"], duration=5, perf_record=True, command=_lab_cmd(1.0))
    kinds = {f["kind"] for f in m["files"]}
    assert "perfdata" in kinds
    out = subprocess.run(["perf", "script", "-i", str(raw / "perf.data")], capture_output=True, text=True).stdout
    assert "CPU 0/KVM" in out and "sched:sched_switch" in out
    # the lab wrote trace_marker lines; perf takes none of them, and says so
    assert "ftrace:print" not in out and "txn_end" not in out
    assert any("trace_marker" in gap for gap in m["not_captured"])
    if "perfstat" in kinds:
        lines = (raw / "perf-stat.csv").read_text().splitlines()
        assert any(",CPU0," in line for line in lines)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_sigint_mid_capture_leaves_an_importable_output(tracing_lock, tmp_path, sig):
    raw = tmp_path / "raw"
    before = cc.snapshot_state(cc.tracefs())
    p = subprocess.Popen(
        [sys.executable, str(Path(cc.__file__)), "-o", str(raw), "--duration", "30", "--no-perf-stat", "--", *_lab_cmd(30)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(2.5)
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    m = json.loads((raw / "manifest.json").read_text())
    assert m["stop_reason"] == "signal" and m["duration_s"] < 20
    assert m["tracing_state_restored"] and cc.snapshot_state(cc.tracefs()) == before
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


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_duration_that_is_not_finite_is_refused_before_anything_runs(tmp_path, monkeypatch, value):
    # issue 42: collect(duration=nan) passed its range check (every
    # comparison with NaN is false) and captured for 0.6 s
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(cc, "tracefs", lambda: pytest.fail("tracefs was looked at"))
    with pytest.raises(cc.CollectError, match=r"^--duration -?(nan|inf): must be between 0 and 86400 seconds$"):
        cc.collect(tmp_path / "raw", duration=value, perf_stat=False)
    assert not (tmp_path / "raw").exists()


def test_missing_events_are_reported_and_skipped(tracing_lock, tmp_path):
    m = cc.collect(tmp_path / "raw", "kvm-sched", events=["sched:sched_switch", "nosuchsys:nosuchevent"], duration=0.5, perf_stat=False)
    assert m["events"]["missing"] == ["nosuchsys:nosuchevent"] and m["events"]["recorded"] == ["sched:sched_switch"]
    # Lost events come from the buffer statistics trace-cmd stored in trace.dat:
    # one entry per CPU of this machine, and the totals are their sums.
    lost = m["lost_events"]
    assert sorted(lost["per_cpu"], key=int) == [str(c) for c in range(os.cpu_count())]
    assert lost["trace_cmd_overruns"] == sum(c["overrun"] + c["commit_overrun"] for c in lost["per_cpu"].values())
    # The collector's own CPU time counts, not only its tools'.
    ov = m["collector_overhead"]
    assert ov["cpu_s"] > sum(ov["tools_cpu_s"].values()) and 0 < ov["pct"] <= ov["pct_of_one_cpu"]


def test_buffer_stats_parse_trace_cmd_report_stat():
    text = "cpus=2\n\nCPU: 0\nentries: 5\noverrun: 3\ncommit overrun: 1\ndropped events: 0\n\nCPU: 1\noverrun: 0\ndropped events: 7\n"
    assert cc.buffer_stats(text) == {"0": {"overrun": 3, "commit_overrun": 1, "dropped_events": 0},
                                     "1": {"overrun": 0, "dropped_events": 7}}


def test_tsc_rate_from_the_kernel_log_prefers_the_refined_calibration():
    log = "[0.000063] tsc: Detected 2596.138 MHz processor\n[1.2] tsc: Refined TSC clocksource calibration: 2596.001 MHz\n"
    assert cc.tsc_hz_from_kernel_log(log) == 2_596_001_000
    assert cc.tsc_hz_from_kernel_log("[0.1] tsc: Detected 2596.138 MHz processor") == 2_596_138_000
    assert cc.tsc_hz_from_kernel_log("nothing here") is None


def test_a_tracer_that_writes_nothing_is_an_error_and_state_is_restored(tracing_lock, tmp_path, monkeypatch):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "trace-cmd").write_text("#!/bin/sh\necho 'trace-cmd: cannot open tracefs' >&2\nexit 1\n")
    (fake / "trace-cmd").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    before = cc.snapshot_state(cc.tracefs())
    with pytest.raises(cc.CollectError, match=r"trace-cmd wrote no trace.dat \(trace-cmd: cannot open tracefs\)"):
        cc.collect(tmp_path / "raw", "kvm-sched", events=["sched:sched_switch"], duration=2, perf_stat=False)
    assert cc.snapshot_state(cc.tracefs()) == before


def test_output_that_is_a_file_is_refused(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root")
    f = tmp_path / "notadir"
    f.write_text("user data")
    with pytest.raises(cc.CollectError, match="not a directory"):
        cc.collect(f, "kvm-sched", duration=1)
    assert f.read_text() == "user data"


def test_what_the_host_lacks_is_said_before_the_output_is_touched(tmp_path):
    if os.geteuid() != 0 or cc.tracefs() is None:
        pytest.skip("needs root and tracefs")
    with pytest.raises(cc.CollectError, match="none of the requested events exist"):
        cc.collect(tmp_path / "new" / "raw", "kvm-sched", events=["nosuchsys:nosuchevent"], duration=1, perf_stat=False)
    assert not (tmp_path / "new").exists()
    # nor is a full output replaced, even with --force
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "manifest.json").write_text("{}")
    with pytest.raises(cc.CollectError, match="none of the requested events exist"):
        cc.collect(kept, "kvm-sched", events=["nosuchsys:nosuchevent"], duration=1, perf_stat=False, force=True)
    assert (kept / "manifest.json").read_text() == "{}"


def test_zipapp_runs_stand_alone(tmp_path):
    target = tmp_path / "collect.pyz"
    cc.build_zipapp(target)
    p = subprocess.run([sys.executable, str(target), "--help"], capture_output=True, text=True, env={"PATH": os.environ["PATH"]})
    assert p.returncode == 0 and "--preset" in p.stdout
    # Presets travel inside the archive: a bad name lists them all.
    p = subprocess.run([sys.executable, str(target), "-o", str(tmp_path / "x"), "--preset", "nope"], capture_output=True, text=True,
                       env={"PATH": os.environ["PATH"]}, cwd=tmp_path)
    known = sorted(f.stem for f in (Path(cc.__file__).parent / "presets").glob("*.json"))
    assert p.returncode == 2 and f"known: {', '.join(known)}" in p.stderr


def test_zipapp_records_with_a_packed_preset(tracing_lock, tmp_path):
    target = tmp_path / "collect.pyz"
    cc.build_zipapp(target)
    p = subprocess.run([sys.executable, str(target), "-o", str(tmp_path / "raw"), "--preset", "kvm-spin", "--duration", "0.5", "--no-perf-stat"],
                       capture_output=True, text=True, env={"PATH": os.environ["PATH"]}, cwd=tmp_path, timeout=60)
    assert p.returncode == 0, p.stderr
    m = json.loads((tmp_path / "raw" / "manifest.json").read_text())
    assert m["preset"] == "kvm-spin" and "sched:sched_switch" in m["events"]["recorded"]


def test_lost_events_with_a_tiny_buffer_exit_1_and_are_counted(tracing_lock, tmp_path):
    # ~600k syscalls traced into 4 KiB per CPU: the ring buffer must overrun.
    raw = tmp_path / "raw"
    p = subprocess.run([sys.executable, "-m", "cratrace", "record", "-o", str(raw), "--events", "raw_syscalls:sys_enter,raw_syscalls:sys_exit",
                        "--buffer-kb", "4", "--duration", "20", "--no-perf-stat", "--",
                        "dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=300000"], capture_output=True, text=True, timeout=90)
    m = json.loads((raw / "manifest.json").read_text())
    # trace-cmd's own view of the same file, summed here independently.
    stat = subprocess.run(["trace-cmd", "report", "--stat", "-i", str(raw / "trace.dat")], capture_output=True, text=True).stdout
    overrun = sum(int(x) for x in re.findall(r"^(?:commit )?overrun:\s*(\d+)", stat, re.M))
    assert m["lost_events"]["trace_cmd_overruns"] == overrun > 0
    assert p.returncode == 1, p.stderr


def test_xentrace_standin_stops_itself_at_its_T_bound(tmp_path, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("needs root")
    # -T is duration+1 s; the collector's own clock (duration) comes first,
    # so the stand-in is stopped by SIGINT and still leaves its file.
    monkeypatch.setenv("PATH", f"{STANDINS}:{os.environ['PATH']}")
    t0 = time.time()
    m = cc.collect(tmp_path / "raw", "xen", duration=0.5, use_xentrace=True, perf_stat=False)
    assert time.time() - t0 < 5 and m["stop_reason"] == "duration"
    assert (tmp_path / "raw" / "xentrace.bin").read_bytes() == b"XENTRACE"


def test_max_size_stops_the_capture_early_and_output_stays_readable(tracing_lock, tmp_path):
    raw = tmp_path / "raw"
    m = cc.collect(raw, "kvm-sched", events=["raw_syscalls:sys_enter", "raw_syscalls:sys_exit", "sched:sched_switch"], duration=20,
                   max_size="300K", perf_stat=False, command=["dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=3000000"])
    assert m["stop_reason"] == "max-size reached" and m["duration_s"] < 15
    r = subprocess.run(["trace-cmd", "report", "-i", str(raw / "trace.dat")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "sys_enter" in r.stdout


def test_kernel_tick_rate_comes_from_the_kernel_config():
    assert cc.config_value("# CONFIG_HZ_100 is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n", "CONFIG_HZ") == 250
    assert cc.config_value("CONFIG_HZ_1000=y\n", "CONFIG_HZ") is None
    hz = cc.host_snapshot()["kernel_hz"]
    assert hz is None or hz in (100, 250, 300, 1000)
