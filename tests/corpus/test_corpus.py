"""Every stage on every trace we have (`benchmarks/corpus.py`): the shared
fixtures, the sample traces, each `cratrace synth` scenario and the lab
recorded as foreign hosts' traces (other VMMs' thread names, marker styles,
event sets, trace clocks, one CPU, a buffer instance). Each stage exits 0,
or 1 with a one-line reason; never 2 from an internal error, never a
traceback."""

from __future__ import annotations

import json

import polars as pl
import pytest

from benchmarks.corpus import LAB_VARIANTS, find_traces, print_table, record_lab_variants, run_corpus, synth_traces
from tests.conftest import FIXTURES, REPO, can_trace


def _failures(results) -> list[str]:
    return [f"{s.trace} / {s.stage}: exit {s.exit}: {s.message}" for r in results for s in r.stages if not s.ok]


def test_every_stage_runs_on_the_fixtures_samples_and_synth_scenarios(tmp_path):
    traces = find_traces([p for p in (FIXTURES, REPO / "sample-traces") if p.is_dir()]) + synth_traces(tmp_path / "synth")
    results = run_corpus(traces, tmp_path / "runs", jobs=2)
    print_table(results)
    assert not _failures(results), _failures(results)
    # every trace went through every stage: 9 each
    assert all(len(r.stages) == 9 for r in results), [(r.trace, len(r.stages)) for r in results]


@pytest.mark.tracing
@pytest.mark.slow
def test_every_stage_runs_on_the_lab_recorded_as_other_hosts_would(tmp_path):
    why = can_trace()
    if why:
        pytest.skip(why)
    traces = record_lab_variants(tmp_path / "lab")
    assert len(traces) == len(LAB_VARIANTS)
    results = run_corpus(traces, tmp_path / "runs", jobs=2)
    print_table(results)
    assert not _failures(results), _failures(results)
    by_name = {r.trace.rsplit("/", 1)[-1].removesuffix(".dat").removesuffix(".data"): i for i, r in enumerate(results)}
    for name, lab, _opts, before in LAB_VARIANTS:
        src = traces[by_name[name]]
        cap = tmp_path / "runs" / f"{by_name[name]:03d}-{src.name}" / "cap"
        meta = json.loads((cap / "capture.json").read_text())["model"]
        vms = meta["vms"]
        vmm = lab.get("vmm", "qemu")
        # two VMs of the lab's size, named after their VMM, never merged
        assert len(vms) == 2 and all(v["vcpus"] == lab.get("vcpus", 2) for v in vms), (name, vms)
        assert all(v["vm"].startswith(vmm) for v in vms), (name, vms)
        # started during the trace, their creation is in it; before it, the
        # grouping is a guess and the model says so
        assert {v["evidence"] for v in vms} == ({"creation-order"} if before else {"fork"}), (name, vms)
        assert bool(meta["guessed"]) == before
        threads = pl.read_parquet(cap / "model" / "threads.parquet").filter(pl.col("role") == "vcpu")
        assert threads.group_by("vm", "vcpu").len()["len"].max() == 1
