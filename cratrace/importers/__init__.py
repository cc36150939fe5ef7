"""Importers: one module per source format, discovered by name.

Each module exposes ``KIND`` (the manifest's kind string), ``sniff(path)``
(is this file mine?) and ``read(path, out_events_dir, *, options,
progress) -> dict`` (write ``<event>.parquet`` files into the directory and
return a reader summary for capture.json). Adding a format means adding a
module to ``IMPORTER_MODULES``; nothing else changes.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from cratrace.optional import optional_module

IMPORTER_MODULES = ("tracedat", "xentrace", "perfdata", "perfstat")


def sink_options(options: dict) -> dict:
    """The native readers' Parquet settings from an importer's `options`
    (the defaults are the readers' own)."""
    return {"batch_rows": int(options.get("batch_rows", 4096)), "compression": str(options.get("compression", "lz4"))}


def polars_compression(codec: str) -> str:
    """`--compression`'s name for a codec as polars' Parquet writers spell it."""
    return {"none": "uncompressed"}.get(codec, codec)


def available() -> dict[str, ModuleType]:
    """KIND -> module for every importer present in this build."""
    mods = (optional_module(f"cratrace.importers.{name}") for name in IMPORTER_MODULES)
    return {mod.KIND: mod for mod in mods if mod is not None}


def sniff(path: Path) -> str | None:
    """The KIND of a trace file, or None if no importer recognises it."""
    for kind, mod in available().items():
        if mod.sniff(path):
            return kind
    return None
