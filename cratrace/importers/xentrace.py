"""xentrace binary files, read by the native Rust reader.

Timestamps are TSC cycles; converting them to ns needs the host's CPU
frequency, from host.json (the collector reads it from `xl info`) or
`cratrace import --cpu-hz`. Without it the import stops with a one-line
error saying so: a capture with cycles in the `ts` column would be
silently wrong. The raw cycles stay in each table's `tsc` column.

VMEXIT reasons are named in the host's space (Intel VMX or AMD SVM),
which the file does not record either: see `exit_reason_space`.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, Callable

from cratrace import _native
from cratrace.errors import UsageError
from cratrace.importers import sink_options

KIND = "xentrace"
CPU_CHANGE = 0x0001F003


def sniff(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(12)
    except OSError:
        return False
    if len(head) < 12:
        return False
    w, cpu, _ = struct.unpack("<III", head)
    return w & 0x0FFFFFFF == CPU_CHANGE and (w >> 28) & 7 == 2 and cpu < 4096


def exit_reason_space(cpu_model: str | None) -> tuple[str, str]:
    """The VMEXIT reason space (`vmx` or `svm`) of a host with CPU
    `cpu_model` (host.json's, from /proc/cpuinfo), and what decided it. A
    xentrace file does not say; without a host snapshot VMX is assumed, as
    xenalyze does (the raw `exit_reason` is kept either way)."""
    if cpu_model and any(v in cpu_model.upper() for v in ("AMD", "HYGON")):  # Hygon: AMD-V too
        return "svm", f"host.json cpu model {cpu_model!r}"
    if cpu_model:
        return "vmx", f"host.json cpu model {cpu_model!r}"
    return "vmx", "assumed (no host.json cpu model)"


def read(path: Path, out_dir: Path, *, options: dict[str, Any], progress: Callable[[int, int], None] | None) -> dict:
    hz = options.get("cpu_hz")
    if not hz:
        raise UsageError(f"{path}: xentrace timestamps are TSC cycles; pass --cpu-hz (the host's CPU frequency, e.g. 2.4e9) or import the raw capture with its host.json")
    exits, basis = exit_reason_space(options.get("cpu_model"))
    s = dict(_native.read_xentrace(str(path), str(out_dir), cpu_hz=float(hz), exit_reasons=exits, **sink_options(options), progress=progress))
    s["exit_reasons_from"] = basis
    s.setdefault("stats", {})
    s.setdefault("raw_fields", [])
    s["lost_events"] = {"": {c: {"count": n, "unknown_pages": 0} for c, n in s.get("lost_records", {}).items()}}
    return s
