"""`perf stat -I <ms> -x, -A` interval output → events/perf_counter.parquet.

Each line is ``time,CPU<n>,value,unit,event,...``: per-CPU counter deltas
over the interval ending at ``time`` (seconds since perf started). Times
become nanoseconds on the trace clock by adding perf's start time on
CLOCK_MONOTONIC, which the collector records in its manifest
(``perf_stat_start_monotonic_ns``); trace-cmd's default `local` clock
follows the same monotonic time base, to within the scheduler clock's drift.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from cratrace.errors import CorruptTraceError
from cratrace.importers import polars_compression, sink_options

if TYPE_CHECKING:
    import polars as pl

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


def parse(path: Path) -> pl.DataFrame:
    import polars as pl

    rows = []
    with open(path, newline="") as fh:
        for lineno, row in enumerate(csv.reader(fh), 1):
            if not row or row[0].startswith("#") or len(row) < 5:
                continue
            try:
                t = float(row[0])
            except ValueError:
                raise CorruptTraceError(f"{path}: line {lineno}: interval time {row[0]!r} is not a number (ERR:corrupt-csv)") from None
            cpu = int(row[1][3:]) if row[1].startswith("CPU") else None
            value = None if row[2].startswith("<not") else float(row[2])
            rows.append((int(round(t * 1e9)), cpu, row[4], value, row[3] or None))
    df = pl.DataFrame(rows, schema={"rel_ns": pl.Int64, "cpu": pl.Int32, "counter": pl.String, "value": pl.Float64, "unit": pl.String}, orient="row")
    return df


def read(path: Path, out_dir: Path, *, options: dict[str, Any], progress: Callable[[int, int], None] | None) -> dict:
    import polars as pl

    df = parse(path)
    start = _start_ns(path)
    ts = pl.col("rel_ns") + (start or 0)
    df = df.sort("rel_ns").with_columns(
        ts.alias("ts"),
        (pl.col("rel_ns") - pl.col("rel_ns").shift(1).over("cpu", "counter")).fill_null(pl.col("rel_ns")).alias("interval_ns"),
    )
    out = df.select("ts", "cpu", pl.lit(None, pl.Int32).alias("pid"), pl.lit("").alias("instance"), "counter", "value", "unit", "interval_ns")
    if out.height:
        out.write_parquet(out_dir / "perf_counter.parquet", compression=polars_compression(sink_options(options)["compression"]))
    tr = [int(out["ts"].min()), int(out["ts"].max())] if out.height else None
    return {
        "format": "perf-stat-csv",
        "events": {"perf_counter": out.height} if out.height else {},
        "counters": sorted(set(out["counter"].to_list())),
        "cpus": int(out["cpu"].max() + 1) if out.height and out["cpu"].max() is not None else 0,
        "time_range": tr,
        "clock": "monotonic" if start is not None else "relative (perf start unknown)",
        "warnings": [] if start is not None else [f"{path}: perf start time unknown; counter times are relative to perf's start"],
        "stats": {},
        "lost_events": {},
        "dropped_fields": [],
    }
