"""Property tests below the CLI: model tables with the schema's invariants
but adversarial shapes (zero-length and coincident states, a vCPU that
never runs, markers of vCPUs with no timeline or of VMs that do not exist,
one CPU or 256, a clock at 0 or near 2^63) go through the workload
extraction, the replay and its metrics. The only exceptions allowed are
cratrace's documented one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cratrace.errors import CratraceError
from cratrace.importer import SCHEMA_VERSION
from cratrace.model.frames import conform
from cratrace.replay import replay_capture

RUNNING = ("guest", "vmm", "spinning")
WAITING = ("preempted", "blocked", "halted")


@st.composite
def model_tables(draw) -> dict:
    """A host's model: CPU slices first (each CPU's span cut into slices,
    each given to idle, a host thread or a vCPU that is not running
    elsewhere then), vCPU timelines from them (gap-free: running where a
    slice has it, a waiting state between), then markers and spin
    episodes anywhere in the span."""
    cpus = draw(st.sampled_from([1, 2, 3, 256]))
    lo = draw(st.sampled_from([0, 1, 1_000_000_000, 2**62, 2**63 - 2**41]))
    span = draw(st.integers(1, 50_000_000))
    hi = lo + span
    vms = draw(st.lists(st.integers(1, 3), min_size=0, max_size=3))
    vcpus = [(f"vm{i}", j, 100 + 10 * i + j) for i, n in enumerate(vms) for j in range(n)]
    hosts = [900, 901]
    tids = [t for *_, t in vcpus] + hosts
    busy: dict[int, list[tuple[int, int]]] = {t: [] for t in tids}
    slices = []
    for cpu in range(min(cpus, 4)):  # the other CPUs of a big host stay idle
        cuts = sorted(draw(st.lists(st.integers(lo, hi), max_size=8)))
        edges = [lo, *cuts, hi]
        for a, b in zip(edges, edges[1:]):
            tid = draw(st.sampled_from([0, *tids]))
            if tid and any(a < e and s < b for s, e in busy[tid]):
                tid = 0  # a thread runs on one CPU at a time
            if tid:
                busy[tid].append((a, b))
            slices.append((cpu, tid, a, b))
    for cpu in range(4, cpus):
        slices.append((cpu, 0, lo, hi))
    states = []
    for vm, v, tid in vcpus:
        t = lo
        for s, e in sorted(busy[tid]):
            if s > t or (s == t and draw(st.booleans())):  # a zero-length wait too
                states.append((vm, v, tid, draw(st.sampled_from(WAITING)), t, s, None))
            states.append((vm, v, tid, draw(st.sampled_from(RUNNING)), s, e, next(c for c, tt, a, b in slices if tt == tid and a == s)))
            t = e
        if t < hi or not busy[tid]:
            states.append((vm, v, tid, draw(st.sampled_from(WAITING)), t, hi, None))
    known = [(vm, v, tid) for vm, v, tid in vcpus] + [("ghost-vm", 0, None), (None, None, 901)]
    markers = []
    for _ in range(draw(st.integers(0, 30))):
        vm, v, tid = draw(st.sampled_from(known)) if known else (None, None, None)
        markers.append((draw(st.integers(lo, hi)), 0, tid, vm, v, draw(st.sampled_from(["txn_end", "spin_begin", "spin_end", "other"])), None))
    episodes = []
    for _ in range(draw(st.integers(0, 5))):
        if not vcpus:
            break
        vm, v, tid = draw(st.sampled_from(vcpus))
        a = draw(st.integers(lo, hi))
        b = draw(st.integers(a, hi))
        episodes.append((vm, v, tid, a, b, b - a, draw(st.sampled_from(["marker", "pause-exit", "pv-kick"]))))
    threads = [(0, None, "swapper", None, None, "idle")] + [(tid, 50 + i, f"CPU {v}/KVM", vm, v, "vcpu") for i, (vm, v, tid) in enumerate(vcpus)] + [(t, t, f"host{t}", None, None, "host") for t in hosts]
    return {
        "cpus": cpus,
        "range": (lo, hi - 1),
        "threads": pl.DataFrame(threads, schema=["tid", "pid", "comm", "vm", "vcpu", "role"], orient="row"),
        "cpu_slices": pl.DataFrame(slices, schema=["cpu", "tid", "start", "end"], orient="row").with_columns((pl.col("end") - pl.col("start")).alias("dur")),
        "vcpu_states": pl.DataFrame(states, schema=["vm", "vcpu", "tid", "state", "start", "end", "pcpu"], orient="row").with_columns((pl.col("end") - pl.col("start")).alias("dur")),
        "markers": pl.DataFrame(markers, schema=["ts", "cpu", "tid", "vm", "vcpu", "name", "fields"], orient="row"),
        "spin_episodes": pl.DataFrame(episodes, schema=["vm", "vcpu", "tid", "start", "end", "dur", "source"], orient="row"),
    }


def _write_capture(d: Path, m: dict) -> Path:
    (d / "model").mkdir(parents=True)
    meta = {"schema_version": SCHEMA_VERSION, "time_range_ns": list(m["range"]), "cpus": m["cpus"], "events": {}, "sources": [], "vms": []}
    (d / "capture.json").write_text(json.dumps(meta))
    for name in ("threads", "cpu_slices", "vcpu_states", "markers", "spin_episodes"):
        df = m[name]
        conform(df if df.height else pl.DataFrame(schema=df.schema), name).write_parquet(d / "model" / f"{name}.parquet")
    return d


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])
@given(m=model_tables(), policy=st.sampled_from(["fair", "eevdf+pv", "credit+wapd", "fair+energy-balance", "asymmetric+yield"]))
def test_adversarial_models_replay_or_fail_with_a_one_line_error(tmp_path_factory, m, policy):
    d = _write_capture(tmp_path_factory.mktemp("cap"), m)
    try:
        res = replay_capture(d, [policy], d / "replays")
    except CratraceError as e:
        assert "\n" not in str(e) and str(e), e
        event(f"refused: {type(e).__name__}")
        return
    event("replayed")
    metrics = res[policy]
    # what every replay's metrics hold: finite, in range, one row per VM
    assert set(metrics["vms"]) == {vm for vm in m["threads"]["vm"].drop_nulls()}
    assert 0 <= metrics["host"]["busy_pct"] <= 100.0 + 1e-6
    for vm, v in metrics["vms"].items():
        assert v["cpu_s"] >= 0 and v["spin_s"] >= 0 and v["marks"] >= 0, (vm, v)
