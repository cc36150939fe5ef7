"""`perf stat -I <ms> -x, -A` interval output → events/perf_counter.parquet.

Each line is ``time,CPU<n>,value,unit,event,...``: per-CPU counter deltas
over the interval ending at ``time`` (seconds since perf started). Times
become nanoseconds on the trace clock by adding perf's start time on
CLOCK_MONOTONIC, which the collector records in its manifest
(``perf_stat_start_monotonic_ns``); trace-cmd's default `local` clock
follows the same monotonic time base, to within the scheduler clock's drift.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from cratrace import _native
from cratrace.importers import sink_options

KIND = "perfstat"


def sniff(path: Path) -> bool:
    try:
        head = Path(path).read_text(errors="replace")[:4096]
    except OSError:
        return False
    return any(line.count(",") >= 4 and ",CPU" in line for line in head.splitlines() if not line.startswith("#"))


def _start_ns(path: Path) -> int | None:
    manifest = path.parent / "manifest.json"
    try:
        return json.loads(manifest.read_text()).get("perf_stat_start_monotonic_ns")
    except (OSError, json.JSONDecodeError):
        return None


def read(path: Path, out_dir: Path, *, options: dict[str, Any], progress: Callable[[int, int], None] | None) -> dict:
    # Native, like the trace readers: importing polars for a few kilobytes
    # of CSV took half of `cratrace import` on a small raw capture.
    start = _start_ns(path)
    s = dict(_native.read_perfstat(str(path), str(out_dir), start_ns=start, **sink_options(options)))
    if progress:
        progress(path.stat().st_size, path.stat().st_size)
    return {
        "format": "perf-stat-csv",
        "events": {"perf_counter": s["rows"]} if s["rows"] else {},
        "counters": s["counters"],
        "cpus": s["cpus"],
        "time_range": s["time_range"],
        "clock": "monotonic" if start is not None else "relative (perf start unknown)",
        "warnings": [] if start is not None else [f"{path}: perf start time unknown; counter times are relative to perf's start"],
        "stats": {},
        "lost_events": {},
        "raw_fields": [],
    }
