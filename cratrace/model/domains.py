"""Xen domains' vCPUs as stand-in threads.

On Xen a domain's vCPU is no host thread: the model's `vcpu_states` have
no tid for it and `cpu_slices` has nothing of it. What works per thread
(the replay's workload, energy per owner) gives each domain vCPU a
stand-in id below zero: -1, -2, ... in (vm, vcpu) order.
"""

from __future__ import annotations

import polars as pl

from cratrace.model.frames import conform

#: the vCPU states in which a vCPU runs on a CPU
RUNNING = ("guest", "vmm", "spinning")


def domain_vcpus(states: pl.DataFrame) -> pl.DataFrame:
    """`vm`, `vcpu` and stand-in `tid` of each vCPU whose states have no tid."""
    xen = states.filter(pl.col("tid").is_null()).select("vm", "vcpu").unique().sort("vm", "vcpu")
    return xen.with_columns((-pl.int_range(1, xen.height + 1)).cast(pl.Int64).alias("tid"))


def domain_runs(states: pl.DataFrame) -> pl.DataFrame:
    """The running intervals of the domain vCPUs (`cpu`, `tid`, `start`,
    `end`), under their stand-in ids."""
    run = states.filter(pl.col("tid").is_null() & pl.col("state").is_in(RUNNING)).drop("tid")
    return run.join(domain_vcpus(states), on=["vm", "vcpu"]).select(pl.col("pcpu").alias("cpu"), "tid", "start", "end").sort("cpu", "start", "end", "tid")


def domain_threads(vcpus: pl.DataFrame) -> pl.DataFrame:
    """`threads` rows for stand-in ids (`tid`, `vm`, `vcpu` of `vcpus`)."""
    return conform(vcpus.select("tid", "vm", "vcpu", pl.format("{} vCPU {}", "vm", "vcpu").alias("comm"), pl.lit("vcpu").alias("role")), "threads")


def with_idle(sl: pl.DataFrame, end: int, t0: int, pcpus: int) -> pl.DataFrame:
    """Fill each CPU's gaps with idle (tid 0) slices, covering [t0, end)."""
    parts = [sl]
    for c in range(pcpus):
        s = sl.filter(pl.col("cpu") == c).sort("start", "end")
        # a gap opens where every slice so far has ended: slices that start
        # together (a zero-length dispatch, then work) must not leave one
        # whose end comes before another's
        gaps, free = [], t0
        for a, b in zip(s["start"].to_list(), s["end"].to_list()):
            if a > free:
                gaps.append((c, 0, free, a))
            free = max(free, b)
        if end > free:
            gaps.append((c, 0, free, end))
        if gaps:
            parts.append(pl.DataFrame(gaps, schema={"cpu": pl.Int32, "tid": pl.Int64, "start": pl.Int64, "end": pl.Int64}, orient="row"))
    out = pl.concat(parts).sort("cpu", "start", "end", "tid")
    return out.with_columns((pl.col("end") - pl.col("start")).alias("dur"))
