"""perf.data files, read by the native Rust reader: tracepoint samples land
in the same tables as trace.dat's, hardware samples in `perf_sample`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from cratrace import _native
from cratrace.importers import sink_options

KIND = "perfdata"


def sniff(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(8) == b"PERFILE2"
    except OSError:
        return False


def read(path: Path, out_dir: Path, *, options: dict[str, Any], progress: Callable[[int, int], None] | None) -> dict:
    s = dict(_native.read_perfdata(str(path), str(out_dir), **sink_options(options), progress=progress))
    s.update({"stats": {}, "raw_fields": [], "lost_events": {"": {"all": {"count": s.get("lost", 0), "unknown_pages": 0}}} if s.get("lost") else {}})
    return s
