"""`markers`: trace_marker text parsed into a name and key=value fields.

``txn_end vm=a vcpu=1`` → name ``txn_end``, fields ``{"vm": "a", "vcpu": "1"}``.
Values stay strings in the JSON; ``vm`` and ``vcpu`` are lifted into
columns when present, else taken from the writer thread's VM.
"""

from __future__ import annotations

import polars as pl

from cratrace.model.frames import conform, empty, top_buffer


def markers(prints: pl.LazyFrame | None, threads: pl.DataFrame) -> pl.DataFrame:
    if prints is None:
        return empty("markers")
    df = top_buffer(prints).select("ts", "cpu", pl.col("pid").cast(pl.Int64).alias("tid"), pl.col("buf").str.strip_chars_end("\n").alias("text")).collect()
    if df.height == 0:
        return empty("markers")
    words = pl.col("text").str.split(" ")
    kv = words.list.slice(1).list.eval(pl.element().filter(pl.element().str.contains("=")))
    df = df.with_columns(words.list.first().alias("name"), kv.alias("_kv"))
    # JSON object built with string expressions (no per-row Python): escape
    # backslashes and quotes, then `k=v` -> `"k":"v"`.
    esc = pl.element().str.replace_all("\\", "\\\\", literal=True).str.replace_all('"', '\\"', literal=True)
    pair = pl.concat_str([pl.lit('"'), esc.str.replace("=", '":"', literal=True), pl.lit('"')])
    df = df.with_columns(
        pl.concat_str([pl.lit("{"), pl.col("_kv").list.eval(pair).list.join(","), pl.lit("}")]).alias("fields"),
        pl.col("_kv").list.eval(pl.element().filter(pl.element().str.starts_with("vm=")).str.slice(3)).list.first().alias("_vm"),
        pl.col("_kv").list.eval(pl.element().filter(pl.element().str.starts_with("vcpu=")).str.slice(5)).list.first().cast(pl.Int32, strict=False).alias("_vcpu"),
    )
    t = threads.select("tid", pl.col("vm").alias("_tvm"), pl.col("vcpu").alias("_tvcpu"))
    df = df.join(t, on="tid", how="left").with_columns(
        pl.coalesce("_vm", "_tvm").alias("vm"), pl.coalesce("_vcpu", "_tvcpu").alias("vcpu")
    )
    return conform(df.sort("ts"), "markers")
