"""`cratrace import`: read trace files into a capture directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from cratrace.cli.console import console, esc, progress_bar


def import_cmd(
    sources: Annotated[list[Path], typer.Argument(help="trace.dat / xentrace / perf.data files, or raw capture directories from `cratrace record`.")],
    out: Annotated[Path, typer.Option("-o", "--output", help="Capture directory to create.")],
    force: Annotated[bool, typer.Option("--force", help="Replace OUT if it exists (only once the new capture is complete).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary.")] = False,
    cpu_hz: Annotated[Optional[float], typer.Option("--cpu-hz", help="CPU frequency for xentrace TSC → ns, if host.json lacks it.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the import summary as JSON.")] = False,
    compression: Annotated[str, typer.Option("--compression", help="Parquet codec of the event tables: lz4 (fastest), zstd (about half the size, for archives) or none.")] = "lz4",
) -> None:
    """Import traces into a capture: one typed Parquet table per event.

    The output is written to a temporary directory and renamed into place,
    so a failed import never leaves a partial capture behind. Exit codes:
    0 all read; 1 imported, but part of the input was damaged (truncated,
    corrupt pages, fields that cannot be typed: each named on stderr with
    its byte offset); 2 nothing imported.
    """
    from cratrace.cli.console import err_console
    from cratrace.importer import data_problems, write_capture

    def bar(name: str, total: int):
        return progress_bar(f"importing {name}", total, quiet=quiet or as_json)

    meta = write_capture(sources, out, force=force, cpu_hz=cpu_hz, progress=bar, compression=compression)
    problems = data_problems(meta)
    if as_json:
        print(json.dumps({"capture": str(out), "events": meta["events"], "lost_events": meta["lost_events"]["total"], "warnings": meta["warnings"]}, indent=2))
    elif not quiet:
        total = sum(meta["events"].values())
        console.print(f"[green]imported[/] {total:,} events in {len(meta['events'])} tables into [bold]{esc(out)}[/]")
        for w in meta["warnings"]:
            if w not in problems:
                console.print(f"[yellow]warning:[/] {esc(w)}", highlight=False)
    for p in problems:
        err_console.print(f"[yellow]warning:[/] {esc(p)}", highlight=False, soft_wrap=True)
    if problems:
        # The capture holds everything that could be read; exit 1 says it is incomplete.
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("import", rich_help_panel="Pipeline")(import_cmd)
