"""A lab capture, recorded once for the model tests, and the recorder
other tests use for lab captures of their own."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest

import cratrace
from cratrace.capture import Capture
from tests.conftest import can_trace


def record_lab_capture(d: Path, params) -> Capture:
    """Record `params` (a `LabParams`) with the kvm-sched preset into
    `d/raw`, then import and model it into `d/cap`; skips when this
    machine cannot trace."""
    why = can_trace()
    if why:
        pytest.skip(why)
    import cratrace_collect as cc
    from cratrace.importer import import_capture
    from cratrace.lab import executable
    from cratrace.model import build_model

    with open("/tmp/cratrace-tracing.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cc.collect(d / "raw", "kvm-sched", duration=8, perf_stat=False, command=params.argv(executable()))
    cap = import_capture([d / "raw"], d / "cap")
    build_model(cap)
    return cratrace.open(d / "cap")


@pytest.fixture(scope="session")
def lab_capture(tmp_path_factory):
    from cratrace.lab import LabParams

    return record_lab_capture(tmp_path_factory.mktemp("lab"), LabParams(vms=2, vcpus=3, duration_s=1.5))
