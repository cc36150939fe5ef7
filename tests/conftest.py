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


#: ring buffer per CPU (KiB) for the tests' own `trace-cmd record` runs
#: (`-b`): what the kernel expands it to on first use. A host can be left
#: with the minimal 7 KiB (`trace-cmd reset -b 1` shrinks it so), in which a
#: short recording keeps nothing.
RECORD_BUFFER_KB = "1408"

BUFFER_SIZE = Path("/sys/kernel/tracing/buffer_size_kb")


@pytest.fixture
def tracing_lock():
    """Hold the machine-wide ftrace lock for the duration of a test, and
    give the ring buffer back at the size the test found (`trace-cmd record
    -b` leaves its own). An unexpanded buffer ("7 (expanded: 1408)") stays
    expanded: the kernel expands it at the first recording anyway."""
    why = can_trace()
    if why:
        pytest.skip(why)
    with open("/tmp/cratrace-tracing.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        size = BUFFER_SIZE.read_text().strip()
        try:
            yield
        finally:
            if size.isdigit() and BUFFER_SIZE.read_text().strip() != size:
                BUFFER_SIZE.write_text(size + "\n")
            fcntl.flock(fh, fcntl.LOCK_UN)


#: fixtures that record with trace-cmd on this machine (root, tracefs):
#: a test that uses one, directly or through another fixture, is marked
#: `tracing`, so `pytest -m "not tracing"` runs the rest as any user
TRACING_FIXTURES = frozenset({"tracing_lock", "lab_capture"})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if TRACING_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.tracing)
