"""What every policy's replay of one capture shares, resolved once: the
workload (with its what-ifs applied), the engine's parameters under the
recorded kernel's defaults, the costs, the host model and the run's own
settings. `cratrace.replay.run` then runs one policy at a time on it.

Precedence, for every value: `--set`, else the capture's declared
scheduler (a generated capture's), else host.json or the capture's own
measurement, else the recorded kernel's default, else the engine's."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from cratrace import _native
from cratrace.capture import Capture
from cratrace.errors import UsageError
from cratrace.replay.costs import resolve_costs
from cratrace.replay.settings import RunSettings, split_settings
from cratrace.replay.workload import Workload, extract_workload


@dataclass
class ReplayPlan:
    """One capture's replay, resolved: what each policy's run shares."""

    cap: Capture
    #: the demand to replay (a what-if's, when one is asked)
    workload: Workload
    #: the engine's parameters (policy settings), by name
    engine: dict[str, float]
    #: the engine's costs (ns) and where each came from
    costs: dict[str, int]
    cost_source: dict[str, str]
    #: the host model (pcpus, frequencies, per-VM caps, classes, ...)
    host: dict
    run: RunSettings
    #: `--set` as given (metrics.json repeats it)
    settings: dict[str, str]
    #: the what-ifs asked (empty: the recording as it was)
    whatif: dict
    #: how scheduling groups are replayed (`--set sched_groups`, resolved)
    groups_mode: str
    seed: int
    #: the policy that produced the capture (its replay is the fidelity check)
    baseline: str


def plan_replay(cap: Capture | str | Path, *, settings: dict[str, str] | None = None, seed: int = 0, drop_vms: list[str] = (), add_vms: list[str] = ()) -> ReplayPlan:
    """Check the settings and resolve everything the policies' runs
    share (a bad setting, seed or VM name is a usage error naming it)."""
    if not 0 <= seed < 2**64:
        raise UsageError(f"--seed {seed}: expected a whole number from 0 to 2^64 - 1")
    cap = cap if isinstance(cap, Capture) else Capture(cap)
    settings = dict(settings or {})
    engine, costs, host, run = split_settings(settings)
    # the declared host scheduler's own settings (a generated capture's:
    # its slice, its switches' cost), under what --set gives
    declared = {k: str(v) for k, v in ((cap.meta.get("scheduler") or {}).get("params") or {}).items()}
    d_engine, d_costs, _, _ = split_settings(declared)
    engine = {**d_engine, **engine}
    host["affinity"] = run.affinity
    marker = run.throughput_marker
    # --set, else host.json's, else the capture's own measurement, else the default
    costs, cost_source = resolve_costs(cap, costs, d_costs, _native.replay_default_costs())
    w = extract_workload(cap, marker, switch_ns=costs["context_switch_ns"], migration_ns=costs["migration_ns"], cpu_speed=run.cpu_speed)
    if "throughput_marker" in run.given and marker not in w.marker_names:
        # asked for by name: a typo would otherwise turn every VM's
        # throughput into useful guest seconds without a word
        known = ", ".join(w.marker_names) or "none"
        raise UsageError(f"--set throughput_marker={marker}: no marker of that name in {cap.path} (its markers: {known})")
    w = with_what_ifs(w, drop_vms, add_vms, seed)
    groups_mode = resolve_sched_groups(w, run.sched_groups)
    apply_sched_groups(w, groups_mode)
    recorded_kernel_defaults(engine, cap, w, int(float(host.get("pcpus", w.pcpus))))
    return ReplayPlan(
        cap=cap, workload=w, engine=engine, costs=costs, cost_source=cost_source, host=host, run=run, settings=settings,
        whatif=what_ifs(settings, drop_vms, add_vms), groups_mode=groups_mode, seed=seed, baseline=baseline_policy(cap, w),
    )


def with_what_ifs(w: Workload, drop_vms: list[str], add_vms: list[str], seed: int) -> Workload:
    """The what-if's workload: VMs dropped, copies of VMs added (the
    recorded one's figures stay beside it)."""
    from cratrace.replay.whatif import add_vm, drop_vms as drop, parse_add_vm

    if drop_vms:
        w = _replacing(w, drop(w, list(drop_vms)))
    for spec in add_vms:
        w = _replacing(w, add_vm(w, *parse_add_vm(spec), seed))
    return w


def _replacing(old: Workload, new: Workload) -> Workload:
    """`new`, `old`'s phases removed from disk (no longer replayed)."""
    old.close()
    return new


#: the share of the host's CPU time threads of other scheduling groups
#: than the VMs' must have used for `sched_groups=auto` to replay groups
#: when the VMs share one: far from both kinds of lab capture measured
#: (under 3% quiet, 45-51% beside a busy session; docs/replay-policies.md)
OTHER_GROUPS_SHARE = 0.10


def resolve_sched_groups(w: Workload, mode: str) -> str:
    """`auto` → `recorded` when the kernel split the CPUs by group weight
    in a way one flat queue cannot: the capture's VMs were in different
    scheduling groups (per-VM cgroups or sessions), or threads of other
    groups than the VMs' used at least `OTHER_GROUPS_SHARE` of the host's
    CPU time (a busy session beside the VMs' gets half the CPUs as a
    group, where a flat queue gives it one thread's share); else `off`.
    Measured on this project's lab captures (docs/replay-policies.md)."""
    if mode != "auto":
        return mode
    vm_groups: dict[int, set[int]] = {}
    for vm, g in zip(w.vm_of, w.group_of):
        if vm >= 0:
            vm_groups.setdefault(vm, set()).add(g)
    separate = len(vm_groups) > 1 and all(len(gs) == 1 and -1 not in gs for gs in vm_groups.values()) \
        and len({next(iter(gs)) for gs in vm_groups.values()}) == len(vm_groups)
    return "recorded" if separate or other_groups_share(w, vm_groups) >= OTHER_GROUPS_SHARE else "off"


def other_groups_share(w: Workload, vm_groups: dict[int, set[int]]) -> float:
    """The share of the host's CPU time (its CPUs × the capture's span)
    that threads of no VM, in scheduling groups other than the VMs' (not
    the root group), used as recorded."""
    if not vm_groups or not w.recorded_cpu_ns:
        return 0.0
    theirs = set().union(*vm_groups.values())
    ns = sum(cpu for vm, g, cpu in zip(w.vm_of, w.group_of, w.recorded_cpu_ns) if vm < 0 and g >= 0 and g not in theirs)
    return ns / max(1, w.duration_ns * w.pcpus)


#: settings that change the host or the demand: a replay under them is a
#: what-if, not the recording replayed
WHATIF_SETTINGS = ("pcpus", "freq_khz", "affinity", "sched_groups")
WHATIF_PREFIXES = ("cap.", "weight.", "affinity.")


def what_ifs(settings: dict[str, str], drop_vms, add_vms) -> dict:
    """The what-ifs a replay asks (empty: the recording as it was)."""
    as_recorded = {"affinity": ("recorded",), "sched_groups": ("auto", "recorded")}
    out: dict = {k: v for k, v in settings.items() if (k in WHATIF_SETTINGS and v not in as_recorded.get(k, ())) or k.startswith(WHATIF_PREFIXES)}
    if drop_vms:
        out["drop_vm"] = list(drop_vms)
    if add_vms:
        out["add_vm"] = list(add_vms)
    return out


def apply_sched_groups(w: Workload, mode: str) -> None:
    """Set `w`'s scheduling groups as `mode` (resolved) replays them."""
    if mode == "off":
        w.group_of = [-1] * len(w.group_of)
    elif mode == "per-vm":
        # a what-if: each VM a scheduling group of its own (a session or
        # a libvirt cgroup per VM), host threads in the root group
        w.group_names = [f"vm:{n}" for n in w.vm_names]
        w.group_shares = [1024] * len(w.vm_names)
        w.group_of = [v if v >= 0 else -1 for v in w.vm_of]


def recorded_kernel_defaults(engine: dict[str, float], cap: Capture, w: Workload, pcpus: int) -> None:
    """The recorded host's own values for what `--set` left unsaid: its
    kernel's tick, EEVDF slice and newidle balancing, its guests' spin
    time before halting."""
    hz = (cap.meta.get("host") or {}).get("kernel_hz")
    if isinstance(hz, (int, float)) and hz > 0:
        # the recorded kernel's tick: when it noticed expired slices
        engine.setdefault("tick_hz", float(hz))
    release = linux_release(str((cap.meta.get("host") or {}).get("kernel") or ""))
    slice_ns = linux_base_slice_ns(release, pcpus)
    if slice_ns is not None:
        engine.setdefault("base_slice_ns", slice_ns)
    odds = linux_newidle_odds(release)
    if odds is not None:
        engine.setdefault("newidle_odds", odds)
    if w.pv_spin_ns:
        # how long this capture's guests spun before halting
        engine.setdefault("pv_spin_ns", float(w.pv_spin_ns))


def baseline_policy(cap: Capture, w: Workload | None = None) -> str:
    """The policy that produced the capture: the one host.json declares
    (`scheduler.policy`: a generated capture's); else credit on Xen; on
    Linux, eevdf from 6.6 on (host.json's kernel), fair (CFS) before or
    when the kernel is unknown; with `+pv` when its vCPUs halted inside
    spin episodes (paravirtual spinlocks). `w`: the capture's workload, if
    already extracted."""
    declared = (cap.meta.get("scheduler") or {}).get("policy")
    kinds = {s["kind"] for s in cap.meta.get("sources", [])}
    if declared:
        sched = str(declared)
    elif "xentrace" in kinds:
        return "credit"
    else:
        release = linux_release(str((cap.meta.get("host") or {}).get("kernel") or ""))
        sched = "eevdf" if release is not None and release >= (6, 6) else "fair"
    if w is None and "vcpu_states" in cap.model:
        w = extract_workload(cap)
        # only its figures are read: its phases go at once
        w.close()
    return f"{sched}+pv" if w is not None and w.pv_halts else sched


def linux_release(uname: str) -> tuple[int, int, int] | None:
    """(major, minor, patch) from `uname -srvm` text such as "Linux
    6.18.44-fc #1 SMP ..." (patch 0 when absent, as in "Linux 6.19-rc4");
    None when it does not name a Linux release."""
    m = re.match(r"Linux (\d+)\.(\d+)(?:\.(\d+))?", uname.strip())
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)) if m else None


def linux_newidle_odds(release: tuple[int, int, int] | None) -> float | None:
    """0 when the recorded kernel balanced at every newidle: proportional
    newidle balancing (NI_RANDOM) came with 6.18.5 and 6.19. Other stable
    series may have it backported, which a release number cannot tell;
    None (unknown or new enough): the engine's default, on."""
    if release is None or release >= (6, 18, 5):
        return None
    return 0.0


def linux_base_slice_ns(release: tuple[int, ...] | None, cpus: int) -> float | None:
    """EEVDF's base slice on the recorded kernel when it differs from the
    engine's default (0.75 ms scaled by 1 + log2 CPUs, CPUs capped at 8):
    Linux 6.15 cut the unscaled slice to 0.70 ms (so that a slice no longer
    ends just past a tick). None: the engine's default."""
    if release is None or release < (6, 15):
        return None
    return 0.70e6 * (1 + (max(1, min(cpus, 8)).bit_length() - 1))


