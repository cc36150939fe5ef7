"""`cratrace info`: what a capture holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from cratrace.cli.console import console, err_console, esc
from cratrace.cli.options import verbose_option


def _fmt_ns(ns: int | None) -> str:
    return "-" if ns is None else f"{ns / 1e9:.6f} s"


def info_cmd(
    capture: Annotated[Path, typer.Argument(help="Capture directory.")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    verbose: Annotated[bool, verbose_option("Also list the fields stored as raw bytes (types the reader has no column type for, such as structs)")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but what makes the capture incomplete (on stderr); the exit code says whether it is.")] = False,
) -> None:
    """Events per type, time range, CPUs, clock, lost events and sources.

    Exits 1 when the capture is incomplete: the kernel dropped records
    (lost events) or the import skipped, guessed or salvaged part of its
    input (truncated, corrupt pages, records of no known event; listed
    under `damaged`, skipped records also counted as lost events) or its model had to guess which threads
    form which VM (`model_guessed`), so scripts can refuse to plan on it.
    Fields of types the reader has no column type for (structs, odd-sized
    integers) are kept as their raw bytes: `--verbose` lists them.
    `--quiet` prints only the reasons for exit 1 (on stderr), so a script
    can check a capture with `cratrace info -q CAP`.
    """
    import cratrace
    from cratrace.importer import data_problems

    cap = cratrace.open(capture)
    m = cap.meta
    tr = m.get("time_range_ns") or [None, None]
    lost = m.get("lost_events", {}).get("total", 0)
    summary = {
        "capture": str(capture),
        "events": m.get("events", {}),
        "total_events": sum(m.get("events", {}).values()),
        "time_range_ns": tr,
        "duration_s": (tr[1] - tr[0]) / 1e9 if tr and tr[0] is not None else None,
        "cpus": m.get("cpus"),
        "clock": m.get("clock"),
        "lost_events": m.get("lost_events", {}),
        "raw_fields": m.get("raw_fields", []),
        "dropped_fields": m.get("dropped_fields", []),
        # a source's checksum: the SHA-256 its manifest gave (checked), else BLAKE3
        "sources": [{k: s[k] for k in ("path", "kind", "sha256", "blake3", "bytes", "removed") if k in s} for s in m.get("sources", [])],
        "model_tables": sorted(cap.model_paths),
        "vms": [v.get("name") for v in m.get("vms", [])],
        # the model's VMs, with the evidence that grouped their threads
        "model_vms": (m.get("model") or {}).get("vms"),
        "model_guessed": (m.get("model") or {}).get("guessed", []),
        "warnings": m.get("warnings", []),
        "damaged": data_problems(m),
    }
    if as_json:
        print(json.dumps(summary, indent=2))
    elif quiet:
        if lost:
            err_console.print(f"lost events: {lost:,}", markup=False, highlight=False)
        for line in summary["damaged"]:
            err_console.print(f"damaged: {line}", markup=False, highlight=False, soft_wrap=True)
        for line in summary["model_guessed"]:
            err_console.print(f"guessed: {line}", markup=False, highlight=False, soft_wrap=True)
    else:
        console.print(f"[bold]{esc(capture)}[/]  {summary['total_events']:,} events, {len(summary['events'])} tables")
        console.print(f"time   {_fmt_ns(tr[0])} .. {_fmt_ns(tr[1])}  ({summary['duration_s'] or 0:.3f} s)   clock {m.get('clock')}   CPUs {m.get('cpus')}")
        for s in summary["sources"]:
            algorithm = next((a for a in ("sha256", "blake3") if s.get(a)), None)
            checksum = f", {algorithm} {s[algorithm][:12]}…" if algorithm else ""
            # a source its importer deleted (`lab capture`'s temporary raw
            # trace) is named by what it was, not by a path that is gone
            where = f"{esc(Path(s['path']).name)} (deleted after import by {esc(s['removed'])})" if s.get("removed") else esc(s["path"])
            console.print(f"source {s['kind']:9} {where}  ({s['bytes']:,} bytes{checksum})", highlight=False, soft_wrap=True)
        from rich.table import Table

        t = Table(box=None, pad_edge=False)
        t.add_column("event")
        t.add_column("rows", justify="right")
        for name, n in sorted(summary["events"].items(), key=lambda kv: -kv[1]):
            t.add_row(name, f"{n:,}")
        console.print(t)
        color = "red" if lost else "green"
        le = summary["lost_events"]
        parts = []
        if le.get("skipped_by_reader"):
            parts.append(f"{le['skipped_by_reader']:,} of them skipped by the reader (unreadable records)")
        if le.get("estimated_in_missing_data"):
            parts.append(f"about {le['estimated_in_missing_data']:,} more in the data a cut file lacks (an estimate)")
        console.print(f"lost events: [{color}]{lost:,}[/]" + (f" ({'; '.join(parts)})" if parts else ""))
        for d in summary["dropped_fields"]:
            console.print(f"[yellow]dropped field[/] {esc(d['event'])}.{esc(d['field'])} ({esc(d['type'])}): {esc(d['reason'])}", highlight=False, soft_wrap=True)
        if verbose:
            for d in summary["raw_fields"]:
                console.print(f"raw bytes: {esc(d['event'])}.{esc(d['field'])} ({esc(d['type'])}): {esc(d['reason'])}", highlight=False, soft_wrap=True)
        if summary["model_tables"]:
            console.print("model: " + ", ".join(summary["model_tables"]))
        if summary["model_vms"]:
            console.print("VMs: " + ", ".join(f"{esc(v['vm'])} ({v['vcpus']} vCPUs, by {v['evidence']})" for v in summary["model_vms"]), highlight=False, soft_wrap=True)
        for g in summary["model_guessed"]:
            console.print(f"[yellow]guessed:[/] {esc(g)}", highlight=False, soft_wrap=True)
        for w in summary["warnings"]:
            console.print(f"[yellow]warning:[/] {esc(w)}", highlight=False, soft_wrap=True)
    if lost or summary["damaged"] or summary["model_guessed"]:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("info", rich_help_panel="Explore")(info_cmd)
