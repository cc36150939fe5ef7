"""`cpu_slices`: per CPU, what ran from when to when (idle is tid 0).

Each sched_switch starts a slice of `next_pid` that lasts until the CPU's
next switch; the first slice of a CPU starts at the capture's start with
the first switch's `prev_pid`, the last ends at the capture's end. The
frequency in force at a slice's start comes from power:cpu_frequency.

A switch whose `prev_pid` is not the task the CPU's previous switch put on
it means a switch-in is missing from the trace (some kernels, e.g. this
project's sandbox VM, never emit the idle -> task switch on an idle CPU).
When the task was woken on that CPU in between (sched_wakeup with
`target_cpu` = this CPU), its slice starts at that wakeup and the previous
slice ends there; otherwise the gap stays with the previous slice.
"""

from __future__ import annotations

import polars as pl

from cratrace.model.frames import conform, empty, top_buffer


def cpu_slices(ev: dict[str, pl.LazyFrame], span: tuple[int, int]) -> pl.DataFrame:
    if "sched_switch" not in ev:
        return empty("cpu_slices")
    start, end = span
    # the events are in time order: a stable sort by CPU puts each CPU's
    # switches together, in time order (half the cost of sorting by both)
    sw = top_buffer(ev["sched_switch"]).select("ts", "cpu", "prev_pid", "next_pid").collect().sort("cpu", maintain_order=True)
    if sw.height == 0:
        return empty("cpu_slices")
    cpu = pl.col("cpu")
    # neighbours on the same CPU: the rows are grouped by CPU, so a shift
    # and a comparison do what a window over each CPU would
    after_same, before_same = cpu == cpu.shift(1), cpu == cpu.shift(-1)
    sw = sw.with_columns(pl.when(after_same).then(pl.col("next_pid").shift(1)).alias("_on"), pl.when(after_same).then(pl.col("ts").shift(1)).alias("_prev_ts"))
    first = sw.filter(~after_same.fill_null(False)).select("cpu", pl.col("ts").alias("end"), pl.col("prev_pid").alias("tid"), pl.lit(start, pl.Int64).alias("start"))
    body = sw.select(
        "cpu",
        pl.col("next_pid").alias("tid"),
        pl.col("ts").alias("start"),
        pl.when(before_same).then(pl.col("ts").shift(-1)).otherwise(pl.lit(end, pl.Int64)).alias("end"),
    )
    body, missed = _missing_switch_ins(body, sw, ev)
    s = pl.concat([first.select("cpu", "tid", "start", "end"), body, missed]).with_columns(pl.col("tid").cast(pl.Int64))
    s = s.filter(pl.col("end") > pl.col("start")).sort("cpu", "start").with_columns((pl.col("end") - pl.col("start")).alias("dur"))
    s = with_frequency(s, ev)
    return conform(s, "cpu_slices")


def _missing_switch_ins(body: pl.DataFrame, sw: pl.DataFrame, ev: dict[str, pl.LazyFrame]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Slices for tasks switched out without a recorded switch-in, from the
    wakeup that put them on the CPU; the slice before ends at that wakeup."""
    none = body.clear()
    gaps = sw.filter(pl.col("_on").is_not_null() & (pl.col("prev_pid") != pl.col("_on")) & (pl.col("prev_pid") != 0))
    if gaps.height == 0 or "sched_wakeup" not in ev:
        return body, none
    wk = top_buffer(ev["sched_wakeup"]).select(pl.col("ts").alias("wake_ts"), pl.col("target_cpu").cast(pl.Int32).alias("cpu"), pl.col("field_pid").cast(pl.Int64).alias("prev_pid")).collect().sort("wake_ts")
    g = gaps.with_columns(pl.col("prev_pid").cast(pl.Int64), pl.col("cpu").cast(pl.Int32)).sort("ts").join_asof(wk, left_on="ts", right_on="wake_ts", by=["cpu", "prev_pid"], strategy="backward", check_sortedness=False)
    g = g.filter(pl.col("wake_ts").is_not_null() & (pl.col("wake_ts") > pl.col("_prev_ts")))
    if g.height == 0:
        return body, none
    missed = g.select("cpu", pl.col("prev_pid").alias("tid"), pl.col("wake_ts").alias("start"), pl.col("ts").alias("end")).cast(body.schema)
    # the slice that ran before (usually idle) now ends at the wakeup
    cut = g.select(pl.col("cpu").cast(body.schema["cpu"]), pl.col("_prev_ts").alias("start"), pl.col("wake_ts").alias("_cut"))
    body = body.join(cut, on=["cpu", "start"], how="left").with_columns(pl.coalesce("_cut", "end").alias("end")).drop("_cut")
    return body, missed


def with_frequency(s: pl.DataFrame, ev: dict[str, pl.LazyFrame]) -> pl.DataFrame:
    if "cpu_frequency" not in ev:
        return s.with_columns(pl.lit(None, pl.Int64).alias("freq_khz"))
    f = top_buffer(ev["cpu_frequency"]).select(pl.col("ts").alias("start"), pl.col("cpu_id").cast(pl.Int32).alias("cpu"), pl.col("state").cast(pl.Int64).alias("freq_khz")).collect()
    return s.sort("start").join_asof(f.sort("start"), on="start", by="cpu", strategy="backward", check_sortedness=False).sort("cpu", "start")
