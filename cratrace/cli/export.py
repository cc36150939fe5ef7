"""`cratrace export`: a capture and its replays in other tools' formats."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from cratrace.cli.console import console, err_console, esc
from cratrace.cli.options import ENV_THROUGHPUT_MARKER, verbose_option

export_app = typer.Typer(
    name="export",
    help="Write a capture (and its replays) in another tool's format: `perfetto` for a timeline in ui.perfetto.dev.",
    no_args_is_help=True,
)


@export_app.command("perfetto")
def perfetto_cmd(
    capture: Annotated[Path, typer.Argument(help="Capture directory, with its model (`cratrace model`).")],
    out: Annotated[Path, typer.Option("-o", "--output", help="The Perfetto trace to write (FILE.pftrace).")],
    replays: Annotated[Optional[Path], typer.Option("--replays", help="The -o OUT of `cratrace replay`: each OUT/<policy>/ becomes a process group of its own beside the recording.")] = None,
    marker: Annotated[str, typer.Option("--marker", envvar=ENV_THROUGHPUT_MARKER, help="Marker whose count per bin is the throughput counter.")] = "txn_end",
    bin_ms: Annotated[float, typer.Option("--bin-ms", help="Width of a throughput bin.")] = 100.0,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing FILE.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress or summary.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="What was written (bytes, packets, per run the slices, states, markers and counter values), as JSON.")] = False,
    verbose: Annotated[bool, verbose_option("Name each part as it is written, also off a terminal")] = False,
) -> None:
    """Write CAPTURE, and each replay under --replays, as one Perfetto trace.

    Open the file in https://ui.perfetto.dev (File > Open trace file, or
    drag it onto the page; the trace stays in the browser, nothing is
    uploaded) or in a Perfetto UI served locally. Each run is a process
    group, the recording first, so a replay lines up under it on one time
    axis: per CPU what ran (cpu_slices), per VM a track per vCPU with its
    states (guest, vmm, preempted, spinning, halted, blocked), markers as
    instant events, and counters for frequency, idle state, power,
    temperature (when recorded) and throughput (transactions per bin).

    Example:

      cratrace export perfetto CAP --replays OUT -o cap.pftrace
    """
    import sys

    from cratrace.export.perfetto import export_perfetto

    say = None if (quiet or as_json or not (verbose or sys.stderr.isatty())) else (lambda name: err_console.print(f"[dim]export: {esc(name)}[/]"))
    summary = export_perfetto(capture, out, replays=replays, marker=marker, bin_ms=bin_ms, force=force, progress=say)
    if as_json:
        print(json.dumps(summary.as_dict(), indent=2))
    elif not quiet:
        console.print(f"wrote {esc(out)} ({summary.bytes:,} bytes, {summary.packets:,} packets); open it in https://ui.perfetto.dev", highlight=False, soft_wrap=True)
        for r in summary.runs:
            console.print(f"  {esc(r.name)}: {r.cpu_slices:,} CPU slices, {r.vcpu_states:,} vCPU states, {r.markers:,} markers, {r.counter_values:,} counter values", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.add_typer(export_app, name="export", rich_help_panel="Explore")
