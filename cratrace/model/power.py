"""`power`: per-CPU frequency and idle-state segments, plus energy and
counter samples when the capture has them (perf stat intervals)."""

from __future__ import annotations

import polars as pl

from cratrace.model.frames import conform, empty, top_buffer

IDLE_EXIT = 4294967295  # cpu_idle state (u32)-1: leaving idle


def power(ev: dict[str, pl.LazyFrame], span: tuple[int, int]) -> pl.DataFrame:
    _, end = span
    parts = []
    if "cpu_frequency" in ev:
        f = top_buffer(ev["cpu_frequency"]).select("ts", pl.col("cpu_id").cast(pl.Int32).alias("cpu"), pl.col("state").cast(pl.Float64).alias("value")).collect().sort("cpu", "ts")
        parts.append(
            f.select("cpu", pl.lit("freq").alias("kind"), pl.lit(None, pl.String).alias("name"), pl.col("ts").alias("start"), pl.col("ts").shift(-1).over("cpu").fill_null(pl.lit(end, pl.Int64)).alias("end"), "value", pl.lit("kHz").alias("unit"))
        )
    if "cpu_idle" in ev:
        i = top_buffer(ev["cpu_idle"]).select("ts", pl.col("cpu_id").cast(pl.Int32).alias("cpu"), pl.col("state").cast(pl.Int64)).collect().sort("cpu", "ts")
        i = i.with_columns(pl.col("ts").shift(-1).over("cpu").fill_null(pl.lit(end, pl.Int64)).alias("end")).filter(pl.col("state") != IDLE_EXIT)
        parts.append(
            i.select("cpu", pl.lit("idle").alias("kind"), pl.col("state").cast(pl.String).alias("name"), pl.col("ts").alias("start"), "end", pl.col("state").cast(pl.Float64).alias("value"), pl.lit("state").alias("unit"))
        )
    if "perf_counter" in ev:
        c = ev["perf_counter"].collect()
        if c.height:
            parts.append(
                c.select(
                    pl.col("cpu").cast(pl.Int32),
                    pl.when(pl.col("counter").str.contains("energy")).then(pl.lit("energy")).otherwise(pl.lit("counter")).alias("kind"),
                    pl.col("counter").alias("name"),
                    (pl.col("ts") - pl.col("interval_ns")).alias("start"),
                    pl.col("ts").alias("end"),
                    pl.col("value").cast(pl.Float64),
                    pl.when(pl.col("counter").str.contains("energy")).then(pl.lit("J")).otherwise(pl.lit("count")).alias("unit"),
                )
            )
    if not parts:
        return empty("power")
    return conform(pl.concat([conform(p, "power") for p in parts]).sort("kind", "cpu", "start"), "power")
