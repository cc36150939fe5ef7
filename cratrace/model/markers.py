"""`markers`: trace_marker text parsed into a name and key=value fields.

``txn_end vm=a vcpu=1`` → name ``txn_end``, fields ``{"vm": "a", "vcpu": "1"}``.
Values stay strings in the JSON; ``vm`` and ``vcpu`` are lifted into
columns when present, else taken from the writer thread's VM.

The table is built in Rust (cratrace-arrow's ``markers`` module): on
marker-heavy traces it is the model's largest, and parsing, attributing
and encoding a million lines through polars was most of the model build.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from cratrace import _native
from cratrace.model.frames import empty
from cratrace.model.marker_parse import SPIN_NAMES

__all__ = ["SPIN_NAMES", "markers", "pairs", "parse", "table", "write"]


def parse(prints: Path | pl.LazyFrame | pl.DataFrame | None) -> _native.MarkerLines | None:
    """Parsed lines of a print event table (a Parquet path or a frame);
    needs nothing but the print events, so the model build runs it beside
    the thread tables. None without print events."""
    if prints is None:
        return None
    if isinstance(prints, Path):
        return _native.MarkerLines.read(prints)
    df = prints.collect() if isinstance(prints, pl.LazyFrame) else prints
    return _native.MarkerLines.from_frame(df)


def _writers(threads: pl.DataFrame) -> pl.DataFrame:
    return threads.select("tid", "vm", "vcpu")


def markers(prints: Path | pl.LazyFrame | pl.DataFrame | None, threads: pl.DataFrame) -> pl.DataFrame:
    """The `markers` table: lines without their own vm=/vcpu= take the
    writer thread's VM and vCPU."""
    return table(parse(prints), threads)


def table(lines: _native.MarkerLines | None, threads: pl.DataFrame, names: tuple[str, ...] | None = None) -> pl.DataFrame:
    """The attributed table of parsed `lines` (only `names`, if given)."""
    if lines is None or len(lines) == 0:
        return empty("markers")
    return pl.DataFrame(lines.table(_writers(threads), list(names) if names else None))


def pairs(lines: _native.MarkerLines | None, threads: pl.DataFrame, names: tuple[str, str] = SPIN_NAMES) -> pl.DataFrame:
    """Episodes of `begin ... end` line pairs (`names`): per VM and vCPU
    as the table attributes them, a begin line whose next line of the two
    names is an end line, to that line. A frame of vm, vcpu, tid (the
    begin line's writer), start and end (cratrace-arrow's `markers`
    module)."""
    if lines is None or len(lines) == 0:
        return pl.DataFrame(schema={"vm": pl.String, "vcpu": pl.Int32, "tid": pl.Int64, "start": pl.Int64, "end": pl.Int64})
    return pl.DataFrame(lines.pairs(_writers(threads), *names))


def write(lines: _native.MarkerLines | None, threads: pl.DataFrame, path: Path, compression: str) -> int:
    """Write the attributed table to `path` (Parquet); returns its rows."""
    if lines is None or len(lines) == 0:
        empty("markers").write_parquet(path, compression=compression)
        return 0
    return lines.write(_writers(threads), path, compression)
