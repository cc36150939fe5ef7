"""Drive a sweep: scan each capture, plan its runs, skip the finished
ones, run the rest as Dask tasks, record what failed, write the dataset.

The driver holds a handful of small dicts per run (its spec, its future)
and never a run's tables: workers write each run's outputs under
``SWEEP/runs/<run-id>/`` themselves, whole or not at all, and the
metrics dataset is assembled from those files at the end, one partition
at a time. So a Ctrl-C (or a lost driver) loses only the runs in flight;
the same command again skips the finished ones.

Runs are submitted as soon as their capture's scan is back, so the
cluster is busy from the first scan on. A task is retried once (Dask's
``retries=1``); a second failure is recorded with its one-line error in
``failures.parquet`` and the sweep goes on.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from cratrace import __version__
from cratrace.errors import OutputExistsError, UsageError
from cratrace.fleet import dataset
from cratrace.fleet.plan import Plan, RunSpec, capture_labels
from cratrace.fleet.tasks import refused

#: (done, total, failed) → None
Progress = Callable[[int, int, int], None]


@dataclass
class SweepResult:
    """How a sweep went (also written to sweep.json, less the timings)."""

    out: Path
    captures: int = 0
    runs: int = 0
    ran: int = 0
    skipped: int = 0
    failures: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    interrupted: bool = False
    metrics_rows: int = 0
    dashboard: str | None = None
    workers: int = 0
    #: wall seconds: from the first task submitted to the last result,
    #: then writing the dataset (benchmarks/sweep_scaling.py reads them)
    tasks_s: float = 0.0
    assemble_s: float = 0.0

    @property
    def failed(self) -> int:
        return len(self.failures)

    def summary(self) -> dict:
        return {"sweep": str(self.out), "captures": self.captures, "runs": self.runs, "ran": self.ran, "skipped_finished": self.skipped, "failed": self.failed,
                "interrupted": self.interrupted, "metrics_rows": self.metrics_rows, "notes": self.notes, "failures": self.failures, "workers": self.workers}


@contextmanager
def sweep_lock(out: Path) -> Iterator[None]:
    """One driver per sweep directory at a time."""
    with open(out / ".lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(f"{out}: another `cratrace sweep` is writing this sweep; wait for it or choose another -o") from None
        yield


def prepare_dir(out: Path) -> None:
    """Create SWEEP (or reuse one), refusing a directory that is something else."""
    if out.exists() and not out.is_dir():
        raise OutputExistsError(f"{out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not dataset.is_sweep(out) and not (out / "runs").is_dir():
        raise OutputExistsError(f"{out}: exists and is not a sweep (no sweep.json); choose another -o")
    (out / "runs").mkdir(parents=True, exist_ok=True)


def clean_temporaries(out: Path) -> None:
    """Half-written runs left by a killed worker (hidden names in runs/)."""
    for p in (out / "runs").glob(".*"):
        shutil.rmtree(p, ignore_errors=True)


def _key(prefix: str, *parts: str) -> str:
    return f"cratrace-{prefix}-" + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


def recording_spec(ref: str, scan: dict) -> dict:
    """The recording as a run of the dataset (partition policy=recording)."""
    return {"run_id": scan["run_id"], "capture": ref, "own_policy": True, "what_if": "", "add_vms": [], "seed": None, "params": {}}


def run_sweep(captures: list[str], plan: Plan, out: Path, client: Any, progress: Progress | None = None) -> SweepResult:
    """Run `plan` over `captures` on `client` (a `distributed.Client`),
    writing the sweep directory `out`."""
    from distributed import as_completed

    out = Path(out).resolve()
    prepare_dir(out)
    res = SweepResult(out)
    labels = capture_labels(captures)
    res.captures = len(captures)
    progress = progress or (lambda done, total, failed: None)
    with sweep_lock(out):
        clean_temporaries(out)
        pending: dict[Any, tuple[str, Any]] = {}
        scans: dict[str, dict] = {}
        specs: list[RunSpec] = []
        timings: list[dict] = []
        done = 0
        t0 = time.perf_counter()
        for ref in captures:
            f = client.submit(_scan, ref, str(out), key=_key("scan", ref, str(out), __version__), retries=1, pure=False)
            pending[f] = ("scan", ref)
        total = len(captures)
        progress(0, total, 0)
        ac = as_completed(list(pending))
        try:
            for f in ac:
                stage, what = pending.pop(f)
                r = f.result() if f.status == "finished" else None
                why = _error_line(f) if r is None else refused(r)
                f.release()
                done += 1
                if why is not None:
                    res.failures.append(_failure(stage, what, labels, why))
                    progress(done, total, res.failed)
                    continue
                if stage == "scan":
                    ref = what
                    scans[ref] = r
                    timings.append({"run_id": r["run_id"], "stage": "scan", "wall_s": r["wall_s"], "peak_rss_mb": r["peak_rss_mb"], "worker": r.get("worker")})
                    runs, notes = plan.runs_for(ref, labels[ref], r, __version__)
                    res.notes += notes
                    for spec in runs:
                        specs.append(spec)
                        total += 1
                        if (out / "runs" / spec.run_id / "rows.parquet").is_file():
                            res.skipped += 1
                            done += 1
                            continue
                        g = client.submit(_run, spec.to_dict(), str(out), r["recorded"], key=_key("run", spec.run_id, str(out)), retries=1, pure=False)
                        pending[g] = ("run", spec)
                        ac.add(g)
                else:
                    res.ran += 0 if r.get("cached") else 1
                    res.skipped += 1 if r.get("cached") else 0
                    timings.append({"run_id": r["run_id"], "stage": "run", "wall_s": r["wall_s"], "peak_rss_mb": r["peak_rss_mb"], "worker": r.get("worker")})
                progress(done, total, res.failed)
        except KeyboardInterrupt:
            res.interrupted = True
            client.cancel(list(pending), force=True)
        res.runs = len(specs)
        t1 = time.perf_counter()
        _write_outputs(out, plan, captures, labels, scans, specs, res, timings)
        res.tasks_s, res.assemble_s = t1 - t0, time.perf_counter() - t1
    return res


def _scan(ref: str, out: str) -> dict:
    from distributed import get_worker

    from cratrace.fleet.tasks import scan_capture

    return {**scan_capture(ref, out), "worker": get_worker().address}


def _run(spec: dict, out: str, recorded: dict) -> dict:
    from distributed import get_worker

    from cratrace.fleet.tasks import run_replay

    return {**run_replay(spec, out, recorded), "worker": get_worker().address}


def _error_line(f: Any) -> str:
    """The one line a failed (or cancelled, or lost) task's future says."""
    from cratrace.fleet.tasks import one_line

    try:
        err = f.exception(timeout=5)
        return one_line(err) if err is not None else f"task {f.status}"
    except Exception as e:  # noqa: BLE001 - cancelled, lost: say which
        return f"task {f.status} ({type(e).__name__})"


def _failure(stage: str, what: Any, labels: dict[str, str], msg: str) -> dict:
    if stage == "scan":
        return {"run_id": None, "stage": "scan", "capture": labels[what], "capture_ref": what, "policy": None, "what_if": None, "params": None, "error": msg}
    s: RunSpec = what
    return {"run_id": s.run_id, "stage": "run", "capture": s.label, "capture_ref": s.capture, "policy": s.policy, "what_if": s.what_if, "params": json.dumps(s.settings, sort_keys=True), "error": msg}


def _write_outputs(out: Path, plan: Plan, captures: list[str], labels: dict[str, str], scans: dict[str, dict], specs: list[RunSpec], res: SweepResult, timings: list[dict]) -> None:
    """sweep.json, failures.parquet, timings.parquet and the metrics, from
    what is finished (all of it, or what a Ctrl-C left)."""
    from cratrace import atomic

    partitions: dict[tuple[str, str], list[dict]] = {}
    for ref, scan in scans.items():
        partitions.setdefault((labels[ref], dataset.RECORDING), []).append(recording_spec(ref, scan))
    finished = 0
    for s in specs:
        if (out / "runs" / s.run_id / "rows.parquet").is_file():
            partitions.setdefault((s.label, s.policy), []).append(s.to_dict())
            finished += 1
    res.metrics_rows = dataset.assemble(out, partitions, plan.param_keys)
    dataset.write_table(out / "failures.parquet", res.failures, dataset.FAILURES, ["stage", "capture", "policy", "what_if", "params", "run_id"])
    dataset.write_table(out / "timings.parquet", timings, dataset.TIMINGS, ["stage", "run_id"])
    doc = {
        "cratrace": __version__,
        "policies": plan.policies,
        "sets": plan.sets,
        "grid": plan.grid,
        "what_ifs": [w.text for w in plan.what_ifs],
        "seed": plan.seed,
        "param_keys": plan.param_keys,
        "captures": [{"ref": ref, "label": labels[ref], **({k: scans[ref][k] for k in ("fingerprint", "host", "own_policy", "typical_vm", "vms", "run_id")} if ref in scans else {"failed": True})} for ref in captures],
        "runs": sorted(({k: v for k, v in s.to_dict().items() if k != "source_of"} for s in specs), key=lambda d: (d["label"], d["policy"], d["run_id"])),
        "finished": finished,
        "failed": res.failed,
        "complete": not res.interrupted and not res.failures,
    }
    atomic.write_text(out / "sweep.json", json.dumps(doc, indent=2, sort_keys=True))
