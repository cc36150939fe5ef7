"""A long replay's tables are written as they are built: vcpu_states a VM
at a time (its diagnostics counted from the same parts) and the markers a
few million rows at a time. The outputs must be the whole build's: every
table's rows and metrics.json byte for byte, on captures with spin
episodes (kvm-heavy-spin: two VMs), gang barriers (gang) and Xen domains
(xen-io-billing: written whole, its vCPUs have no thread)."""

from __future__ import annotations

import polars as pl
import pytest

from cratrace.replay import run
from tests.helpers import cratrace

SCENARIOS = {
    "kvm-heavy-spin": ["--set", "duration_ms=60"],
    "gang": ["--set", "duration_ms=200"],
    "xen-io-billing": [],
}
IMPORT = {"xen-io-billing": ["--cpu-hz", "2.4e9"]}


@pytest.fixture(scope="module", params=sorted(SCENARIOS))
def capture(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(request.param)
    raw = d / ("raw.bin" if request.param.startswith("xen") else "raw.dat")
    cratrace("synth", request.param, "-o", raw, *SCENARIOS[request.param], check=True)
    cratrace("import", raw, *IMPORT.get(request.param, []), "-o", d / "cap", "-q", check=True)
    cratrace("model", d / "cap", "-q", check=True)
    return request.param, d / "cap"


def test_tables_written_in_parts_are_the_whole_ones(capture, tmp_path, monkeypatch):
    name, capture = capture
    policies = ["fair", "wapd"]
    run.replay_capture(capture, policies, tmp_path / "whole")
    monkeypatch.setattr(run, "STATE_ROWS", 10)
    monkeypatch.setattr(run, "MARKER_ROWS", 7)
    run.replay_capture(capture, policies, tmp_path / "parts")
    for policy in policies:
        whole, parts = tmp_path / "whole" / policy, tmp_path / "parts" / policy
        assert (parts / "metrics.json").read_bytes() == (whole / "metrics.json").read_bytes()
        names = sorted(p.name for p in (whole / "model").iterdir())
        assert names == sorted(p.name for p in (parts / "model").iterdir())
        for table in names:
            a, b = pl.read_parquet(whole / "model" / table), pl.read_parquet(parts / "model" / table)
            assert a.schema == b.schema and a.equals(b, null_equal=True), (policy, table)
        # more than one part of each (no markers in the Xen scenario)
        assert pl.read_parquet(parts / "model" / "vcpu_states.parquet").height > 10
        assert pl.read_parquet(parts / "model" / "markers.parquet").height > 7 or name.startswith("xen")
