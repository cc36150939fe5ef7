"""Import and model many captures at once, one task per capture on the
same kind of cluster as a sweep (`cratrace import --fleet`, `cratrace
model CAP...`). One capture that fails does not stop the others: each
result is a success or a one-line error."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

from cratrace.errors import UsageError

_UNSAFE = re.compile(r"[^A-Za-z0-9._+@-]+")


def capture_names(sources: list[Path]) -> dict[Path, str]:
    """One capture name per raw capture directory: its own name (the
    host's, as `raw/HOST/` gives it), or more of its path where names
    repeat."""
    from cratrace.fleet.plan import capture_labels

    labels = capture_labels([str(s.resolve()) for s in sources])
    return {s: _UNSAFE.sub("_", labels[str(s.resolve())]) for s in sources}


def run_each(client: Any, fn: Callable, jobs: dict[str, tuple], progress: Callable[[int, int], None] | None = None) -> dict[str, dict]:
    """`fn(*args)` for each job on the cluster (retried once unless it
    refused); returns per job name `{"ok": result}` or `{"error": line}`,
    in the jobs' order."""
    from distributed import as_completed

    from cratrace.fleet.tasks import one_line, refused

    futures = {client.submit(fn, *args, retries=1, pure=False): name for name, args in jobs.items()}
    out: dict[str, dict] = {}
    progress = progress or (lambda done, total: None)
    progress(0, len(jobs))
    try:
        for i, f in enumerate(as_completed(list(futures)), start=1):
            name = futures[f]
            if f.status == "finished":
                r = f.result()
                out[name] = {"error": refused(r)} if refused(r) else {"ok": r}
            else:
                try:
                    err = f.exception(timeout=5)
                    out[name] = {"error": one_line(err) if err is not None else f"task {f.status}"}
                except Exception as e:  # noqa: BLE001
                    out[name] = {"error": f"task {f.status} ({type(e).__name__})"}
            f.release()
            progress(i, len(jobs))
    except KeyboardInterrupt:
        client.cancel(list(futures), force=True)
        raise
    return {name: out[name] for name in jobs if name in out}


def import_jobs(sources: list[Path], out: Path, force: bool, compression: str, max_memory: int | None = None, cpu_hz: float | None = None) -> tuple[dict[str, tuple], list[str]]:
    """(name → import_one's arguments, the names skipped as already
    imported). `max_memory`: each import's decompression budget in bytes
    (None: the importer's default for each file); `cpu_hz`: xentrace's TSC
    frequency where a host's host.json lacks it."""
    for s in sources:
        if not s.is_dir() or not (s / "manifest.json").is_file():
            raise UsageError(f"{s}: --fleet imports raw capture directories (from `cratrace record` or `cratrace synth --raw`), one per host")
    names = capture_names(sources)
    jobs: dict[str, tuple] = {}
    skipped: list[str] = []
    for s in sources:
        name = names[s]
        dest = out / name
        if dest.exists() and not force:
            skipped.append(name)
            continue
        jobs[name] = (str(s.resolve()), str(dest.resolve()), force, compression, max_memory, cpu_hz)
    return jobs, skipped
