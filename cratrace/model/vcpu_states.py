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
    """The `vcpu_states` table a batch at a time (rows final, the batches
    in table order): a batch of whole vCPUs, or a time window of one
    vCPU's timeline, so that a long capture's timelines need not be held
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
    runs = slices.filter(pl.col("tid").is_in(keyed["tid"].implode())).select("tid", "start", "end", pl.col("cpu").cast(pl.Int32)).sort("tid", "start")

    def named(segs: pl.DataFrame, keys: list[int]) -> pl.DataFrame:
        ep = spins.filter(pl.col("_key").is_in(keys)) if spins is not None else None
        if ep is not None and segs.height:
            # the episodes reaching into these segments (all a window's
            # pieces need: each is cut and covered by those over it alone)
            ep = ep.filter((pl.col("end") > segs["start"].min()) & (pl.col("start") < segs["end"].max()))
        if ep is not None and ep.height:
            segs = _overlay_spins(segs, ep)
        names = order.filter(pl.col("_key").is_in(keys))
        return conform(segs.with_columns(
            pl.col("_key").replace_strict(names["_key"], names["vm"], return_dtype=pl.String).alias("vm"),
            pl.col("_key").replace_strict(names["_key"], names["vcpu"], return_dtype=pl.Int32).alias("vcpu"),
            (pl.col("end") - pl.col("start")).alias("dur"),
        ), "vcpu_states")

    def batch(keys: list[int]) -> pl.DataFrame:
        # vCPUs in key order, so the batches come out in table order
        vk = keyed.filter(pl.col("_key").is_in(keys))
        return named(_segments(ev, vk, runs.filter(pl.col("tid").is_in(vk["tid"].implode())), span), keys)

    def windows(key: int, tid: int, cuts: list[int]):
        # one vCPU of one thread, a time window at a time, each window's
        # state carried in from the one before (`_Windows`)
        w = _Windows(ev, keyed.filter(pl.col("_key") == key), runs.filter(pl.col("tid") == tid), span, cuts)
        return [lambda i=i: named(w.segments(i), [key]) for i in range(len(cuts) + 1)]

    marks = _marks_per_thread(ev, keyed)
    build: list = []
    for keys in _vcpu_batches([marks.get(k, (0, 0)) for k in range(order.height)]):
        cuts = _window_cuts(runs, keyed, keys, marks)
        if cuts:
            build += windows(keys[0], marks[keys[0]][1], cuts)
        else:
            build.append(lambda keys=keys: batch(keys))
    return VcpuBatches(build)


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
#: (the build holds about 100 bytes of memory for each, with the batch's
#: segments): consecutive vCPUs are a batch while their marks stay under
#: it, and a vCPU with more is built in time windows of about this many
MARKS_PER_BATCH = 2_000_000


def _marks_per_thread(ev: dict[str, pl.LazyFrame], keyed: pl.DataFrame) -> dict[int, tuple[int, int]]:
    """Per vCPU key: its KVM marks (entries and exits) and, when it is one
    thread's, that thread (else -1); counted over the pid column alone."""
    tids = keyed["tid"].implode()
    counts = [
        top_buffer(ev[n]).select(pl.col("pid").cast(pl.Int64).alias("tid")).filter(pl.col("tid").is_in(tids)).group_by("tid").len().collect(engine="streaming")
        for n in ("kvm_entry", "kvm_exit") if n in ev
    ]
    per_tid = pl.concat(counts).group_by("tid").agg(pl.col("len").sum()) if counts else pl.DataFrame(schema={"tid": pl.Int64, "len": pl.UInt32})
    per_key = keyed.join(per_tid, on="tid", how="left").group_by("_key").agg(pl.col("len").fill_null(0).sum(), pl.col("tid").first(), pl.len().alias("threads"))
    return {int(k): (int(n), int(t) if th == 1 else -1) for k, n, t, th in per_key.select("_key", "len", "tid", "threads").iter_rows()}


def _vcpu_batches(marks: list[tuple[int, int]]) -> list[list[int]]:
    """The vCPU keys 0..len(`marks`) in consecutive batches whose KVM
    marks (`marks[key][0]`) stay under MARKS_PER_BATCH, a vCPU with more a
    batch of its own: a vCPU's timeline is its own, so a batch need not
    hold whole VMs (2 VMs of 4 vCPUs each are 8 batches, not 2, when long)."""
    batches: list[list[int]] = []
    held = MARKS_PER_BATCH + 1
    for key, (n, _) in enumerate(marks):
        if held + n > MARKS_PER_BATCH or not batches:
            batches.append([])
            held = 0
        batches[-1].append(key)
        held += n
    return batches


def _window_cuts(runs: pl.DataFrame, keyed: pl.DataFrame, keys: list[int], marks: dict[int, tuple[int, int]]) -> list[int]:
    """Where a batch's one vCPU is cut into time windows of about
    MARKS_PER_BATCH marks: at the starts of its runs, evenly by count.
    None (no windows) for a batch of several vCPUs, a vCPU of several
    threads or none with marks, or one under the limit."""
    if len(keys) != 1:
        return []
    n, tid = marks.get(keys[0], (0, -1))
    if tid < 0 or n <= MARKS_PER_BATCH:
        return []
    starts = runs.filter(pl.col("tid") == tid)["start"]
    parts = min(-(-n // MARKS_PER_BATCH), starts.len())
    return sorted({int(starts[i * starts.len() // parts]) for i in range(1, parts)})


class _Windows:
    """One vCPU thread's timeline in time windows cut at `cuts` (starts of
    its runs): window i spans from its cut to the next (the capture's
    start and end outside them) and holds the runs starting in it. Each
    window reads the events of its span, inclusive of both ends, and
    carries in the thread's last KVM entry and exit before it (the state
    its first run begins in, the exit a gap is named by); windows must be
    built in order. cratrace-timelines checks that windows glued give the
    whole timeline (`vcpu::tests`)."""

    def __init__(self, ev: dict[str, pl.LazyFrame], vc: pl.DataFrame, runs: pl.DataFrame, span: tuple[int, int], cuts: list[int]) -> None:
        self.ev, self.vc, self.runs, self.span = ev, vc, runs, span
        self.edges = [span[0], *cuts, span[1]]
        self.entry: pl.DataFrame | None = None
        self.exit: pl.DataFrame | None = None
        self.next = 0

    def segments(self, i: int) -> pl.DataFrame:
        assert i == self.next, "windows are built in order"
        self.next += 1
        lo, hi = self.edges[i], self.edges[i + 1]
        last = i == len(self.edges) - 2
        # the first window reads from the trace's start, the last to its end
        within = (None if i == 0 else lo, None if last else hi)
        runs = self.runs.filter((pl.col("start") >= lo) if i else pl.lit(True)).filter((pl.col("start") < hi) if not last else pl.lit(True))
        ev = _EventsWindow(self.ev, within)
        entries, exits = _kvm_marks(ev, self.vc)
        if self.entry is not None:
            entries, exits = pl.concat([self.entry, entries]), pl.concat([self.exit, exits])
        # what the next window carries in: the last entry and exit before it
        self.entry, self.exit = entries.filter(pl.col("ts") < hi).tail(1), exits.filter(pl.col("ts") < hi).tail(1)
        return _segments(ev, self.vc, runs, (lo, hi), lead=i == 0, marks=(entries, exits))


class _EventsWindow(dict):
    """The event tables as lazy frames of a time window's rows only
    (`within`: inclusive bounds, None for none)."""

    def __init__(self, ev: dict[str, pl.LazyFrame], within: tuple[int | None, int | None]) -> None:
        lo, hi = within
        cond = pl.lit(True)
        if lo is not None:
            cond = cond & (pl.col("ts") >= lo)
        if hi is not None:
            cond = cond & (pl.col("ts") <= hi)
        super().__init__({name: lf.filter(cond) for name, lf in ev.items()})


def _of(ev: dict[str, pl.LazyFrame], tids: pl.Series, name: str, *cols: pl.Expr, who: str = "pid") -> pl.DataFrame:
    """Event `name`'s (tid, ts, *cols) rows of the threads `tids`, in
    time order; `who`: the column naming the thread."""
    if name not in ev:
        return pl.DataFrame(schema={"tid": pl.Int64, "ts": pl.Int64} | {c.meta.output_name(): pl.Int64 for c in cols})
    lf = top_buffer(ev[name])
    return lf.select(pl.col(who).cast(pl.Int64).alias("tid"), "ts", *cols).filter(pl.col("tid").is_in(tids.implode())).collect()


def _kvm_marks(ev: dict[str, pl.LazyFrame], vc: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The threads' KVM entries (tid, ts) and exits (tid, ts, reason)."""
    # a null reason says nothing: not a halt
    return _of(ev, vc["tid"], "kvm_entry"), _of(ev, vc["tid"], "kvm_exit", pl.col("exit_reason").cast(pl.Int64).fill_null(-1).alias("reason"))


def _segments(ev: dict[str, pl.LazyFrame], vc: pl.DataFrame, runs: pl.DataFrame, span: tuple[int, int], lead: bool = True, marks: tuple[pl.DataFrame, pl.DataFrame] | None = None) -> pl.DataFrame:
    """The vCPU threads' (`vc`: tid, _key) timelines before spin episodes:
    _key, tid, state, start, end, pcpu, sorted by _key and start, from
    their running stretches `runs` (tid, start, end, cpu; by tid and
    start). One pass per thread in Rust (cratrace-timelines,
    `vcpu_timelines`, which states the rules) over the events read here:
    the polars form (as-of joins, then a sort of every segment by vCPU and
    start) was half the build. A time window (`lead` false after the
    first) is given its KVM `marks`, carried ones with them."""
    tids = vc["tid"]

    def woken(name: str) -> pl.DataFrame:
        # the event's own pid field, or the writer for kvm_vcpu_wakeup
        return _of(ev, tids, name, who="field_pid" if name in ev and "field_pid" in ev[name].collect_schema().names() else "pid")

    # a null prev_state says nothing: not runnable
    outs = _of(ev, tids, "sched_switch", pl.col("prev_state").cast(pl.Int64).fill_null(-1), who="prev_pid")
    entries, exits = marks if marks is not None else _kvm_marks(ev, vc)
    wakeups = pl.concat([woken(n) for n in ("sched_wakeup", "sched_waking", "kvm_vcpu_wakeup")])
    t = pl.DataFrame(_native.vcpu_timelines(
        threads=vc.select("tid", "_key"), runs=runs, outs=outs, entries=entries, exits=exits, wakeups=wakeups, span=span, halts=list(HLT_EXITS),
        lead=lead, marked=marks is not None,
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
