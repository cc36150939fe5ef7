"""`cpu_slices`: per CPU, what ran from when to when (idle is tid 0).

Each sched_switch starts a slice of `next_pid` that lasts until the CPU's
next switch; the first slice of a CPU starts at the capture's start with
the first switch's `prev_pid`, the last ends at the capture's end. The
frequency in force at a slice's start comes from power:cpu_frequency.
"""

from __future__ import annotations

import polars as pl

from cratrace.model.frames import conform, empty, top_buffer


def cpu_slices(ev: dict[str, pl.LazyFrame], span: tuple[int, int]) -> pl.DataFrame:
    if "sched_switch" not in ev:
        return empty("cpu_slices")
    start, end = span
    sw = top_buffer(ev["sched_switch"]).select("ts", "cpu", "prev_pid", "next_pid").collect().sort("cpu", "ts", maintain_order=True)
    if sw.height == 0:
        return empty("cpu_slices")
    first = sw.group_by("cpu").agg(pl.col("ts").first().alias("end"), pl.col("prev_pid").first().alias("tid")).with_columns(pl.lit(start, pl.Int64).alias("start"))
    body = sw.select(
        "cpu",
        pl.col("next_pid").alias("tid"),
        pl.col("ts").alias("start"),
        pl.col("ts").shift(-1).over("cpu").fill_null(pl.lit(end, pl.Int64)).alias("end"),
    )
    s = pl.concat([first.select("cpu", "tid", "start", "end"), body]).with_columns(pl.col("tid").cast(pl.Int64))
    s = s.filter(pl.col("end") > pl.col("start")).sort("cpu", "start").with_columns((pl.col("end") - pl.col("start")).alias("dur"))
    s = with_frequency(s, ev)
    return conform(s, "cpu_slices")


def with_frequency(s: pl.DataFrame, ev: dict[str, pl.LazyFrame]) -> pl.DataFrame:
    if "cpu_frequency" not in ev:
        return s.with_columns(pl.lit(None, pl.Int64).alias("freq_khz"))
    f = top_buffer(ev["cpu_frequency"]).select(pl.col("ts").alias("start"), pl.col("cpu_id").cast(pl.Int32).alias("cpu"), pl.col("state").cast(pl.Int64).alias("freq_khz")).collect()
    return s.sort("start").join_asof(f.sort("start"), on="start", by="cpu", strategy="backward", check_sortedness=False).sort("cpu", "start")
