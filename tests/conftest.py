"""Shared test fixtures: where things are, and a lock around real tracing.

ftrace has one global top-level buffer, so tests (and developers on the same
machine) that record with trace-cmd take ``/tmp/cratrace-tracing.lock``
first; see :func:`tracing_lock`.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = (REPO / ".." / "shared").resolve()
FIXTURES = SHARED / "fixtures"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """../shared/fixtures, or skip the test when it is not beside the repo."""
    if not FIXTURES.is_dir():
        pytest.skip(f"shared fixtures not found at {FIXTURES} (they live beside the repo, not in it)")
    return FIXTURES


def can_trace() -> str | None:
    """None if trace-cmd can record here, else the reason it cannot."""
    if os.geteuid() != 0:
        return "recording with trace-cmd needs root"
    if shutil.which("trace-cmd") is None:
        return "trace-cmd is not installed"
    if not Path("/sys/kernel/tracing/events").is_dir():
        return "tracefs is not mounted at /sys/kernel/tracing (run ../shared/sandbox/enable-tracing.sh here)"
    return None


@pytest.fixture
def tracing_lock():
    """Hold the machine-wide ftrace lock for the duration of a test."""
    why = can_trace()
    if why:
        pytest.skip(why)
    with open("/tmp/cratrace-tracing.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
