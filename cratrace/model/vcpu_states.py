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
from cratrace.model.frames import conform, empty, top_buffer, vm_batches

HLT_EXITS = (12, 0x78)  # VMX HLT, SVM hlt


#: a KVM timeline's states while it is built: an integer a row, not a
#: string (the table's column is a string, cast at the end)
STATE = pl.Enum(["guest", "vmm", "preempted", "blocked", "halted", "spinning"])


def _kvm_marks(ev: dict[str, pl.LazyFrame], tids: list[int]) -> pl.DataFrame:
    parts = []
    if "kvm_entry" in ev:
        parts.append(top_buffer(ev["kvm_entry"]).select("ts", pl.col("pid").cast(pl.Int64).alias("tid"), pl.lit("guest", STATE).alias("state"), pl.lit(None, pl.UInt32).alias("reason")))
    if "kvm_exit" in ev:
        parts.append(top_buffer(ev["kvm_exit"]).select("ts", pl.col("pid").cast(pl.Int64).alias("tid"), pl.lit("vmm", STATE).alias("state"), pl.col("exit_reason").cast(pl.UInt32).alias("reason")))
    if not parts:
        return pl.DataFrame(schema={"ts": pl.Int64, "tid": pl.Int64, "state": STATE, "reason": pl.UInt32})
    # in time order, which is how every use reads them (each as-of join
    # sorts by time): sorting by thread first cost 0.4 s of 30 s of
    # kvm-heavy-spin's build, for an order no one read
    return pl.concat(parts).filter(pl.col("tid").is_in(tids)).collect().sort("ts")


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
    if "xen_runstate_change" in ev:
        return xen_vcpu_states(ev, span)
    vc = threads.filter(pl.col("role") == "vcpu").select("tid", "vm", "vcpu")
    if vc.height == 0 or slices.height == 0:
        return empty("vcpu_states")
    # Each (vm, vcpu) as one integer, numbered in their sort order: the
    # timelines are built, sorted and overlaid by it, and get their VM's
    # name at the end (sorting 1.2 M segments of 10 s of kvm-heavy-spin by
    # the string key took 0.37 s and 130 MB).
    order = vc.select("vm", "vcpu").unique().sort("vm", "vcpu").with_row_index("_key")
    keyed = vc.join(order, on=["vm", "vcpu"])
    # VMs a batch at a time, in name order, so the batches' timelines come
    # out in _key order: the build holds one batch's KVM marks and pieces
    # at once, not the whole host's
    spins = spins.join(order, on=["vm", "vcpu"]) if spins.height else spins
    parts = []
    for vms in _vm_batches(ev, order):
        segs = _segments(ev, keyed.filter(pl.col("vm").is_in(vms)).select("tid", "_key"), slices, span)
        ep = spins.filter(pl.col("vm").is_in(vms)) if spins.height else spins
        parts.append(_overlay_spins(segs, ep) if ep.height else segs)
        del segs
    segs = pl.concat(parts) if len(parts) > 1 else parts[0]
    del parts
    keys = order["_key"].to_list()
    segs = segs.with_columns(
        pl.col("_key").replace_strict(keys, order["vm"].to_list(), return_dtype=pl.String).alias("vm"),
        pl.col("_key").replace_strict(keys, order["vcpu"].to_list(), return_dtype=pl.Int32).alias("vcpu"),
        (pl.col("end") - pl.col("start")).alias("dur"),
    )
    return conform(segs, "vcpu_states")


#: KVM entry/exit marks a batch of VMs' timelines is built from at most
#: (about 75 bytes of the build's memory each): a host's VMs are split
#: into batches of equal vCPU counts when their marks are more
MARKS_PER_BATCH = 2_000_000


def _vm_batches(ev: dict[str, pl.LazyFrame], order: pl.DataFrame) -> list[list[str]]:
    """The VMs of `order` (_key, vm, vcpu; sorted) in batches whose share
    of the capture's KVM marks stays under MARKS_PER_BATCH."""
    marks = sum(ev[n].select(pl.len()).collect().item() for n in ("kvm_entry", "kvm_exit") if n in ev)
    return vm_batches(order, marks, MARKS_PER_BATCH)


def _segments(ev: dict[str, pl.LazyFrame], vc: pl.DataFrame, slices: pl.DataFrame, span: tuple[int, int]) -> pl.DataFrame:
    """The vCPU threads' (`vc`: tid, _key) timelines before spin episodes:
    _key, tid, state, start, end, pcpu, sorted by _key and start. Its own
    function so that the events and pieces it reads are let go before the
    overlay, the build's peak."""
    start, end = span
    tids = vc["tid"].to_list()
    runs = slices.filter(pl.col("tid").is_in(tids)).select("tid", "start", "end", pl.col("cpu").alias("pcpu")).sort("tid", "start")
    # off-CPU gaps and how the thread left the CPU
    out_state = pl.DataFrame(schema={"tid": pl.Int64, "start": pl.Int64, "prev_state": pl.Int64})
    if "sched_switch" in ev:
        out_state = (
            top_buffer(ev["sched_switch"])
            .select(pl.col("prev_pid").cast(pl.Int64).alias("tid"), pl.col("ts").alias("start"), pl.col("prev_state").cast(pl.Int64))
            .filter(pl.col("tid").is_in(tids))
            .collect()
        )
    marks = _kvm_marks(ev, tids)
    kvm_tids = set(marks["tid"].unique().to_list())
    gaps = runs.select("tid", pl.col("end").alias("start"), pl.col("start").shift(-1).over("tid").fill_null(pl.lit(end, pl.Int64)).alias("end"))
    firsts = runs.group_by("tid").agg(pl.col("start").min().alias("end")).with_columns(pl.lit(start, pl.Int64).alias("start"))
    never = vc.filter(~pl.col("tid").is_in(runs["tid"].unique().to_list())).select("tid", pl.lit(start, pl.Int64).alias("start"), pl.lit(end, pl.Int64).alias("end"))
    gaps = gaps.join(out_state, on=["tid", "start"], how="left")
    # halted: last exit before the gap was HLT
    if marks.height:
        last_exit = marks.filter(pl.col("state") == "vmm").select("tid", pl.col("ts").alias("start"), "reason")
        gaps = gaps.sort("start").join_asof(last_exit.sort("start"), on="start", by="tid", strategy="backward", check_sortedness=False).sort("tid", "start")
    else:
        gaps = gaps.with_columns(pl.lit(None, pl.UInt32).alias("reason"))
    runnable = (pl.col("prev_state") & 0xFF) == 0
    gaps = gaps.with_columns(
        pl.when(runnable).then(pl.lit("preempted", STATE)).when(pl.col("reason").is_in(HLT_EXITS)).then(pl.lit("halted", STATE)).otherwise(pl.lit("blocked", STATE)).alias("state"),
        pl.lit(None, pl.Int32).alias("pcpu"),
    ).select("tid", "start", "end", "state", "pcpu")
    gaps = _split_at_wakeups(gaps, ev, tids)
    pre = pl.concat([firsts.select("tid", "start", "end"), never]).with_columns(pl.lit("blocked", STATE).alias("state"), pl.lit(None, pl.Int32).alias("pcpu"))
    # running time split by KVM entry/exit
    run_segs = _split_runs(runs, marks, kvm_tids)
    segs = pl.concat([run_segs, gaps, pre.select(run_segs.columns)], how="vertical_relaxed").filter(pl.col("end") > pl.col("start"))
    return segs.join(vc, on="tid").select("_key", "tid", "state", "start", "end", "pcpu").sort("_key", "start")


def _wakeups(ev: dict[str, pl.LazyFrame], tids: list[int]) -> pl.DataFrame:
    parts = []
    for name in ("sched_wakeup", "sched_waking", "kvm_vcpu_wakeup"):
        if name not in ev:
            continue
        lf = top_buffer(ev[name])
        cols = lf.collect_schema().names()
        # the woken thread: the event's own pid field, or the writer for kvm_vcpu_wakeup
        who = "field_pid" if "field_pid" in cols else "pid"
        parts.append(lf.select(pl.col(who).cast(pl.Int64).alias("tid"), pl.col("ts").alias("wake")))
    if not parts:
        return pl.DataFrame(schema={"tid": pl.Int64, "wake": pl.Int64})
    return pl.concat(parts).filter(pl.col("tid").is_in(tids)).collect().sort("wake")


def _split_at_wakeups(gaps: pl.DataFrame, ev: dict[str, pl.LazyFrame], tids: list[int]) -> pl.DataFrame:
    """A blocked or halted gap ends at the thread's first wakeup inside it;
    from there to its next run it was runnable: preempted (waiting for a
    CPU). Without wakeup events the whole gap stays blocked."""
    wk = _wakeups(ev, tids)
    if wk.height == 0:
        return gaps
    sleepy = gaps.filter(pl.col("state") != "preempted").sort("start")
    j = sleepy.join_asof(wk, left_on="start", right_on="wake", by="tid", strategy="forward", check_sortedness=False)
    inside = (pl.col("wake") > pl.col("start")) & (pl.col("wake") < pl.col("end"))
    first = j.with_columns(pl.when(inside).then(pl.col("wake")).otherwise(pl.col("end")).alias("end")).select(gaps.columns)
    second = j.filter(inside).with_columns(pl.col("wake").alias("start"), pl.lit("preempted", STATE).alias("state")).select(gaps.columns)
    return pl.concat([gaps.filter(pl.col("state") == "preempted"), first, second]).sort("tid", "start")


def _split_runs(runs: pl.DataFrame, marks: pl.DataFrame, kvm_tids: set) -> pl.DataFrame:
    """Running time split by KVM entry/exit (`runs`: tid, start, end, pcpu,
    sorted by tid and start; `marks`: in time order): a thread without KVM
    marks is guest throughout; a run of one with them begins in the state
    of its last mark at or before it (vmm if none) and changes at each
    mark inside it. One sorted pass in Rust (cratrace-timelines); as-of
    joins and sorts of every mark were a quarter of the model build."""
    kvm = pl.col("tid").is_in(list(kvm_tids))
    plain = runs.filter(~kvm).with_columns(pl.lit("guest", STATE).alias("state"))
    k = runs.filter(kvm)
    if k.height == 0:
        return plain.select("tid", "start", "end", "state", pl.col("pcpu").cast(pl.Int32))
    names = STATE.categories
    pieces = pl.DataFrame(_native.split_runs(
        runs=k.select("tid", "start", "end"),
        marks=marks.select("tid", "ts", pl.col("state").to_physical().cast(pl.UInt8)),
        initial=names.index_of("vmm"),
    ))
    run = pieces["run"]
    split = pl.DataFrame({"tid": k["tid"].gather(run), "start": pieces["start"], "end": pieces["end"], "state": pl.Series(names, dtype=STATE).gather(pieces["state"]), "pcpu": k["pcpu"].gather(run)})
    return pl.concat([plain.select(split.columns), split]).with_columns(pl.col("pcpu").cast(pl.Int32))


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
