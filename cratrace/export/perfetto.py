"""A capture and its replays as one Perfetto trace (``.pftrace``).

Perfetto's UI (ui.perfetto.dev, or a local build of it) opens the file as a
timeline. Each run, the recorded one and each replayed policy, is a
process group of its own, so they line up one above the other on one time
axis (replays run on the capture's clock):

``recorded`` / ``replay: <policy>``
    ``CPU n``           what ran (model table ``cpu_slices``; idle left out),
                        a slice per stretch named by the thread's comm
    ``VM <vm>``         a group per VM:
        ``vCPU n``      its states (``vcpu_states``: guest, vmm,
                        preempted, spinning, halted, blocked, lost)
        ``markers``     its ``markers`` as instant events
        ``throughput``  its transactions (markers named ``txn_end`` by
                        default) per 100 ms bin
    ``markers``, ``throughput``  the host's (markers of no VM; all VMs)
    ``CPU n freq (kHz)``, ``CPU n idle state``, ``power <domain> (W)``,
    ``<counter>``       the ``power`` table as counters (energy samples as
                        their mean power over each interval)
    ``temp <zone> (°C)`` ``thermal_temperature`` events, when recorded

The file is written with the `perfetto` package's protos and its
`TraceProtoBuilder`, a batch of packets at a time (each batch one
serialised ``Trace``; concatenated, they are one): memory holds a batch of
packets and a batch of table rows, whatever the length of the capture.
Slice and marker names are interned (``InternedData.event_names``) on one
packet sequence, so a name costs its bytes once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Iterator

from cratrace.errors import CaptureError, OutputExistsError, UsageError

#: packets per serialised batch
BATCH_PACKETS = 8192
#: table rows read per batch
BATCH_ROWS = 16384
#: the one packet sequence every packet is written on
SEQUENCE = 1

#: the order of a run's tracks (TrackDescriptor.sibling_order_rank)
RANK_CPU, RANK_VM, RANK_HOST, RANK_COUNTER = 0, 100_000, 200_000, 300_000


def _protos() -> Any:
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2
    except ImportError:
        raise UsageError("export perfetto needs the `perfetto` package: pip install perfetto (or cratrace's `test` extra)") from None
    return perfetto_trace_pb2


@dataclass
class RunCounts:
    """What one run contributed to the trace."""

    name: str
    cpu_slices: int = 0
    vcpu_states: int = 0
    markers: int = 0
    counter_values: int = 0
    tracks: int = 0


@dataclass
class ExportSummary:
    path: str
    bytes: int = 0
    packets: int = 0
    runs: list[RunCounts] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"path": self.path, "bytes": self.bytes, "packets": self.packets, "runs": [vars(r) for r in self.runs]}


class PacketWriter:
    """Writes TracePackets in batches on one sequence, interning names."""

    def __init__(self, fh: IO[bytes]):
        from perfetto.trace_builder.proto_builder import TraceProtoBuilder

        self.pb = _protos()
        self._builder_type = TraceProtoBuilder
        self.builder = TraceProtoBuilder()
        # the builder's packet list, added to directly on the hot paths
        self._add = self.builder.trace.packet.add
        self.fh = fh
        self.pending = 0
        self.packets = 0
        self.bytes = 0
        self.names: dict[str, int] = {}
        self.annotations: dict[str, int] = {}
        self._first = True
        self._uuid = 0
        TE = self.pb.TrackEvent
        self.BEGIN, self.END, self.INSTANT, self.COUNTER = TE.TYPE_SLICE_BEGIN, TE.TYPE_SLICE_END, TE.TYPE_INSTANT, TE.TYPE_COUNTER
        flags = self.pb.TracePacket
        self._cleared = flags.SEQ_INCREMENTAL_STATE_CLEARED
        self._needs = flags.SEQ_NEEDS_INCREMENTAL_STATE

    def packet(self, flags: int | None = None) -> Any:
        """A new packet on the sequence; `flags` its sequence flags (the
        first packet's clear the incremental state)."""
        if self.pending >= BATCH_PACKETS:
            self.flush()
        p = self.builder.add_packet()
        p.trusted_packet_sequence_id = SEQUENCE
        if self._first:
            p.sequence_flags = self._cleared
            self._first = False
        elif flags is not None:
            p.sequence_flags = flags
        self.pending += 1
        self.packets += 1
        return p

    def flush(self) -> None:
        if self.pending:
            data = self.builder.serialize()
            self.fh.write(data)
            self.bytes += len(data)
            self.builder = self._builder_type()
            self._add = self.builder.trace.packet.add
            self.pending = 0

    def uuid(self) -> int:
        self._uuid += 1
        return self._uuid

    def name_iid(self, p: Any, name: str) -> int:
        """`name`'s interned id, adding it to packet `p` when new."""
        iid = self.names.get(name)
        if iid is None:
            iid = self.names[name] = len(self.names) + 1
            p.interned_data.event_names.add(iid=iid, name=name)
        return iid

    def annotation_iid(self, p: Any, name: str) -> int:
        iid = self.annotations.get(name)
        if iid is None:
            iid = self.annotations[name] = len(self.annotations) + 1
            p.interned_data.debug_annotation_names.add(iid=iid, name=name)
        return iid

    # --- tracks -----------------------------------------------------------
    def process_track(self, pid: int, name: str) -> int:
        uuid = self.uuid()
        p = self.packet()
        d = p.track_descriptor
        d.uuid = uuid
        d.process.pid = pid
        d.process.process_name = name
        d.child_ordering = self.pb.TrackDescriptor.EXPLICIT
        return uuid

    def track(self, parent: int, name: str, rank: int, *, counter_unit: str | None = None, ordered: bool = False) -> int:
        uuid = self.uuid()
        p = self.packet()
        d = p.track_descriptor
        d.uuid = uuid
        d.parent_uuid = parent
        d.name = name
        d.sibling_order_rank = rank
        if ordered:
            d.child_ordering = self.pb.TrackDescriptor.EXPLICIT
        if counter_unit is not None:
            d.counter.unit_name = counter_unit
        return uuid

    # --- events -----------------------------------------------------------
    # The hot paths: a capture's timelines are millions of slices, so these
    # set fields directly (about 2 µs a packet) and take at most one or two
    # annotations as arguments rather than a dict.

    def slice(self, track: int, start: int, end: int, name: str, arg: str | None = None, value: Any = None) -> None:
        """A slice from BEGIN to END packets, with `arg` = `value` when given."""
        # (never the sequence's first packet: a run's track comes before its slices)
        if self.pending >= BATCH_PACKETS:
            self.flush()
        p = self._add()
        p.timestamp = start
        p.trusted_packet_sequence_id = SEQUENCE
        p.sequence_flags = self._needs
        e = p.track_event
        e.type = self.BEGIN
        e.track_uuid = track
        iid = self.names.get(name)
        e.name_iid = iid if iid is not None else self.name_iid(p, name)
        if value is not None:
            self._arg(p, e, arg, value)  # type: ignore[arg-type]
        # the end uses no interned state
        q = self._add()
        q.timestamp = end
        q.trusted_packet_sequence_id = SEQUENCE
        f = q.track_event
        f.type = self.END
        f.track_uuid = track
        self.pending += 2
        self.packets += 2

    def instant(self, track: int, ts: int, name: str, args: tuple[tuple[str, Any], ...] = ()) -> None:
        p = self.packet(self._needs)
        p.timestamp = ts
        e = p.track_event
        e.type = self.INSTANT
        e.track_uuid = track
        iid = self.names.get(name)
        e.name_iid = iid if iid is not None else self.name_iid(p, name)
        for arg, value in args:
            if value is not None:
                self._arg(p, e, arg, value)

    def counter(self, track: int, ts: int, value: float | int) -> None:
        p = self.packet()
        p.timestamp = ts
        e = p.track_event
        e.type = self.COUNTER
        e.track_uuid = track
        if isinstance(value, int):
            e.counter_value = value
        else:
            e.double_counter_value = value

    def _arg(self, p: Any, e: Any, name: str, v: Any) -> None:
        a = e.debug_annotations.add()
        iid = self.annotations.get(name)
        a.name_iid = iid if iid is not None else self.annotation_iid(p, name)
        if isinstance(v, bool):
            a.bool_value = v
        elif isinstance(v, int):
            a.int_value = v
        elif isinstance(v, float):
            a.double_value = v
        else:
            a.string_value = str(v)


@dataclass
class RunTables:
    """A run's tables as Parquet paths (name → path), and how to label it."""

    label: str
    tables: dict[str, Path]
    events: dict[str, Path] = field(default_factory=dict)


def _batches(path: Path | None, columns: list[str]) -> Iterator[dict[str, list]]:
    """The table's rows a batch at a time, as lists per column (columns it
    lacks are all None)."""
    if path is None:
        return
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    have = [c for c in columns if c in pf.schema_arrow.names]
    for b in pf.iter_batches(batch_size=BATCH_ROWS, columns=have):
        cols = b.to_pydict()
        for c in columns:
            if c not in cols:
                cols[c] = [None] * b.num_rows
        yield cols


def _thread_names(threads: Path | None) -> dict[int, str]:
    out: dict[int, str] = {}
    for cols in _batches(threads, ["tid", "comm", "vm", "vcpu"]):
        for tid, comm, vm, vcpu in zip(cols["tid"], cols["comm"], cols["vm"], cols["vcpu"]):
            out[tid] = comm or (f"{vm} vCPU {vcpu}" if vm is not None else f"tid {tid}")
    return out


class _RunExporter:
    """Writes one run's tracks and events."""

    def __init__(self, w: PacketWriter, run: RunTables, pid: int, marker: str, bin_ns: int, names: dict[int, str]):
        self.w, self.run, self.marker, self.bin_ns = w, run, marker, bin_ns
        self.counts = RunCounts(run.label)
        self.root = w.process_track(pid, run.label)
        self.names = names
        self.vm_tracks: dict[str, int] = {}
        self.tracks: dict[tuple, int] = {}

    def _track(self, key: tuple, parent: int, name: str, rank: int, **kw: Any) -> int:
        uuid = self.tracks.get(key)
        if uuid is None:
            uuid = self.tracks[key] = self.w.track(parent, name, rank, **kw)
            self.counts.tracks += 1
        return uuid

    def vm(self, vm: str) -> int:
        if vm not in self.vm_tracks:
            rank = RANK_VM + len(self.vm_tracks) * 1000
            self.vm_tracks[vm] = self._track(("vm", vm), self.root, f"VM {vm}", rank, ordered=True)
        return self.vm_tracks[vm]

    def export(self) -> RunCounts:
        self.cpu_slices()
        self.vcpu_states()
        self.markers()
        self.throughput()
        self.power()
        self.temperature()
        return self.counts

    def cpu_slices(self) -> None:
        w = self.w
        for cols in _batches(self.run.tables.get("cpu_slices"), ["cpu", "tid", "start", "end"]):
            for cpu, tid, start, end in zip(cols["cpu"], cols["tid"], cols["start"], cols["end"]):
                if tid == 0 or end <= start:
                    continue
                track = self.tracks.get(("cpu", cpu)) or self._track(("cpu", cpu), self.root, f"CPU {cpu}", RANK_CPU + cpu)
                w.slice(track, start, end, self.names.get(tid) or f"tid {tid}", "tid", tid)
                self.counts.cpu_slices += 1

    def vcpu_states(self) -> None:
        w = self.w
        for cols in _batches(self.run.tables.get("vcpu_states"), ["vm", "vcpu", "state", "start", "end", "pcpu"]):
            for vm, vcpu, state, start, end, pcpu in zip(cols["vm"], cols["vcpu"], cols["state"], cols["start"], cols["end"], cols["pcpu"]):
                if end <= start:
                    continue
                key = ("vcpu", vm, vcpu)
                track = self.tracks.get(key) or self._track(key, self.vm(vm), f"vCPU {vcpu}", vcpu)
                w.slice(track, start, end, state, "pcpu", pcpu)
                self.counts.vcpu_states += 1

    def markers(self) -> None:
        w = self.w
        for cols in _batches(self.run.tables.get("markers"), ["ts", "vm", "vcpu", "name", "text"]):
            for ts, vm, vcpu, name, text in zip(cols["ts"], cols["vm"], cols["vcpu"], cols["name"], cols["text"]):
                if vm is None:
                    track = self._track(("markers",), self.root, "markers", RANK_HOST)
                else:
                    track = self.tracks.get(("markers", vm)) or self._track(("markers", vm), self.vm(vm), "markers", 900)
                w.instant(track, ts, name, (("vcpu", vcpu), ("text", text)))
                self.counts.markers += 1

    def throughput(self) -> None:
        """Transactions per bin, per VM and for the host: a counter value
        at each bin's start, zero bins included."""
        path = self.run.tables.get("markers")
        if path is None:
            return
        import polars as pl

        per = (
            pl.scan_parquet(path)
            .filter(pl.col("name") == self.marker)
            .select((pl.col("ts") // self.bin_ns * self.bin_ns).alias("bin"), pl.col("vm"))
            .group_by("bin", "vm")
            .len()
            .collect()
            .sort("vm", "bin", nulls_last=True)
        )
        if per.height == 0:
            return
        first, last = int(per["bin"].min()), int(per["bin"].max())
        unit = f"{self.marker}/{self.bin_ns / 1e6:g} ms"
        host: dict[int, int] = {}
        by_vm: dict[Any, dict[int, int]] = {}
        for b, vm, n in per.iter_rows():
            by_vm.setdefault(vm, {})[b] = n
            host[b] = host.get(b, 0) + n
        for vm, bins in by_vm.items():
            if vm is None:
                continue
            track = self._track(("throughput", vm), self.vm(vm), "throughput", 901, counter_unit=unit)
            self._bins(track, bins, first, last)
        track = self._track(("throughput",), self.root, "throughput", RANK_HOST + 1, counter_unit=unit)
        self._bins(track, host, first, last)

    def _bins(self, track: int, bins: dict[int, int], first: int, last: int) -> None:
        for b in range(first, last + self.bin_ns, self.bin_ns):
            self.w.counter(track, b, int(bins.get(b, 0)))
            self.counts.counter_values += 1

    def power(self) -> None:
        """Frequency and idle segments per CPU, energy as mean power per
        interval, other counters as their values per interval."""
        w = self.w
        # an idle segment's end, written as -1 (not idle) unless the next
        # segment of that CPU starts right there
        idle_until: dict[tuple, tuple[int, int]] = {}
        for cols in _batches(self.run.tables.get("power"), ["cpu", "kind", "name", "start", "end", "value", "unit"]):
            for cpu, kind, name, start, end, value, unit in zip(cols["cpu"], cols["kind"], cols["name"], cols["start"], cols["end"], cols["value"], cols["unit"]):
                where = f"CPU {cpu}" if cpu is not None else "package"
                rank = RANK_COUNTER + (cpu if cpu is not None else 9999)
                if kind == "freq":
                    key: tuple = ("freq", cpu)
                    track = self.tracks.get(key) or self._track(key, self.root, f"{where} freq (kHz)", rank, counter_unit="kHz")
                    w.counter(track, start, int(value))
                elif kind == "idle":
                    key = ("idle", cpu)
                    track = self.tracks.get(key) or self._track(key, self.root, f"{where} idle state", rank + 10_000)
                    pending = idle_until.pop(key, None)
                    if pending is not None and pending[1] != start:
                        w.counter(track, pending[1], -1)
                        self.counts.counter_values += 1
                    w.counter(track, start, int(value))
                    idle_until[key] = (track, end)
                elif kind == "energy":
                    key = ("energy", cpu, name)
                    track = self.tracks.get(key) or self._track(key, self.root, f"power {name or 'energy'} {where} (W)", rank + 20_000, counter_unit="W")
                    w.counter(track, start, float(value) / max(end - start, 1) * 1e9)
                else:
                    key = ("counter", cpu, name)
                    track = self.tracks.get(key) or self._track(key, self.root, f"{name} {where}", rank + 30_000, counter_unit=unit or None)
                    w.counter(track, start, float(value))
                self.counts.counter_values += 1
        for track, end in idle_until.values():
            w.counter(track, end, -1)
            self.counts.counter_values += 1

    def temperature(self) -> None:
        path = self.run.events.get("thermal_temperature")
        if path is None:
            return
        for cols in _batches(path, ["ts", "thermal_zone", "id", "temp"]):
            for ts, zone, zid, temp in zip(cols["ts"], cols["thermal_zone"], cols["id"], cols["temp"]):
                if temp is None:
                    continue
                label = zone if zone is not None else f"zone {zid}"
                key = ("temp", label)
                track = self.tracks.get(key) or self._track(key, self.root, f"temp {label} (°C)", RANK_COUNTER + 50_000 + len(self.tracks), counter_unit="°C")
                # the kernel reports millidegrees Celsius
                self.w.counter(track, ts, temp / 1000.0)
                self.counts.counter_values += 1


def runs_of(capture: Path, replays: Path | None) -> list[RunTables]:
    """The recorded run and each replay's (OUT/<policy>/model/), as
    `cratrace report` finds them (`cratrace.report.runs`)."""
    from cratrace.capture import Capture

    cap = Capture(capture)
    need = ("cpu_slices", "vcpu_states")
    missing = [n for n in need if n not in cap.model_paths]
    if missing:
        raise CaptureError(f"{capture}: model tables missing ({', '.join(missing)}); run `cratrace model {capture}` first")
    runs = [RunTables("recorded", dict(cap.model_paths), dict(cap.event_paths))]
    if replays is not None:
        replays = Path(replays)
        if not replays.is_dir():
            raise UsageError(f"--replays {replays}: not a directory (give the -o OUT of `cratrace replay`)")
        dirs = sorted(p for p in replays.iterdir() if (p / "model").is_dir() and (p / "metrics.json").is_file())
        if not dirs:
            raise UsageError(f"--replays {replays}: holds no replay (no OUT/<policy>/model/); give the -o OUT of `cratrace replay`")
        for d in dirs:
            runs.append(RunTables(f"replay: {d.name}", {p.stem: p for p in sorted((d / "model").glob("*.parquet"))}))
    return runs


def export_perfetto(
    capture: str | Path,
    out: str | Path,
    *,
    replays: str | Path | None = None,
    marker: str = "txn_end",
    bin_ms: float = 100.0,
    force: bool = False,
    progress: Callable[[str], None] | None = None,
) -> ExportSummary:
    """Write `capture` (and each replay under `replays`) to the Perfetto
    trace `out`; see the module's doc for the tracks."""
    from cratrace import atomic

    if not (math.isfinite(bin_ms) and bin_ms > 0):
        raise UsageError(f"--bin-ms {bin_ms}: expected a bin width in ms > 0")
    _protos()
    out = Path(out)
    if out.exists() and not force:
        raise OutputExistsError(f"{out}: already exists; pass --force to replace it")
    runs = runs_of(Path(capture), Path(replays) if replays is not None else None)
    summary = ExportSummary(str(out))
    recorded_names = _thread_names(runs[0].tables.get("threads"))

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            w = PacketWriter(fh)
            for k, run in enumerate(runs):
                if progress:
                    progress(run.label)
                names = recorded_names if k == 0 else {**recorded_names, **_thread_names(run.tables.get("threads"))}
                summary.runs.append(_RunExporter(w, run, k + 1, marker, int(bin_ms * 1e6), names).export())
            w.flush()
            summary.packets, summary.bytes = w.packets, w.bytes

    # a reader sees the old file or the whole new one
    atomic.write_with(out, write)
    return summary
