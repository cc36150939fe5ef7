"""Why a replay differs from its recording: the same measurements taken on
the capture's `vcpu_states` and on the replay's, set side by side in
metrics.json (`fidelity.diagnostics`). Pure functions from frames to
numbers; they read only canonical columns, so they apply to both."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from cratrace.model.frames import grouped, shift_within

RUNNING = ("guest", "spinning")
ASLEEP = ("blocked", "halted")


def _runs(s: pl.DataFrame) -> pl.DataFrame:
    """Each stretch a vCPU spent on a CPU (guest and spinning segments
    merged), with the state it left into, from a timeline whose rows of a
    thread are together and in time order. A stretch's first and last rows
    are picked out in that order and paired by position (grouping 0.5 M
    stretches cost 0.23 s and 240 MB; a frame of every row's flags, 150 MB
    of 3.8 M segments)."""
    on = pl.col("state").is_in(RUNNING)
    opens = on & ~shift_within(on, "tid", 1).fill_null(False)
    closes = on & ~shift_within(on, "tid", -1).fill_null(False)
    first = s.filter(opens).select("tid", "vm", "start")
    last = s.select("end", shift_within("state", "tid", -1).alias("left_to"), closes.alias("_close")).filter("_close").drop("_close")
    return pl.concat([first, last], how="horizontal")


def sibling_wakeup_preemption(states: pl.DataFrame, window_ns: int = 30_000) -> dict[str, float | int | None]:
    """Of the wakeups of a vCPU while another vCPU of its VM was on a CPU,
    the share after which such a sibling was preempted within `window_ns`:
    how often a waking vCPU takes the CPU from its own VM (the lock-holder
    preemption the spin policies are about starts here)."""
    n, preempted = _sibling_counts(states, window_ns)
    return {"wakeups": n, "preempted_pct": round(100 * preempted / n, 2) if n else None}


def _sibling_counts(states: pl.DataFrame, window_ns: int = 30_000) -> tuple[int, int]:
    """(wakeups beside a running sibling, of them followed by its
    preemption): sums over VMs, so whole VMs can be counted apart."""
    return _sibling_counts_of(*_sibling_parts(states), window_ns)


def _sibling_parts(states: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """What the sibling-wakeup figure reads of a timeline: each thread's
    wakeups (vm, tid, t), its stretches on a CPU (sib, rs, re,
    left_preempted) and the threads (vm, sib). Per thread, so the parts of
    timelines split by thread, concatenated, are the whole's (a thread's
    wakeups and stretches are some thirty times fewer than its rows)."""
    # the columns used (narrow, from `measure`) before anything is copied:
    # on 3.8 M segments the filter, a sort by thread and the strings'
    # copies took 490 MB
    states = states.select("vm", "tid", "state", "start", "end")
    if states["vm"].null_count():
        states = states.filter(pl.col("vm").is_not_null())
    s = grouped(states, "tid", "start")
    wakes = s.filter(shift_within("state", "tid", 1).is_in(ASLEEP) & ~pl.col("state").is_in(ASLEEP)).select("vm", "tid", pl.col("start").alias("t"))
    # what a stretch is read for: its thread, span and whether it ended
    # preempted (a long recording's vCPUs have millions of stretches)
    runs = _runs(s).select(pl.col("tid").alias("sib"), pl.col("start").alias("rs"), pl.col("end").alias("re"), (pl.col("left_to") == "preempted").alias("left_preempted"))
    # the threads from their first rows (each thread's rows are together):
    # a hash of every row's (vm, tid) took 0.4 s of 8.7 M
    sibs = s.filter(pl.col("tid") != pl.col("tid").shift(1).fill_null(-1)).select("vm", pl.col("tid").alias("sib"))
    return wakes, runs, sibs


def _sibling_counts_of(wakes: pl.DataFrame, runs: pl.DataFrame, sibs: pl.DataFrame, window_ns: int = 30_000) -> tuple[int, int]:
    """`_sibling_counts` from `_sibling_parts` (each thread's stretches in
    time order, its rows together)."""
    # each thread's stretches are in time order, which is all an as-of
    # join by thread needs (polars: sorted within each `by` group): a
    # sort of every stretch by time took 0.4 s of 3.7 M
    pairs = wakes.join(sibs.unique(), on="vm").filter(pl.col("sib") != pl.col("tid")).sort("t")
    if pairs.height == 0 or runs.height == 0:
        return 0, 0
    hit = pairs.join_asof(runs, left_on="t", right_on="rs", by="sib", strategy="backward", check_sortedness=False)
    hit = hit.with_columns(
        ((pl.col("rs") < pl.col("t")) & (pl.col("re") >= pl.col("t"))).fill_null(False).alias("_running"),
    ).with_columns((pl.col("_running") & pl.col("left_preempted") & (pl.col("re") - pl.col("t") <= window_ns)).alias("_pre"))
    per_wake = hit.group_by("vm", "tid", "t").agg(pl.col("_running").any(), pl.col("_pre").any()).filter(pl.col("_running"))
    return per_wake.height, int(per_wake["_pre"].sum())


def preempted_s(states: pl.DataFrame) -> dict[str, float]:
    """Per VM, vCPU seconds runnable but waiting for a CPU."""
    return {vm: round(ns / 1e9, 6) for vm, ns in _preempted_ns(states).iter_rows()}


def _preempted_ns(states: pl.DataFrame) -> pl.DataFrame:
    """Per VM (vm, ns), the time runnable but waiting for a CPU: sums, so
    parts of a timeline can be counted apart."""
    p = states.filter(pl.col("vm").is_not_null() & (pl.col("state") == "preempted"))
    return p.group_by("vm").agg((pl.col("end") - pl.col("start")).sum())


def vm_cpu_concentration(states: pl.DataFrame, window_ns: int = 100_000_000) -> float | None:
    """How much of a VM's vCPU time ran on its busiest CPU, per window of
    `window_ns`: percent, weighted by time, over the VMs of two or more
    vCPUs. 100 means each VM's vCPUs shared one CPU (packed: a lock holder
    is then preempted by its own sibling, which spins in its place);
    100/CPUs means spread evenly. Stretches are counted in the window they
    start in, windows from the first such stretch."""
    start = _concentration_start(states.lazy())
    if start is None:
        return None
    top, total = _concentration_sums(states, *start, window_ns)
    return round(100 * top / total, 2) if total else None


def _counted(lf: pl.LazyFrame, multi: pl.Series) -> pl.LazyFrame:
    """The running stretches on a known CPU of the VMs `multi` (narrow
    queries over the frame, not filtered copies of all of it: 175 MB on
    3.8 M segments)."""
    return lf.select("vm", "state", "start", "end", "pcpu").filter(pl.col("vm").is_in(multi.implode()) & pl.col("state").is_in(RUNNING) & pl.col("pcpu").is_not_null())


def _concentration_start(lf: pl.LazyFrame) -> tuple[int, pl.Series] | None:
    """Where the windows start (the first stretch counted) and the VMs with
    two or more vCPU threads, the ones counted; None: no stretch is."""
    if "pcpu" not in lf.collect_schema().names():
        return None
    multi = lf.filter(pl.col("vm").is_not_null()).group_by("vm").agg(pl.col("tid").n_unique().alias("n")).filter(pl.col("n") >= 2).collect(engine="streaming")["vm"]
    t0 = _counted(lf, multi).select(pl.col("start").min()).collect(engine="streaming").item()
    return None if t0 is None else (t0, multi)


def _concentration_sums(states: pl.DataFrame, t0: int, multi: pl.Series, window_ns: int = 100_000_000) -> tuple[int, int]:
    """(time on each VM's busiest CPU per window, all the time) over the
    VMs `multi`."""
    return _concentration_of(_concentration_parts(states, t0, multi, window_ns))


def _concentration_parts(states: pl.DataFrame, t0: int, multi: pl.Series, window_ns: int = 100_000_000) -> pl.DataFrame:
    """Per window, VM and CPU (w, vm, pcpu, ns), the running time of the
    VMs `multi`: sums, so parts of a timeline can be counted apart."""
    on = _counted(states.lazy(), multi).select("vm", "start", "end", "pcpu").collect()
    return on.group_by(((pl.col("start") - t0) // window_ns).alias("w"), "vm", "pcpu").agg((pl.col("end") - pl.col("start")).sum().alias("ns"))


def _concentration_of(per_cpu: pl.DataFrame) -> tuple[int, int]:
    """(time on each VM's busiest CPU per window, all the time) from
    `_concentration_parts`, of one timeline or of its parts concatenated."""
    if per_cpu.height == 0:
        return 0, 0
    per_cpu = per_cpu.group_by("w", "vm", "pcpu").agg(pl.col("ns").sum())
    per_vm = per_cpu.group_by("w", "vm").agg(pl.col("ns").max().alias("top"), pl.col("ns").sum().alias("all"))
    return int(per_vm["top"].sum()), int(per_vm["all"].sum())


def vcpu_migrations(states: pl.DataFrame) -> int:
    """How often a vCPU ran on another CPU than in its previous stretch on
    one: the kernel moved vCPUs a few hundred times in a 6 s lab capture,
    most of them pulled by a CPU whose last thread had just blocked, and a
    replay that moves them far less keeps a VM's vCPUs where lock-holder
    preemption storms start (docs/fidelity-log.md, stop 36)."""
    if "pcpu" not in states.columns:
        return 0
    on = grouped(states.filter(pl.col("vm").is_not_null() & pl.col("state").is_in(RUNNING) & pl.col("pcpu").is_not_null()).select("tid", "start", "pcpu"), "tid", "start")
    before = shift_within("pcpu", "tid", 1)
    return int(on.select((before.is_not_null() & (before != pl.col("pcpu"))).sum()).item())


def narrow(states: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """The columns of a timeline that `measure` reads, its strings as
    categories (4 bytes a row, not 16)."""
    cols = [c for c in ("tid", "start", "end", "pcpu") if c in states.collect_schema().names()]
    return states.lazy().select(pl.col("vm").cast(pl.Categorical), pl.col("state").cast(pl.Categorical), *cols).collect()


@dataclass
class Parts:
    """What `measure` reads of a timeline, kept from its parts (a long
    recording's vCPUs read a few at a time) and summed up by `figures`:
    each piece is per thread or a sum, so the parts of a timeline split by
    thread give the whole's figures."""

    #: where the concentration's windows start and the VMs it counts
    #: (`_concentration_start`, of the whole timeline)
    start: tuple[int, pl.Series] | None
    #: the sibling-wakeup parts of VMs not yet counted, and the counts of
    #: those that were
    sibling: list[tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]] = field(default_factory=list)
    wakeups: tuple[int, int] = (0, 0)
    preempted: list[pl.DataFrame] = field(default_factory=list)
    concentration: list[pl.DataFrame] = field(default_factory=list)
    moves: int = 0

    def add(self, s: pl.DataFrame) -> None:
        """Count the timeline part `s` (its threads' rows whole)."""
        self.sibling.append(_sibling_parts(s))
        self.preempted.append(_preempted_ns(s))
        self.moves += vcpu_migrations(s)
        if self.start is not None:
            self.concentration.append(_concentration_parts(s, *self.start))

    def count_wakeups(self) -> None:
        """Count the sibling wakeups of the parts added so far, which must
        hold whole VMs (every thread of each VM they hold), and drop
        their stretches: a VM's wakeups pair with its own threads' only."""
        if self.sibling:
            n, k = _sibling_counts_of(*(pl.concat(p) for p in zip(*self.sibling)))
            self.wakeups = (self.wakeups[0] + n, self.wakeups[1] + k)
            self.sibling = []

    def figures(self) -> dict:
        self.count_wakeups()
        wakeups, preempted = self.wakeups
        waiting = pl.concat(self.preempted).group_by("vm").agg(pl.col("end").sum()) if self.preempted else pl.DataFrame()
        top, total = _concentration_of(pl.concat(self.concentration)) if self.concentration else (0, 0)
        return {
            "sibling_wakeup_preemption_pct": round(100 * preempted / wakeups, 2) if wakeups else None,
            "sibling_wakeups": wakeups,
            "preempted_s": {vm: round(ns / 1e9, 6) for vm, ns in waiting.iter_rows()},
            "vm_cpu_concentration_pct": round(100 * top / total, 2) if total else None,
            "vcpu_migrations": self.moves,
        }


def parts(states: pl.DataFrame | pl.LazyFrame) -> Parts:
    """An empty `Parts` for the timeline `states` (read lazily once, for
    where the concentration's windows start)."""
    return Parts(_concentration_start(states.lazy()))


def measure(states: pl.DataFrame | pl.LazyFrame, vm_batches: list[list[str]] | None = None) -> dict:
    """The diagnostics of one timeline (a recording's or a replay's). Each
    figure is per VM or a sum over VMs: with `vm_batches`, the timeline is
    read a batch of VMs at a time (a long recording need not be held
    whole), with the same result."""
    lf = states.lazy()
    p = parts(lf)
    for vms in vm_batches or [None]:
        p.add(narrow(lf if vms is None else lf.filter(pl.col("vm").is_in(vms))))
        p.count_wakeups()
    return p.figures()


def compare(recorded: dict, replayed: dict) -> dict:
    """Two `measure` results side by side: measure → {recorded, replayed}."""
    return {k: {"recorded": recorded[k], "replayed": replayed[k]} for k in recorded}
