"""Consolidation what-ifs on a recorded workload: one VM fewer, copies of
a VM more (the capacity planner's questions), as pure functions from a
`Workload` to a new one. Fewer or more CPUs, caps and weights are engine
settings (`--set pcpus=N`, `cap.VM=PCT`, `weight.VM=W`).

A copy of a VM replays its recorded demand again as another VM: its own
threads (stand-in ids below the capture's), its own locks, the same
affinity, started later by an offset drawn from the seed (uniform in
[0, `ADD_VM_SPREAD_NS`)), so copies do not run in lock step.
"""

from __future__ import annotations

import random
from array import array
from dataclasses import replace

from cratrace.errors import UsageError
from cratrace.replay.spill import PHASE_TYPECODES, PhaseSpill
from cratrace.replay.workload import WAIT_FOR, Workload

#: copies of a VM start this much later at most (the seeded offset's range)
ADD_VM_SPREAD_NS = 100_000_000


def parse_add_vm(spec: str) -> tuple[str, int]:
    """`NAME[:COUNT]` → (name, count >= 1)."""
    name, sep, count = spec.rpartition(":")
    if not sep or not count.isdigit():
        name, count = spec, "1"
    if not name or int(count) < 1:
        raise UsageError(f"--add-vm {spec}: expected NAME or NAME:COUNT (a count of 1 or more)")
    return name, int(count)


def _vm_index(w: Workload, name: str, option: str) -> int:
    if name not in w.vm_names:
        raise UsageError(f"{option} {name}: no VM of that name in the capture (VMs: {', '.join(w.vm_names) or 'none'})")
    return w.vm_names.index(name)


def _rebuilt(w: Workload, keep: list[int], extra: list[tuple[int, dict]]) -> Workload:
    """`w` with only the threads `keep` (in that order), then `extra`
    copies ((source thread, overrides) each: `tid`, `vm`, `delay` and
    `waits`, its own map from old thread indices to new), phases remapped;
    a wait on a thread that is gone is dropped."""
    new_of = {old: new for new, old in enumerate(keep)}
    # the recorded phases in memory for the while (a what-if's threads
    # take them in another order); the new ones go to a spill of their own
    phase_thread, phase_kind, phase_a, phase_b = w.phase_columns()
    per_thread: dict[int, list[int]] = {}
    for i, t in enumerate(phase_thread):
        per_thread.setdefault(t, []).append(i)
    out = replace(
        w,
        tids=[], vm_of=[], vcpu_of=[], start=[], start_cpu=[], fine_accounting=[], group_of=[], allowed=[], power_w=[], recorded_cpu_ns=[],
        phases=PhaseSpill(),
    )
    new_phases = tuple(array(code) for code in PHASE_TYPECODES)
    rows = [(old, {}) for old in keep] + extra
    for new, (old, over) in enumerate(rows):
        out.tids.append(over.get("tid", w.tids[old]))
        out.vm_of.append(over.get("vm", w.vm_of[old]))
        out.vcpu_of.append(w.vcpu_of[old])
        out.start.append(w.start[old] + over.get("delay", 0))
        out.start_cpu.append(w.start_cpu[old])
        out.fine_accounting.append(w.fine_accounting[old])
        out.group_of.append(w.group_of[old])
        out.allowed.append(w.allowed[old])
        out.power_w.append(w.power_w[old])
        out.recorded_cpu_ns.append(w.recorded_cpu_ns[old])
        waits = {**new_of, **over.get("waits", {})}
        for i in per_thread.get(old, []):
            kind, a, b = phase_kind[i], phase_a[i], phase_b[i]
            if kind == WAIT_FOR:
                if int(a) not in waits:
                    continue
                a = waits[int(a)]
            for col, x in zip(new_phases, (new, kind, a, b)):
                col.append(x)
    out.extend_phases(*new_phases)
    return out


def drop_vms(w: Workload, names: list[str]) -> Workload:
    """`w` without the threads of the VMs `names` (their demand gone)."""
    gone = {_vm_index(w, n, "--drop-vm") for n in names}
    keep = [i for i, v in enumerate(w.vm_of) if v not in gone]
    out = _rebuilt(w, keep, [])
    kept_vms = [i for i in range(len(w.vm_names)) if i not in gone]
    renumber = {old: new for new, old in enumerate(kept_vms)}
    out.vm_of = [renumber.get(v, -1) if v >= 0 else -1 for v in out.vm_of]
    out.vm_names = [w.vm_names[i] for i in kept_vms]
    for d in ("critical_ns", "recorded_marks", "recorded_spin_ns", "recorded_window"):
        setattr(out, d, {k: v for k, v in getattr(w, d).items() if k not in names})
    return out


def add_vm(w: Workload, name: str, count: int, seed: int) -> Workload:
    """`w` with `count` more copies of VM `name`'s demand, named
    `name+1`, `name+2`, ..."""
    src = _vm_index(w, name, "--add-vm")
    threads = [i for i, v in enumerate(w.vm_of) if v == src]
    rng = random.Random(f"add-vm {name} {seed}")
    next_tid = min([0, *w.tids]) - 1
    extra: list[tuple[int, dict]] = []
    delays: list[int] = []
    out_names = list(w.vm_names)
    for k in range(1, count + 1):
        copy = f"{name}+{k}"
        if copy in out_names:
            raise UsageError(f"--add-vm {name}: the capture already has a VM named {copy}")
        out_names.append(copy)
        vm = len(out_names) - 1
        delay = rng.randrange(ADD_VM_SPREAD_NS)
        delays.append(delay)
        # the copy's threads wait on each other, as the VM's did
        first = len(w.tids) + len(extra)
        waits = {old: first + j for j, old in enumerate(threads)}
        for old in threads:
            extra.append((old, {"tid": next_tid, "vm": vm, "delay": delay, "waits": waits}))
            next_tid -= 1
    out = _rebuilt(w, list(range(len(w.tids))), extra)
    out.vm_names = out_names
    for k, delay in enumerate(delays, start=1):
        copy = f"{name}+{k}"
        for d in ("critical_ns", "recorded_marks", "recorded_spin_ns"):
            src_val = getattr(w, d).get(name)
            if src_val is not None:
                getattr(out, d)[copy] = src_val
        if name in w.recorded_window:
            first, last = w.recorded_window[name]
            out.recorded_window[copy] = (first + delay, last + delay)
    return out
