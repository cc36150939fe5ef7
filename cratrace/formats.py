"""``CAPTURE/formats.json``: how each event type's row is printed.

A trace.dat carries every event's kernel print format (the ``print fmt:``
line of its format file) and the kernel's symbol table; `trace-cmd report`
prints each event with them. The import keeps the formats of the event
types the capture has rows for, and the names of the addresses those
formats print as symbols (``%ps`` of ``print``'s ``ip``: distinct values
only, looked up in the trace's kallsyms, which is megabytes and is not
kept), so `cratrace dump` can print the capture as `trace-cmd report`
does without the trace.dat (issue 44)::

    {"events": {"sched_switch": {"system": "sched", "print_fmt": "...",
                                 "long_size": 8}, ...},
     "symbols": {"18446744071579..." : "tracing_mark_write", ...}}

A capture imported before this file existed has none; `cratrace dump`
then prints raw fields.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

FILE = "formats.json"


def collect(sources: list[tuple[str, Path, dict]], events_dir: Path) -> dict[str, Any] | None:
    """The formats of the tables in `events_dir`, from the summaries of
    `sources` ((kind, path, summary) each; a summary's ``formats`` is
    taken out of it); None when no source had any."""
    events: dict[str, dict] = {}
    symbol_fields: dict[str, list[str]] = {}
    kallsyms_from: list[Path] = []
    for kind, path, summary in sources:
        formats = summary.pop("formats", None) or []
        long_size = int(summary.get("kernel_long_size") or 8)
        for table, system, print_fmt in formats:
            if table in events:
                continue  # the first source's, as the merged table's columns
            events[table] = {"system": system, "print_fmt": print_fmt, "long_size": long_size}
            fields = _pointer_fields(print_fmt)
            if fields:
                symbol_fields[table] = fields
                if kind == "tracedat" and path not in kallsyms_from:
                    kallsyms_from.append(path)
    if not events:
        return None
    symbols: dict[str, str] = {}
    if symbol_fields and kallsyms_from:
        addresses = _addresses(events_dir, symbol_fields)
        if addresses:
            from cratrace import _native

            for path in kallsyms_from:
                left = sorted(addresses - {int(a) for a in symbols})
                symbols.update((str(a), name) for a, name in _native.tracedat_symbols(str(path), left))
    return {"events": events, "symbols": symbols}


def _pointer_fields(print_fmt: str) -> list[str]:
    from cratrace.dump.printfmt import pointer_fields

    return pointer_fields(print_fmt)


def _addresses(events_dir: Path, fields: dict[str, list[str]]) -> set[int]:
    """The distinct values of the pointer fields (a column by the field's
    name, or `field_<name>`), read in Rust a batch at a time: pyarrow's
    compute module alone cost the import 0.23 s and the column 80 MB of a
    10 M-event trace."""
    from cratrace import _native

    out: set[int] = set()
    for table, names in fields.items():
        path = events_dir / f"{table}.parquet"
        if not path.is_file():
            continue
        for name in names:
            out.update(_native.parquet_distinct_u64(str(path), [name, f"field_{name}"]) or ())
    return out


