"""A long capture's demand is extracted a batch of vCPUs at a time (its
recorded diagnostics from the same batches' parts): every field of the
workload must be what reading the timelines whole gives, on captures with
spin episodes and pv halts (kvm-heavy-spin), gang barriers (gang) and Xen
domains (xen-io-billing, whose vCPUs have no thread)."""

from __future__ import annotations

import dataclasses

import polars as pl
import pytest

from cratrace.capture import Capture
from cratrace.replay import diagnostics
from cratrace.replay import workload as wl


@pytest.fixture(scope="module")
def capture(scenario_capture) -> Capture:
    return Capture(scenario_capture[1])


@pytest.mark.parametrize("vcpus_per_batch", [1, 3])
def test_a_workload_extracted_a_few_vcpus_at_a_time_is_the_whole_one(capture, monkeypatch, vcpus_per_batch):
    whole = wl.extract_workload(capture, switch_ns=2000, migration_ns=5000)
    rows = capture.model["vcpu_states"].select(pl.len()).collect().item()
    vcpus = sum(1 for v in whole.vm_of if v >= 0)
    # a batch's share of the rows: `vcpus_per_batch` vCPUs' worth
    monkeypatch.setattr(wl, "SEGMENTS_PER_BATCH", rows / vcpus * (vcpus_per_batch + 0.5))
    batched = wl.extract_workload(capture, switch_ns=2000, migration_ns=5000)
    assert vcpus >= 3 and len(whole.phase_kind) > 100
    for f in dataclasses.fields(whole):
        assert getattr(batched, f.name) == getattr(whole, f.name), f.name


def test_diagnostics_from_parts_split_by_thread_are_the_whole_ones(capture):
    states = capture.model["vcpu_states"].collect()
    if states["tid"].null_count():
        pytest.skip("a Xen domain's vCPUs have no thread to split by")
    p = diagnostics.parts(states)
    for (_,), part in states.group_by(["tid"], maintain_order=True):
        p.add(part)
    assert p.figures() == diagnostics.measure(states)
