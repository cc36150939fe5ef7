"""`cratrace sweep`: captures × policies × parameters × what-ifs, as one
job on Dask, into one dataset (issue #43)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from cratrace.cli.console import console, err_console, esc
from cratrace.cli.options import ENV_THROUGHPUT_MARKER, Verbose


def sweep_cmd(
    out: Annotated[Path, typer.Option("-o", "--output", help="The sweep directory: metrics/ (hive-partitioned Parquet), runs/<run-id>/, failures.parquet, sweep.json. Run the same command again to resume.")],
    captures: Annotated[Optional[list[str]], typer.Argument(help="Modelled captures: directories (a directory of captures stands for each), or URLs fsspec reads (s3://..., file://...).", show_default=False)] = None,
    globs: Annotated[Optional[list[str]], typer.Option("--glob", help="Captures by pattern, e.g. 'hosts/*/capture' or 's3://bucket/hosts/*/capture' (quote it; repeatable).")] = None,
    policy: Annotated[Optional[list[str]], typer.Option("--policy", "-p", help="A policy, as `cratrace replay -p` takes it (eevdf, eevdf+wapd, credit+rslp, ...), or `own`: each capture's own. Repeatable; default: own.")] = None,
    sets: Annotated[Optional[list[str]], typer.Option("--set", help="key=value for every run, as `cratrace replay --set` (repeatable).")] = None,
    grid: Annotated[Optional[list[str]], typer.Option("--grid", help="key=v1,v2,...: one run per value, every combination of the --grid keys (e.g. balance_k=1.05,1.1,1.2).")] = None,
    what_if: Annotated[Optional[list[str]], typer.Option("--what-if", help="An alternative host, run beside the host as recorded: drop-vm=NAME, add-vm=NAME[:COUNT], or any --set key (pcpus=8, cap.VM=PCT, weight.VM=W, affinity.VM=CPUS); several parts joined by ';'. NAME @typical is each capture's typical VM (median recorded CPU). A what-if naming a VM a capture lacks is not run there. Repeatable.")] = None,
    headroom: Annotated[int, typer.Option("--headroom", help="Also run add-vm=@typical:1 .. N under every policy: how many more copies of its typical VM each host takes (`cratrace fleet-report` reads it).")] = 0,
    seed: Annotated[int, typer.Option(help="The replays' seed (see `cratrace replay --seed`).")] = 0,
    scheduler: Annotated[Optional[str], typer.Option("--scheduler", help="An existing Dask scheduler, e.g. tcp://HOST:8786 (default: DASK_SCHEDULER_ADDRESS, else a local cluster). Its workers need cratrace installed and the captures and -o at the same paths (or URLs).")] = None,
    workers: Annotated[Optional[int], typer.Option("--workers", help="Worker processes of the local cluster (default: one per core).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the sweep's summary as JSON.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress or summary; the exit code says how it went.")] = False,
    throughput_marker: Annotated[Optional[str], typer.Option("--throughput-marker", envvar=ENV_THROUGHPUT_MARKER, help="The marker the guests write once per transaction (default txn_end), as `cratrace replay --throughput-marker`; --set throughput_marker=NAME wins over it.", show_default=False)] = None,
    verbose: Verbose = False,
) -> None:
    """Replay every capture under every policy, parameter and what-if, as
    tasks on Dask, into one Parquet dataset.

    Each run (capture, policy, settings, what-if, seed) is one task; its id
    hashes those and cratrace's version, so finished runs are skipped and
    the same command resumes an interrupted sweep. The recording itself is
    the `policy=recording` partition, the baseline `cratrace fleet-report`
    compares with. A failed run is retried once, then recorded in
    failures.parquet and the sweep goes on. Query the result with
    `cratrace sql SWEEP "SELECT ... FROM hosts"`.

    Exit codes: 0 every run finished; 1 some failed (listed in
    SWEEP/failures.parquet); 2 bad input; 130 interrupted (finished runs
    kept).
    """
    from cratrace.fleet.cluster import dashboard_link, dask_client, worker_count
    from cratrace.fleet.plan import Plan, expand_captures, headroom_what_ifs, parse_grid, parse_sets, parse_what_if
    from cratrace.fleet.sweep import run_sweep

    refs = expand_captures(list(captures or []), list(globs or []))
    what_ifs = [parse_what_if(w) for w in what_if or []] + (headroom_what_ifs(headroom) if headroom else [])
    settings = parse_sets(list(sets or []))
    if throughput_marker is not None:
        settings.setdefault("throughput_marker", throughput_marker.strip())
    plan = Plan(list(policy or []), settings, parse_grid(list(grid or [])), what_ifs, seed)
    show = not (quiet or as_json)
    with dask_client(scheduler, workers) as client:
        link = dashboard_link(client)
        if show:
            n = worker_count(client)
            err_console.print(f"sweep: {len(refs)} captures on {n} worker{'s' if n != 1 else ''}" + (f"; dashboard {esc(link)}" if link else ""), highlight=False, soft_wrap=True)
        with _bar(quiet=not show) as progress:
            res = run_sweep(refs, plan, out, client, progress)
        res.dashboard = link
        res.workers = worker_count(client) if not res.interrupted else res.workers
    if as_json:
        print(json.dumps(res.summary(), indent=2, sort_keys=True))
    elif show:
        console.print(f"[green]sweep[/] {res.runs} runs on {res.captures} captures: {res.ran} ran, {res.skipped} already finished, {res.failed} failed; {res.metrics_rows:,} metric rows in [bold]{esc(res.out / 'metrics')}[/]", highlight=False, soft_wrap=True)
        for note in res.notes:
            err_console.print(f"note: {esc(note)}", highlight=False, soft_wrap=True)
    if res.interrupted:
        from cratrace.cli import signals

        err_console.print(f"[red]{signals.describe()}[/]: finished runs are kept in {esc(res.out)}; run the same command again to resume", highlight=False, soft_wrap=True)
        signals.reported = True
        raise typer.Exit(signals.exit_code())
    if res.failures:
        first = res.failures[0]
        what = f"{first['capture']}" + (f" {first['policy']}" if first["policy"] else " (scan)")
        err_console.print(f"[yellow]warning:[/] {res.failed} failed (see {esc(res.out / 'failures.parquet')}); first: {esc(what)}: {esc(first['error'])}", highlight=False, soft_wrap=True)
        raise typer.Exit(1)


def _bar(quiet: bool):
    """A progress bar: runs done / total, failures, ETA (a terminal only)."""
    import sys
    from contextlib import contextmanager

    @contextmanager
    def bar():
        if quiet or not sys.stderr.isatty():
            yield lambda done, total, failed: None
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        with Progress(
            TextColumn("[bold]sweep"), BarColumn(), MofNCompleteColumn(), TextColumn("runs, [red]{task.fields[failed]}[/] failed"),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=err_console.get(), transient=True,
        ) as prog:
            task = prog.add_task("sweep", total=None, failed=0)
            yield lambda done, total, failed: prog.update(task, completed=done, total=total, failed=failed)

    return bar()


def register(app: typer.Typer) -> None:
    app.command("sweep", rich_help_panel="Fleet")(sweep_cmd)
