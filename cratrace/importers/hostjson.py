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
    problem = _shape_problem(data)
    if problem:
        raise CaptureError(f"{path}: host snapshot: {problem}")
    return data


def _shape_problem(host: dict[str, Any]) -> str | None:
    """What in the keys capture.json takes from a snapshot is not as the
    collector writes it (later stages read them as such), else None."""
    for k in ("cpu", "xen"):
        if host.get(k) is not None and not isinstance(host[k], dict):
            return f"{k} is {type(host[k]).__name__}, not an object"
    rates = [(k, host.get(k)) for k in ("tsc_hz", "cpu_hz", "kernel_hz")] + [("xen.cpu_hz", (host.get("xen") or {}).get("cpu_hz"))]
    for k, v in rates:
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0):
            return f"{k} is {v!r}, not a positive number"
    aff = host.get("affinity")
    if aff is not None and not (isinstance(aff, dict) and all(str(k).isdigit() and isinstance(v, (str, list)) for k, v in aff.items())):
        return "affinity is not an object of thread id: CPU list"
    sch = host.get("scheduler")
    if sch is not None and not (isinstance(sch, dict) and isinstance(sch.get("policy"), str) and isinstance(sch.get("params", {}), dict)):
        return "scheduler is not an object with a policy (and params)"
    vms = host.get("vms")
    if vms is None:
        return None
    if not isinstance(vms, list):
        return f"vms is {type(vms).__name__}, not a list"
    for i, vm in enumerate(vms):
        if not isinstance(vm, dict) or not isinstance(vm.get("name"), str):
            return f"vms[{i}] is not an object with a name"
        vcpus = vm.get("vcpus", [])
        if not isinstance(vcpus, list) or not all(isinstance(c, dict) and isinstance(c.get("index"), int) and isinstance(c.get("tid"), int) for c in vcpus):
            return f"vms[{i}] ({vm['name']}): vcpus is not a list of {{index, tid}} objects"
    return None


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
        # each VM thread's allowed CPUs, and a declared host scheduler
        "affinity": host.get("affinity"),
        "scheduler": host.get("scheduler"),
        "power_w": host.get("power_w"),
    }
