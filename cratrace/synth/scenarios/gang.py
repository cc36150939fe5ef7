"""`gang`: a gang-synchronised parallel job (an OpenMP program such as
NPB LU-OMP) in a VM of ``vcpus`` vCPUs, next to competing VMs, for the
asymmetric policy's slice study (papers/asym.md §5.2: LU-OMP gained about
70% from the slow cores' 10 ms slice).

The job runs in phases: in each, every vCPU computes ``phase_us`` (each
vCPU's share drawn ±``imbalance`` per phase) and then waits at a barrier
until all have arrived. A vCPU writes ``barrier_wait vm=gang vcpu=N`` to
trace_marker when it arrives and ``barrier_done vm=gang vcpu=N`` when it
goes on; vCPU 0 writes ``txn_end vm=gang vcpu=0`` after each barrier, so
the VM's throughput is phases per second. With ``barrier=spin`` a waiter
busy-waits (a PAUSE exit every ``ple_us``, as libgomp's spin-wait does) and
keeps its CPU until the barrier opens or the host preempts it; with
``barrier=block`` it halts (HLT exit, sleeps) and the last arrival wakes
it. ``cpu_vms`` single-vCPU VMs ``cpu0..`` are always runnable (the
paper's NPB-SER VM); ``io_vms`` VMs ``io0..`` run bursts of ``burst_us``
and wait ``io_wait_us`` for I/O (its netperf VMs).

The host: ``cores`` CPUs at ``khz`` (the paper's homogeneous baseline, four
cores at 2.79 GHz; the asymmetric policy's replay makes some of them
slow). Every vCPU is pinned, round robin over the cores in the order
gang/0.., cpu0.., io0..; each core runs its threads round robin with a
``slice_us`` slice (Xen credit's 30 ms by default), no wakeup preemption:
a spinning waiter holds its core for the rest of its slice while a
sibling that has not arrived waits behind it on the same core (the
"busy blocking" the paper credits the shorter slice with shortening).

Event-driven, in ns. The truth gives each vCPU's run, work and wait time,
the phases done, and the host as it ran (scheduler ``rr`` with the slice,
each vCPU's pin), so the capture replays to it under its own policy.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass
from typing import Any

from cratrace.synth.scenarios._common import (
    EXIT_EXTERNAL_INTERRUPT,
    EXIT_HLT,
    EXIT_IO_INSTRUCTION,
    EXIT_PAUSE,
    TASK_INTERRUPTIBLE,
    TASK_RUNNING,
    USER_RIP,
    Builder,
    Param,
    Result,
    host_declaration,
)

NAME = "gang"
VERSION = 1
SUMMARY = "A gang-synchronised parallel VM (barriers between phases, spin or block) next to CPU- and I/O-bound VMs (asymmetric slice studies)."
PARAMS = {
    "vcpus": Param(4, "vCPUs of the parallel VM (gang)"),
    "cpu_vms": Param(1, "CPU-bound single-vCPU VMs"),
    "io_vms": Param(1, "I/O-bound single-vCPU VMs"),
    "cores": Param(4, "host CPUs"),
    "khz": Param(2790000, "their frequency (the paper's fast cores)"),
    "duration_ms": Param(1000, "simulated time (the job ends at the first barrier after it)"),
    "slice_us": Param(30000, "host time slice (Xen credit's 30 ms)"),
    "phase_us": Param(4000, "compute per vCPU per phase, mean"),
    "imbalance": Param(0.25, "each vCPU's compute per phase varies by up to this share either way"),
    "barrier": Param("spin", "how a vCPU waits at a barrier: spin (busy-wait, PAUSE exits) or block (HLT until woken)"),
    "ple_us": Param(40, "spin time between PAUSE exits while waiting"),
    "burst_us": Param(300, "I/O-bound VM run burst (±50%)"),
    "io_wait_us": Param(900, "I/O wait between bursts (±50%)"),
}

ALLOW_ZERO = ("cpu_vms", "io_vms", "imbalance")


def check(p: dict[str, Any]) -> None:
    from cratrace.errors import UsageError

    if p["barrier"] not in ("spin", "block"):
        raise UsageError(f"--set barrier={p['barrier']}: spin or block")
    if not 0 <= p["imbalance"] < 1:
        raise UsageError(f"--set imbalance={p['imbalance']}: a share from 0 to below 1")
    if p["vcpus"] < 2:
        raise UsageError(f"--set vcpus={p['vcpus']}: a gang needs at least 2 vCPUs")


@dataclass
class _V:
    tid: int
    vm: str
    vcpu: int
    kind: str  # gang | cpu | io
    core: int
    mode: str = "work"  # work | spin | sleep | wait (io)
    left: int = 0  # ns of the current work or burst
    arrived_at: int = 0  # its arrival at the barrier it waits at
    pause_due: int = 0  # its next PAUSE exit while it spins
    released: bool = False  # its barrier opened while it was off the CPU
    wake_at: int = 0
    run_ns: int = 0
    work_ns: int = 0
    spin_ns: int = 0
    sleep_ns: int = 0
    phases: int = 0


def generate(p: dict[str, Any], seed: int) -> Result:
    check(p)
    rng = random.Random(seed)
    ncore, slice_ns, ple = p["cores"], p["slice_us"] * 1000, p["ple_us"] * 1000
    spin = p["barrier"] == "spin"
    b = Builder(ncore)
    th: dict[int, _V] = {}
    order: list[_V] = []

    def vm(name: str, q: int, n: int, kind: str) -> None:
        b.thread(q, "qemu-system-x86_64", q, "vmm", vm=name)
        for j in range(n):
            tid = b.thread(q + 1 + j, f"CPU {j}/KVM", q, "vcpu", vm=name, vcpu=j)
            v = _V(tid, name, j, kind, core=len(order) % ncore)
            th[tid] = v
            order.append(v)

    vm("gang", 4000, p["vcpus"], "gang")
    for i in range(p["cpu_vms"]):
        vm(f"cpu{i}", 5000 + 100 * i, 1, "cpu")
    for i in range(p["io_vms"]):
        vm(f"io{i}", 6000 + 100 * i, 1, "io")
    b.forks()
    for c in range(ncore):
        b.emit(0, c, "cpu_frequency", 0, state=p["khz"], cpu_id=c)

    def phase_work() -> int:
        return max(1, round(p["phase_us"] * 1000 * (1 + p["imbalance"] * rng.uniform(-1, 1))))

    def burst() -> int:
        return max(1, int(p["burst_us"] * 1000 * rng.uniform(0.5, 1.5)))

    for v in order:
        v.left = phase_work() if v.kind == "gang" else burst() if v.kind == "io" else 1 << 62
    runq: list[deque[int]] = [deque(v.tid for v in order if v.core == c) for c in range(ncore)]
    slice_end = [0] * ncore
    arrived: list[int] = []
    parties = p["vcpus"]
    waits: list[int] = []  # each wait's length (arrival to going on), ns
    opened = [-1]  # when a barrier last opened

    def go_on(t: int, v: _V) -> None:
        """Past the barrier (on its CPU): the next phase."""
        b.marker(t, v.core, v.tid, f"barrier_done vm=gang vcpu={v.vcpu}")
        if v.vcpu == 0:
            b.marker(t, v.core, v.tid, "txn_end vm=gang vcpu=0")
        waits.append(t - v.arrived_at)
        v.phases += 1
        v.mode, v.left, v.released = "work", phase_work(), False

    def dispatch(t: int, c: int, prev_state: int) -> None:
        if not runq[c]:
            b.switch(t, c, 0, prev_state)
            return
        v = th[runq[c].popleft()]
        b.switch(t, c, v.tid, prev_state)
        b.kvm_entry(t, c, v.tid, v.vcpu, rip=USER_RIP)
        slice_end[c] = t + slice_ns
        if v.released:
            go_on(t, v)
        elif v.mode == "spin":
            v.pause_due = t + ple

    def arrive(t: int, v: _V) -> None:
        b.marker(t, v.core, v.tid, f"barrier_wait vm=gang vcpu={v.vcpu}")
        v.arrived_at = t
        arrived.append(v.tid)
        if len(arrived) < parties:
            if spin:
                v.mode = "spin"
                v.pause_due = t + ple
            else:
                b.kvm_exit(t, v.core, v.tid, v.vcpu, EXIT_HLT, rip=USER_RIP)
                v.mode = "sleep"
                dispatch(t, v.core, TASK_INTERRUPTIBLE)
            return
        # the last arrival opens the barrier
        opened[0] = t
        for tid in arrived[:-1]:
            w = th[tid]
            if b.current[w.core] == tid:
                go_on(t, w)
            elif w.mode == "sleep":
                b.wakeup(t, v.core, tid, w.core)
                w.released, w.mode = True, "work"
                runq[w.core].append(tid)
                if b.current[w.core] == 0:
                    dispatch(t, w.core, TASK_RUNNING)
            else:
                w.released = True
        arrived.clear()
        go_on(t, v)

    # the job ends at the first barrier that opens once `duration_ms` has
    # passed: a capture cut inside a phase would leave its waiters'
    # last wait with no end the replay could know
    end = p["duration_ms"] * 1_000_000
    stop = 20 * end  # (a gang that never finishes a phase)
    for c in range(ncore):
        dispatch(0, c, TASK_RUNNING)
    t = 0
    while True:
        nxt = [stop]
        for c in range(ncore):
            tid = b.current[c]
            if tid == 0:
                continue
            v = th[tid]
            nxt.append(slice_end[c])
            if v.mode == "work":
                nxt.append(t + v.left)
            elif v.mode == "spin":
                nxt.append(v.pause_due)
        nxt += [v.wake_at for v in order if v.kind == "io" and v.mode == "wait"]
        tn = min(nxt)
        dt = tn - t
        for c in range(ncore):
            tid = b.current[c]
            if tid:
                v = th[tid]
                v.run_ns += dt
                if v.mode == "work":
                    v.left -= dt
                    v.work_ns += dt
                elif v.mode == "spin":
                    v.spin_ns += dt
        for v in order:
            if v.mode == "sleep":
                v.sleep_ns += dt
        t = tn
        if t >= stop:
            break
        for v in order:  # I/O completions: the VM's interrupt on its core
            if v.kind == "io" and v.mode == "wait" and v.wake_at == t:
                b.wakeup(t, v.core, v.tid, v.core)
                v.mode, v.left = "work", burst()
                runq[v.core].append(v.tid)
                if b.current[v.core] == 0:
                    dispatch(t, v.core, TASK_RUNNING)
        for c in range(ncore):
            tid = b.current[c]
            if tid == 0:
                continue
            v = th[tid]
            if v.mode == "work" and v.left <= 0:
                if v.kind == "gang":
                    arrive(t, v)
                else:  # an I/O burst ends
                    b.kvm_exit(t, c, tid, v.vcpu, EXIT_IO_INSTRUCTION if rng.random() < 0.5 else EXIT_HLT, rip=USER_RIP)
                    v.mode, v.wake_at = "wait", t + int(p["io_wait_us"] * 1000 * rng.uniform(0.5, 1.5))
                    dispatch(t, c, TASK_INTERRUPTIBLE)
            elif v.mode == "spin" and v.pause_due == t:
                b.kvm_exit(t, c, tid, v.vcpu, EXIT_PAUSE)
                b.kvm_entry(t, c, tid, v.vcpu)
                v.pause_due = t + ple
            tid = b.current[c]
            if tid and slice_end[c] <= t:
                if runq[c]:
                    v = th[tid]
                    b.kvm_exit(t, c, tid, v.vcpu, EXIT_EXTERNAL_INTERRUPT, rip=USER_RIP)
                    runq[c].append(tid)
                    dispatch(t, c, TASK_RUNNING)
                else:
                    slice_end[c] = t + slice_ns
        if t >= end and opened[0] == t:
            break

    end_abs = b.end(b.t0 + t)
    gang = [v for v in order if v.kind == "gang"]
    truth = dict(
        start_ns=b.t0,
        end_ns=end_abs,
        threads=b.thread_table(end_abs),
        per_vcpu=[dict(vm=v.vm, vcpu=v.vcpu, tid=v.tid, kind=v.kind, core=v.core, run_ns=v.run_ns, work_ns=v.work_ns,
                       spin_ns=v.spin_ns, sleep_ns=v.sleep_ns, phases=v.phases) for v in order],
        per_vm=dict(gang=dict(txns=gang[0].phases, phases=gang[0].phases, barrier=p["barrier"],
                              work_ns=sum(v.work_ns for v in gang), spin_ns=sum(v.spin_ns for v in gang),
                              sleep_ns=sum(v.sleep_ns for v in gang),
                              mean_wait_ns=round(sum(waits) / len(waits)) if waits else None)),
        notes="phases = barriers vCPU 0 passed (its txn_end markers); a wait runs from barrier_wait to barrier_done",
    )
    truth["vms"] = b.inventory()
    # each core time-slices its pinned threads round robin, no wakeup preemption
    truth["host"] = host_declaration("rr", {v.tid: [v.core] for v in order}, rr_slice_ns=slice_ns)
    return Result(b.events, truth, dict(cpus=ncore, comms=b.comms()))
