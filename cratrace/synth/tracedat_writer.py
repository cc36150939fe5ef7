"""A trace.dat writer: turns a list of events into a file `trace-cmd report` reads.

It owns the byte layout of trace-cmd's file format, versions 6 and 7
(``Documentation/trace-cmd/trace-cmd.dat.v6/v7.5.txt`` in trace-cmd), so the
scenario generator (issue #8) and the reader's tests (issue #2) can produce
every variant the reader must handle without a kernel: v6 or v7; v7 sections
uncompressed or compressed with zlib or zstd; 32- or 64-bit kernels (the
``commit`` field of header_page and every ``long``/pointer field shrink to 4
bytes); little- or big-endian; any page size; several buffer instances;
saved cmdlines; printk formats for ``bprint``; options (uname, trace clock,
CPU count, TSC2NSEC, OFFSET).

Ring-buffer pages are built like the kernel builds them: a page header
(u64 timestamp, long commit), 4-byte record headers (type_len:5,
time_delta:27; bit order follows the endianness), data records with
type_len 1..28 or 0 plus a length word for payloads above 112 bytes,
time-extend records when a delta does not fit in 27 bits, optional padding
at the page tail, optional lost-event flags (``RB_MISSED_EVENTS``, with the
count stored after the data: ``RB_MISSED_STORED``).

API (one call)::

    from cratrace.synth.tracedat_writer import write_tracedat, Event
    write_tracedat("t.dat", [
        Event(ts=1_000, cpu=0, name="sched_switch", pid=0, fields=dict(
            prev_comm="swapper/0", prev_pid=0, prev_prio=120, prev_state=0,
            next_comm="CPU 0/KVM", next_pid=1201, next_prio=120)),
        Event(ts=2_000, cpu=0, name="print", pid=1201, fields={"buf": "txn_end vm=a vcpu=0\\n"}),
        Event(ts=3_000, cpu=1, name="bprint", pid=7, fields={"fmt": "lock %d held %s\\n", "args": [3, "x"]}),
    ], version=7, compression="zstd", long_size=8, endian="little",
       page_size=4096, cpus=2, comms={1201: "CPU 0/KVM"})

Events are plain :class:`Event` objects (or dicts with the same keys).
``name`` is an event name from the bundled formats
(:func:`cratrace.synth.event_formats.bundled_formats`) or ``system:name``;
extra formats can be passed as text with ``formats=``. Field values: ints
for integer fields (masked to the field's width, two's complement for
signed), ``str``/``bytes`` for ``char[N]`` and ``__data_loc char[]``, lists
of ints for other arrays. Missing fields are zero. ``instance`` names a buffer
instance ("" = top level); ``flags``/``preempt`` fill common_flags and
common_preempt_count. For ``bprint``, ``fields["fmt"]`` is the printk format
and ``fields["args"]`` its arguments; the writer assigns the format an
address and stores it in the printk section.

Determinism: the same arguments give byte-identical files (no clocks, no
randomness; zlib and zstd at fixed levels).
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import sys
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Iterator, Literal, Mapping, Sequence

from cratrace import atomic
from cratrace.synth.event_formats import (
    EventFormat,
    bundled_formats,
    header_event,
    header_page,
    parse_format,
    relayout,
)

Compression = Literal["none", "zlib", "zstd"]
Endian = Literal["little", "big"]

MAGIC = b"\x17\x08\x44tracing"

# trace-cmd option ids (shared by v6 and v7)
OPT_DONE, OPT_DATE, OPT_CPUSTAT, OPT_BUFFER, OPT_TRACECLOCK, OPT_UNAME = 0, 1, 2, 3, 4, 5
OPT_OFFSET, OPT_CPUCOUNT, OPT_VERSION, OPT_TSC2NSEC = 7, 8, 9, 14
OPT_STRINGS, OPT_HEADER_INFO, OPT_FTRACE_EVENTS, OPT_EVENT_FORMATS = 15, 16, 17, 18
OPT_KALLSYMS, OPT_PRINTK, OPT_CMDLINES = 19, 20, 21

SEC_FL_COMPRESS = 1

# ring buffer record types
RB_PADDING, RB_TIME_EXTEND, RB_TIME_STAMP = 29, 30, 31
RB_MAX_SMALL_DATA = 28 * 4
TS_BITS = 27
MISSED_EVENTS, MISSED_STORED = 1 << 31, 1 << 30

BPRINT_FMT_BASE = 0xFFFFFFFF82000000  # where our fake printk formats "live"


@dataclass
class Event:
    ts: int  # ns on the trace clock
    cpu: int
    name: str
    pid: int = 0
    fields: Mapping[str, Any] = field(default_factory=dict)
    instance: str = ""
    flags: int = 0
    preempt: int = 0


class WriterError(ValueError):
    """Bad writer input (unknown event, bad option); names what and where."""


@dataclass
class _Ctx:
    endian: str  # "<" or ">"
    long_size: int
    formats: dict[str, EventFormat]  # by name and system:name
    printk: dict[str, int]  # fmt -> address


def _as_event(e: Event | Mapping[str, Any]) -> Event:
    if isinstance(e, Event):
        return e
    return Event(**e)


# ---------------------------------------------------------------- payloads


def _int_bytes(ctx: _Ctx, value: int, size: int, signed: bool) -> bytes:
    value = int(value)
    mask = (1 << (8 * size)) - 1
    value &= mask
    return value.to_bytes(size, "little" if ctx.endian == "<" else "big")


def _str_bytes(v: Any) -> bytes:
    if isinstance(v, bytes):
        return v
    return str(v).encode()


def _bprint_args(ctx: _Ctx, fmt: str, args: Sequence[Any]) -> bytes:
    """Encode args the way the kernel's vbin_printf packs them (u32 words)."""
    out = bytearray()
    specs = re.findall(r"%[-+ #0]*\d*(?:\.\d+)?(hh|h|ll|l|z)?([diouxXcsp%])", fmt)
    it = iter(args)
    for length, conv in specs:
        if conv == "%":
            continue
        v = next(it)
        if conv == "s":
            out += _str_bytes(v) + b"\0"
            while len(out) % 4:
                out += b"\0"
            continue
        size = 8 if length == "ll" or (length in ("l", "z") or conv == "p") and ctx.long_size == 8 else 4
        # the kernel (vbin_printf) aligns every argument, 8-byte ones too, to 4
        out += _int_bytes(ctx, v, size, True)
    return bytes(out)


def _encode_payload(ctx: _Ctx, fmt: EventFormat, ev: Event) -> bytes:
    buf = bytearray(fmt.static_size)
    dyn = bytearray()
    values = dict(ev.fields)
    if fmt.name == "bprint":
        fstr = values.pop("fmt")
        base = BPRINT_FMT_BASE & ((1 << (8 * ctx.long_size)) - 1)  # a 32-bit kernel address
        addr = ctx.printk.setdefault(fstr, base + 0x40 * len(ctx.printk))
        values["fmt"] = addr
        values["buf"] = _bprint_args(ctx, fstr, values.pop("args", ()))
    values.update(common_type=fmt.id, common_flags=ev.flags, common_preempt_count=ev.preempt, common_pid=ev.pid)
    for f in fmt.fields:
        v = values.get(f.name, 0)
        if f.data_loc or f.rel_loc:
            data = _str_bytes(v) + (b"\0" if not isinstance(v, bytes) else b"")
            off = fmt.static_size + len(dyn)
            if f.rel_loc:
                off -= f.offset + f.size
            buf[f.offset : f.offset + 4] = _int_bytes(ctx, (len(data) << 16) | off, 4, False)
            dyn += data
        elif f.array_len == 0:  # flexible trailing array: print's buf[], bprint's buf[]
            data = _str_bytes(v) + (b"\0" if isinstance(v, str) else b"")
            dyn += data
        elif f.array_len is not None:
            if "char" in f.type:
                raw = _str_bytes(v)[: f.size - 1] if v else b""
                buf[f.offset : f.offset + len(raw)] = raw
            else:
                es = f.elem_size
                for i, x in enumerate(list(v or [])[: f.array_len]):
                    buf[f.offset + i * es : f.offset + (i + 1) * es] = _int_bytes(ctx, x, es, f.signed)
        else:
            if isinstance(v, bool):
                v = int(v)
            buf[f.offset : f.offset + f.size] = _int_bytes(ctx, v, f.size, f.signed)
    out = bytes(buf) + bytes(dyn)
    if len(out) % 4:
        out += b"\0" * (4 - len(out) % 4)
    return out


# ------------------------------------------------------------ ring buffer


def _rec_header(ctx: _Ctx, type_len: int, delta: int) -> bytes:
    if ctx.endian == "<":
        word = (delta << 5) | type_len
    else:
        word = (type_len << TS_BITS) | delta
    return struct.pack(ctx.endian + "I", word)


def _data_record(ctx: _Ctx, delta: int, payload: bytes) -> bytes:
    if len(payload) <= RB_MAX_SMALL_DATA:
        return _rec_header(ctx, len(payload) // 4, delta) + payload
    return _rec_header(ctx, 0, delta) + struct.pack(ctx.endian + "I", len(payload) + 4) + payload


def _build_pages(
    ctx: _Ctx,
    records: list[tuple[int, bytes]],
    page_size: int,
    tail_padding: bool,
    lost: Mapping[int, int],
    abs_every: int = 0,
) -> bytes:
    """Pack (ts, payload) records, ts-sorted, into ring-buffer pages.

    The writer packs pages in Rust now (``readers/src/tracedat/writer.rs``);
    this first implementation is kept as the reference its tests compare
    against (tests/synth/test_synth_streaming.py).

    ``lost`` maps a page index to a number of events lost before that page.
    """
    hdr = 8 + ctx.long_size
    cap = page_size - hdr
    pages: list[bytes] = []
    i = 0
    n = len(records)
    while i < n:
        pidx = len(pages)
        lost_here = lost.get(pidx, 0)
        room = cap - (ctx.long_size if lost_here else 0)
        page_ts = records[i][0]
        last = page_ts
        body = bytearray()
        while i < n:
            ts, payload = records[i]
            delta = ts - last
            if delta < 0:
                raise WriterError(f"events on one CPU must be sorted by ts (ts {ts} after {last})")
            rec = b""
            if abs_every and (i % abs_every) == 0 and ts != page_ts:
                # absolute time stamp record (type 31): ts split like a time extend
                rec += _rec_header(ctx, RB_TIME_STAMP, ts & ((1 << TS_BITS) - 1))
                rec += struct.pack(ctx.endian + "I", (ts >> TS_BITS) & 0xFFFFFFFF)
                delta = 0
            elif delta >= 1 << TS_BITS:
                rec += _rec_header(ctx, RB_TIME_EXTEND, delta & ((1 << TS_BITS) - 1))
                rec += struct.pack(ctx.endian + "I", delta >> TS_BITS)
                delta = 0
            rec += _data_record(ctx, delta, payload)
            if len(rec) > cap:
                raise WriterError(f"event of {len(payload)} bytes does not fit in a {page_size}-byte page")
            if len(body) + len(rec) > room:
                break
            body += rec
            last = ts
            i += 1
        commit = len(body)
        left = room - commit
        if tail_padding and i < n and left >= 4:
            # the kernel pads the tail when the next event does not fit; a
            # padding record with delta 0 means "rest of page is empty"
            if left >= 8:
                body += _rec_header(ctx, RB_PADDING, 0) + struct.pack(ctx.endian + "I", left - 4)
                body += b"\0" * (left - 8)
            else:
                body += _rec_header(ctx, RB_PADDING, 0)
            commit = len(body)
        flags = 0
        extra = b""
        if lost_here:
            flags = MISSED_EVENTS | MISSED_STORED
            extra = _int_bytes(ctx, lost_here, ctx.long_size, False)
        page = struct.pack(ctx.endian + "Q", page_ts) + _int_bytes(ctx, commit | flags, ctx.long_size, False)
        page += bytes(body) + extra
        page += b"\0" * (page_size - len(page))
        pages.append(page)
    return b"".join(pages)


# ------------------------------------------------------------ compression


def _compress(algo: str, data: bytes) -> bytes:
    if algo == "zlib":
        return zlib.compress(data, 6)
    if algo == "zstd":
        import zstandard

        return zstandard.ZstdCompressor(level=3, write_content_size=True, write_checksum=False).compress(data)
    raise WriterError(f"unknown compression {algo!r}")


def _compressed(algo: str, chunks: Iterable[bytes]) -> Iterator[tuple[bytes, bytes]]:
    """(chunk, compressed chunk) for each chunk, as :func:`_compress`
    gives them, compressed two at a time on threads (zlib and zstd
    release the GIL) while the file is written."""
    from concurrent.futures import ThreadPoolExecutor

    if algo == "zstd":
        import zstandard

        def one(data: bytes) -> bytes:
            # a compressor per call: one is not safe on two threads
            return zstandard.ZstdCompressor(level=3, write_content_size=True, write_checksum=False).compress(data)
    else:
        def one(data: bytes) -> bytes:
            return _compress(algo, data)

    with ThreadPoolExecutor(2, thread_name_prefix="cratrace-synth-compress") as pool:
        ahead: list = []
        for ch in chunks:
            ahead.append((ch, pool.submit(one, ch)))
            if len(ahead) > 4:
                ch0, fut = ahead.pop(0)
                yield ch0, fut.result()
        for ch0, fut in ahead:
            yield ch0, fut.result()


def _compression_header(algo: str) -> bytes:
    if algo == "none":
        return b"none\0\0"
    if algo == "zlib":
        return b"zlib\0" + zlib.ZLIB_VERSION.encode() + b"\0"
    import zstandard

    return b"zstd\0" + ".".join(map(str, zstandard.ZSTD_VERSION)).encode() + b"\0"


# ------------------------------------------------------------ the file


class _Out:
    """The file being assembled: written as it goes, its position tracked
    for the offsets the format stores, earlier bytes patched in place."""

    def __init__(self, f: BinaryIO, e: str):
        self.f = f
        self.e = e
        self.pos = 0

    def u16(self, v: int) -> None:
        self.raw(struct.pack(self.e + "H", v))

    def u32(self, v: int) -> None:
        self.raw(struct.pack(self.e + "I", v))

    def u64(self, v: int) -> None:
        self.raw(struct.pack(self.e + "Q", v))

    def raw(self, v: bytes) -> None:
        self.f.write(v)
        self.pos += len(v)

    def cstr(self, s: str) -> None:
        self.raw(s.encode() + b"\0")

    def align(self, n: int) -> None:
        self.raw(b"\0" * (-self.pos % n))

    def patch(self, at: int, v: bytes) -> None:
        self.f.seek(at)
        self.f.write(v)
        self.f.seek(self.pos)

    def patch64(self, at: int, v: int) -> None:
        self.patch(at, struct.pack(self.e + "Q", v))

    def copy(self, pages: "_Pages") -> None:
        """A CPU's spooled pages, as they are."""
        if not pages:
            return
        with open(pages.path, "rb") as src:  # type: ignore[arg-type]
            left = pages.size
            while left:
                block = src.read(min(left, 1 << 20))
                if not block:
                    raise WriterError(f"spooled pages {pages.path} end {left} bytes early")
                self.raw(block)
                left -= len(block)

    def __len__(self) -> int:
        return self.pos


@dataclass(frozen=True)
class _Pages:
    """One CPU's ring-buffer pages, spooled to a file (size 0: none)."""

    path: Path | None
    size: int

    def __bool__(self) -> bool:
        return self.size > 0

    def chunks(self, size: int) -> Iterator[bytes]:
        if not self.size:
            return
        with open(self.path, "rb") as src:  # type: ignore[arg-type]
            for _ in range(-(-self.size // size)):
                yield src.read(size)


NO_PAGES = _Pages(None, 0)

def _pack(e: str, f: str, *v: Any) -> bytes:
    return struct.pack(e + f, *v)


#: write_tracedat's options that shape the pages (fixed when a stream
#: opens) and those that only shape the file around them (given to finish)
PAGE_OPTIONS = ("version", "compression", "long_size", "endian", "page_size", "instance_page_sizes",
                "formats", "lost_events", "tail_padding", "abs_ts_every")
FILE_OPTIONS = ("cpus", "instances", "comms", "uname", "trace_clock", "tsc2nsec", "offset", "cpustat",
                "split_options", "chunk_pages")

#: events handed to the native encoder at a time
BATCH = 8192

# where a field's value comes from, for the native encoder: the event's
# fields (0) or its header (type id, flags, preempt count, pid)
_SOURCES = {"common_type": 1, "common_flags": 2, "common_preempt_count": 3, "common_pid": 4}


def _field_kind(f) -> int:
    """The native encoder's code for how a field is stored (the order of
    _encode_payload's tests)."""
    if f.data_loc:
        return 3
    if f.rel_loc:
        return 4
    if f.array_len == 0:
        return 5
    if f.array_len is not None:
        return 2 if "char" in f.type else 1
    return 0


class TraceDatStream:
    """A trace.dat written as its events come, in memory that does not
    grow with the trace (issue #47): each event is encoded into its CPU's
    ring-buffer pages (in Rust, a batch at a time) and the pages spooled to
    a scratch directory beside ``path``; :meth:`finish` writes the file
    around them. Events of one CPU must come in time order (`cratrace
    synth`'s Builder keeps them so); :func:`write_tracedat` sorts any list.

    ``put(ts, cpu, name, pid, fields)`` adds an event of the top buffer,
    :meth:`add` an :class:`Event`. Options are :func:`write_tracedat`'s:
    those that shape pages here, the rest at :meth:`finish`. ``len()`` and
    :meth:`counts` say what was added. Use it as a context manager (the
    spool is removed on leaving, finished or not)."""

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        version: Literal[6, 7] = 7,
        compression: Compression = "none",
        long_size: Literal[4, 8] = 8,
        endian: Endian = "little",
        page_size: int = 4096,
        instance_page_sizes: Mapping[str, int] | None = None,
        formats: Sequence[str] = (),
        lost_events: Mapping[tuple[str, int], Mapping[int, int]] | None = None,
        tail_padding: bool = True,
        abs_ts_every: int = 0,
        overwrite: bool = False,
    ):
        from cratrace import _native

        path = Path(path)
        if version not in (6, 7):
            raise WriterError(f"version must be 6 or 7, not {version!r}")
        if compression not in ("none", "zlib", "zstd"):
            raise WriterError(f"compression must be none, zlib or zstd, not {compression!r}")
        if version == 6 and compression != "none":
            raise WriterError("file version 6 has no compression; use version=7")
        if long_size not in (4, 8):
            raise WriterError(f"long_size must be 4 or 8, not {long_size!r}")
        if endian not in ("little", "big"):
            raise WriterError(f"endian must be little or big, not {endian!r}")
        if page_size < 256 or page_size & (page_size - 1):
            raise WriterError(f"page_size must be a power of two >= 256, not {page_size}")
        instance_page_sizes = dict(instance_page_sizes or {})
        for iname, ps in instance_page_sizes.items():
            if version == 6:
                raise WriterError("per-instance page sizes need file version 7 (v6 has one page size)")
            if ps < 256 or ps & (ps - 1):
                raise WriterError(f"instance {iname!r}: page size must be a power of two >= 256, not {ps}")
        if path.exists() and not overwrite:
            raise WriterError(f"{path} exists (pass overwrite=True to replace it)")
        self.path, self.version, self.compression = path, version, compression
        self.long_size, self.endian, self.page_size = long_size, endian, page_size
        self.instance_page_sizes = instance_page_sizes
        self.lost_events = {k: dict(v) for k, v in (lost_events or {}).items()}
        e = "<" if endian == "little" else ">"

        fmts: dict[str, EventFormat] = {}
        for f in bundled_formats().values():
            fmts[f.name] = relayout(f, long_size)
        for text in formats:
            m = re.match(r"system:\s*(\S+)\n", text)
            system = m.group(1) if m else "synth"
            if m:
                text = text[m.end() :]
            f = relayout(parse_format(text, system), long_size)
            fmts[f.name] = f
        self.fmts = fmts
        by_full = {f"{f.system}:{f.name}": f for f in fmts.values()}
        self.ctx = _Ctx(e, long_size, {**fmts, **by_full}, {})
        specs = []
        for f in fmts.values():
            fields = [(sys.intern(x.name), x.offset, x.size, _field_kind(x), x.array_len or 0, x.elem_size,
                       _SOURCES.get(x.name, 0)) for x in f.fields]
            # left to Python: bprint (its format goes to the printk
            # section) and formats with a scalar wider than 8 bytes (a
            # struct such as __kernel_sockaddr_storage, stored as its bytes;
            # the native encoder writes integers of up to 64 bits)
            python = f.name == "bprint" or any(_field_kind(x) == 0 and x.size > 8 for x in f.fields)
            specs.append(([f.name, f"{f.system}:{f.name}"], f.id, f.static_size, python, fields))
        path.parent.mkdir(parents=True, exist_ok=True)
        self._dir = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".spool", dir=path.parent))
        self._spool = _native.TraceDatSpool(
            str(self._dir), little=endian == "little", long_size=long_size, page_size=page_size,
            instance_page_sizes=instance_page_sizes, tail_padding=tail_padding, abs_every=abs_ts_every,
            lost=self.lost_events, formats=specs, encode=self._encode)
        self._batch: list[tuple] = []

    def _encode(self, name: str, pid: int, fields: Mapping[str, Any], flags: int, preempt: int) -> bytes:
        """The payload of an event the native encoder leaves to Python
        (bprint: its format string goes to the printk section)."""
        ev = Event(ts=0, cpu=0, name=name, pid=pid, fields=fields, flags=flags, preempt=preempt)
        return _encode_payload(self.ctx, self.ctx.formats[name], ev)

    def put(self, ts: int, cpu: int, name: str, pid: int, fields: Mapping[str, Any]) -> None:
        """Add an event of the top buffer (no flags, no preempt count)."""
        batch = self._batch
        batch.append((ts, cpu, name, pid, fields))
        if len(batch) >= BATCH:
            self.flush()

    def add(self, ev: Event | Mapping[str, Any]) -> None:
        ev = _as_event(ev)
        self._batch.append((ev.ts, ev.cpu, ev.name, ev.pid, ev.fields, ev.instance, ev.flags, ev.preempt))
        if len(self._batch) >= BATCH:
            self.flush()

    def flush(self) -> None:
        batch, self._batch = self._batch, []
        try:
            self._spool.add(batch)
        except ValueError as e:
            raise WriterError(str(e)) from None

    def __len__(self) -> int:
        return len(self._spool) + len(self._batch)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __iter__(self):
        raise TypeError("a TraceDatStream does not keep its events (len() and counts() say what was added)")

    def counts(self) -> dict[str, int]:
        """Events added, by the name they were added with."""
        self.flush()
        return dict(self._spool.counts())

    def __enter__(self) -> "TraceDatStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Remove the spooled pages."""
        shutil.rmtree(self._dir, ignore_errors=True)

    def finish(
        self,
        *,
        cpus: int | None = None,
        instances: Sequence[str] = (),
        comms: Mapping[int, str] | None = None,
        uname: str = "Linux synth 6.18.44 #1 SMP PREEMPT_DYNAMIC x86_64",
        trace_clock: str = "local",
        tsc2nsec: tuple[int, int, int] | None = None,
        offset: int | None = None,
        cpustat: bool = True,
        split_options: bool = False,
        chunk_pages: int = 64,
    ) -> Path:
        """Write the file (atomically) around the pages; returns its path."""
        self.flush()
        spooled = self._spool.finish()
        e, long_size, page_size, version = self.ctx.endian, self.long_size, self.page_size, self.version
        max_cpu = max((s[1] for s in spooled), default=-1)
        ncpus = cpus if cpus is not None else max(max_cpu + 1, 1)
        if max_cpu >= ncpus:
            raise WriterError(f"an event is on cpu {max_cpu} but cpus={ncpus}")
        lost_events = self.lost_events
        # buffers: the top one, the instances asked for, then those events used
        order = [""] + list(instances)
        for inst, *_ in spooled:
            if inst not in order:
                order.append(inst)
        by_buf: dict[str, dict[int, tuple]] = {name: {} for name in order}
        for s in spooled:
            by_buf[s[0]][s[1]] = s
        buffers_data: dict[str, list[tuple[int, _Pages]]] = {
            name: [(cpu, _Pages(Path(cpumap[cpu][2]), cpumap[cpu][3]) if cpu in cpumap else NO_PAGES) for cpu in range(ncpus)]
            for name, cpumap in by_buf.items()
        }

        # every bundled format goes in the file (as trace-cmd records all enabled
        # events); ftrace's print/bprint live in the ftrace section
        fmts = self.fmts
        all_fmts = sorted({f"{f.system}:{f.name}": f for f in fmts.values()}.values(), key=lambda f: (f.system, f.id))
        ftrace_fmts = [f for f in all_fmts if f.system == "ftrace"]
        systems: dict[str, list[EventFormat]] = {}
        for f in all_fmts:
            if f.system != "ftrace":
                systems.setdefault(f.system, []).append(f)

        header_info = (
            b"header_page\0"
            + _pack(e, "Q", len(hp := header_page(long_size, page_size).encode()))
            + hp
            + b"header_event\0"
            + _pack(e, "Q", len(he := header_event().encode()))
            + he
        )
        ftrace_sec = _pack(e, "I", len(ftrace_fmts)) + b"".join(
            _pack(e, "Q", len(t := f.text.encode())) + t for f in ftrace_fmts
        )
        ev_sec = _pack(e, "I", len(systems))
        for sysname, lst in systems.items():
            ev_sec += sysname.encode() + b"\0" + _pack(e, "I", len(lst))
            for f in lst:
                t = f.text.encode()
                ev_sec += _pack(e, "Q", len(t)) + t
        kallsyms = b""
        printk = "".join(f'0x{addr:x} : "{_c_escape(fmt)}"\n' for fmt, addr in self.ctx.printk.items()).encode()
        cmdlines = "".join(f"{pid} {comm}\n" for pid, comm in sorted((comms or {}).items())).encode()

        clock_text = " ".join(
            f"[{c}]" if c == trace_clock else c
            for c in ["local", "global", "counter", "uptime", "perf", "mono", "mono_raw", "boot", "x86-tsc"]
        ) + "\n"
        if trace_clock not in clock_text:
            clock_text = f"[{trace_clock}]\n"
        simple_opts: list[tuple[int, bytes]] = []
        if offset is not None:
            simple_opts.append((OPT_OFFSET, f"{offset}\0".encode()))
        simple_opts.append((OPT_TRACECLOCK, clock_text.encode() + b"\0"))
        simple_opts.append((OPT_UNAME, uname.encode() + b"\0"))
        simple_opts.append((OPT_VERSION, b"cratrace-synth\0"))
        simple_opts.append((OPT_CPUCOUNT, _pack(e, "I", ncpus)))
        if tsc2nsec is not None:
            mult, shift, toff = tsc2nsec
            simple_opts.append((OPT_TSC2NSEC, _pack(e, "IIQ", mult, shift, toff)))
        if cpustat:
            for cpu in range(ncpus):
                _, _, _, _, n, nbytes, first, last = by_buf[""].get(cpu, ("", cpu, "", 0, 0, 0, None, None))
                dropped = sum(lost_events.get(("", cpu), {}).values())
                text = (f"CPU: {cpu}\nentries: {n}\noverrun: 0\ncommit overrun: 0\n"
                        f"bytes: {nbytes}\n"
                        f"oldest event ts: {_secs(first or 0)}\n"
                        f"now ts: {_secs(last or 0)}\n"
                        f"dropped events: {dropped}\nread events: 0\n")
                simple_opts.append((OPT_CPUSTAT, text.encode() + b"\0"))

        tmp = atomic.temp_file(self.path)
        try:
            with open(tmp, "wb") as f:
                out = _Out(f, e)
                out.raw(MAGIC)
                out.cstr(str(version))
                out.raw(bytes([0 if self.endian == "little" else 1, long_size]))
                out.u32(page_size)
                if version == 6:
                    _write_v6(out, header_info, ftrace_sec, ev_sec, kallsyms, printk, cmdlines, simple_opts,
                              buffers_data, ncpus, page_size, trace_clock)
                else:
                    _write_v7(out, self.compression, header_info, ftrace_sec, ev_sec, kallsyms, printk, cmdlines,
                              simple_opts, buffers_data, page_size, trace_clock, chunk_pages, split_options,
                              self.instance_page_sizes)
            os.replace(tmp, self.path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        finally:
            self.close()
        return self.path


def write_tracedat(
    path: str | os.PathLike,
    events: Iterable[Event | Mapping[str, Any]],
    *,
    version: Literal[6, 7] = 7,
    compression: Compression = "none",
    long_size: Literal[4, 8] = 8,
    endian: Endian = "little",
    page_size: int = 4096,
    instance_page_sizes: Mapping[str, int] | None = None,
    cpus: int | None = None,
    instances: Sequence[str] = (),
    comms: Mapping[int, str] | None = None,
    formats: Sequence[str] = (),
    uname: str = "Linux synth 6.18.44 #1 SMP PREEMPT_DYNAMIC x86_64",
    trace_clock: str = "local",
    tsc2nsec: tuple[int, int, int] | None = None,
    offset: int | None = None,
    lost_events: Mapping[tuple[str, int], Mapping[int, int]] | None = None,
    tail_padding: bool = True,
    abs_ts_every: int = 0,
    cpustat: bool = True,
    split_options: bool = False,
    chunk_pages: int = 64,
    overwrite: bool = False,
) -> Path:
    """Write ``events`` as a trace.dat file at ``path`` (atomically) and return the path.

    ``cpus`` defaults to 1 + the highest CPU used. ``instances`` lists extra
    buffer instances (events name theirs in ``Event.instance``; instances
    used by events are added automatically). ``comms`` fills saved cmdlines.
    ``formats`` adds format texts (``system`` taken from a leading
    ``system: NAME`` line, default ``synth``). ``tsc2nsec`` = (mult, shift,
    offset) writes the TSC2NSEC option (timestamps then count TSC cycles) and
    ``offset`` the OFFSET option. ``lost_events[(instance, cpu)] = {page:
    count}`` flags pages as preceded by lost events. ``abs_ts_every=N`` writes
    an absolute time-stamp record (type 31) before every N-th event of a CPU
    (except a page's first), as kernels do with absolute timestamps enabled.
    ``instance_page_sizes`` (v7) gives instances their own ring-buffer page
    size (stored in their BUFFER option). ``cpustat`` writes a CPUSTAT option per CPU of the top buffer (entries,
    bytes, dropped events, as trace-cmd record does). ``split_options``
    (v7) puts the plain options in a second options section chained from the
    first one's DONE option, as trace-cmd does when it appends options. ``chunk_pages`` is the
    v7 compression chunk size in pages. ``overwrite=False`` refuses to
    replace an existing file.

    The events are held (each CPU's are sorted by ts, equal ts keeping
    their order); :class:`TraceDatStream` writes a trace without holding it.
    """
    with TraceDatStream(path, version=version, compression=compression, long_size=long_size, endian=endian,
                        page_size=page_size, instance_page_sizes=instance_page_sizes, formats=formats,
                        lost_events=lost_events, tail_padding=tail_padding, abs_ts_every=abs_ts_every,
                        overwrite=overwrite) as stream:
        ctx = stream.ctx
        per_buf: dict[str, dict[int, list[Event]]] = {"": {}}
        for name in instances:
            per_buf.setdefault(name, {})
        for idx, raw in enumerate(events):
            ev = _as_event(raw)
            fmt = ctx.formats.get(ev.name)
            if fmt is None:
                raise WriterError(f"event #{idx}: unknown event {ev.name!r} (no format bundled or given)")
            if ev.cpu < 0:
                raise WriterError(f"event #{idx}: negative cpu {ev.cpu}")
            if fmt.name == "bprint":
                # printk formats are numbered in the events' order, not the file's
                base = BPRINT_FMT_BASE & ((1 << (8 * ctx.long_size)) - 1)
                ctx.printk.setdefault(ev.fields["fmt"], base + 0x40 * len(ctx.printk))
            per_buf.setdefault(ev.instance, {}).setdefault(ev.cpu, []).append(ev)
        for cpumap in per_buf.values():
            for cpu in sorted(cpumap):
                for ev in sorted(cpumap[cpu], key=lambda r: r.ts):  # stable: equal ts keep input order
                    stream.add(ev)
        return stream.finish(cpus=cpus, instances=instances, comms=comms, uname=uname, trace_clock=trace_clock,
                             tsc2nsec=tsc2nsec, offset=offset, cpustat=cpustat, split_options=split_options,
                             chunk_pages=chunk_pages)


def _secs(ns: int) -> str:
    return f"{ns // 1_000_000_000}.{ns % 1_000_000_000 // 1000:06d}"


def _c_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")


def _write_v6(out, header_info, ftrace_sec, ev_sec, kallsyms, printk, cmdlines, simple_opts,
              buffers_data, ncpus, page_size, trace_clock) -> None:
    e = out.e
    out.raw(header_info)
    out.raw(ftrace_sec)
    out.raw(ev_sec)
    out.u32(len(kallsyms))
    out.raw(kallsyms)
    out.u32(len(printk))
    out.raw(printk)
    out.u64(len(cmdlines))
    out.raw(cmdlines)
    out.u32(ncpus)
    out.raw(b"options  \0")
    for oid, data in simple_opts:
        out.u16(oid)
        out.u32(len(data))
        out.raw(data)
    # instances: option BUFFER = (u64 offset of the instance's cpu table, name);
    # patched once the table's place is known
    patches: dict[str, int] = {}
    for name in buffers_data:
        if name == "":
            continue
        data = b"\0" * 8 + name.encode() + b"\0"
        out.u16(OPT_BUFFER)
        out.u32(len(data))
        patches[name] = len(out)
        out.raw(data)
    out.u16(OPT_DONE)
    # each buffer: "flyrecord\0", a (offset, size) pair per CPU, then the
    # trace clock as u64 length + text; the page data of all buffers follows
    order = [""] + [n for n in buffers_data if n != ""]
    tables: dict[str, int] = {}
    clock = f"[{trace_clock}]".encode()
    for name in order:
        if name:
            out.patch64(patches[name], len(out))
        out.raw(b"flyrecord\0")
        tables[name] = len(out)
        for _ in range(ncpus):
            out.u64(0)
            out.u64(0)
        out.u64(len(clock))
        out.raw(clock)
    for name in order:
        for cpu, pages in buffers_data[name]:
            out.align(page_size)
            start = len(out)
            out.copy(pages)
            out.patch(tables[name] + 16 * cpu, _pack(e, "QQ", start if pages else 0, pages.size))


def _write_v7(out, compression, header_info, ftrace_sec, ev_sec, kallsyms, printk, cmdlines,
              simple_opts, buffers_data, page_size, trace_clock, chunk_pages, split_options=False,
              instance_page_sizes=None) -> None:
    e = out.e
    comp = compression != "none"
    out.raw(_compression_header(compression))
    first_opts_at = len(out)
    out.u64(0)  # patched: offset of the first options section

    strings = bytearray()

    def string_id(s: str) -> int:
        at = len(strings)
        strings.extend(s.encode() + b"\0")
        return at

    def section(sec_id: int, desc: str, body: bytes, compress: bool = comp) -> int:
        at = len(out)
        flags = SEC_FL_COMPRESS if compress else 0
        if compress:
            c = _compress(compression, body)
            body = _pack(e, "II", len(c), len(body)) + c
        out.u16(sec_id)
        out.u16(flags)
        out.u32(string_id(desc))
        out.u64(len(body))
        out.raw(body)
        return at

    offsets = {
        OPT_HEADER_INFO: section(OPT_HEADER_INFO, "headers", header_info),
        OPT_FTRACE_EVENTS: section(OPT_FTRACE_EVENTS, "ftrace events", ftrace_sec),
        OPT_EVENT_FORMATS: section(OPT_EVENT_FORMATS, "events format", ev_sec),
        OPT_KALLSYMS: section(OPT_KALLSYMS, "kallsyms", _pack(e, "I", len(kallsyms)) + kallsyms),
        OPT_PRINTK: section(OPT_PRINTK, "printk", _pack(e, "I", len(printk)) + printk),
        OPT_CMDLINES: section(OPT_CMDLINES, "command lines", _pack(e, "Q", len(cmdlines)) + cmdlines),
    }

    buffer_opts: list[bytes] = []
    file_page_size = page_size
    for name, cpu_pages in buffers_data.items():
        page_size = (instance_page_sizes or {}).get(name, file_page_size)
        sec_at = len(out)
        desc_id = string_id(f"buffer {name}" if name else "flyrecord")
        # section header; size patched below
        out.u16(OPT_BUFFER)
        out.u16(SEC_FL_COMPRESS if comp else 0)
        out.u32(desc_id)
        size_at = len(out)
        out.u64(0)
        body_start = len(out)
        cpu_entries = []
        for cpu, pages in cpu_pages:
            if not pages:
                continue
            if comp:
                out.align(page_size)  # trace-cmd aligns each CPU's data
                start = len(out)
                chunk = chunk_pages * page_size
                out.u32(-(-pages.size // chunk))
                for ch, c in _compressed(compression, pages.chunks(chunk)):
                    out.u32(len(c))
                    out.u32(len(ch))
                    out.raw(c)
                cpu_entries.append((cpu, start, len(out) - start))
            else:
                out.align(page_size)
                start = len(out)
                out.copy(pages)
                cpu_entries.append((cpu, start, pages.size))
        out.patch(size_at, _pack(e, "Q", len(out) - body_start))
        opt = _pack(e, "Q", sec_at) + name.encode() + b"\0" + trace_clock.encode() + b"\0"
        opt += _pack(e, "II", page_size, len(cpu_entries))  # per-buffer page size (trace-cmd >= 3.1)
        for cpu, start, size in cpu_entries:
            opt += _pack(e, "IQQ", cpu, start, size)
        buffer_opts.append(opt)

    # the options section, then the strings section it points to
    opts = bytearray()
    for oid, at in offsets.items():
        opts += _pack(e, "HI", oid, 8) + _pack(e, "Q", at)
    later = bytearray()
    for oid, data in simple_opts:
        (later if split_options else opts).extend(_pack(e, "HI", oid, len(data)) + data)
    for data in buffer_opts:
        opts += _pack(e, "HI", OPT_BUFFER, len(data)) + data
    opts_desc = string_id("options")
    strings_desc = string_id("strings")
    # strings go before the options that point at them: every description
    # has been registered by now
    strings_at = len(out)
    sbody = bytes(strings)
    out.u16(OPT_STRINGS)
    out.u16(0)
    out.u32(strings_desc)
    out.u64(len(sbody))
    out.raw(sbody)
    opts += _pack(e, "HI", OPT_STRINGS, 8) + _pack(e, "Q", strings_at)

    def options_section(body: bytes) -> int:
        at = len(out)
        if comp:
            c = _compress(compression, body)
            body = _pack(e, "II", len(c), len(body)) + c
        out.u16(0)
        out.u16(SEC_FL_COMPRESS if comp else 0)
        out.u32(opts_desc)
        out.u64(len(body))
        out.raw(body)
        return at

    next_at = 0
    if split_options:  # the chained section is written first so its offset is known
        next_at = options_section(bytes(later) + _pack(e, "HIQ", OPT_DONE, 8, 0))
    opts += _pack(e, "HIQ", OPT_DONE, 8, next_at)
    out.patch64(first_opts_at, options_section(bytes(opts)))


def _section_len(compression: str, body: bytes) -> int:
    if compression == "none":
        return len(body)
    return 8 + len(_compress(compression, body))


@dataclass
class TraceDatWriter:
    """Incremental front end to :func:`write_tracedat` (the API the reader's
    tests were first written against, kept so both styles work)::

        w = TraceDatWriter(version=7, compression="zstd", cpus=2, cmdlines={10: "a"}).add_bundled_formats()
        w.event(1_000, 0, "sched_switch", pid=10, prev_comm="a", ...)
        w.write("t.dat")

    Every bundled format is always embedded, so :meth:`add_bundled_formats`
    only returns the writer; :meth:`add_format` adds a format text.
    """

    version: int = 7
    compression: str = "none"
    long_size: int = 8
    endian: str = "little"
    cpus: int | None = None
    cmdlines: Mapping[int, str] = field(default_factory=dict)
    page_size: int = 4096
    events: list[Event] = field(default_factory=list)
    extra_formats: list[str] = field(default_factory=list)

    def add_bundled_formats(self) -> "TraceDatWriter":
        return self

    def add_format(self, system: str, text: str) -> None:
        self.extra_formats.append(f"system: {system}\n{text}")

    def event(self, ts: int, cpu: int, name: str, pid: int = 0, instance: str = "", **values: Any) -> None:
        self.events.append(Event(ts=ts, cpu=cpu, name=name, pid=pid, fields=values, instance=instance))

    def write(self, path: str | os.PathLike) -> Path:
        return write_tracedat(path, self.events, version=self.version, compression=self.compression,  # type: ignore[arg-type]
                              long_size=self.long_size, endian=self.endian, page_size=self.page_size,  # type: ignore[arg-type]
                              cpus=self.cpus, comms=self.cmdlines, formats=self.extra_formats, overwrite=True)
