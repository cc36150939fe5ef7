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
