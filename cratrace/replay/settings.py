"""`cratrace replay --set key=value`: which settings there are, where each
goes (the engine's policy parameters, its costs, the host model, the run)
and the range each must be in; a bad value is a usage error naming it."""

from __future__ import annotations

import math

from cratrace.errors import UsageError

ENGINE_PARAMS = {
    "sched_latency_ns", "min_granularity_ns", "wakeup_granularity_ns", "base_slice_ns", "tick_hz", "migration_cost_ns", "newidle_cost_ns", "newidle_odds", "wake_update_curr", "host_placement", "busy_balance_ns", "busy_balance_load", "credit_slice_ns", "credit_tick_ns", "credit_acct_ns", "rr_slice_ns", "cap_period_ns", "cap_check_ns",
    "ple_window_ns", "spin_budget_ns", "respin_ns", "excess_retries", "pv_spin_ns",
    "balance_period_ns", "balance_k", "balance_window", "balance_decay", "force_swap_hz", "swap_cost_ns", "safe_point_ns",
    "static_w", "idle_w", "capacitance", "volt",
    "ambient_c", "throttle_c", "r_core_c_per_w", "c_core_j_per_c", "r_sink_c_per_w", "c_sink_j_per_c",
    "fast_cores", "fast_khz", "slow_khz", "fast_volt", "slow_volt", "fast_slice_ns", "slow_slice_ns", "cpu_class_util", "io_block_hz", "spill_slow",
}
COSTS = {"context_switch_ns", "hypercall_ns", "scan_per_partner_ns", "migration_ns"}
HOST = {"pcpus", "freq_khz", "recorded_khz", "elasticity"}
OTHER = {"throughput_marker", "fidelity_tolerance_pct", "limit_s", "sched_groups", "cpu_speed", "affinity"}
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


def split_settings(settings: dict[str, str]) -> tuple[dict, dict, dict, dict]:
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
            if k in ("fidelity_tolerance_pct", "limit_s"):
                setting_in_range(k, v)
            if k == "cpu_speed" and v not in ("markers", "off"):
                raise UsageError(f"--set cpu_speed={v}: markers (each CPU's speed over time, read from the vCPUs' transactions between throughput markers) or off (work as long as it took)")
            if k == "affinity" and v not in ("recorded", "off"):
                raise UsageError(f"--set affinity={v}: recorded (each thread on the CPUs the capture allowed it, the default) or off (anywhere); affinity.VM=CPUS sets one VM's")
            if k == "throughput_marker" and not v:
                raise UsageError("--set throughput_marker=: expected the name of a marker the guests write (default txn_end)")
            other[k] = v
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
    return engine, costs, host, other
