"""trace.dat (trace-cmd) files, read by the native Rust reader."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from cratrace import _native
from cratrace.importers import sink_options

KIND = "tracedat"
MAGIC = b"\x17\x08\x44tracing"


def sniff(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(10) == MAGIC
    except OSError:
        return False


def read(path: Path, out_dir: Path, *, options: dict[str, Any], progress: Callable[[int, int], None] | None) -> dict:
    return dict(_native.read_tracedat(str(path), str(out_dir), **sink_options(options), max_memory=options.get("max_memory"), progress=progress))
