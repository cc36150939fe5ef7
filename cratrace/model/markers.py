"""`markers`: trace_marker text parsed into a name and key=value fields.

``txn_end vm=a vcpu=1`` → name ``txn_end``, fields ``{"vm": "a", "vcpu": "1"}``.
Values stay strings in the JSON; ``vm`` and ``vcpu`` are lifted into
columns when present, else taken from the writer thread's VM.
"""

from __future__ import annotations

import polars as pl

from cratrace import _native
from cratrace.model.frames import conform, empty, top_buffer


def markers(prints: pl.LazyFrame | None, threads: pl.DataFrame) -> pl.DataFrame:
    return attribute(parse(prints), threads)


def parse(prints: pl.LazyFrame | None) -> pl.DataFrame | None:
    """The marker lines with name, fields and their own vm/vcpu (as
    `_vm`, `_vcpu`); needs nothing but the print events, so the model
    build runs it beside the thread tables."""
    if prints is None:
        return None
    df = top_buffer(prints).select("ts", "cpu", pl.col("pid").cast(pl.Int64).alias("tid"), pl.col("buf").str.strip_chars_end("\n").alias("text")).collect()
    if df.height == 0:
        return None
    # One pass in Rust over the texts (cratrace-format's ftrace::marker
    # says what a name and a field are); regular expressions over every
    # line were most of the model build on marker-heavy traces.
    parsed = pl.DataFrame(_native.parse_markers(df.select("text")))
    df = pl.concat([df, parsed.rename({"vm": "_vm", "vcpu": "_vcpu"})], how="horizontal")
    if not df["ts"].is_sorted():
        df = df.sort("ts", maintain_order=True)
    return df


def attribute(parsed: pl.DataFrame | None, threads: pl.DataFrame) -> pl.DataFrame:
    """The `markers` table: lines without their own vm=/vcpu= take the
    writer thread's VM and vCPU."""
    if parsed is None:
        return empty("markers")
    t = threads.select("tid", pl.col("vm").alias("_tvm"), pl.col("vcpu").alias("_tvcpu"))
    df = parsed.join(t, on="tid", how="left", maintain_order="left").with_columns(
        pl.coalesce("_vm", "_tvm").alias("vm"), pl.coalesce("_vcpu", "_tvcpu").alias("vcpu")
    )
    return conform(df, "markers")
