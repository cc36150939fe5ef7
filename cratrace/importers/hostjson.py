"""host.json (written by the collector) → capture.json's host and VM inventory.

Every key is optional: a snapshot taken where libvirt or Xen is absent says
so, and an older collector may not know a key at all.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cratrace.errors import CaptureError


def load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CaptureError(f"{path}: unreadable host snapshot ({e})") from None
    if not isinstance(data, dict):
        raise CaptureError(f"{path}: host snapshot is not a JSON object")
    return data


def to_capture(host: dict[str, Any]) -> dict[str, Any]:
    """The parts of capture.json a host snapshot provides."""
    cpu = host.get("cpu") or {}
    return {
        "host": {k: host.get(k) for k in ("hostname", "kernel", "kernel_hz", "clocksource", "cpufreq", "idle_states", "libvirt", "xen") if k in host}
        | {"cpu_model": cpu.get("model"), "topology": cpu.get("topology")},
        "tsc_hz": host.get("tsc_hz"),
        "cpu_hz": host.get("cpu_hz") or (host.get("xen") or {}).get("cpu_hz"),
        "vms": host.get("vms") or [],
        # each thread's CFS scheduling group (autogroup or CPU cgroup) and
        # the groups' weights, when the collector recorded them
        "sched_groups": host.get("sched_groups"),
    }
