"""`vcpu_states`: a gap-free timeline per vCPU.

Running time comes from cpu_slices; within it, kvm_entry → kvm_exit is
`guest` and kvm_exit → kvm_entry is `vmm` (a vCPU thread without any KVM
events, like the workload lab's, counts its running time as guest).
Off-CPU time is `preempted` when the thread was switched out runnable
(prev_state 0) and `blocked` otherwise, or `halted` when its last exit
before blocking was HLT. Spin episodes then overlay `spinning` on guest
time. Time before a thread's first appearance is `blocked`.
"""

from __future__ import annotations

import polars as pl

from cratrace import _native
from cratrace.model.frames import conform, empty, top_buffer

HLT_EXITS = (12, 0x78)  # VMX HLT, SVM hlt


#: a KVM timeline's states while it is built: an integer a row, not a
#: string (the table's column is a string, cast at the end); the codes are
#: cratrace-timelines'
STATE = pl.Enum(_native.VCPU_STATES)


# offline (paused, not yet up) is not runnable: blocked in the canonical vocabulary
XEN_STATES = {"running": "guest", "runnable": "preempted", "blocked": "blocked", "offline": "blocked"}
XEN_IDLE_DOMAIN = 32767


def xen_vcpu_states(ev: dict[str, pl.LazyFrame], span: tuple[int, int]) -> pl.DataFrame:
    """From xentrace runstate changes: each change opens a segment of its
    new state until the vCPU's next change (or the capture's end); the time
    before a vCPU's first change is its first change's old state. Domains
    are VMs named `dom<N>`; the idle domain is not a VM."""
    start, end = span
    rs = ev["xen_runstate_change"].filter(pl.col("dom") != XEN_IDLE_DOMAIN).select("ts", "cpu", "dom", "vcpu", "old_state", "new_state").collect().sort("dom", "vcpu", "ts", maintain_order=True)
    if rs.height == 0:
        return empty("vcpu_states")
    body = rs.select(
        pl.col("dom"), pl.col("vcpu"), pl.col("new_state").alias("x"), pl.col("ts").alias("start"),
        pl.col("ts").shift(-1).over("dom", "vcpu").fill_null(pl.lit(end, pl.Int64)).alias("end"),
        pl.when(pl.col("new_state") == "running").then(pl.col("cpu")).alias("pcpu"),
    )
    head = rs.group_by("dom", "vcpu").agg(pl.col("old_state").first().alias("x"), pl.col("ts").first().alias("end"), pl.col("cpu").first().alias("c")).select(
        "dom", "vcpu", "x", pl.lit(start, pl.Int64).alias("start"), "end", pl.when(pl.col("x") == "running").then(pl.col("c")).alias("pcpu")
    )
    seg = pl.concat([head, body], how="vertical_relaxed").filter(pl.col("end") > pl.col("start"))
    seg = seg.with_columns(
        pl.concat_str(pl.lit("dom"), pl.col("dom").cast(pl.String)).alias("vm"),
        pl.col("x").replace_strict(XEN_STATES, default="lost").alias("state"),
        pl.lit(None, pl.Int64).alias("tid"),
        (pl.col("end") - pl.col("start")).alias("dur"),
    )
    return conform(seg.sort("vm", "vcpu", "start"), "vcpu_states")


def vcpu_states(ev: dict[str, pl.LazyFrame], threads: pl.DataFrame, slices: pl.DataFrame, spins: pl.DataFrame, span: tuple[int, int]) -> pl.DataFrame:
    """The whole `vcpu_states` table (`vcpu_state_batches` together)."""
    parts = list(vcpu_state_batches(ev, threads, slices, spins, span))
    return pl.concat(parts) if parts else empty("vcpu_states")


def vcpu_state_batches(ev: dict[str, pl.LazyFrame], threads: pl.DataFrame, slices: pl.DataFrame, spins: pl.DataFrame, span: tuple[int, int]) -> VcpuBatches:
    """The `vcpu_states` table a batch of vCPUs at a time (rows final, the
    batches in table order): a long capture's timelines need not be held
    whole, only one batch's (`len()`: how many batches)."""
    if "xen_runstate_change" in ev:
        return VcpuBatches([lambda: xen_vcpu_states(ev, span)])
    vc = threads.filter(pl.col("role") == "vcpu").select("tid", "vm", "vcpu")
    if vc.height == 0 or slices.height == 0:
        return VcpuBatches([])
    # Each (vm, vcpu) as one integer, numbered in their sort order: the
    # timelines are built, sorted and overlaid by it, and get their VM's
    # name at the end (sorting 1.2 M segments of 10 s of kvm-heavy-spin by
    # the string key took 0.37 s and 130 MB).
    order = vc.select("vm", "vcpu").unique().sort("vm", "vcpu").with_row_index("_key")
    keyed = vc.join(order, on=["vm", "vcpu"]).select("tid", "_key")
    spins = spins.join(order, on=["vm", "vcpu"]).select("_key", "start", "end") if spins.height else None

    def batch(keys: list[int]) -> pl.DataFrame:
        # vCPUs in key order, so the batches come out in table order
        segs = _segments(ev, keyed.filter(pl.col("_key").is_in(keys)), slices, span)
        ep = spins.filter(pl.col("_key").is_in(keys)) if spins is not None else None
        if ep is not None and ep.height:
            segs = _overlay_spins(segs, ep)
        named = order.filter(pl.col("_key").is_in(keys))
        return conform(segs.with_columns(
            pl.col("_key").replace_strict(named["_key"], named["vm"], return_dtype=pl.String).alias("vm"),
            pl.col("_key").replace_strict(named["_key"], named["vcpu"], return_dtype=pl.Int32).alias("vcpu"),
            (pl.col("end") - pl.col("start")).alias("dur"),
        ), "vcpu_states")

    return VcpuBatches([lambda keys=keys: batch(keys) for keys in _vcpu_batches(ev, order.height)])


class VcpuBatches:
    """The batches of `vcpu_state_batches`: each built when iterated to."""

    def __init__(self, build: list) -> None:
        self._build = build

    def __len__(self) -> int:
        return len(self._build)

    def __iter__(self):
        for b in self._build:
            yield b()


#: KVM entry/exit marks a batch of vCPUs' timelines is built from at most
#: (the build holds about 60 bytes of memory for each, and the batch's
#: segments): a host's vCPUs are split into batches of equal counts when
#: their marks are more
MARKS_PER_BATCH = 2_000_000


def _vcpu_batches(ev: dict[str, pl.LazyFrame], vcpus: int) -> list[list[int]]:
    """The vCPU keys 0..`vcpus` in consecutive batches whose share of the
    capture's KVM marks (taken as shared evenly) stays under
    MARKS_PER_BATCH: a vCPU's timeline is its own, so a batch need not
    hold whole VMs (2 VMs of 4 vCPUs each are 8 batches, not 2, when long)."""
    marks = sum(ev[n].select(pl.len()).collect().item() for n in ("kvm_entry", "kvm_exit") if n in ev)
    per = max(1, MARKS_PER_BATCH * vcpus // max(marks, 1)) if marks else vcpus
    return [list(range(k, min(k + per, vcpus))) for k in range(0, vcpus, per)]


def _segments(ev: dict[str, pl.LazyFrame], vc: pl.DataFrame, slices: pl.DataFrame, span: tuple[int, int]) -> pl.DataFrame:
    """The vCPU threads' (`vc`: tid, _key) timelines before spin episodes:
    _key, tid, state, start, end, pcpu, sorted by _key and start. One pass
    per thread in Rust (cratrace-timelines, `vcpu_timelines`, which states
    the rules) over the events read here: the polars form (as-of joins,
    then a sort of every segment by vCPU and start) was half the build."""
    tids = vc["tid"].implode()
    runs = slices.filter(pl.col("tid").is_in(tids)).select("tid", "start", "end", pl.col("cpu").cast(pl.Int32)).sort("tid", "start")

    def of(name: str, *cols: pl.Expr, who: str = "pid") -> pl.DataFrame:
        """Event `name`'s (tid, ts, *cols) rows of the threads, in time
        order; `who`: the column naming the thread."""
        if name not in ev:
            return pl.DataFrame(schema={"tid": pl.Int64, "ts": pl.Int64} | {c.meta.output_name(): pl.Int64 for c in cols})
        lf = top_buffer(ev[name])
        return lf.select(pl.col(who).cast(pl.Int64).alias("tid"), "ts", *cols).filter(pl.col("tid").is_in(tids)).collect()

    def woken(name: str) -> pl.DataFrame:
        # the event's own pid field, or the writer for kvm_vcpu_wakeup
        return of(name, who="field_pid" if name in ev and "field_pid" in ev[name].collect_schema().names() else "pid")

    # a null reason or prev_state says nothing: neither a halt nor runnable
    outs = of("sched_switch", pl.col("prev_state").cast(pl.Int64).fill_null(-1), who="prev_pid")
    exits = of("kvm_exit", pl.col("exit_reason").cast(pl.Int64).fill_null(-1).alias("reason"))
    wakeups = pl.concat([woken(n) for n in ("sched_wakeup", "sched_waking", "kvm_vcpu_wakeup")])
    t = pl.DataFrame(_native.vcpu_timelines(
        threads=vc.select("tid", "_key"), runs=runs, outs=outs, entries=of("kvm_entry"), exits=exits, wakeups=wakeups, span=span, halts=list(HLT_EXITS),
    ))
    return t.with_columns(pl.Series(STATE.categories, dtype=STATE).gather(t["state"]).alias("state"))


def _overlay_spins(segs: pl.DataFrame, spins: pl.DataFrame) -> pl.DataFrame:
    """Spinning replaces guest time inside spin episodes (both keyed by
    `_key`, their vCPU's number; `segs` in `_key` and start order). One
    sorted pass in Rust (cratrace-timelines) cuts the guest segments at the
    episodes' edges and gives the pieces in the timeline's order: the
    polars form (as-of joins, then a sort of every segment) was a third of
    the model build."""
    pieces = pl.DataFrame(_native.overlay_timeline(
        segments=segs.select("_key", "start", "end", (pl.col("state") == "guest").alias("eligible")),
        over=spins.select("_key", "start", "end"),
    ))
    return segs.drop("start", "end").select(pl.all().gather(pieces["seg"])).with_columns(
        pieces["start"], pieces["end"],
        pl.when(pieces["covered"]).then(pl.lit("spinning", STATE)).otherwise(pl.col("state")).alias("state"),
    ).select(segs.columns)
