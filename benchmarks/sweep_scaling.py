"""Benchmark: `cratrace sweep` on Dask, 1 worker against 2 (issue #43).

Generates N captures with `cratrace synth` (kvm-heavy-spin, different
seeds and sizes), imports and models them, then sweeps them under 4
policies x 3 values of a setting on a LocalCluster of 1 worker and of 2
(one thread each). Prints, per cluster: runs per minute, the per-task
gap on a worker between one task's end and the next one's start (the
scheduler's overhead, against the mean task time; target < 5%), and the
peak memory of a worker process; then the speed-up from 1 worker to 2
(target >= 1.8x: the machine has 2 cores, shared).

Then the driver's bookkeeping for a simulated sweep of many captures (no
replays: scans are made up, runs are no-op tasks, each run's rows a
one-row file): planning, the task graph through Dask, and writing the
dataset, at two sizes; time and memory per run should stay flat.

    python benchmarks/sweep_scaling.py [--captures 6] [--fleet 250,1000] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.quick import scratch  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "sweep_scaling"
POLICIES = ["rr", "fair", "eevdf", "fair+wapd"]
GRID = ["context_switch_ns=1000,2000,4000"]


def make_captures(root: Path, n: int, base_ms: int) -> list[str]:
    """N modelled captures: kvm-heavy-spin, seeds 1..N, lengths base_ms
    to 2 x base_ms."""
    import subprocess

    from cratrace.importer import import_capture
    from cratrace.model import build_model

    caps = []
    for i in range(n):
        cap = root / f"host{i:02d}"
        if not (cap / "model").is_dir():
            trace = root / f"host{i:02d}.dat"
            ms = base_ms + base_ms * i // max(n - 1, 1)
            subprocess.run([sys.executable, "-m", "cratrace", "synth", "kvm-heavy-spin", "-o", str(trace), "--seed", str(i + 1), "--set", "vms=2", "--set", "vcpus=2", "--set", f"duration_ms={ms}", "--force", "-q"], check=True)
            build_model(import_capture([trace], cap, force=True))
        caps.append(str(cap))
    return caps


def sweep_on(workers: int, caps: list[str], out: Path) -> dict:
    from distributed import get_task_stream

    from cratrace.fleet.cluster import dask_client
    from cratrace.fleet.plan import Plan, parse_grid
    from cratrace.fleet.sweep import run_sweep

    shutil.rmtree(out, ignore_errors=True)
    plan = Plan(POLICIES, {}, parse_grid(GRID), [])
    with dask_client(None, workers) as client:
        with get_task_stream(client) as ts:
            res = run_sweep(caps, plan, out, client)
        stream = ts.data
    import polars as pl

    t = pl.read_parquet(out / "timings.parquet")
    # compute intervals per worker, in order: the gaps between them while
    # work was queued are what the scheduler and the transfer of a task cost
    per_worker: dict[str, list[tuple[float, float]]] = {}
    for task in stream:
        for ss in task.get("startstops", []):
            if ss["action"] == "compute":
                per_worker.setdefault(task["worker"], []).append((ss["start"], ss["stop"]))
    gaps, computes = [], []
    for spans in per_worker.values():
        spans.sort()
        computes += [b - a for a, b in spans]
        gaps += [max(0.0, s2 - e1) for (_, e1), (s2, _) in zip(spans, spans[1:])]
    mean_task = statistics.mean(computes)
    gap = statistics.median(gaps) if gaps else 0.0
    return {
        "workers": workers, "runs": res.ran, "scans": res.captures, "failed": res.failed, "tasks_s": round(res.tasks_s, 3), "assemble_s": round(res.assemble_s, 3),
        "runs_per_min": round(60 * res.ran / res.tasks_s, 1), "mean_task_s": round(mean_task, 4), "gap_s": round(gap, 5),
        "overhead_pct": round(100 * gap / mean_task, 2), "peak_rss_mb_per_worker": round(float(t["peak_rss_mb"].max()), 1),
    }


def _noop(spec: dict) -> str:
    return spec["run_id"]


def bookkeeping(n_captures: int, root: Path, client) -> dict:
    """The driver's side of a sweep of `n_captures` made-up captures."""
    from distributed import as_completed

    import polars as pl
    from cratrace import __version__
    from cratrace.fleet import dataset
    from cratrace.fleet.plan import Plan, capture_labels, parse_grid, recording_id
    from cratrace.fleet.sweep import _key

    refs = [f"/fleet/host{i:05d}/capture" for i in range(n_captures)]
    plan = Plan(POLICIES, {}, parse_grid(GRID), [])
    tracemalloc.start()
    t = time.perf_counter()
    labels = capture_labels(refs)
    specs = []
    for i, ref in enumerate(refs):
        fp = f"{i:032x}"
        scan = {"fingerprint": fp, "vms": ["vm0", "vm1"], "own_policy": "rr", "typical_vm": "vm0", "host": labels[ref], "run_id": recording_id(fp, __version__)}
        runs, _ = plan.runs_for(ref, labels[ref], scan, __version__)
        specs += [(s, s.to_dict(), _key("run", s.run_id, "x")) for s in runs]
    plan_s = time.perf_counter() - t
    _, plan_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    n = len(specs)
    t = time.perf_counter()
    futures = [client.submit(_noop, d, key=k, pure=False) for _, d, k in specs]
    for f in as_completed(futures):
        f.release()
    graph_s = time.perf_counter() - t
    # each run's rows as a worker leaves them (not timed: the workers' part)
    sweep = root / f"fleet-{n_captures}"
    shutil.rmtree(sweep, ignore_errors=True)
    one = dataset.frame([{"kind": "host", "host": "h", "duration_s": 1.0}], dataset.ROW_COLUMNS)
    partitions: dict = {}
    for s, d, _ in specs:
        (sweep / "runs" / s.run_id).mkdir(parents=True)
        one.write_parquet(sweep / "runs" / s.run_id / "rows.parquet")
        partitions.setdefault((s.label, s.policy), []).append(d)
    t = time.perf_counter()
    rows = dataset.assemble(sweep, partitions, plan.param_keys)
    assemble_s = time.perf_counter() - t
    assert rows == n and pl.scan_parquet(sweep / "metrics" / "**" / "*.parquet").select(pl.len()).collect().item() == n
    shutil.rmtree(sweep, ignore_errors=True)
    return {"captures": n_captures, "runs": n, "plan_us_per_run": round(1e6 * plan_s / n, 1), "plan_bytes_per_run": round(plan_peak / n),
            "graph_us_per_run": round(1e6 * graph_s / n, 1), "assemble_us_per_run": round(1e6 * assemble_s / n, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--captures", type=int, default=6, help="generated captures to sweep")
    ap.add_argument("--ms", type=int, default=200, help="the shortest capture's length (simulated ms; the longest is twice that)")
    ap.add_argument("--fleet", default="250,1000", help="the simulated sweeps' sizes, in captures")
    ap.add_argument("--quick", action="store_true", help="2 captures of 50-100 ms, simulated sweeps of 20 and 80 captures, in a scratch directory")
    ap.add_argument("--json", action="store_true", help="the figures as JSON")
    a = ap.parse_args()
    if a.quick:
        a.captures, a.ms, a.fleet = 2, 50, "20,80"
    root = scratch("sweep_scaling") if a.quick else OUT
    root.mkdir(parents=True, exist_ok=True)
    try:
        caps = make_captures(root / "caps", a.captures, a.ms)
        runs = [sweep_on(n, caps, root / f"sweep-{n}w") for n in (1, 2)]
        one, two = runs
        for r in runs:
            print(f"{r['workers']} worker{'s' if r['workers'] > 1 else ''}: {r['runs']} runs ({r['scans']} captures x {len(POLICIES)} policies x 3 settings) in {r['tasks_s']:.2f} s: "
                  f"{r['runs_per_min']:.0f} runs/min; task {r['mean_task_s'] * 1e3:.0f} ms, gap between tasks {r['gap_s'] * 1e3:.1f} ms: overhead {r['overhead_pct']:.1f}% (target < 5%); "
                  f"peak RSS per worker {r['peak_rss_mb_per_worker']:.0f} MiB; dataset written in {r['assemble_s']:.2f} s", flush=True)
        speedup = one["tasks_s"] / two["tasks_s"]
        print(f"speed-up 1 -> 2 workers: {speedup:.2f}x (target 1.8x)")
        from cratrace.fleet.cluster import dask_client

        sizes = [int(x) for x in a.fleet.split(",")]
        with dask_client(None, 2) as client:
            books = [bookkeeping(n, root, client) for n in sizes]
        for b in books:
            print(f"simulated sweep of {b['captures']:,} captures, {b['runs']:,} runs: plan {b['plan_us_per_run']:.0f} µs and {b['plan_bytes_per_run'] / 1024:.1f} KiB per run, "
                  f"task graph {b['graph_us_per_run']:.0f} µs per run, dataset {b['assemble_us_per_run']:.0f} µs per run", flush=True)
        lo, hi = books[0], books[-1]
        print(f"per run, {hi['captures']:,} against {lo['captures']:,} captures: plan time {hi['plan_us_per_run'] / lo['plan_us_per_run']:.2f}x, memory {hi['plan_bytes_per_run'] / lo['plan_bytes_per_run']:.2f}x, "
              f"task graph {hi['graph_us_per_run'] / lo['graph_us_per_run']:.2f}x, dataset {hi['assemble_us_per_run'] / lo['assemble_us_per_run']:.2f}x (flat: 1x)")
        if a.json:
            print(json.dumps({"sweeps": runs, "speedup": round(speedup, 3), "bookkeeping": books}, indent=2))
    finally:
        if a.quick:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
