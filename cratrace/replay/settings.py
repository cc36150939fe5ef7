"""`cratrace replay --set key=value`: which settings there are, where each
goes (the engine's policy parameters, its costs, the host model, the run)
and the range each must be in; a bad value is a usage error naming it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

from cratrace import _native
from cratrace.errors import UsageError

#: the engine's parameters, from the engine itself (one list, not two)
ENGINE_PARAMS = frozenset(_native.replay_param_defaults())
COSTS = {"context_switch_ns", "hypercall_ns", "scan_per_partner_ns", "migration_ns"}
HOST = {"pcpus", "freq_khz", "recorded_khz", "elasticity"}
OTHER = {"throughput_marker", "fidelity_tolerance_pct", "limit_s", "sched_groups", "cpu_speed", "affinity"}


@dataclass(frozen=True)
class RunSettings:
    """The run's own settings (not the engine's, the costs or the host's),
    typed, each at its default unless `--set` gave it."""

    throughput_marker: str = "txn_end"
    fidelity_tolerance_pct: float = 5.0
    limit_s: float = 3600.0
    sched_groups: str = "auto"
    cpu_speed: str = "off"
    affinity: str = "recorded"
    #: the settings `--set` gave (a marker asked for by name must exist)
    given: frozenset[str] = field(default_factory=frozenset)


class ReplaySettings(NamedTuple):
    """`--set` split by where each setting goes."""

    engine: dict[str, float]
    costs: dict[str, int]
    host: dict
    run: RunSettings
def setting_number(k: str, v: str, expected: str = "a finite number") -> float:
    """A `--set k=v` value that must be a finite number."""
    try:
        x = float(v)
    except ValueError:
        x = float("nan")
    if not math.isfinite(x):
        raise UsageError(f"--set {k}={v}: expected {expected}")
    return x


#: a setting's range: low, high, whether it counts things, what it is
Range = tuple[float, float, bool, str]

#: the host and run settings' ranges (elasticity.VM as elasticity)
RANGES: dict[str, Range] = {
    "pcpus": (1, 4096, True, "a whole number of pCPUs"),
    "freq_khz": (1, 1e9, False, "a frequency in kHz above 0"),
    "recorded_khz": (1, 1e9, False, "a frequency in kHz above 0"),
    "elasticity": (-1, 0, False, "an elasticity from -1 (CPU bound) to 0 (insensitive to frequency)"),
    "limit_s": (1e-9, 1e7, False, "a simulated time limit in seconds above 0"),
    "fidelity_tolerance_pct": (0, 1e6, False, "a tolerance in percent >= 0"),
    "cap": (0.01, 409600, False, "a cap in percent of one CPU above 0 (50: half a CPU, 200: two)"),
    "weight": (1, 10000, False, "a weight from 1 to 10000 (cgroup cpu.weight; 100 is the default)"),
    "power": (0, 1e4, False, "a vCPU's power in W while it runs (0 to 10000)"),
}


def setting_in_range(k: str, v: str, ranges: dict[str, Range] = RANGES, default: Range = (0, math.inf, False, "a number >= 0")) -> float:
    """A `--set k=v` number within `k`'s range in `ranges` (else
    `default`'s: costs and times are >= 0)."""
    lo, hi, whole, what = ranges.get(k.split(".")[0], default)
    x = setting_number(k, v, what)
    if not lo <= x <= hi or (whole and x != int(x)):
        raise UsageError(f"--set {k}={v}: expected {what}")
    return x


def split_settings(settings: dict[str, str]) -> ReplaySettings:
    """Check every `--set` key and value and sort them: the engine's
    parameters, its costs, the host model's, the run's (a bad key or value
    is a usage error naming it)."""
    engine, costs, host, other = {}, {}, {}, {}
    for k, v in settings.items():
        if k in ENGINE_PARAMS:
            engine[k] = setting_number(k, v)
        elif k in COSTS:
            costs[k] = int(setting_in_range(k, v))
        elif k in HOST:
            host[k] = setting_in_range(k, v)
        elif k in OTHER:
            if k == "sched_groups" and v not in ("auto", "recorded", "off", "per-vm"):
                raise UsageError(f"--set sched_groups={v}: auto, recorded (the host's autogroups and CPU cgroups), off (every thread in one group) or per-vm (a what-if: each VM a group of its own, as a session or a libvirt cgroup per VM gives it)")
            if k == "cpu_speed" and v not in ("markers", "off"):
                raise UsageError(f"--set cpu_speed={v}: markers (each CPU's speed over time, read from the vCPUs' transactions between throughput markers) or off (work as long as it took)")
            if k == "affinity" and v not in ("recorded", "off"):
                raise UsageError(f"--set affinity={v}: recorded (each thread on the CPUs the capture allowed it, the default) or off (anywhere); affinity.VM=CPUS sets one VM's")
            if k == "throughput_marker" and not v:
                raise UsageError("--set throughput_marker=: expected the name of a marker the guests write (default txn_end)")
            other[k] = setting_in_range(k, v) if k in ("fidelity_tolerance_pct", "limit_s") else v
        elif k.startswith("class.") and len(k) > 6:
            # per-VM label for asymmetric placement
            if v not in ("cpu", "io"):
                raise UsageError(f"--set {k}={v}: a VM's class is cpu or io")
            host.setdefault("vm_class", {})[k[6:]] = v == "cpu"
        elif k.startswith("elasticity.") and len(k) > 11:
            host.setdefault("vm_elasticity", {})[k[11:]] = setting_in_range(k, v)
        elif k.startswith("cap.") and len(k) > 4:
            # a what-if: the VM's CPU capped at PCT% of one CPU
            host.setdefault("vm_cap", {})[k[4:]] = setting_in_range(k, v) / 100
        elif k.startswith("weight.") and len(k) > 7:
            # a what-if: the VM's share against the others' (100 each)
            host.setdefault("vm_share", {})[k[7:]] = setting_in_range(k, v) / 100
        elif k.startswith("power.") and len(k) > 6:
            # each of the VM's vCPUs draws this while it runs (a class a
            # user measured: a hot, vector-heavy VM against a cold one)
            host.setdefault("vm_power", {})[k[6:]] = setting_in_range(k, v)
        elif k.startswith("affinity.") and len(k) > 9:
            # a what-if: the VM's vCPUs on these CPUs (a Linux CPU list)
            from cratrace.model.affinity import parse_cpulist

            try:
                cpus = parse_cpulist(v)
            except ValueError:
                cpus = []
            if not cpus:
                raise UsageError(f"--set {k}={v}: expected a CPU list such as 0-3,8")
            host.setdefault("vm_affinity", {})[k[9:]] = cpus
        else:
            allowed = ", ".join(sorted(ENGINE_PARAMS | COSTS | HOST | OTHER)) + ", class.VM, elasticity.VM, affinity.VM, cap.VM, weight.VM, power.VM"
            raise UsageError(f"--set {k}: unknown setting (allowed: {allowed})")
    return ReplaySettings(engine, costs, host, RunSettings(**other, given=frozenset(other)))
