"""`kvm-heavy-spin`: VMs × vCPUs oversubscribed on pCPUs, with lock-holder
preemption and PAUSE exits (issue #8).

A small time-stepped host: vCPU threads (`CPU n/KVM` of processes
`qemu-system-x86_64`) take turns on pCPUs in FIFO order with a time slice;
each vCPU computes, takes its VM's spin lock, holds it for a critical
section, releases it (marking `txn_end`) and sleeps. A vCPU that finds the
lock held spins in guest mode and takes a PAUSE exit (VMX reason 40) every
`pause_gap_us`; when the holder was preempted, the spin lasts until the
holder runs again. Events: sched_switch, kvm_entry/kvm_exit (reasons 40
PAUSE, 12 HLT, 1 external interrupt), sched_process_fork, trace_marker.

Truth: every spin stint (a contiguous run of PAUSE exits on one pCPU
stint: its first and last exit), transactions per VM, CPU time per vCPU.
"""

from __future__ import annotations

import random
from collections import deque
from pathlib import Path

from cratrace.synth.tracedat_writer import TraceDatWriter

PARAMS = {
    "vms": (2, "VMs"),
    "vcpus": (2, "vCPUs per VM"),
    "pcpus": (2, "host CPUs"),
    "duration_ms": (300, "simulated time"),
    "slice_us": (500, "host time slice"),
    "burst_us": (300, "mean compute burst between critical sections"),
    "hold_us": (100, "critical section"),
    "sleep_us": (50, "mean sleep after a transaction"),
    "pause_gap_us": (10, "PAUSE exits are this far apart while spinning"),
}
STEP_NS = 10_000
PAUSE, HLT, EXT_INT = 40, 12, 1


def generate(out: Path, seed: int = 1, **params) -> dict:
    p = {k: v for k, (v, _) in PARAMS.items()} | {k: int(v) for k, v in params.items()}
    rng = random.Random(seed)
    nv = p["vms"] * p["vcpus"]
    qpid = [1000 + 100 * v for v in range(p["vms"])]
    tid = [qpid[i // p["vcpus"]] + 1 + i % p["vcpus"] for i in range(nv)]
    name = [f"CPU {i % p['vcpus']}/KVM" for i in range(nv)]
    vm_of = [i // p["vcpus"] for i in range(nv)]
    w = TraceDatWriter(version=7, compression="zstd", cpus=p["pcpus"], cmdlines={t: n for t, n in zip(tid, name)} | {q: "qemu-system-x86" for q in qpid}).add_bundled_formats()
    t = 1_000_000_000
    for i in range(nv):
        w.event(t, 0, "sched_process_fork", pid=qpid[vm_of[i]], parent_comm="qemu-system-x86", parent_pid=qpid[vm_of[i]], child_comm=name[i], child_pid=tid[i])
        t += 1000
    start = t
    end = start + p["duration_ms"] * 1_000_000
    us = 1000
    state = ["work"] * nv
    left = [rng.randint(p["burst_us"] // 2, p["burst_us"] * 3 // 2) * us for _ in range(nv)]
    wake_at = [0] * nv
    lock = [None] * p["vms"]
    ready = deque(range(nv))
    cur = [None] * p["pcpus"]
    slice_left = [0] * p["pcpus"]
    last_pause = [0] * nv
    stint: list = [None] * nv  # open spin stint [first, last]
    truth_spins, txns, cpu_ns = [], [0] * p["vms"], [0] * nv

    def close_stint(v):
        if stint[v] is not None:
            truth_spins.append({"vm": f"vm{vm_of[v]}", "vcpu": v % p["vcpus"], "start": stint[v][0], "end": stint[v][1]})
            stint[v] = None

    def switch(c, prev, nxt, prev_state, now):
        pp, pc = (tid[prev], name[prev]) if prev is not None else (0, f"swapper/{c}")
        np_, nc = (tid[nxt], name[nxt]) if nxt is not None else (0, f"swapper/{c}")
        w.event(now, c, "sched_switch", pid=pp, prev_comm=pc, prev_pid=pp, prev_prio=120, prev_state=prev_state, next_comm=nc, next_pid=np_, next_prio=120)

    t = start
    while t < end:
        for v in range(nv):
            if state[v] == "sleep" and wake_at[v] <= t:
                state[v] = "work"
                left[v] = rng.randint(p["burst_us"] // 2, p["burst_us"] * 3 // 2) * us
                ready.append(v)
        for c in range(p["pcpus"]):
            v = cur[c]
            if v is None and ready:
                v = ready.popleft()
                cur[c] = v
                slice_left[c] = p["slice_us"] * us
                switch(c, None, v, 0, t)
                w.event(t + 500, c, "kvm_entry", pid=tid[v], vcpu_id=v % p["vcpus"], rip=0xFFFFFFFF81000000)
                last_pause[v] = t
                continue
            if v is None:
                continue
            cpu_ns[v] += STEP_NS
            vm = vm_of[v]
            if state[v] == "work":
                left[v] -= STEP_NS
                if left[v] <= 0:
                    state[v] = "spin"
            if state[v] == "spin":
                if lock[vm] is None:
                    lock[vm] = v
                    close_stint(v)
                    state[v] = "crit"
                    left[v] = p["hold_us"] * us
                elif t - last_pause[v] >= p["pause_gap_us"] * us:
                    w.event(t, c, "kvm_exit", pid=tid[v], exit_reason=PAUSE, guest_rip=0xFFFFFFFF81001000, isa=1, vcpu_id=v % p["vcpus"])
                    w.event(t + 300, c, "kvm_entry", pid=tid[v], vcpu_id=v % p["vcpus"], rip=0xFFFFFFFF81001000)
                    last_pause[v] = t
                    stint[v] = [t, t] if stint[v] is None else [stint[v][0], t]
            elif state[v] == "crit":
                left[v] -= STEP_NS
                if left[v] <= 0:
                    lock[vm] = None
                    txns[vm] += 1
                    w.event(t + 100, c, "print", pid=tid[v], ip=0xFFFFFFFF81002000, buf=f"txn_end vm=vm{vm} vcpu={v % p['vcpus']}\n")
                    w.event(t + 200, c, "kvm_exit", pid=tid[v], exit_reason=HLT, guest_rip=0xFFFFFFFF81003000, isa=1, vcpu_id=v % p["vcpus"])
                    state[v] = "sleep"
                    wake_at[v] = t + rng.randint(p["sleep_us"] // 2, p["sleep_us"] * 3 // 2) * us
                    cur[c] = None
                    switch(c, v, None, 1, t + 1000)
                    continue
            slice_left[c] -= STEP_NS
            if slice_left[c] <= 0 and ready:
                close_stint(v)
                w.event(t, c, "kvm_exit", pid=tid[v], exit_reason=EXT_INT, guest_rip=0xFFFFFFFF81004000, isa=1, vcpu_id=v % p["vcpus"])
                ready.append(v)
                cur[c] = None
                switch(c, v, None, 0, t + 1000)
                if ready:
                    nxt = ready.popleft()
                    cur[c] = nxt
                    slice_left[c] = p["slice_us"] * us
                    switch(c, None, nxt, 0, t + 2000)
                    w.event(t + 2500, c, "kvm_entry", pid=tid[nxt], vcpu_id=nxt % p["vcpus"], rip=0xFFFFFFFF81000000)
                    last_pause[nxt] = t
        t += STEP_NS
    for v in range(nv):
        close_stint(v)
    w.write(out)
    return {
        "scenario": "kvm-heavy-spin",
        "seed": seed,
        "params": p,
        "vms": {f"vm{v}": {"pid": qpid[v], "vcpu_tids": tid[v * p["vcpus"] : (v + 1) * p["vcpus"]], "txns": txns[v]} for v in range(p["vms"])},
        "spin_episodes": sorted(truth_spins, key=lambda s: (s["vm"], s["vcpu"], s["start"])),
        "cpu_ns": {str(tid[v]): cpu_ns[v] for v in range(nv)},
        "pause_gap_us": p["pause_gap_us"],
    }
