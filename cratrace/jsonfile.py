"""JSON files people read as well as programs: capture.json.

Indented, except long lists of plain values or short rows (a trace's
saved cmdlines: thousands of ``[pid, "comm"]``), which go one row a line.
``json.dumps(indent=2)`` spread each row over four lines: a 2.75 M-event
trace's capture.json was 450 KB and took 13 ms to encode, a thirtieth of
its whole import on one core; this way it is about a third of the size
and a few ms.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

#: lists at least this long, of no dicts, are written a row a line
LONG = 32


def dumps(obj: Any) -> str:
    """`obj` as indented JSON with long flat lists a row a line; loads
    back equal to `obj`."""
    token = uuid.uuid4().hex
    rows: list[str] = []

    def swap(o: Any) -> Any:
        if isinstance(o, dict):
            return {k: swap(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            if len(o) >= LONG and not any(isinstance(x, dict) for x in o):
                # \x01 cannot occur in JSON text (strings escape it): as the
                # item separator it marks the rows' boundaries exactly
                flat = json.dumps(o, separators=("\x01", ": "))
                flat = flat.replace("]\x01[", "],\n[").replace("\x01", ", ")
                rows.append("[\n" + flat[1:] if isinstance(o[0], (list, tuple)) else flat)
                return f"{token}:{len(rows) - 1}"
            return [swap(x) for x in o]
        return o

    text = json.dumps(swap(obj), indent=2)
    for i, raw in enumerate(rows):
        text = text.replace(f'"{token}:{i}"', raw, 1)
    return text
