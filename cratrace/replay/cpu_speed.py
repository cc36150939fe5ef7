"""Each CPU's speed over time, read from the work the vCPUs did between
their throughput markers.

A trace gives how long work took, not how much there was. On a shared
host the same work takes longer while a core's other hyperthread or
another tenant is busy: on the lab machine (a 2-vCPU cloud guest) a
vCPU's cycle of fixed work took 0.22, 0.41 or 0.8 ms, the level set by
the CPU it ran on and the time, changing every second or so, the two
CPUs independently (docs/fidelity-log.md, stop 38). Replayed as recorded
durations, a cycle that ran on the slow CPU stays slow wherever the
replay runs it, and the time structure that decides lock-holder
preemption is lost.

When a VM's transactions are alike (the same work between two of a
vCPU's throughput markers), each transaction's guest time measures the
speed of the CPU it ran on: speed = the VM's median transaction / this
one. Per CPU and window (`WINDOW_NS`) the median of those samples is
the CPU's speed then; windows without enough samples keep the speed
before them. Speeds are scaled so that their median is 1: work in the
demand is then recorded ns times the speed (`Segment::speed` in
cratrace-replay's demand), and the replay runs each CPU at its recorded
speed at that time. Transactions that vary in their work only add noise
per window; ones whose mix changes over time would read as a speed
change, which is why this is a setting (`--set cpu_speed=markers`).
"""

from __future__ import annotations

import polars as pl

#: the windows the speed is read over: a CPU's level held for ~1 s in the
#: lab, and a vCPU finishes a transaction every ~0.5 ms
WINDOW_NS = 20_000_000
#: transactions a window needs for its own reading (else the one before)
MIN_SAMPLES = 8


def transactions(states: pl.DataFrame, marks: pl.DataFrame) -> pl.DataFrame:
    """Per vCPU transaction (the work up to each of its throughput marks,
    from the previous one) done all on one CPU: vm, cpu, end (its last
    guest segment's end) and guest_ns. `states`: guest segments of
    vcpu_states (vm, vcpu, start, end, pcpu); `marks`: vm, vcpu, ts."""
    guest = states.filter(pl.col("pcpu").is_not_null()).select("vm", "vcpu", "start", "end", "pcpu").sort("vm", "vcpu", "start")
    m = marks.select("vm", "vcpu", pl.col("ts").alias("mark")).sort("vm", "vcpu", "mark")
    # each guest segment belongs to the first mark at or after its start
    tagged = guest.join_asof(m, left_on="start", right_on="mark", by=["vm", "vcpu"], strategy="forward", check_sortedness=False).drop_nulls("mark")
    per = tagged.group_by("vm", "vcpu", "mark").agg(
        (pl.col("end") - pl.col("start")).sum().alias("guest_ns"),
        pl.col("pcpu").n_unique().alias("cpus"),
        pl.col("pcpu").first().alias("cpu"),
        pl.col("end").max(),
    )
    # a vCPU's first mark closes a transaction begun before the capture
    first = m.group_by("vm", "vcpu").agg(pl.col("mark").min().alias("first"))
    return (
        per.join(first, on=["vm", "vcpu"])
        .filter((pl.col("cpus") == 1) & (pl.col("mark") > pl.col("first")) & (pl.col("guest_ns") > 0))
        .select("vm", "cpu", "end", "guest_ns")
    )


def speed_profile(states: pl.DataFrame, marks: pl.DataFrame, t0: int, window_ns: int = WINDOW_NS) -> dict[int, list[tuple[int, float]]]:
    """Per CPU, its speed over time: [(from, relative to `t0`; speed)], the
    first from 0, speeds scaled to a median of 1. Empty when no window has
    MIN_SAMPLES transactions."""
    tx = transactions(states, marks)
    if tx.height == 0:
        return {}
    samples = tx.with_columns((pl.col("guest_ns").median().over("vm") / pl.col("guest_ns")).alias("speed"))
    per = (
        samples.group_by("cpu", ((pl.col("end") - t0) // window_ns).alias("w"))
        .agg(pl.col("speed").median(), pl.len().alias("n"))
        .filter(pl.col("n") >= MIN_SAMPLES)
        .sort("cpu", "w")
    )
    if per.height == 0:
        return {}
    scale = float(per["speed"].median())
    profile: dict[int, list[tuple[int, float]]] = {}
    for (cpu,), g in per.group_by(["cpu"], maintain_order=True):
        steps: list[tuple[int, float]] = []
        for w, speed in g.select("w", "speed").iter_rows():
            s = round(speed / scale, 2)
            if not steps or steps[-1][1] != s:
                steps.append((max(int(w) * window_ns, 0) if steps else 0, s))
        profile[int(cpu)] = steps
    return profile


def speed_column(frame: pl.DataFrame, profile: dict[int, list[tuple[int, float]]], t0: int, cpu: str) -> pl.DataFrame:
    """`frame` (rows with `start` and CPU column `cpu`) with `speed`: its
    CPU's speed at its start (1 off a CPU or without a profile), its rows
    in their order."""
    if not profile:
        return frame.with_columns(pl.lit(1.0).alias("speed"))
    steps = pl.DataFrame(
        [(c, t0 + at, s) for c, st in profile.items() for at, s in st],
        schema={"_cpu": pl.Int64, "_from": pl.Int64, "speed": pl.Float64},
        orient="row",
    ).sort("_cpu", "_from")
    keyed = frame.with_row_index("_row").with_columns(pl.col(cpu).cast(pl.Int64).alias("_cpu"))
    out = keyed.sort("_cpu", "start").join_asof(steps, left_on="start", right_on="_from", by="_cpu", strategy="backward", check_sortedness=False)
    # before a CPU's first step: its first speed
    first = steps.group_by("_cpu").agg(pl.col("speed").first().alias("_first"))
    out = out.join(first, on="_cpu", how="left").with_columns(pl.coalesce("speed", "_first", pl.lit(1.0)).alias("speed"))
    return out.sort("_row").drop("_row", "_cpu", "_from", "_first")
