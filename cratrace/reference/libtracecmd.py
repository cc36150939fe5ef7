"""A small ctypes binding to the system libtracecmd / libtraceevent.

It reads a trace.dat event by event with ``tracecmd_iterate_events`` (top
buffer and every instance) and decodes each field with libtraceevent's own
field descriptions, yielding plain Python values in the same conventions as
the native reader's tables (ints with the format's signedness, char arrays
cut at the first NUL, dynamic arrays as lists), so the two can be compared
row by row.

Struct layouts follow the installed headers (libtraceevent 1.7,
libtracecmd 1.3): ``tep_record`` (ts at 0, size at 28, data at 32, cpu at
40), ``tep_event`` (name at 8) and ``tep_format_field``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import struct
from dataclasses import dataclass
from typing import Iterator

FIELD_IS_ARRAY, FIELD_IS_SIGNED, FIELD_IS_STRING, FIELD_IS_DYNAMIC, FIELD_IS_RELATIVE = 1, 4, 8, 16, 256


class _Record(ctypes.Structure):
    _fields_ = [
        ("ts", ctypes.c_ulonglong),
        ("offset", ctypes.c_ulonglong),
        ("missed_events", ctypes.c_longlong),
        ("record_size", ctypes.c_int),
        ("size", ctypes.c_int),
        ("data", ctypes.c_void_p),
        ("cpu", ctypes.c_int),
    ]


class _Field(ctypes.Structure):
    pass


_Field._fields_ = [
    ("next", ctypes.POINTER(_Field)),
    ("event", ctypes.c_void_p),
    ("type", ctypes.c_char_p),
    ("name", ctypes.c_char_p),
    ("alias", ctypes.c_char_p),
    ("offset", ctypes.c_int),
    ("size", ctypes.c_int),
    ("arraylen", ctypes.c_uint),
    ("elementsize", ctypes.c_uint),
    ("flags", ctypes.c_ulong),
]


class _EventHead(ctypes.Structure):
    _fields_ = [("tep", ctypes.c_void_p), ("name", ctypes.c_char_p), ("id", ctypes.c_int)]


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_Record), ctypes.c_int, ctypes.c_void_p)


def _load(name: str) -> ctypes.CDLL:
    for candidate in (ctypes.util.find_library(name), f"lib{name}.so.1", f"lib{name}.so"):
        if candidate:
            try:
                return ctypes.CDLL(candidate)
            except OSError:
                continue
    raise OSError(f"lib{name} not found (Debian: apt-get install lib{name}-dev)")


def available() -> bool:
    try:
        _load("tracecmd")
        _load("traceevent")
        return True
    except OSError:
        return False


@dataclass
class RefEvent:
    ts: int
    cpu: int
    pid: int
    instance: str
    name: str
    fields: dict


class ReferenceReader:
    """Iterate every event of a trace.dat through libtracecmd."""

    def __init__(self, path: str):
        self.path = str(path)
        self.tc = _load("tracecmd")
        self.te = _load("traceevent")
        tc, te = self.tc, self.te
        tc.tracecmd_open.restype = ctypes.c_void_p
        tc.tracecmd_open.argtypes = [ctypes.c_char_p, ctypes.c_int]
        tc.tracecmd_close.argtypes = [ctypes.c_void_p]
        tc.tracecmd_get_tep.restype = ctypes.c_void_p
        tc.tracecmd_get_tep.argtypes = [ctypes.c_void_p]
        tc.tracecmd_buffer_instances.argtypes = [ctypes.c_void_p]
        tc.tracecmd_buffer_instance_name.restype = ctypes.c_char_p
        tc.tracecmd_buffer_instance_name.argtypes = [ctypes.c_void_p, ctypes.c_int]
        tc.tracecmd_buffer_instance_handle.restype = ctypes.c_void_p
        tc.tracecmd_buffer_instance_handle.argtypes = [ctypes.c_void_p, ctypes.c_int]
        tc.tracecmd_iterate_events.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, _CALLBACK, ctypes.c_void_p]
        te.tep_find_event_by_record.restype = ctypes.c_void_p
        te.tep_find_event_by_record.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Record)]
        te.tep_event_fields.restype = ctypes.POINTER(ctypes.POINTER(_Field))
        te.tep_event_fields.argtypes = [ctypes.c_void_p]
        te.tep_data_pid.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Record)]
        te.tep_is_file_bigendian.argtypes = [ctypes.c_void_p]
        te.tep_get_long_size.argtypes = [ctypes.c_void_p]
        self.handle = tc.tracecmd_open(self.path.encode(), 0)
        if not self.handle:
            raise OSError(f"libtracecmd cannot open {self.path}")
        self._fields_cache: dict[int, list] = {}

    def close(self) -> None:
        if self.handle:
            self.tc.tracecmd_close(self.handle)
            self.handle = None

    def __enter__(self) -> "ReferenceReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _fields(self, event: int) -> list:
        if event not in self._fields_cache:
            arr = self.te.tep_event_fields(event)
            out = []
            i = 0
            while arr and arr[i]:
                f = arr[i].contents
                out.append((f.name.decode(), f.offset, f.size, f.flags, f.elementsize, (f.type or b"").decode()))
                i += 1
            self._fields_cache[event] = out
        return self._fields_cache[event]

    def _decode(self, data: bytes, fields: list, endian: str, long_size: int) -> dict:
        out = {}
        for name, off, size, flags, elem, ctype in fields:
            signed = bool(flags & FIELD_IS_SIGNED)
            if flags & FIELD_IS_DYNAMIC:
                if off + 4 > len(data):
                    out[name] = None
                    continue
                (loc,) = struct.unpack_from(endian + "I", data, off)
                start, length = loc & 0xFFFF, loc >> 16
                if flags & FIELD_IS_RELATIVE:
                    start += off + size
                raw = data[start : start + length]
                if "char" in ctype.split("[")[0]:
                    out[name] = raw.split(b"\0", 1)[0].decode("utf-8", "replace")
                elif "cpumask" in ctype or "bitmask" in ctype:
                    words = struct.unpack_from(endian + ("Q" if long_size == 8 else "I") * (len(raw) // long_size), raw)
                    out[name] = [w * 8 * long_size + b for w, word in enumerate(words) for b in range(8 * long_size) if word >> b & 1]
                else:
                    out[name] = _ints(raw, elem or 4, signed, endian)
            elif flags & FIELD_IS_ARRAY or size == 0:
                raw = data[off : off + size] if size else data[off:]
                if flags & FIELD_IS_STRING or ctype.split("[")[0].strip() in ("char", "unsigned char", "signed char"):
                    out[name] = raw.split(b"\0", 1)[0].decode("utf-8", "replace")
                else:
                    out[name] = _ints(raw, elem or 4, signed, endian)
            else:
                raw = data[off : off + size]
                if len(raw) < size or size not in (1, 2, 4, 8):
                    out[name] = None
                    continue
                code = {1: "b", 2: "h", 4: "i", 8: "q"}[size]
                (out[name],) = struct.unpack(endian + (code if signed else code.upper()), raw)
        return out

    def events(self) -> Iterator[RefEvent]:
        """Every event, top buffer first then each instance, each in ts order."""
        handles = [("", self.handle)]
        for i in range(self.tc.tracecmd_buffer_instances(self.handle)):
            name = self.tc.tracecmd_buffer_instance_name(self.handle, i).decode()
            h = self.tc.tracecmd_buffer_instance_handle(self.handle, i)
            if h:
                handles.append((name, h))
        for inst, h in handles:
            tep = self.tc.tracecmd_get_tep(h)
            endian = ">" if self.te.tep_is_file_bigendian(tep) else "<"
            long_size = self.te.tep_get_long_size(tep) or 8
            got: list[RefEvent] = []

            def cb(_h, rec_p, cpu, _d, tep=tep, endian=endian, long_size=long_size, got=got, inst=inst):
                rec = rec_p.contents
                event = self.te.tep_find_event_by_record(tep, rec_p)
                if not event:
                    return 0
                name = ctypes.cast(event, ctypes.POINTER(_EventHead)).contents.name.decode()
                data = ctypes.string_at(rec.data, rec.size)
                pid = self.te.tep_data_pid(tep, rec_p)
                got.append(RefEvent(rec.ts, rec.cpu, pid, inst, name, self._decode(data, self._fields(event), endian, long_size)))
                return 0

            self.tc.tracecmd_iterate_events(h, None, 0, _CALLBACK(cb), None)
            yield from got


def _ints(raw: bytes, elem: int, signed: bool, endian: str) -> list[int]:
    code = {1: "b", 2: "h", 4: "i", 8: "q"}.get(elem, "I")
    if not signed:
        code = code.upper()
    n = len(raw) // struct.calcsize(code)
    return list(struct.unpack_from(endian + code * n, raw))
