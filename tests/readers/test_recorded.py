"""Traces recorded on this machine with trace-cmd: a top-level buffer with
sched/irq/timer events and trace_marker writes, plus a second buffer
instance; the native reader must agree with trace-cmd report."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import cratrace
from benchmarks.corpus import prepare_instance
from tests.conftest import RECORD_BUFFER_KB
from tests.helpers import cratrace as run_cli
from tests.helpers import report_counts

TRACEFS = Path("/sys/kernel/tracing")
# Files that refuse writes in sandboxed VMs; covered like enable-tracing.sh does.
def _record(tmp: Path, extra: list[str]) -> Path:
    out = tmp / "trace.dat"
    workload = "for i in $(seq 200); do echo txn_end vm=a vcpu=$((i % 2)) > /sys/kernel/tracing/trace_marker; done; sleep 0.2"
    r = subprocess.run(
        ["trace-cmd", "record", "-q", "-b", RECORD_BUFFER_KB, "-e", "sched", "-e", "irq", "-e", "timer", *extra, "-o", str(out), "--", "sh", "-c", workload],
        capture_output=True,
        text=True,
        cwd=tmp,
        timeout=60,
    )
    # tracing_lock skipped already where trace-cmd cannot record: a failure here is one
    assert r.returncode == 0, f"trace-cmd record failed: {r.stderr.strip().splitlines()[-1:]}"
    return out


def test_recorded_trace_with_markers(tracing_lock, tmp_path):
    f = _record(tmp_path, [])
    cap_dir = tmp_path / "cap"
    run_cli("import", f, "-o", cap_dir, "-q", check=True)
    cap = cratrace.open(cap_dir)
    assert cap.meta["events"] == report_counts(f)
    prints = cap.events["print"].collect()
    texts = [t for t in prints["buf"].to_list() if t.startswith("txn_end")]
    assert len(texts) == 200 and texts[0] == "txn_end vm=a vcpu=1\n"
    assert cap.meta["events"]["sched_switch"] > 0


def test_recorded_trace_with_a_second_buffer_instance(tracing_lock, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root")
    prepare_instance("cratrace_test", tmp_path / "scratch")
    f = _record(tmp_path, ["-B", "cratrace_test", "-e", "sched:sched_switch"])
    cap_dir = tmp_path / "cap"
    run_cli("import", f, "-o", cap_dir, "-q", check=True)
    cap = cratrace.open(cap_dir)
    assert cap.meta["events"] == report_counts(f)
    by_inst = cap.sql("SELECT instance, count(*) AS n FROM sched_switch GROUP BY 1 ORDER BY 1")
    assert by_inst["instance"].to_list() == ["", "cratrace_test"]
    assert all(n > 0 for n in by_inst["n"])
    names = [i["name"] for i in cap.meta["sources"][0]["summary"]["instances"]]
    assert names == ["", "cratrace_test"]
