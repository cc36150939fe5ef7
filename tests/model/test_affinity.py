"""Which CPUs a thread was allowed: host.json's (the collector's
Cpus_allowed_list), else inferred from the trace only where the kernel's
balancing would have moved an unpinned vCPU; and the replay keeps to it."""

from __future__ import annotations

import json

import polars as pl
import pytest

from cratrace.model.affinity import MIN_RUNS, cpulist, inferred, parse_cpulist, recorded
from tests.conftest import can_trace


@pytest.mark.parametrize("text,cpus", [("0", [0]), ("0-3", [0, 1, 2, 3]), ("0-1,4,6-7", [0, 1, 4, 6, 7]), ("3,1", [1, 3])])
def test_cpu_lists_round_trip(text, cpus):
    assert parse_cpulist(text) == cpus
    assert parse_cpulist(cpulist(cpus)) == cpus
    with pytest.raises(ValueError):
        parse_cpulist("a-b")


def test_host_json_affinity_every_cpu_is_no_restriction():
    got = recorded({"10": "0-1", "11": "0-3", "12": [2]}, ncpus=4)
    assert got.rows() == [(10, "0-1", "host.json"), (12, "2", "host.json")]


def _timeline(tid: int, cpu: int, runs: int, wait_us: int) -> list[tuple]:
    """A vCPU alternating 100 µs on `cpu` with `wait_us` preempted."""
    rows, t = [], 0
    for _ in range(runs):
        rows.append(("vm", 0, tid, "guest", t, t + 100_000, cpu))
        t += 100_000
        rows.append(("vm", 0, tid, "preempted", t, t + wait_us * 1000, None))
        t += wait_us * 1000
    return rows


def _frames(rows, idle_cpu1: bool) -> tuple[pl.DataFrame, pl.DataFrame]:
    states = pl.DataFrame(rows, schema=["vm", "vcpu", "tid", "state", "start", "end", "pcpu"], orient="row")
    end = int(states["end"].max())
    # CPU 1 idle the whole time, or busy with another thread
    slices = pl.DataFrame({"cpu": [1], "tid": [0 if idle_cpu1 else 99], "start": [0], "end": [end]})
    return states, slices


def test_a_vcpu_that_waits_beside_an_idle_cpu_it_never_uses_was_pinned():
    states, slices = _frames(_timeline(7, 0, MIN_RUNS + 5, 200), idle_cpu1=True)
    assert inferred(states, slices, ncpus=2).rows() == [(7, "0", "trace")]


def test_a_vcpu_that_stayed_on_one_cpu_of_a_busy_host_says_nothing():
    # balanced load stays put: no idle CPU it could have been pulled to
    states, slices = _frames(_timeline(7, 0, MIN_RUNS + 5, 200), idle_cpu1=False)
    assert inferred(states, slices, ncpus=2).height == 0
    # too few runs to tell, idle CPU or not
    states, slices = _frames(_timeline(7, 0, MIN_RUNS - 1, 200), idle_cpu1=True)
    assert inferred(states, slices, ncpus=2).height == 0


@pytest.mark.tracing
def test_a_capture_pinned_with_taskset_replays_on_its_cpu(tmp_path):
    """The lab's VMs pinned to CPU 0 (taskset, as libvirt's vcpupin does):
    the collector records each VM thread's allowed CPUs, the model keeps
    them, and the replay runs the vCPUs on CPU 0 only, where an unpinned
    replay spread them over both CPUs (and overstated throughput by 88%)."""
    why = can_trace()
    if why:
        pytest.skip(why)
    import fcntl

    import cratrace_collect as cc
    from cratrace.lab import LabParams, executable
    from tests.helpers import cratrace

    argv = LabParams(vms=2, vcpus=2, duration_s=1.5, lock="pv").argv(executable())
    with open("/tmp/cratrace-tracing.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cc.collect(tmp_path / "raw", "kvm-sched", duration=6, perf_stat=False, command=["taskset", "-c", "0", *argv])
    host = json.loads((tmp_path / "raw" / "host.json").read_text())
    vcpu_tids = {str(c["tid"]) for vm in host["vms"] for c in vm["vcpus"]}
    assert vcpu_tids and all(host["affinity"].get(t) == "0" for t in vcpu_tids), host["affinity"]
    cap = tmp_path / "cap"
    cratrace("import", tmp_path / "raw", "-o", cap, "-q", check=True)
    cratrace("model", cap, "-q", check=True)
    threads = pl.read_parquet(cap / "model" / "threads.parquet").filter(pl.col("role") == "vcpu")
    assert set(threads["allowed_cpus"]) == {"0"} and set(threads["affinity_evidence"]) == {"host.json"}
    p = cratrace("replay", cap, "-o", tmp_path / "rep", "--json")
    assert p.returncode in (0, 1), p.stderr
    (policy, m), = json.loads(p.stdout).items()
    slices = pl.read_parquet(tmp_path / "rep" / policy / "model" / "cpu_slices.parquet")
    ran = slices.join(threads.select("tid"), on="tid")
    assert set(ran["cpu"].unique()) == {0}
    # an unpinned replay of the same capture spreads them (the what-if)
    p = cratrace("replay", cap, "-o", tmp_path / "free", "-p", policy, "--set", "affinity=off", "--json")
    free = pl.read_parquet(tmp_path / "free" / policy / "model" / "cpu_slices.parquet").join(threads.select("tid"), on="tid")
    assert set(free["cpu"].unique()) == {0, 1}


def test_overlap_of_two_interval_sets_matches_a_brute_force_sum():
    # the time a vCPU waited while CPUs outside its set idled: two sets of
    # disjoint intervals, each pair's overlap summed by brute force
    import random

    from cratrace.model.affinity import _overlap

    rng = random.Random(3)

    def disjoint(n: int) -> list[tuple[int, int]]:
        t, out = rng.randint(-5, 5), []
        for _ in range(n):
            t += rng.randint(0, 6)
            d = rng.randint(1, 8)
            out.append((t, t + d))
            t += d
        return out

    def frame(iv: list[tuple[int, int]]) -> pl.DataFrame:
        return pl.DataFrame(iv, schema={"start": pl.Int64, "end": pl.Int64}, orient="row").sample(fraction=1.0, shuffle=True, seed=rng.randint(0, 99))

    seen = 0
    for _ in range(300):
        a, b = disjoint(rng.randint(0, 8)), disjoint(rng.randint(0, 8))
        want = sum(max(0, min(e, f) - max(s, g)) for s, e in a for g, f in b)
        assert _overlap(frame(a), frame(b)) == want, (a, b)
        seen += want > 0
    assert seen > 100
