"""A lab capture, recorded once for the model tests."""

from __future__ import annotations

import fcntl

import pytest

import cratrace
from tests.conftest import can_trace


@pytest.fixture(scope="session")
def lab_capture(tmp_path_factory):
    why = can_trace()
    if why:
        pytest.skip(why)
    from collectors import cratrace_collect as cc
    from cratrace.importer import import_capture
    from cratrace.lab import LabParams, executable
    from cratrace.model import build_model

    d = tmp_path_factory.mktemp("lab")
    events = cc.load_preset("kvm-sched")["ftrace_events"]
    with open("/tmp/cratrace-tracing.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cc.collect(d / "raw", "kvm-sched", events=events, duration=8, perf_stat=False, command=LabParams(vms=2, vcpus=3, duration_s=1.5).argv(executable()))
    cap = import_capture([d / "raw"], d / "cap")
    build_model(cap)
    return cratrace.open(d / "cap")
