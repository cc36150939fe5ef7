"""A long replay's tables are written as they are built: vcpu_states a
vCPU at a time (its diagnostics counted from the same parts) and the
markers a few million rows at a time. The outputs must be the whole
build's: every table's rows and metrics.json byte for byte, on the
captures of conftest.py (a Xen domain's vCPU states, without threads,
are written whole)."""

from __future__ import annotations

import polars as pl

from cratrace.replay import run


def test_tables_written_in_parts_are_the_whole_ones(scenario_capture, tmp_path, monkeypatch):
    name, capture = scenario_capture
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
