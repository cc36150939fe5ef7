"""What runs on a Dask worker: scan a capture, replay one run, import or
model one capture. Each takes and returns plain data (paths as strings,
dicts), writes its outputs whole or not at all, and turns any failure
into one line: the driver records that line, not a traceback from
another machine. A refusal (cratrace's own error: bad input, over
budget, an output in the way) comes back as the result ``{"refused":
line}``, since it would be the same on every try; any other failure
raises a `TaskError`, which Dask tries once more.

A task that finds its output already there (a run finished by an earlier
sweep, or by the first try of a task the scheduler ran twice) returns at
once: the runs are idempotent.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import resource
import shutil
import time
from pathlib import Path
from typing import Any, Callable

from cratrace import __version__, atomic
from cratrace.errors import CratraceError
from cratrace.fleet.dataset import HOST_KEY, measure_run
from cratrace.fleet.plan import recording_id
from cratrace.fleet.source import local_capture


class TaskError(Exception):
    """A fleet task failed; the message is one line."""


#: the key of a task's result that says it refused, and why (one line)
REFUSED = "refused"


def refused(result: dict) -> str | None:
    """The line a task's result refuses with, or None."""
    return result.get(REFUSED)


def _task(fn: Callable[..., dict]) -> Callable[..., dict]:
    """A task's failures as one line: its refusals (cratrace's own errors)
    returned as ``{"refused": line}``, anything else raised as a
    `TaskError`."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> dict:
        try:
            return fn(*args, **kwargs)
        except CratraceError as e:
            return {REFUSED: one_line(e)}
        except Exception as e:  # noqa: BLE001 - every failure becomes one line
            raise TaskError(one_line(e)) from None

    return run


def one_line(e: BaseException) -> str:
    """An exception as one line: cratrace's own message, a file system
    error's path and reason, else the type and first line."""
    from cratrace.errors import CratraceError

    if isinstance(e, OSError) and e.strerror:
        where = ": ".join(str(f) for f in (e.filename, e.filename2) if f is not None)
        text = f"{where}: {e.strerror}" if where else e.strerror
    else:
        lines = str(e).strip().splitlines()
        text = lines[0] if lines else ""
        if not isinstance(e, (CratraceError, TaskError)):
            text = f"{type(e).__name__}: {text}" if text else type(e).__name__
    return text[:500]


def _peak_rss_mb() -> float:
    # Linux reports kilobytes
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _timing(t0: float, **extra) -> dict:
    return {"wall_s": round(time.perf_counter() - t0, 4), "peak_rss_mb": _peak_rss_mb(), "pid": os.getpid(), **extra}


def fingerprint(local: Path) -> str:
    """What the capture's replays depend on: capture.json and every model
    table's content (blake3), hashed together."""
    from cratrace import _native

    h = hashlib.sha256((local / "capture.json").read_bytes())
    for p in sorted((local / "model").glob("*.parquet")):
        h.update(f"\0{p.name}\0{_native.file_blake3(p)}".encode())
    return h.hexdigest()[:32]


def typical_vm(vms: dict[str, dict]) -> str | None:
    """The VM whose recorded CPU time is the median (the lower one of an
    even count; ties by name); Xen's dom0 is the host's, not a tenant."""
    ranked = sorted((v["cpu_s"], name) for name, v in vms.items() if name != "dom0")
    return ranked[(len(ranked) - 1) // 2][1] if ranked else None


def _finish(tmp: Path, dest: Path) -> None:
    """Rename a run's temporary directory into place; a copy that lost a
    race to an identical one is dropped."""
    try:
        os.rename(tmp, dest)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not dest.is_dir():
            raise


@_task
def scan_capture(ref: str, sweep: str) -> dict:
    """Fingerprint a capture and measure its recording (the baseline
    every policy is compared with), written as the run
    ``runs/<recording id>/``; returns what planning its runs needs:
    fingerprint, VMs, typical VM, own policy, host name, recorded
    throughputs."""
    t0 = time.perf_counter()
    local = local_capture(ref)
    fp = fingerprint(local)
    rid = recording_id(fp, __version__)
    dest = Path(sweep) / "runs" / rid
    if (dest / "scan.json").is_file():
        return {**json.loads((dest / "scan.json").read_text()), **_timing(t0, cached=True)}
    from cratrace.capture import Capture
    from cratrace.replay.plan import baseline_policy
    from cratrace.report.runs import recorded_run

    cap = Capture(local)
    cap.require_model(["threads", "cpu_slices", "vcpu_states"])
    run = recorded_run(cap)
    vms = run.metrics["vms"]
    host = str((cap.meta.get("host") or {}).get("hostname") or "") or None
    counted = any(v.get("marks") for v in vms.values())
    recorded = {name: v["throughput_per_s"] for name, v in vms.items()}
    recorded[HOST_KEY] = sum(v["throughput_per_s"] for v in vms.values() if v.get("marks") or not counted)
    info = {"run_id": rid, "fingerprint": fp, "vms": sorted(vms), "typical_vm": typical_vm(vms), "own_policy": baseline_policy(cap), "host": host, "recorded": recorded, "duration_s": run.duration_s}
    rows = measure_run(run, cap, {"host": host or ""}, recorded=recorded)
    tmp = atomic.temp_dir(dest)
    try:
        _write_rows(tmp / "rows.parquet", rows)
        (tmp / "scan.json").write_text(json.dumps(info, indent=2, sort_keys=True))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _finish(tmp, dest)
    return {**info, **_timing(t0, cached=False)}


def _write_rows(path: Path, rows: list[dict]) -> None:
    from cratrace.fleet.dataset import ROW_COLUMNS, frame

    frame(rows, ROW_COLUMNS).write_parquet(path, compression="zstd")


@_task
def run_replay(spec: dict, sweep: str, recorded: dict) -> dict:
    """Replay one run of a sweep (a `RunSpec` as a dict) into
    ``runs/<run id>/``: the replay's model tables, metrics.json, its spec,
    and its metric rows. `recorded`: the capture's recorded throughputs
    (from its scan)."""
    t0 = time.perf_counter()
    dest = Path(sweep) / "runs" / spec["run_id"]
    if (dest / "rows.parquet").is_file():
        return _timing(t0, run_id=spec["run_id"], cached=True)
    from cratrace.capture import Capture
    from cratrace.replay import replay_capture
    from cratrace.report.runs import replay_runs

    cap = Capture(local_capture(spec["capture"]))
    settings = {**spec["params"], **spec["whatif_sets"]}
    tmp = atomic.temp_dir(dest)
    try:
        out = tmp / "replay"
        replay_capture(cap, [spec["policy"]], out, settings=settings, seed=spec["seed"], force=True, drop_vms=list(spec["drop_vms"]), add_vms=[f"{n}:{c}" for n, c in spec["add_vms"]])
        run = replay_runs(out)[0]
        rows = measure_run(run, cap, {"host": spec["host"]}, source_of=spec["source_of"], recorded=recorded)
        run.release()
        for item in (out / spec["policy"].replace("/", "_")).iterdir():
            os.rename(item, tmp / item.name)
        shutil.rmtree(out)
        _write_rows(tmp / "rows.parquet", rows)
        (tmp / "spec.json").write_text(json.dumps({**spec, "cratrace": __version__}, indent=2, sort_keys=True))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _finish(tmp, dest)
    return _timing(t0, run_id=spec["run_id"], cached=False)


@_task
def import_one(source: str, out: str, force: bool, compression: str, max_memory: int | None = None, cpu_hz: float | None = None) -> dict:
    """`cratrace import SOURCE -o OUT [--max-memory BYTES] [--cpu-hz HZ]`
    for one host of a fleet import."""
    t0 = time.perf_counter()
    from cratrace.importer import data_problems, write_capture

    meta = write_capture([Path(source)], Path(out), force=force, compression=compression, max_memory=max_memory, cpu_hz=cpu_hz)
    return _timing(t0, events=sum(meta["events"].values()), problems=data_problems(meta))


@_task
def model_one(capture: str, spin_gap_ns: int, window_ns: int, vm_pattern: str | None) -> dict:
    """`cratrace model CAPTURE` for one capture of many."""
    t0 = time.perf_counter()
    import cratrace
    from cratrace.model.build import build_model, model_notes

    rows = build_model(capture, spin_gap_ns=spin_gap_ns, window_ns=window_ns, vm_pattern=vm_pattern)
    meta = cratrace.open(capture).meta
    guessed, remarks = model_notes(meta)
    return _timing(t0, tables=rows, vms=[v["vm"] for v in meta["model"]["vms"]], guessed=guessed, remarks=remarks)
