"""Kernel event formats bundled with the generator, and their re-layout for
32-bit kernels.

The text files under ``formats/`` are verbatim copies of a current kernel's
``/sys/kernel/tracing/events/<system>/<event>/format`` (see
``formats/PROVENANCE``).  Writers embed them unchanged for 64-bit kernels; for
32-bit kernels (kernel long size 4) :func:`relayout` rewrites the field lines
the way a 32-bit build of the same kernel would lay them out (``long``,
pointers and ``size_t`` shrink to 4 bytes, offsets follow natural alignment),
so the embedded formats and the ring-buffer payloads agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

FORMAT_DIR = Path(__file__).with_name("formats")

_FIELD_RE = re.compile(
    r"^\s*field:(?P<decl>[^;]*);\s*offset:(?P<offset>\d+);\s*size:(?P<size>\d+);\s*signed:(?P<signed>\d+);"
)


@dataclass(frozen=True)
class Field:
    decl: str  # the C declaration as in the format, e.g. "char prev_comm[16]"
    name: str
    type: str
    offset: int
    size: int
    signed: bool
    array_len: int | None  # None: scalar; 0: flexible array (`buf[]`); n: fixed array
    data_loc: bool = False  # __data_loc: u32 (len << 16 | offset)
    rel_loc: bool = False  # __rel_loc: like data_loc but offset from field end

    @property
    def elem_size(self) -> int:
        if self.array_len:
            return self.size // self.array_len
        return self.size


@dataclass(frozen=True)
class EventFormat:
    system: str
    name: str
    id: int
    fields: tuple[Field, ...]  # common_* first
    text: str  # the format text to embed

    @property
    def static_size(self) -> int:
        return max((f.offset + f.size for f in self.fields), default=8)

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{self.system}:{self.name} has no field {name!r}")


def _parse_decl(decl: str) -> tuple[str, str, int | None, bool, bool]:
    decl = decl.strip()
    data_loc = decl.startswith("__data_loc ")
    rel_loc = decl.startswith("__rel_loc ")
    m = re.match(r"^(.*?)([A-Za-z_][A-Za-z0-9_]*)\s*(\[(\d*)\])?$", decl)
    if not m:
        raise ValueError(f"cannot parse field declaration {decl!r}")
    ctype, name, arr, n = m.group(1).strip(), m.group(2), m.group(3), m.group(4)
    if data_loc or rel_loc:
        return ctype, name, None, data_loc, rel_loc
    array_len = None if arr is None else (int(n) if n else 0)
    return ctype, name, array_len, False, False


def parse_format(text: str, system: str) -> EventFormat:
    name = re.search(r"^name: (\S+)", text, re.M).group(1)
    eid = int(re.search(r"^ID: (\d+)", text, re.M).group(1))
    fields = []
    for line in text.splitlines():
        m = _FIELD_RE.match(line)
        if not m:
            continue
        ctype, fname, alen, dl, rl = _parse_decl(m.group("decl"))
        fields.append(
            Field(m.group("decl").strip(), fname, ctype, int(m.group("offset")), int(m.group("size")),
                  m.group("signed") == "1", alen, dl, rl)
        )
    return EventFormat(system, name, eid, tuple(fields), text)


def _is_long(ctype: str) -> bool:
    """Types whose size is the kernel's long size."""
    t = ctype.replace("const ", "").replace("unsigned ", "").strip()
    if "*" in t:
        return True
    if re.search(r"\blong\s+long\b", t):
        return False
    return t in ("long", "size_t", "ssize_t", "unsigned long", "long int") or t.endswith(" long")


def relayout(fmt: EventFormat, long_size: int) -> EventFormat:
    """The format as a kernel with ``long_size``-byte longs would print it."""
    if long_size == 8:
        return fmt
    new_fields: list[Field] = []
    pos = 0
    replacements: dict[str, str] = {}
    for f in fmt.fields:
        if f.name.startswith("common_"):
            new_fields.append(f)
            pos = max(pos, f.offset + f.size)
            continue
        elem = f.elem_size
        if not (f.data_loc or f.rel_loc) and _is_long(f.type):
            elem = 4
        size = elem * f.array_len if f.array_len else (elem if f.array_len is None else 0)
        align = min(max(elem, 1), 4)  # i386 aligns u64 to 4
        pos = (pos + align - 1) // align * align
        nf = replace(f, offset=pos, size=size)
        new_fields.append(nf)
        pos += size
        replacements[f.decl] = (
            f"\tfield:{f.decl};\toffset:{nf.offset};\tsize:{nf.size};\tsigned:{int(f.signed)};"
        )
    lines = []
    for line in fmt.text.splitlines():
        m = _FIELD_RE.match(line)
        if m and m.group("decl").strip() in replacements:
            line = replacements[m.group("decl").strip()]
        lines.append(line)
    return replace(fmt, fields=tuple(new_fields), text="\n".join(lines) + "\n")


@lru_cache(maxsize=None)
def bundled_formats() -> dict[str, EventFormat]:
    """All bundled formats by event name (``sched_switch``, ``print``...)."""
    out: dict[str, EventFormat] = {}
    for path in sorted(FORMAT_DIR.glob("*/*.format")):
        fmt = parse_format(path.read_text(), path.parent.name)
        out[fmt.name] = fmt
    return out


def header_page(long_size: int, page_size: int) -> str:
    """The ``events/header_page`` text of a kernel with the given long and page size."""
    data_off = 8 + long_size
    return (
        "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n"
        f"\tfield: local_t commit;\toffset:8;\tsize:{long_size};\tsigned:1;\n"
        "\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n"
        f"\tfield: char data;\toffset:{data_off};\tsize:{page_size - data_off};\tsigned:0;\n"
    )


def header_event() -> str:
    return (FORMAT_DIR / "header_event").read_text()
