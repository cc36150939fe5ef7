"""`cratrace import`: read trace files into a capture directory."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Optional

import typer

from cratrace.cli.console import console, esc, print_outcomes, progress_bar
from cratrace.cli.options import ENV_COMPRESSION, ENV_CPU_HZ, verbose_option


def import_cmd(
    sources: Annotated[list[Path], typer.Argument(help="trace.dat / xentrace / perf.data files, or raw capture directories from `cratrace record`.")],
    out: Annotated[Path, typer.Option("-o", "--output", help="Capture directory to create.")],
    force: Annotated[bool, typer.Option("--force", help="Replace OUT if it exists (only once the new capture is complete).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary.")] = False,
    cpu_hz: Annotated[Optional[float], typer.Option("--cpu-hz", envvar=ENV_CPU_HZ, help="CPU frequency for xentrace TSC → ns, if host.json lacks it.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the import summary as JSON.")] = False,
    compression: Annotated[str, typer.Option("--compression", envvar=ENV_COMPRESSION, help="Parquet codec of the event tables: lz4 (fastest), zstd (about half the size, for archives) or none.")] = "lz4",
    fleet: Annotated[bool, typer.Option("--fleet", help="Each SOURCE is one host's raw capture directory (e.g. raw/*/): one capture per host, OUT/<host>/, imported in parallel on Dask; captures already in OUT are kept (--force replaces them).")] = False,
    scheduler: Annotated[Optional[str], typer.Option("--scheduler", help="With --fleet: an existing Dask scheduler (default: DASK_SCHEDULER_ADDRESS, else a local cluster).")] = None,
    workers: Annotated[Optional[int], typer.Option("--workers", help="With --fleet: worker processes of the local cluster (default: one per core).")] = None,
    max_memory: Annotated[Optional[str], typer.Option("--max-memory", help="Most decompressed trace.dat data held at once, e.g. 512M or 4G (default: 64 times the file, at least 256M); a file needing more is refused.")] = None,
    verbose: Annotated[bool, verbose_option("Also list the rows of each event table")] = False,
) -> None:
    """Import traces into a capture: one typed Parquet table per event.

    The output is written to a temporary directory and renamed into place,
    so a failed import never leaves a partial capture behind. Exit codes:
    0 all read; 1 imported, but part of the input was skipped, guessed or
    re-attributed (truncated, corrupt pages, records of no known event,
    fields that cannot be typed: each named on one line of stderr with its
    byte offset, the detail in capture.json); 2 nothing imported (also a
    trace.dat that would hold more than --max-memory decompressed).
    """
    from cratrace.cli.console import err_console
    from cratrace.importer import data_problems, write_capture

    budget = _bytes(max_memory) if max_memory is not None else None
    if cpu_hz is not None and not (math.isfinite(cpu_hz) and cpu_hz > 0):
        from cratrace.errors import UsageError

        raise UsageError(f"--cpu-hz {cpu_hz:g}: expected a frequency in Hz above 0, e.g. 2.4e9 (--cpu-hz or ${ENV_CPU_HZ})")
    if fleet:
        _import_fleet(sources, out, force=force, compression=compression, max_memory=budget, cpu_hz=cpu_hz, scheduler=scheduler, workers=workers, quiet=quiet, as_json=as_json)
        return
    if scheduler or workers:
        from cratrace.errors import UsageError

        raise UsageError("--scheduler and --workers go with --fleet (one capture per host); without it the sources are merged into one capture here")

    def bar(name: str, total: int):
        return progress_bar(f"importing {name}", total, quiet=quiet or as_json)

    meta = write_capture(sources, out, force=force, cpu_hz=cpu_hz, progress=bar, compression=compression, max_memory=budget)
    problems = data_problems(meta)
    if as_json:
        print(json.dumps({"capture": str(out), "events": meta["events"], "lost_events": meta["lost_events"]["total"], "warnings": meta["warnings"]}, indent=2))
    elif not quiet:
        total = sum(meta["events"].values())
        console.print(f"[green]imported[/] {total:,} events in {len(meta['events'])} tables into [bold]{esc(out)}[/]")
        for w in meta["warnings"]:
            if w not in problems:
                console.print(f"[yellow]warning:[/] {esc(w)}", highlight=False)
        if verbose:
            for name, n in sorted(meta["events"].items(), key=lambda kv: (-kv[1], kv[0])):
                console.print(f"  {esc(name)} {n:,}", highlight=False, soft_wrap=True)
    for p in problems:
        err_console.print(f"[yellow]warning:[/] {esc(p)}", highlight=False, soft_wrap=True)
    if problems:
        # The capture holds everything that could be read; exit 1 says it is incomplete.
        raise typer.Exit(1)


def _import_fleet(sources: list[Path], out: Path, *, force: bool, compression: str, max_memory: int | None, cpu_hz: float | None, scheduler: str | None, workers: int | None, quiet: bool, as_json: bool) -> None:
    """One capture per raw capture directory, on Dask. Exit 1 when any
    failed or was damaged (each named in one line); 2 when every host
    failed, as a single import that could not run."""
    from cratrace.fleet.cluster import dask_client
    from cratrace.fleet.many import import_jobs, run_each
    from cratrace.fleet.tasks import import_one

    jobs, skipped = import_jobs(sources, out, force, compression, max_memory, cpu_hz)
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}
    if jobs:
        with dask_client(scheduler, workers) as client, progress_bar("importing hosts", len(jobs), quiet=quiet or as_json) as cb:
            results = run_each(client, import_one, jobs, lambda done, total: cb(done))
    failed = {n: r["error"] for n, r in results.items() if "error" in r}
    damaged = {n: r["ok"]["problems"] for n, r in results.items() if "ok" in r and r["ok"]["problems"]}
    if made and not any(out.iterdir()):
        # every host failed: no empty directory left where none was
        out.rmdir()
    if as_json:
        print(json.dumps({"captures": {n: ({"capture": str(out / n), "events": r["ok"]["events"], "problems": r["ok"]["problems"]} if "ok" in r else {"error": r["error"]}) for n, r in results.items()}, "skipped": skipped}, indent=2))
    elif not quiet:
        ok = len(results) - len(failed)
        console.print(f"[green]imported[/] {ok} of {len(results)} hosts into [bold]{esc(out)}[/]" + (f"; {len(skipped)} already there (kept; --force replaces them)" if skipped else ""), highlight=False, soft_wrap=True)
    if print_outcomes(failed, damaged):
        raise typer.Exit(2 if failed and len(failed) == len(results) else 1)


def _bytes(text: str) -> int:
    """`--max-memory`'s size: a whole number of bytes, or with K, M, G or T
    (powers of 1,024)."""
    from cratrace.errors import UsageError

    t = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(t[-1:], 1)
    digits = t[:-1] if scale > 1 else t
    if not digits.isdigit() or int(digits) == 0:
        raise UsageError(f"--max-memory {text}: expected a size such as 512M or 4G")
    return int(digits) * scale


def register(app: typer.Typer) -> None:
    app.command("import", rich_help_panel="Pipeline")(import_cmd)
