"""Captures the replay's split-up paths are checked on: generated, imported
and modelled once per module, with spin episodes and pv halts
(kvm-heavy-spin: two VMs), gang barriers (gang) and Xen domains
(xen-io-billing, whose vCPUs have no thread)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import cratrace

SCENARIOS = {
    "kvm-heavy-spin": ["--set", "duration_ms=60"],
    "gang": ["--set", "duration_ms=200"],
    "xen-io-billing": [],
}
#: xentrace's timestamps are TSC cycles: the import needs the clock
IMPORT = {"xen-io-billing": ["--cpu-hz", "2.4e9"]}


@pytest.fixture(scope="module", params=sorted(SCENARIOS))
def scenario_capture(request, tmp_path_factory) -> tuple[str, Path]:
    """(scenario, modelled capture directory)."""
    d = tmp_path_factory.mktemp(request.param)
    raw = d / ("raw.bin" if request.param.startswith("xen") else "raw.dat")
    cratrace("synth", request.param, "-o", raw, *SCENARIOS[request.param], check=True)
    cratrace("import", raw, *IMPORT.get(request.param, []), "-o", d / "cap", "-q", check=True)
    cratrace("model", d / "cap", "-q", check=True)
    return request.param, d / "cap"


@pytest.fixture(scope="module")
def two_hogs(tmp_path_factory) -> Path:
    """A modelled capture of two CPU-bound vCPUs sharing one core
    (thermal, 200 ms): small, and every phase kind a what-if moves."""
    d = tmp_path_factory.mktemp("hogs")
    cratrace("synth", "thermal", "-o", d / "raw", "--raw", "--set", "cores=1", "--set", "vcpus_per_core=2", "--set", "duration_ms=200", check=True)
    cratrace("import", d / "raw", "-o", d / "cap", "-q", check=True)
    cratrace("model", d / "cap", "-q", check=True)
    return d / "cap"
