"""`spin_episodes`: when a vCPU spun waiting for a sibling.

Three sources: marker pairs (`spin_begin` … `spin_end` with vm/vcpu
fields, paired as the markers are parsed), clusters of PAUSE exits (VMX
reason 40, SVM 0x77) whose gaps are below a threshold, and PV-spinlock
halt/kick pairs (a vCPU halts, a sibling
kicks it with the KVM_HC_KICK_CPU hypercall). The lock-holder candidate is
a sibling vCPU that was preempted when the episode began.
"""

from __future__ import annotations

import polars as pl

from cratrace import _native
from cratrace.model.frames import conform, empty, in_order, top_buffer, total_order

PAUSE_EXITS = (40, 0x77)
KVM_HC_KICK_CPU = 5


def from_markers(pairs: pl.DataFrame) -> pl.DataFrame:
    """Episodes of `spin_begin ... spin_end` marker pairs (vm, vcpu, tid,
    start, end: `cratrace.model.markers.pairs`)."""
    if pairs.height == 0:
        return pl.DataFrame()
    return pairs.with_columns(pl.lit("marker").alias("source"))


def from_pause_exits(ev: dict[str, pl.LazyFrame], vcpus: pl.DataFrame, gap_ns: int) -> pl.DataFrame:
    if "kvm_exit" not in ev or vcpus.height == 0:
        return pl.DataFrame()
    # the vCPUs' PAUSE exits in time order (as the events are written),
    # clustered in one pass (cratrace-timelines): a shift and a cumulative
    # sum per thread over 17 M exits of 100 M events took most of the
    # model's spin step
    ex = in_order(
        top_buffer(ev["kvm_exit"])
        .filter(pl.col("exit_reason").is_in(PAUSE_EXITS))
        .select("ts", pl.col("pid").cast(pl.Int64).alias("tid"))
        .filter(pl.col("tid").is_in(vcpus["tid"].implode()))
        .collect(),
        "ts",
    )
    if ex.height == 0:
        return pl.DataFrame()
    episodes = pl.DataFrame(_native.pause_clusters(exits=ex, gap_ns=gap_ns))
    return episodes.join(vcpus, on="tid").with_columns(pl.lit("pause-exit").alias("source"))


def from_pv_kicks(ev: dict[str, pl.LazyFrame], vcpus: pl.DataFrame) -> pl.DataFrame:
    """A halted vCPU kicked by a sibling: [halt, kick]."""
    if "kvm_hypercall" not in ev or "kvm_exit" not in ev or vcpus.height == 0:
        return pl.DataFrame()
    kicks = (
        top_buffer(ev["kvm_hypercall"])
        .filter(pl.col("nr") == KVM_HC_KICK_CPU)
        .select(pl.col("ts").alias("end"), pl.col("pid").cast(pl.Int64).alias("kicker"), pl.col("a1").cast(pl.Int64).alias("apic"))
        .collect()
        .join(vcpus.rename({"tid": "kicker", "vcpu": "clearer_vcpu"}), on="kicker")
    )
    if kicks.height == 0:
        return pl.DataFrame()
    # the kicked vCPU: same VM, vcpu index == APIC id (the usual QEMU numbering)
    kicked = kicks.join(vcpus.rename({"vcpu": "apic_vcpu"}).with_columns(pl.col("apic_vcpu").cast(pl.Int64)), left_on=["vm", "apic"], right_on=["vm", "apic_vcpu"])
    halts = top_buffer(ev["kvm_exit"]).filter(pl.col("exit_reason").is_in([12, 0x78])).select(pl.col("ts").alias("start"), pl.col("pid").cast(pl.Int64).alias("tid")).collect()
    ep = kicked.sort("end").join_asof(halts.sort("start"), left_on="end", right_on="start", by="tid", strategy="backward", check_sortedness=False).drop_nulls("start")
    return ep.select("vm", pl.col("apic").cast(pl.Int32).alias("vcpu"), "tid", "start", "end", pl.lit("pv-kick").alias("source"), pl.lit(1, pl.Int64).alias("exits"), "clearer_vcpu")


def with_holder(ep: pl.DataFrame, states: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """holder_vcpu: a sibling preempted at the episode's start (the lowest
    such vCPU; cratrace-timelines' `lock_holders`, one pass: an as-of join
    of every episode times its VM's other vCPUs took a GB at 100 M events)."""
    if "holder_vcpu" in ep.columns:
        ep = ep.drop("holder_vcpu")
    return ep.with_columns(holder_column(ep.select("vm", "vcpu", "start"), states))


def holder_column(ep: pl.DataFrame, states: pl.DataFrame | pl.LazyFrame) -> pl.Series:
    """`with_holder`'s holder_vcpu column for episodes given by their vm,
    vcpu and start alone: a long capture's episodes are written a slice at
    a time beside it, never held whole with their holders."""
    pre = states.lazy().filter(pl.col("state") == "preempted").select("vm", pl.col("vcpu").cast(pl.Int32), "start", "end")
    pre = pre.collect() if ep.height else pre.clear().collect()
    if pre.height == 0:
        return pl.Series("holder_vcpu", [None] * ep.height, pl.Int32)
    # the VMs as numbers, alike on both sides
    vms = pl.Enum(sorted(set(ep["vm"].drop_nulls().unique().to_list()) | set(pre["vm"].drop_nulls().unique().to_list())))

    def numbered(df: pl.DataFrame, *cols: str) -> pl.DataFrame:
        return df.select(pl.col("vm").cast(vms).to_physical().alias("_vm"), pl.col("vcpu").cast(pl.Int32), *cols)

    return pl.DataFrame(_native.lock_holders(episodes=numbered(ep, "start"), preemptions=numbered(pre, "start", "end")))["holder_vcpu"]


def spin_episodes(ev: dict[str, pl.LazyFrame], threads: pl.DataFrame, marker_pairs: pl.DataFrame, gap_ns: int = 50_000) -> pl.DataFrame:
    """Every source's episodes; `marker_pairs`: the capture's spin marker
    pairs (`cratrace.model.markers.pairs`)."""
    vcpus = threads.filter(pl.col("role") == "vcpu").select("tid", "vm", "vcpu")
    parts = [p for p in (from_markers(marker_pairs), from_pause_exits(ev, vcpus, gap_ns), from_pv_kicks(ev, vcpus)) if p.height]
    if not parts:
        return empty("spin_episodes")
    ep = pl.concat([conform(p.with_columns((pl.col("end") - pl.col("start")).alias("dur")), "spin_episodes") for p in parts])
    # every column breaks ties: two kicks can end one halt, and rows equal
    # in (vm, vcpu, start) came out in either order from one build to the next
    return total_order(ep, "vm", "vcpu", "start")
