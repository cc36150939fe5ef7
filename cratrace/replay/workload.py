"""Recorded demand as replay phases.

Per vCPU, from ``vcpu_states``: guest and hypervisor time is *work*
(each work phase remembers the CPU it ran on, for the ``recorded``
placement),
blocked and halted time is an open-loop *block*, preempted time is dropped
(the replayed scheduler recreates it) and so is spinning (demand a policy
may remove; locks recreate it). Blocked or halted time inside a spin
episode is a paravirtual spinlock's halt (pv_wait until the holder's kick):
a lock wait, which the `pv` spin response recreates, so it is dropped too. Every throughput marker (default
``txn_end``) becomes a *mark*; when the capture shows lock contention
(marker spin episodes), the last ``critical_ns`` of work before each mark
runs under the VM's lock (*acquire* … *release*), ``critical_ns`` being
the median time from a spin's end to the transaction's end. A gang
barrier's wait (a vCPU's ``barrier_wait`` marker to its next
``barrier_done``, or the capture's end) becomes a *barrier* phase, whatever
the vCPU did meanwhile: the replay waits until every vCPU of the VM with
barriers has arrived, spinning when the recorded wait stayed on the CPU,
sleeping when it blocked or halted. Host threads
that used the CPU replay as work and blocks from their CPU slices.

Work is taken net of the switches the engine charges again: a recorded
run's time includes the switch into it (the trace's slice starts at
sched_switch) and, when it changed CPU, the move; the replay pays both at
each of its own dispatches, so without the deduction every run would pay
twice, and a run would end a switch cost after its recorded end, when a
waking sibling can preempt it instead of it blocking as recorded.

The per-phase rules run in Rust (cratrace-replay's ``demand`` module),
one call for all vCPUs and one for all host threads; this module picks
the threads and computes what the rules need from the model tables.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field

import polars as pl

from cratrace import _native
from cratrace.capture import Capture
from cratrace.errors import CaptureError
from cratrace.model.affinity import parse_cpulist
from cratrace.model.domains import domain_runs, domain_vcpus
from cratrace.model.frames import aligned, in_order, vm_batches
from cratrace.replay import diagnostics
from cratrace.replay.cpu_speed import speed_column, speed_profile
from cratrace.replay.spill import PHASE_TYPECODES, PhaseSpill  # noqa: F401 (PHASE_TYPECODES: re-exported)

WORK, BLOCK, ACQUIRE, RELEASE, MARK, WAIT_FOR, BARRIER = range(7)

#: the frequency a capture without recorded frequencies is taken to have
#: run at: the report's power model's nominal one
#: (`cratrace.report.energy.PowerModel.nominal_ghz`), so that a replay's
#: energy and the report's are one figure (it was 1 GHz here, 2 there)
NOMINAL_KHZ = 2_000_000

#: the guest markers a gang barrier's wait is read from: a vCPU writes the
#: first when it arrives and the second when it goes on (issue 41)
BARRIER_NAMES = ("barrier_wait", "barrier_done")



@dataclass
class Workload:
    """Columnar phases plus what is needed to map results back."""

    t0: int
    duration_ns: int
    tids: list[int] = field(default_factory=list)
    vm_of: list[int] = field(default_factory=list)
    vcpu_of: list[int] = field(default_factory=list)
    start: list[int] = field(default_factory=list)
    #: the CPU each thread first ran on in the capture (-1: never ran)
    start_cpu: list[int] = field(default_factory=list)
    #: the kernel re-read each thread's runtime every few µs while it ran
    #: (system calls that run update_curr): its expired slices end at once
    fine_accounting: list[bool] = field(default_factory=list)
    vm_names: list[str] = field(default_factory=list)
    #: each thread's CFS scheduling group on the host (an index into
    #: group_names, -1: the root group), and the groups' weights
    group_of: list[int] = field(default_factory=list)
    #: each thread's allowed CPUs as recorded (threads.allowed_cpus; None:
    #: any)
    allowed: list[list[int] | None] = field(default_factory=list)
    #: each thread's power while it runs (W, threads.power_w; None: the
    #: host's power model's)
    power_w: list[float | None] = field(default_factory=list)
    group_names: list[str] = field(default_factory=list)
    group_shares: list[int] = field(default_factory=list)
    #: the phases, as four typed columns in files of a temporary
    #: directory (`cratrace.replay.spill`): in memory they were 21 bytes
    #: a phase, 2.2 GB of a 100 M-event capture held by the whole replay
    phases: PhaseSpill = field(default_factory=PhaseSpill)
    critical_ns: dict[str, int] = field(default_factory=dict)
    recorded_cpu_ns: list[int] = field(default_factory=list)
    recorded_marks: dict[str, int] = field(default_factory=dict)
    #: every marker name the capture's guests wrote
    marker_names: list[str] = field(default_factory=list)
    #: per VM, the vCPUs' recorded spinning time (ns), to set beside the
    #: replay's: the demand a spin policy may remove
    recorded_spin_ns: dict[str, int] = field(default_factory=dict)
    #: `cratrace.replay.diagnostics.measure` of the recorded vcpu_states,
    #: for each replay's metrics to set beside its own
    recorded_diagnostics: dict = field(default_factory=dict)
    #: per VM, recorded (first vCPU start, last mark) relative to t0: the
    #: window throughput is measured over, in the recording and the replay
    recorded_window: dict[str, tuple[int, int]] = field(default_factory=dict)
    pcpus: int = 1
    freq_khz: int = 2_000_000
    #: the capture recorded its CPUs' frequencies (else `freq_khz` is
    #: NOMINAL_KHZ, the frequency the report's power model charges)
    freq_known: bool = False
    #: spin episodes in which the vCPU halted (pv spinlock waits), and the
    #: median spinning before the first halt of one (ns; None: no halts)
    pv_halts: int = 0
    pv_spin_ns: int | None = None
    #: per CPU, its recorded speed over time (`cratrace.replay.cpu_speed`;
    #: empty: every CPU at 1, work as long as it took)
    cpu_speed: dict[int, list[tuple[int, float]]] = field(default_factory=dict)

    def add_thread(self, tid: int, vm: int, vcpu: int, start: int, recorded_cpu: int, start_cpu: int = -1, fine_accounting: bool = False, group: str | None = None, allowed: list[int] | None = None, power_w: float | None = None) -> int:
        self.tids.append(tid)
        self.allowed.append(allowed)
        self.power_w.append(power_w)
        self.group_of.append(-1 if group is None or group not in self.group_names else self.group_names.index(group))
        self.start_cpu.append(start_cpu)
        self.fine_accounting.append(fine_accounting)
        self.vm_of.append(vm)
        self.vcpu_of.append(vcpu)
        self.start.append(start)
        self.recorded_cpu_ns.append(recorded_cpu)
        return len(self.tids) - 1

    def phase(self, t: int, kind: int, a: int = 0, b: int = 0) -> None:
        """Append one phase (a test's or a small workload's: many go
        faster by `extend_phases`)."""
        self.phases.extend(([t], [kind], [int(a)], [int(b)]))

    def extend_phases(self, thread: Iterable[int] | bytes, kind: Iterable[int] | bytes, a: Iterable[int] | bytes, b: Iterable[int] | bytes) -> None:
        """Append phases given as columns: iterables of ints, or packed
        bytes as the native builders return them."""
        self.phases.extend((thread, kind, a, b))

    def phase_columns(self) -> tuple[array, array, array, array]:
        """thread, kind, a, b, loaded from the spill into memory (a copy:
        for what needs them all at once)."""
        return self.phases.columns()

    # one column loaded into memory, for a look at it (tests, checks)
    phase_thread = property(lambda self: self.phases.column(0))
    phase_kind = property(lambda self: self.phases.column(1))
    phase_a = property(lambda self: self.phases.column(2))
    phase_b = property(lambda self: self.phases.column(3))

    def close(self) -> None:
        """Remove the phases' spill (the workload has no phases after)."""
        self.phases.close()


#: a thread whose runtime the kernel updated at least this often (median
#: gap between its `sched_stat_runtime` events) made system calls while it
#: worked; ticks and switches alone update it every few milliseconds
FINE_ACCOUNTING_NS = 50_000


def fine_accounting(stat_runtime: pl.LazyFrame | None) -> set[int]:
    """Threads whose expired slices the kernel noticed at once: update_curr
    (which ends an expired slice) ran for them every few µs, at the system
    calls they made, not only at ticks. Each `sched_stat_runtime` event is
    one such update; without the events, none."""
    if stat_runtime is None:
        return set()
    pid = "field_pid" if "field_pid" in stat_runtime.collect_schema().names() else "pid"
    per = stat_runtime.group_by(pl.col(pid).alias("tid")).agg(pl.col("runtime").median().alias("gap")).collect()
    return {int(t) for t, gap in per.iter_rows() if t and gap is not None and gap <= FINE_ACCOUNTING_NS}


def _critical_ns(markers: pl.DataFrame, marker: str) -> dict[str, int]:
    """Median spin_end → next transaction end, per VM."""
    # in time order (as the table is written), each vCPU's next marker is
    # a shift within its group: sorting by vCPU first took three times as long
    m = in_order(markers.filter(pl.col("name").is_in(["spin_end", marker]) & pl.col("vm").is_not_null()), "ts")
    if m.height == 0:
        return {}
    m = m.with_columns(pl.col("name").shift(-1).over("vm", "vcpu").alias("_next"), pl.col("ts").shift(-1).over("vm", "vcpu").alias("_next_ts"))
    d = m.filter((pl.col("name") == "spin_end") & (pl.col("_next") == marker)).with_columns((pl.col("_next_ts") - pl.col("ts")).alias("d"))
    return {r["vm"]: int(r["d"]) for r in d.group_by("vm").agg(pl.col("d").median()).iter_rows(named=True) if r["d"] is not None}


def mark_lock_waits(states: pl.DataFrame, episodes: pl.DataFrame | None) -> pl.DataFrame:
    """``states`` (sorted by vm, vcpu, start) with ``in_spin``: the segment
    began inside one of its vCPU's spin episodes, and ``episode``: that
    episode's start (null outside one)."""
    if episodes is None or episodes.height == 0:
        return states.with_columns(pl.lit(False).alias("in_spin"), pl.lit(None, pl.Int64).alias("episode"))
    # One episode per stretch of waiting: overlapping evidence of one
    # wait (the spin markers around it, its PAUSE-exit clusters, the
    # halt-to-kick of a pv wait inside it) is merged, so that a wait's
    # spinning and its halt belong to one episode. Each segment takes the
    # wait its start lies in: one pass in Rust over the timeline in its
    # order (each vCPU numbered by its run of rows), where an as-of join
    # sorted the whole timeline by time and back (1.5 s of 10 s of a
    # 10 M-event capture's extraction).
    key = pl.struct("vm", "vcpu").rle_id().cast(pl.UInt32).alias("_key")
    keyed = states.select(key, pl.col("start").alias("at"), "vm", "vcpu")
    vcpus = keyed.filter(pl.col("_key") != pl.col("_key").shift(1).fill_null(-1)).select("vm", "vcpu", "_key")
    over = episodes.select("vm", pl.col("vcpu").cast(states.schema["vcpu"]), "start", "end").join(vcpus, on=["vm", "vcpu"]).select("_key", "start", "end")
    episode = pl.DataFrame(_native.enclosing_interval(instants=keyed.select("_key", "at"), over=over))["start"]
    episode = aligned(episode, states["start"])
    return states.hstack([episode.alias("episode"), episode.is_not_null().alias("in_spin")])


def pv_halt_stats(states: pl.DataFrame) -> tuple[int, int | None]:
    """(spin episodes with a halt, median spinning before an episode's
    first halt) from ``mark_lock_waits`` output."""
    return _pv_summary(*_pv_halts(states))


def _pv_summary(halts: int, spun: pl.Series) -> tuple[int, int | None]:
    """(halts, the median of the spinning before them, ns; None: none)."""
    med = spun.median() if spun.len() else None
    return halts, None if med is None else int(med)


def _pv_halts(states: pl.DataFrame) -> tuple[int, pl.Series]:
    """(spin episodes with a halt, each one's spinning before its first
    halt, ns): per vCPU, so vCPUs can be counted apart."""
    # one query over the rows in episodes, its columns only (a filtered
    # copy of the whole timeline was this step's peak)
    ins = states.lazy().filter(pl.col("in_spin")).select("vm", "vcpu", "episode", "state", "start", "end")
    halted = ins.filter(pl.col("state").is_in(["blocked", "halted"])).group_by("vm", "vcpu", "episode").agg(pl.col("start").min().alias("_halt"))
    spun = (
        ins.filter(pl.col("state") == "spinning")
        .join(halted, on=["vm", "vcpu", "episode"])
        .filter(pl.col("start") < pl.col("_halt"))
        .group_by("vm", "vcpu", "episode")
        .agg((pl.min_horizontal("end", "_halt") - pl.col("start")).sum().alias("ns"))
    )
    halted, spun = pl.collect_all([halted.select(pl.len()), spun.select("ns")])
    return halted.item(), spun["ns"]


#: `vcpu_states` states as the native phase builder numbers them (from
#: the builder itself; others, e.g. preempted: not demand)
_STATE_CODES = _native.replay_segment_state_codes()


def _state_code(state: pl.Expr) -> pl.Expr:
    """`_STATE_CODES` of the state names (6: not demand): compared name by
    name, which took a third of the time a replace took of short strings."""
    code = pl.lit(6, pl.UInt8)
    for name, c in _STATE_CODES.items():
        code = pl.when(state == name).then(pl.lit(c, pl.UInt8)).otherwise(code)
    return code.alias("state")


def _vcpu_timelines(vcpus: pl.DataFrame, states: pl.DataFrame) -> pl.DataFrame:
    """What the phases of `vcpus` (rows: their thread index order) are
    built from: their timelines in `states` (sorted by vm, vcpu, start), as
    the narrow frame `_native.vcpu_phases` reads."""
    order = vcpus.select("vm", "vcpu").with_row_index("_t").cast({"vm": states.schema["vm"], "vcpu": states.schema["vcpu"]})
    # `states` comes in vCPU order already: each run of one (vm, vcpu) is
    # numbered, and only the runs' first rows are joined with `order` (a
    # join and a sort of the whole timeline took 0.4 s and 230 MB of 30 s
    # of kvm-heavy-spin's extraction).
    runs = states.select("vm", "vcpu", pl.struct("vm", "vcpu").rle_id().alias("_run"))
    firsts = runs.filter(pl.col("_run") != pl.col("_run").shift(1).fill_null(-1)).join(order, on=["vm", "vcpu"])
    return (
        states.select(
            runs["_run"].replace_strict(firsts["_run"], firsts["_t"], default=None, return_dtype=pl.UInt32).alias("_t"),
            "start", "end",
            _state_code(pl.col("state")),
            "in_spin", pl.col("pcpu").cast(pl.Int64),
        )
        .drop_nulls("_t")
    )


def _marks_by_thread(vcpus: pl.DataFrame, marks: pl.LazyFrame) -> pl.DataFrame:
    """The throughput `marks` (vm, vcpu, ts) of `vcpus` as (_t, ts), `_t`
    a vCPU's row in `vcpus`, sorted: what `_native.vcpu_phases` reads."""
    order = vcpus.select("vm", "vcpu").with_row_index("_t").lazy().cast({"vm": marks.collect_schema()["vm"], "vcpu": marks.collect_schema()["vcpu"]})
    return marks.join(order, on=["vm", "vcpu"]).select("_t", "ts").sort("_t", "ts").collect()


def barrier_waits(markers: pl.DataFrame, end_ns: int) -> pl.DataFrame:
    """Each vCPU's gang-barrier waits (vm, vcpu, start, end) from its
    markers: a `barrier_wait` to the vCPU's next marker when that is a
    `barrier_done`, else to `end_ns` (the capture ended while it waited)
    when it is the vCPU's last barrier marker; a `barrier_wait` followed by
    another `barrier_wait` is dropped (a lost marker: no wait is known)."""
    m = markers.filter(pl.col("name").is_in(BARRIER_NAMES) & pl.col("vm").is_not_null() & pl.col("vcpu").is_not_null())
    if m.height == 0:
        return pl.DataFrame(schema={"vm": pl.String, "vcpu": pl.Int32, "start": pl.Int64, "end": pl.Int64})
    m = in_order(m.select("vm", pl.col("vcpu").cast(pl.Int32), "ts", "name"), "vm", "vcpu", "ts").with_columns(
        pl.col("name").shift(-1).over("vm", "vcpu").alias("_next"), pl.col("ts").shift(-1).over("vm", "vcpu").alias("_next_ts")
    )
    waits = m.filter((pl.col("name") == BARRIER_NAMES[0]) & (pl.col("_next").is_null() | (pl.col("_next") == BARRIER_NAMES[1])))
    return waits.select("vm", "vcpu", pl.col("ts").alias("start"), pl.col("_next_ts").fill_null(end_ns).alias("end"))


def _vcpu_phases(w: Workload, segs: pl.DataFrame, ts: pl.DataFrame, crit: list[int], switch_ns: int, migration_ns: int, first_thread: int = 0, waits: pl.DataFrame | None = None) -> list[int | None]:
    """Append the vCPUs' phases to `w` from their `_vcpu_timelines` (their
    thread indices from `first_thread`); each work phase keeps the CPU it
    ran on. The rule is cratrace-replay's `demand` module, run on the
    vCPUs in one call. Returns each vCPU's start when its timeline began
    blocked or halted (None: it did not)."""
    starts, phases = _native.vcpu_phases(segments=segs, marks=ts, critical_ns=crit, switch_ns=switch_ns, migration_ns=migration_ns, first_thread=first_thread, barriers=waits)
    w.extend_phases(*phases)
    return starts


#: timeline segments the demand is built from at once at most: a capture
#: with more is read a batch of vCPUs at a time (vCPUs taken to share the
#: segments evenly; a bigger vCPU is a batch of its own)
SEGMENTS_PER_BATCH = 1_500_000


def vcpu_batches(vcpus: pl.DataFrame, rows: float, limit: float) -> list[list[tuple[str, int]]]:
    """The (vm, vcpu) pairs of `vcpus` (sorted) in consecutive batches, few
    enough each that a batch's share of `rows` (taken as shared evenly by
    the vCPUs) is at most `limit`; a vCPU bigger than that is a batch of
    its own."""
    per_vcpu = rows / max(vcpus.height, 1)
    batches: list[list[tuple[str, int]]] = [[]]
    for pair in vcpus.select("vm", "vcpu").iter_rows():
        if batches[-1] and (len(batches[-1]) + 1) * per_vcpu > limit:
            batches.append([])
        batches[-1].append(pair)
    return batches


def of_vcpus(lf: pl.LazyFrame, pairs: list[tuple[str, int]]) -> pl.LazyFrame:
    """The rows of `lf` (a model table in vm, vcpu order) of the vCPUs
    `pairs`, in that order: one filter a vCPU, which the Parquet reader
    answers from the row groups whose statistics may hold it."""
    return pl.concat([lf.filter((pl.col("vm") == vm) & (pl.col("vcpu") == vcpu)) for vm, vcpu in pairs])


def extract_workload(cap: Capture, throughput_marker: str = "txn_end", min_host_cpu_frac: float = 0.001, switch_ns: int = 0, migration_ns: int = 0, cpu_speed: str = "off") -> Workload:
    """The replay workload of a modelled capture; `cpu_speed`: "markers"
    reads each CPU's speed over time from the vCPUs' transactions
    (`cratrace.replay.cpu_speed`) and counts work in it, "off" counts
    work as the ns it took."""
    optional = [t for t in ("spin_episodes",) if t in cap.model_paths]
    m = cap.require_model(["threads", "cpu_slices", "vcpu_states", "markers", *optional])
    lo, hi = cap.meta.get("time_range_ns") or [0, 0]
    timelines = m["vcpu_states"]
    threads = m["threads"].collect()
    slices = m["cpu_slices"].collect()
    # the spin episodes' columns the lock waits read, a batch at a time
    episodes = m["spin_episodes"].select("vm", "vcpu", "start", "end") if "spin_episodes" in m else None
    # a Xen domain's vCPUs are no host threads: their timelines (tid null)
    # give their stand-in ids, running time and first CPU
    domains = timelines.filter(pl.col("tid").is_null()).collect()
    # what the demand reads of the markers (their text and fields were a
    # fifth of the extraction's memory), each use's rows read apart
    markers = m["markers"].select("ts", "name", "vm", "vcpu")
    w = Workload(t0=int(lo), duration_ns=int(hi - lo + 1))
    # the host's CPUs: the trace's count, or more if a slice says so (a CPU
    # that stayed idle all along has no slice, and is still there to use)
    w.pcpus = max(int(slices["cpu"].max() + 1) if slices.height else 0, int(cap.meta.get("cpus") or 0), 1)
    freqs = slices["freq_khz"].drop_nulls()
    w.freq_khz = int(freqs.median()) if freqs.len() else NOMINAL_KHZ
    w.freq_known = bool(freqs.len())
    # the names as categories: 20 M markers' strings were 650 MB
    w.critical_ns = _critical_ns(markers.filter(pl.col("name").is_in(["spin_end", throughput_marker])).with_columns(pl.col("name", "vm").cast(pl.Categorical)).collect(), throughput_marker)
    per_tid = slices.group_by("tid").agg(pl.col("dur").sum(), pl.col("cpu").sort_by("start").first())
    cpu_by_tid = dict(zip(per_tid["tid"], per_tid["dur"]))
    first_cpu = dict(zip(per_tid["tid"], per_tid["cpu"]))
    fine = fine_accounting(cap.events.get("sched_stat_runtime"))
    # the host's scheduling groups (threads tables of older models have none)
    group_by_tid = dict(zip(threads["tid"], threads["sched_group"])) if "sched_group" in threads.columns else {}
    allowed_by_tid = {int(t): parse_cpulist(c) for t, c in threads.select("tid", "allowed_cpus").iter_rows() if c}
    power_by_tid = {int(t): float(p) for t, p in threads.select("tid", "power_w").iter_rows() if p is not None}
    recorded_groups = (cap.meta.get("sched_groups") or {}).get("groups") or {}
    for name in sorted({g for g in group_by_tid.values() if g is not None}):
        w.group_names.append(name)
        w.group_shares.append(int((recorded_groups.get(name) or {}).get("shares") or 1024))
    vcpus = threads.filter(pl.col("role") == "vcpu").sort("vm", "vcpu")
    twice = vcpus.filter(pl.len().over("vm", "vcpu") > 1)
    if twice.height:
        # models built before 2026-11-27 merged VMs whose vCPU threads had
        # no creator in the trace into one `vm-unknown`
        vm, vcpu = twice.select("vm", "vcpu").row(0)
        raise CaptureError(f"{cap.path}: the threads table has {twice.height} threads for vCPU {vcpu} of VM {vm!r} (a model built by an older cratrace); run `cratrace model {cap.path}` again")
    xen = domain_vcpus(domains)
    if xen.height:
        # their running time and first CPU come from their states, as the
        # host's threads' come from cpu_slices
        per = domain_runs(domains).sort("start").group_by("tid").agg((pl.col("end") - pl.col("start")).sum().alias("dur"), pl.col("cpu").first())
        cpu_by_tid.update(zip(per["tid"], per["dur"]))
        first_cpu.update((t, c) for t, c in zip(per["tid"], per["cpu"]) if c is not None)
        vcpus = pl.concat([vcpus.select("tid", "vm", "vcpu"), xen.select("tid", "vm", "vcpu")]).sort("vm", "vcpu")
    w.vm_names = sorted(set(vcpus["vm"].to_list()))
    vm_index = {n: i for i, n in enumerate(w.vm_names)}
    w.marker_names = sorted(n for n in markers.select(pl.col("name").unique()).collect(engine="streaming")["name"].to_list() if n is not None)
    tx = markers.filter(pl.col("name") == throughput_marker)
    per_vm = tx.group_by("vm").agg(pl.len(), pl.col("ts").max()).collect(engine="streaming")
    w.recorded_marks = {vm: int(n) for vm, n, _ in per_vm.iter_rows() if vm is not None}
    spun = timelines.filter(pl.col("state") == "spinning").group_by("vm").agg((pl.col("end") - pl.col("start")).sum()).collect(engine="streaming")
    w.recorded_spin_ns = {vm: int(ns) for vm, ns in spun.iter_rows() if vm is not None}
    if cpu_speed == "markers":
        guest = timelines.filter(pl.col("state") == "guest").select("vm", "vcpu", "start", "end", "pcpu").collect()
        w.cpu_speed = speed_profile(guest, tx.collect(), int(lo))
        del guest
    for vm, _, last in per_vm.sort("vm").iter_rows():
        if vm is not None:
            w.recorded_window[vm] = (0, int(last - lo))
    waits = barrier_waits(markers.filter(pl.col("name").is_in(BARRIER_NAMES)).collect(), int(hi))
    # each vCPU's marks by its thread index (a narrow frame, sliced per
    # batch: the marks with their VMs' names were 600 MB held throughout)
    marks = _marks_by_thread(vcpus, tx)
    rows = vcpus.select("vm", "vcpu", "tid").rows()
    # A long capture's timelines are read a batch of vCPUs at a time
    # (every figure below is per vCPU, or a sum of per-thread parts): the
    # extraction holds one batch's segments, not the host's, and reads
    # them once for the demand and the recorded diagnostics.
    batches = vcpu_batches(vcpus.select("vm", "vcpu"), timelines.select(pl.len()).collect().item(), SEGMENTS_PER_BATCH)
    whole = len(batches) == 1
    recorded = diagnostics.parts(timelines)
    if domains.height and not whole:
        # a Xen domain's vCPUs have no thread of their own (tid null): the
        # diagnostics' threads are read a batch of whole VMs at a time
        w.recorded_diagnostics = diagnostics.measure(timelines, vm_batches(vcpus, timelines.select(pl.len()).collect().item(), SEGMENTS_PER_BATCH))
        recorded = None

    starts: list[int | None] = []
    halts, spins = 0, []
    for b, pairs in enumerate(batches):
        part = vcpus.slice(len(starts), len(pairs))
        # the columns the demand and the diagnostics read (durations were
        # a tenth of a batch's memory); read whole, every row is taken as
        # it is (a row without a VM too)
        states = (timelines if whole else of_vcpus(timelines, pairs)).select("vm", "vcpu", "tid", "state", "start", "end", "pcpu").collect()
        if recorded is not None:
            recorded.add(diagnostics.narrow(states) if whole else states)
            if b + 1 == len(batches) or batches[b + 1][0][0] != pairs[-1][0]:
                # the VMs read so far are whole: their stretches go
                recorded.count_wakeups()
        states = mark_lock_waits(in_order(states.drop("tid"), "vm", "vcpu", "start"), None if episodes is None else (episodes if whole else of_vcpus(episodes, pairs)).collect())
        n, spun_ns = _pv_halts(states)
        halts, spins = halts + n, spins + [spun_ns]
        segs = _vcpu_timelines(part, states)
        first = len(starts)
        ts = marks.filter(pl.col("_t").is_between(first, first + len(pairs) - 1)).with_columns(pl.col("_t") - first)
        order = part.select("vm", pl.col("vcpu").cast(pl.Int32)).with_row_index("_t")
        wt = waits.join(order, on=["vm", "vcpu"]).select("_t", "start", "end").sort("_t", "start") if waits.height else None
        if w.cpu_speed:
            segs = speed_column(segs, w.cpu_speed, int(lo), "pcpu")
        # the recorded timelines are not read again: dropped before the
        # phases are built (polars may keep the freed memory for itself)
        del states
        crit = [w.critical_ns.get(vm, 0) for vm in part["vm"].to_list()]
        starts += _vcpu_phases(w, segs, ts, crit, switch_ns, migration_ns, first_thread=len(starts), waits=wt)
        del segs, ts, wt
    if recorded is not None:
        w.recorded_diagnostics = recorded.figures()
    w.pv_halts, w.pv_spin_ns = _pv_summary(halts, pl.concat(spins))
    # each VM's window opens at its first vCPU's start (0, the capture's
    # start, is a start like any other, not "unset")
    opened: dict[str, int] = {}
    for (vm, vcpu, tid), first in zip(rows, starts):
        start = lo if first is None else first
        w.add_thread(int(tid), vm_index[vm], int(vcpu), int(start - lo), int(cpu_by_tid.get(tid, 0)), int(first_cpu.get(tid, -1)), tid in fine, group_by_tid.get(tid), allowed_by_tid.get(int(tid)), power_by_tid.get(int(tid)))
        opened[vm] = min(opened.get(vm, int(start - lo)), int(start - lo))
    for vm, (_, last) in w.recorded_window.items():
        w.recorded_window[vm] = (opened.get(vm, 0), last)
    # host threads that used a noticeable share of the CPU
    total = max(sum(cpu_by_tid.values()), 1)
    vcpu_tids = set(vcpus["tid"].to_list())
    ran = set(per_tid["tid"].to_list())
    host = sorted(tid for tid, ns in cpu_by_tid.items() if tid != 0 and tid not in vcpu_tids and tid in ran and ns >= min_host_cpu_frac * total)
    if host:
        order = pl.DataFrame({"tid": host}, schema={"tid": slices.schema["tid"]}).with_row_index("_t")
        hs = slices.join(order, on="tid").sort("_t", "start", maintain_order=True).select("_t", "start", "end", pl.col("cpu").cast(pl.Int64))
        if w.cpu_speed:
            hs = speed_column(hs, w.cpu_speed, int(lo), "cpu")
        firsts = hs.group_by("_t").agg(pl.col("start").first()).sort("_t")["start"].to_list()
        base = len(w.tids)
        for tid, first in zip(host, firsts):
            w.add_thread(int(tid), -1, -1, int(first - lo), int(cpu_by_tid[tid]), int(first_cpu.get(tid, -1)), tid in fine, group_by_tid.get(tid), allowed_by_tid.get(int(tid)), power_by_tid.get(int(tid)))
        w.extend_phases(*_native.host_phases(slices=hs, threads=len(host), switch_ns=switch_ns, migration_ns=migration_ns, first_thread=base))
    return w
