"""A trace.dat writer: file versions 6 and 7, compression none/zlib/zstd,
kernel long size 8 or 4, little- or big-endian.

Usage::

    w = TraceDatWriter(version=7, compression="zstd", long_size=8, endian="little", cpus=2)
    w.add_format("sched", text_of_sched_switch_format)        # or load_formats()
    w.event(ts_ns, cpu, "sched_switch", pid=0, prev_comm="a", prev_pid=1, ...)
    w.write("out.dat")

Event payloads are laid out from the embedded format (fixed fields at their
offsets, `__data_loc` strings appended), records are packed into
ring-buffer pages exactly as the kernel does (type_len/time_delta words,
time-extend records for deltas over 2^27 ns, page headers with commit
sizes), and the file metadata follows trace-cmd.dat(5). For a 32-bit
kernel layout the formats are re-laid out with 4-byte longs and pointers.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from cratrace.errors import UsageError

FORMATS = Path(__file__).with_name("formats")
TS_MAX_DELTA = (1 << 27) - 1


@dataclass
class _Field:
    name: str
    ctype: str
    offset: int
    size: int
    signed: bool
    decl: str


@dataclass
class _Format:
    system: str
    name: str
    id: int
    common: list
    fields: list
    print_fmt: str

    def text(self) -> str:
        lines = [f"name: {self.name}", f"ID: {self.id}", "format:"]
        for f in self.common:
            lines.append(f"\tfield:{f.decl};\toffset:{f.offset};\tsize:{f.size};\tsigned:{int(f.signed)};")
        lines.append("")
        for f in self.fields:
            lines.append(f"\tfield:{f.decl};\toffset:{f.offset};\tsize:{f.size};\tsigned:{int(f.signed)};")
        lines += ["", f"print fmt: {self.print_fmt}", ""]
        return "\n".join(lines)


def _parse(system: str, text: str) -> _Format:
    name = id_ = None
    common, fields, pf = [], [], ""
    for line in text.splitlines():
        t = line.strip()
        if t.startswith("name:"):
            name = t[5:].strip()
        elif t.startswith("ID:"):
            id_ = int(t[3:])
        elif t.startswith("field:"):
            parts = [p.strip() for p in t.split(";")]
            decl = parts[0][6:].strip()
            kv = dict(p.split(":", 1) for p in parts[1:] if ":" in p)
            head = decl.split("[")[0]
            fname = head.replace("*", " ").split()[-1]
            f = _Field(fname, decl[: decl.rfind(fname)].strip(), int(kv["offset"]), int(kv["size"]), kv.get("signed") == "1", decl)
            (common if fname.startswith("common_") else fields).append(f)
        elif t.startswith("print fmt:"):
            pf = t[10:].strip()
    if name is None or id_ is None:
        raise UsageError(f"format of {system} has no name or ID")
    return _Format(system, name, id_, common, fields, pf)


def _relayout(f: _Format, long_size: int) -> _Format:
    """Re-lay out a 64-bit format for a kernel whose long is `long_size`."""
    if long_size == 8:
        return f
    off = 8  # after the common header
    out = []
    for x in f.fields:
        size = x.size
        base = x.ctype.replace("const ", "").strip()
        if ("long" in base and "long long" not in base) or base.endswith("*") or base in ("size_t", "ssize_t"):
            size = long_size if "[" not in x.decl else x.size // 8 * long_size
        align = min(max(size, 1), long_size) if size else 4
        if "char" in base and "[" in x.decl:
            align = 1
        off = (off + align - 1) // align * align
        out.append(_Field(x.name, x.ctype, off, size, x.signed, x.decl))
        off += size
    return _Format(f.system, f.name, f.id, f.common, out, f.print_fmt)


def load_formats(names: list[str] | None = None) -> list[tuple[str, str]]:
    """(system, text) of the bundled formats (all, or `system.event` names)."""
    out = []
    for p in sorted(FORMATS.glob("*.format")):
        system, event = p.stem.split(".", 1)
        if names is None or f"{system}.{event}" in names or event in names:
            out.append((system, p.read_text()))
    return out


def header_page_text(long_size: int) -> str:
    return (
        "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n"
        f"\tfield: local_t commit;\toffset:8;\tsize:{long_size};\tsigned:1;\n"
        "\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n"
        f"\tfield: char data;\toffset:{8 + long_size};\tsize:{4096 - 8 - long_size};\tsigned:0;\n"
    )


@dataclass
class _Rec:
    ts: int
    payload: bytes


@dataclass
class TraceDatWriter:
    version: int = 7
    compression: str = "none"
    long_size: int = 8
    endian: str = "little"
    page_size: int = 4096
    cpus: int = 1
    clock: str = "local"
    uname: str = "Linux synth 6.18.0 #1 SMP x86_64"
    cmdlines: dict = field(default_factory=dict)
    _formats: dict = field(default_factory=dict)
    _by_id: dict = field(default_factory=dict)
    _events: dict = field(default_factory=dict)  # instance -> cpu -> [_Rec]

    def __post_init__(self):
        if self.version not in (6, 7):
            raise UsageError(f"version {self.version}: allowed 6, 7")
        if self.compression not in ("none", "zlib", "zstd") or (self.version == 6 and self.compression != "none"):
            raise UsageError(f"compression {self.compression!r}: allowed none, zlib, zstd (v7 only)")
        if self.long_size not in (4, 8) or self.endian not in ("little", "big"):
            raise UsageError("long_size must be 4 or 8 and endian little or big")
        self._e = "<" if self.endian == "little" else ">"

    # ---------------------------------------------------------- formats
    def add_format(self, system: str, text: str) -> None:
        f = _relayout(_parse(system, text), self.long_size)
        self._formats[f.name] = f
        self._by_id[f.id] = f

    def add_bundled_formats(self) -> "TraceDatWriter":
        for system, text in load_formats():
            self.add_format(system, text)
        return self

    # ----------------------------------------------------------- events
    def _int(self, v: int, size: int, signed: bool) -> bytes:
        code = {1: "b", 2: "h", 4: "i", 8: "q"}[size]
        if not signed:
            code = code.upper()
            v &= (1 << (8 * size)) - 1
        return struct.pack(self._e + code, v)

    def payload(self, name: str, pid: int, **values) -> bytes:
        f = self._formats[name]
        fixed = max([x.offset + x.size for x in f.fields] + [8])
        buf = bytearray(fixed)
        buf[0:2] = self._int(f.id, 2, False)
        buf[4:8] = self._int(pid, 4, True)
        tail = bytearray()
        for x in f.fields:
            v = values.get(x.name, 0)
            if x.decl.startswith("__data_loc") or x.decl.startswith("__rel_loc"):
                data = (v.encode() if isinstance(v, str) else bytes(v)) + (b"\0" if isinstance(v, str) else b"")
                start = fixed + len(tail)
                loc = (len(data) << 16) | (start - (x.offset + x.size) if x.decl.startswith("__rel_loc") else start)
                buf[x.offset : x.offset + 4] = self._int(loc, 4, False)
                tail += data
            elif x.size == 0:  # trailing array: print's buf
                tail += (v.encode() + b"\0") if isinstance(v, str) else bytes(v)
            elif "char" in x.ctype and "[" in x.decl:
                s = v.encode()[: x.size - 1] if isinstance(v, str) else bytes(v)
                buf[x.offset : x.offset + x.size] = s.ljust(x.size, b"\0")
            elif x.size in (1, 2, 4, 8):
                buf[x.offset : x.offset + x.size] = self._int(int(v), x.size, x.signed)
        out = bytes(buf + tail)
        return out + b"\0" * (-len(out) % 4)

    def event(self, ts: int, cpu: int, name: str, pid: int = 0, instance: str = "", **values) -> None:
        if name not in self._formats:
            raise UsageError(f"no format for event {name!r}")
        self._events.setdefault(instance, {}).setdefault(cpu, []).append(_Rec(ts, self.payload(name, pid, **values)))

    # ----------------------------------------------------------- pages
    def _pages(self, recs: list[_Rec]) -> list[bytes]:
        hdr = 8 + self.long_size
        cap = self.page_size - hdr
        pages, body, page_ts, last = [], bytearray(), None, None
        w4 = lambda v: struct.pack(self._e + "I", v)  # noqa: E731

        def word(type_len: int, delta: int) -> bytes:
            return w4(type_len | (delta << 5) if self.endian == "little" else (type_len << 27) | delta)

        def flush():
            if body:
                pages.append(struct.pack(self._e + "Q", page_ts) + self._int(len(body), self.long_size, False) + bytes(body) + b"\0" * (cap - len(body)))

        for r in sorted(recs, key=lambda r: r.ts):
            n = len(r.payload)
            rec = (word(n // 4, 0) if n <= 112 else word(0, 0) + w4(n + 4)) + r.payload
            if page_ts is None or len(body) + len(rec) + 8 > cap:
                flush()
                body, page_ts, last = bytearray(), r.ts, r.ts
            delta = r.ts - last
            if delta > TS_MAX_DELTA:
                body += word(30, delta & TS_MAX_DELTA) + w4(delta >> 27)
                delta = 0
            hw = word(n // 4, delta) if n <= 112 else word(0, delta) + w4(n + 4)
            body += hw + r.payload
            last = r.ts
        flush()
        return pages

    # ------------------------------------------------------------ file
    def _compress(self, data: bytes) -> bytes:
        if self.compression == "zlib":
            return zlib.compress(data)
        if self.compression == "zstd":
            import zstandard

            return zstandard.ZstdCompressor(level=3).compress(data)
        return data

    def _formats_blob(self) -> tuple[bytes, bytes]:
        ftrace = [f for f in self._formats.values() if f.system == "ftrace"]
        e = self._e
        fb = struct.pack(e + "I", len(ftrace)) + b"".join(struct.pack(e + "Q", len(t)) + t for t in (f.text().encode() for f in ftrace))
        systems: dict[str, list] = {}
        for f in self._formats.values():
            if f.system != "ftrace":
                systems.setdefault(f.system, []).append(f)
        eb = struct.pack(e + "I", len(systems))
        for s, fs in systems.items():
            eb += s.encode() + b"\0" + struct.pack(e + "I", len(fs))
            eb += b"".join(struct.pack(e + "Q", len(t)) + t for t in (f.text().encode() for f in fs))
        return fb, eb

    def _header_info(self) -> bytes:
        hp = header_page_text(self.long_size).encode()
        he = (FORMATS / "header_event").read_bytes()
        e = self._e
        return b"header_page\0" + struct.pack(e + "Q", len(hp)) + hp + b"header_event\0" + struct.pack(e + "Q", len(he)) + he

    def _cmdlines(self) -> bytes:
        return "".join(f"{p} {c}\n" for p, c in sorted(self.cmdlines.items())).encode()

    def write(self, path: str | Path) -> None:
        data = self._write_v6() if self.version == 6 else self._write_v7()
        Path(path).write_bytes(data)

    def _start(self) -> bytearray:
        out = bytearray(b"\x17\x08\x44tracing" + str(self.version).encode() + b"\0")
        out += bytes([0 if self.endian == "little" else 1, self.long_size])
        out += struct.pack(self._e + "I", self.page_size)
        return out

    def _instances(self) -> list[str]:
        names = sorted(self._events, key=lambda n: (n != "", n))
        return names or [""]

    def _write_v6(self) -> bytes:
        e = self._e
        out = self._start() + self._header_info()
        fb, eb = self._formats_blob()
        out += fb + eb + struct.pack(e + "I", 0) + struct.pack(e + "I", 0)  # kallsyms, printk
        cl = self._cmdlines()
        out += struct.pack(e + "Q", len(cl)) + cl + struct.pack(e + "I", self.cpus)
        out += b"options  \0"
        opts = bytearray()

        def opt(i: int, d: bytes):
            opts.extend(struct.pack(e + "H", i) + struct.pack(e + "I", len(d)) + d)

        opt(5, self.uname.encode() + b"\0")
        opt(4, f"[{self.clock}]".encode() + b"\0")
        instances = [n for n in self._instances() if n]
        inst_pos = {}
        for n in instances:
            inst_pos[n] = len(out) + len(opts) + 6
            opt(3, b"\0" * 8 + n.encode() + b"\0")
        opts.extend(struct.pack(e + "H", 0))
        out += opts
        out += b"flyrecord\0"
        table_at = len(out)
        inst_block: dict[str, int] = {}
        out += b"\0" * (16 * self.cpus)
        tables = {"": table_at}
        for n in instances:
            # an instance's BUFFER option points at its own "flyrecord" block
            inst_pos_data = len(out)
            out += b"flyrecord\0"
            tables[n] = len(out)
            out += b"\0" * (16 * self.cpus)
            inst_block[n] = inst_pos_data
        for n in [""] + instances:
            for c in range(self.cpus):
                pages = self._pages(self._events.get(n, {}).get(c, []))
                out += b"\0" * (-len(out) % self.page_size)
                at = len(out)
                out += b"".join(pages)
                struct.pack_into(e + "QQ", out, tables[n] + 16 * c, at if pages else 0, len(pages) * self.page_size)
        for n in instances:
            struct.pack_into(e + "Q", out, inst_pos[n], inst_block[n])
        return bytes(out)

    def _section(self, out: bytearray, sid: int, body: bytes, compress: bool) -> int:
        at = len(out)
        e = self._e
        if compress and self.compression != "none":
            c = self._compress(body)
            body = struct.pack(e + "II", len(c), len(body)) + c
        out += struct.pack(e + "HHIQ", sid, 1 if compress and self.compression != "none" else 0, 0, len(body)) + body
        return at

    def _write_v7(self) -> bytes:
        e = self._e
        out = self._start()
        out += self.compression.encode() + b"\0" + (b"" if self.compression == "none" else b"1\0") + (b"\0" if self.compression == "none" else b"")
        first_opt = len(out)
        out += b"\0" * 8
        fb, eb = self._formats_blob()
        pos = {
            16: self._section(out, 16, self._header_info(), True),
            17: self._section(out, 17, fb, True),
            18: self._section(out, 18, eb, True),
            19: self._section(out, 19, struct.pack(e + "I", 0), True),
            20: self._section(out, 20, struct.pack(e + "I", 0), True),
        }
        cl = self._cmdlines()
        pos[21] = self._section(out, 21, struct.pack(e + "Q", len(cl)) + cl, True)
        buffers = []
        for n in self._instances():
            hdr_at = len(out)
            compressed = self.compression != "none"
            out += struct.pack(e + "HHIQ", 3, 1 if compressed else 0, 0, 0)
            start = len(out)
            cpus = []
            for c in range(self.cpus):
                pages = self._pages(self._events.get(n, {}).get(c, []))
                if not pages:
                    cpus.append((c, 0, 0))
                    continue
                if compressed:
                    at = len(out)
                    chunks = [b"".join(pages[i : i + 16]) for i in range(0, len(pages), 16)]
                    out += struct.pack(e + "I", len(chunks))
                    for ch in chunks:
                        cz = self._compress(ch)
                        out += struct.pack(e + "II", len(cz), len(ch)) + cz
                    cpus.append((c, at, len(out) - at))
                else:
                    out += b"\0" * (-len(out) % self.page_size)
                    at = len(out)
                    out += b"".join(pages)
                    cpus.append((c, at, len(out) - at))
            struct.pack_into(e + "Q", out, hdr_at + 8, len(out) - start)
            buffers.append((n, hdr_at, cpus))
        opts = bytearray()

        def opt(i: int, d: bytes):
            opts.extend(struct.pack(e + "H", i) + struct.pack(e + "I", len(d)) + d)

        for sid in (16, 17, 18, 19, 20, 21):
            opt(sid, struct.pack(e + "Q", pos[sid]))
        opt(8, struct.pack(e + "I", self.cpus))
        opt(5, self.uname.encode() + b"\0")
        opt(9, b"cratrace-synth\0")
        opt(4, f"[{self.clock}]".encode() + b"\0")
        for n, at, cpus in buffers:
            # trace-cmd >= 3.1 writes the buffer's page size before its CPU count
            d = struct.pack(e + "Q", at) + n.encode() + b"\0" + self.clock.encode() + b"\0" + struct.pack(e + "II", self.page_size, len(cpus))
            d += b"".join(struct.pack(e + "IQQ", c, o, s) for c, o, s in cpus)
            opt(3, d)
        opt(0, struct.pack(e + "Q", 0))
        at = len(out)
        out += struct.pack(e + "HHIQ", 0, 0, 0, len(opts)) + opts
        struct.pack_into(e + "Q", out, first_opt, at)
        return bytes(out)
