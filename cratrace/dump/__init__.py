"""`cratrace dump`: a capture's events as text, one line each, in time order.

The lines are `trace-cmd report`'s (`cratrace.dump.layout`), each event's
fields printed with its kernel print format (`cratrace.dump.printfmt`,
from the capture's ``formats.json``), read as one time-ordered stream
(`cratrace.dump.merge`) in constant memory. An event type with no stored
format (a capture imported before formats were kept, xentrace and perf
tables) or one whose format cannot be evaluated prints its fields as
``name=value`` pairs, as ``trace-cmd report -R`` does.

>>> from cratrace.dump import dump_lines
>>> for line in dump_lines("capture/", events=["sched_switch"]):  # doctest: +SKIP
...     print(line)
"""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path
from typing import Any, Callable, Iterator

from cratrace.dump.layout import PLUGINS, Comms, header, make_bprint
from cratrace.dump.merge import Row, merged
from cratrace.dump.printfmt import PrintFmtError, compile_print_fmt, raw_fields
from cratrace.errors import CaptureError, UsageError

Printer = Callable[[Row, Comms], str]


class Dump:
    """What `cratrace dump` needs of a capture: its event tables, print
    formats, symbols and saved thread names."""

    def __init__(self, capture: str | Path):
        self.path = Path(capture)
        meta_path = self.path / "capture.json"
        if not meta_path.is_file():
            raise CaptureError(f"{self.path}: not a capture (no capture.json); create one with `cratrace import`")
        try:
            self.meta = json.loads(meta_path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CaptureError(f"{meta_path}: unreadable capture.json ({e})") from None
        events = self.path / "events"
        self.tables = {p.stem: p for p in sorted(events.glob("*.parquet"))} if events.is_dir() else {}
        fpath = self.path / "formats.json"
        formats: dict[str, Any] = {}
        if fpath.is_file():
            try:
                formats = json.loads(fpath.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise CaptureError(f"{fpath}: unreadable ({e})") from None
        self.formats: dict[str, dict] = formats.get("events", {})
        self.symbols: dict[int, str] = {int(k): v for k, v in (formats.get("symbols") or {}).items()}
        self.cmdlines: dict[int, str] = {}
        instances: set[str] = set()
        for s in self.meta.get("sources", []):
            summary = s.get("summary") or {}
            for pid, comm in summary.get("cmdlines") or []:
                self.cmdlines.setdefault(int(pid), comm)
            instances.update(i.get("name") or "" for i in summary.get("instances") or [])
        #: the width trace-cmd gives buffer instance names before each line
        #: when the trace has instances (0: none)
        self.instance_width = max((len(n) for n in instances if n), default=0)
        self._printers: dict[str, Printer] = {}

    def select(self, events: list[str] | None) -> dict[str, Path]:
        """The tables `events` names: event names, globs (``sched_*``) or
        systems (``sched``, as `trace-cmd record -e sched`); all when None."""
        if not events:
            return dict(self.tables)
        chosen: dict[str, Path] = {}
        for pattern in events:
            hit = {n: p for n, p in self.tables.items() if fnmatch.fnmatchcase(n, pattern) or self.formats.get(n, {}).get("system") == pattern}
            if not hit:
                have = ", ".join(self.tables) or "none"
                raise UsageError(f"-e {pattern}: no such event in {self.path} (have: {have})")
            chosen.update(hit)
        return dict(sorted(chosen.items()))

    def symbol(self, addr: Any) -> str:
        """An address as ``%ps`` prints it."""
        if addr is None:
            return "0x0"
        a = int(addr) & ((1 << 64) - 1)
        name = self.symbols.get(a)
        return name.split("+", 1)[0] if name else f"0x{a:x}"

    def printer(self, table: str, raw: bool = False) -> Printer:
        """How `table`'s events print: trace-cmd's plugin, the kernel's
        print format, or (`raw`, or no usable format) name=value pairs."""
        key = table + ("\0raw" if raw else "")
        if key in self._printers:
            return self._printers[key]
        fmt = self.formats.get(table)
        printer: Printer | None = None
        if not raw:
            if table in PLUGINS:
                printer = PLUGINS[table]
            elif table == "bprint":
                printer = make_bprint(self.symbol)
            elif fmt:
                try:
                    render = compile_print_fmt(fmt["print_fmt"], long_size=int(fmt.get("long_size") or 8), symbols=self.symbols)
                    printer = lambda row, comms, render=render: render(row)  # noqa: E731
                except PrintFmtError:
                    printer = None
        if printer is None:
            printer = lambda row, comms: raw_fields(row, row.fields)  # noqa: E731
        # trace-cmd drops one newline the event's text ends with (trace_marker adds it)
        self._printers[key] = lambda row, comms, p=printer: _checked(p, row, comms)
        return self._printers[key]

    def rows(self, events: list[str] | None = None, *, cpus: list[int] | None = None, start: int | None = None, end: int | None = None) -> Iterator[Row]:
        return merged(self.select(events), cpus=cpus, start=start, end=end)


def _checked(p: Printer, row: Row, comms: Comms) -> str:
    try:
        text = p(row, comms)
    except (TypeError, ValueError, OverflowError, KeyError):
        # a value the format did not expect (a null, a wrong type): the fields
        text = raw_fields(row, row.fields)
    return text[:-1] if text.endswith("\n") else text


def _open(capture: str | Path | Dump) -> Dump:
    return capture if isinstance(capture, Dump) else Dump(capture)


def dump_lines(capture: str | Path | Dump, events: list[str] | None = None, *, cpus: list[int] | None = None, start: int | None = None, end: int | None = None, raw: bool = False, ns: bool = False) -> Iterator[str]:
    """The events of `capture` as `trace-cmd report` lines, in time order
    (`start <= ts < end` in ns, on `cpus`, of `events` when given)."""
    d = _open(capture)
    comms = Comms(d.cmdlines)
    width = d.instance_width
    for row in d.rows(events, cpus=cpus, start=start, end=end):
        pid = row["pid"] if "pid" in row.cols else None
        head = header(comms(pid), pid, row["cpu"] if "cpu" in row.cols else None, row["ts"], row.table, ns)
        if width:
            # trace-cmd names the buffer instance of each line when there are any
            inst = row["instance"] if "instance" in row.cols else ""
            head = (f"{inst:>{width}}: " if inst else " " * (width + 2)) + head
        yield head + d.printer(row.table, raw)(row, comms)


def dump_records(capture: str | Path | Dump, events: list[str] | None = None, *, cpus: list[int] | None = None, start: int | None = None, end: int | None = None) -> Iterator[dict]:
    """The same events as dicts: ts (ns), cpu, pid, comm, event, info (the
    printed text) and fields (the raw values)."""
    d = _open(capture)
    comms = Comms(d.cmdlines)
    for row in d.rows(events, cpus=cpus, start=start, end=end):
        pid = row["pid"] if "pid" in row.cols else None
        comm = comms(pid)
        info = d.printer(row.table)(row, comms)
        fields = {f: _jsonable(row.get(f)) for f in row.fields}
        yield {"ts": row["ts"], "cpu": row["cpu"] if "cpu" in row.cols else None, "pid": pid, "comm": comm, "event": row.table, "info": info, "fields": fields}


def _jsonable(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    return v


__all__ = ["Dump", "dump_lines", "dump_records"]
