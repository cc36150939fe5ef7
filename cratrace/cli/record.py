"""`cratrace record`: capture on this host (the same code as the
stand-alone collector, `cratrace_collect`, the `cratrace-collect` command)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from cratrace.cli.console import console, err_console, esc
from cratrace.cli.options import Verbose
from cratrace.errors import CratraceError


class RecordError(CratraceError):
    """The capture could not start (not root, tool missing, bad option)."""


def record_cmd(
    out: Annotated[Path, typer.Option("-o", "--output", help="Raw capture directory to create.")],
    preset: Annotated[str, typer.Option(help="Question to capture for: kvm-sched, kvm-spin, postcopy, io-billing, energy, xen.")] = "kvm-sched",
    events: Annotated[Optional[list[str]], typer.Option("--event", "-e", "--events", help="An ftrace event (system:event) to record instead of the preset's; repeatable (-e sched:sched_switch -e kvm:kvm_exit), or a comma list.")] = None,
    duration: Annotated[float, typer.Option(help="Seconds to capture (upper bound).")] = 10.0,
    max_size: Annotated[str, typer.Option(help="Stop when the output exceeds this size (e.g. 500M, 2G).")] = "1G",
    perf_record: Annotated[bool, typer.Option("--perf-record", help="Record tracepoints with `perf record` instead of trace-cmd.")] = False,
    no_perf_stat: Annotated[bool, typer.Option("--no-perf-stat", help="Skip per-CPU hardware counters.")] = False,
    xentrace: Annotated[bool, typer.Option("--xentrace", help="Also run xentrace (Xen dom0 only).")] = False,
    buffer_kb: Annotated[int, typer.Option(help="Per-CPU ftrace buffer size in KiB (raise it if events are lost).")] = 8192,
    force: Annotated[bool, typer.Option("--force", help="Overwrite a non-empty OUT.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the manifest as JSON.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary; the exit code says how it went (1: events were lost).")] = False,
    verbose: Verbose = False,
    command: Annotated[Optional[list[str]], typer.Argument(help="Optional workload to run during the capture (after --).")] = None,
) -> None:
    """Capture ftrace/perf/xentrace with a host snapshot and VM inventory.

    Needs root. Stops after --duration, at --max-size, when COMMAND exits,
    or on Ctrl-C, always leaving an importable directory and restoring the
    kernel's tracing state. Then: `cratrace import OUT -o CAPTURE`.
    """
    from cratrace_collect import CollectError, check_args, collect, lost_total, split_events

    if buffer_kb < 1:
        raise RecordError(f"--buffer-kb must be >= 1, got {buffer_kb}")
    chosen = split_events(events)
    try:
        check_args(preset, chosen, duration, max_size, buffer_kb)  # before root is needed
        m = collect(out, preset, chosen, duration, max_size, not no_perf_stat, perf_record, xentrace, buffer_kb, force=force, command=command or None)
    except CollectError as e:
        raise RecordError(str(e)) from None
    if as_json:
        print(json.dumps(m, indent=2))
    elif not quiet:
        _summary(out, m)
    for problem in m.get("restore_problems", []):
        err_console.print(f"[yellow]warning:[/] tracing state not restored: {esc(problem)}", highlight=False, soft_wrap=True)
    if lost_total(m):  # the capture is usable but incomplete: exit 1 (see cli/main.py)
        raise typer.Exit(1)


def _summary(out: Path, m: dict) -> None:
    console.print(f"[green]captured[/] {esc(', '.join(f['path'] for f in m['files']))} into [bold]{esc(out)}[/] in {m['duration_s']} s ({m['stop_reason']})")
    if m["events"]["missing"]:
        console.print(f"[yellow]not on this host, skipped:[/] {esc(', '.join(m['events']['missing']))}")
    for gap in m.get("not_captured", []):
        console.print(f"[yellow]not captured:[/] {esc(gap)}")
    console.print(f"lost events {m['lost_events'].get('trace_cmd_overruns')} overrun + {m['lost_events'].get('dropped') or 0} dropped, collector CPU {m['collector_overhead']['pct_of_one_cpu']}% of one CPU, tracing state restored: {m['tracing_state_restored']}")


def register(app: typer.Typer) -> None:
    app.command("record", rich_help_panel="Pipeline")(record_cmd)
