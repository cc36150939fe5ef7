"""`kvm-heavy-spin`: oversubscribed VMs whose vCPUs spin on guest locks
while the lock holder is preempted on the host (lock-holder preemption).

Shaped after the spin study (papers/spin.md §5): vCPU threads ``CPU n/KVM``
of ``qemu-system-x86_64`` processes are pinned round-robin onto fewer pCPUs
and time-sliced by the host (``slice_us``). In the guest each vCPU loops:
work (``work_us`` ± 50%), take one of ``locks`` per-VM spinlocks, hold it
(``hold_us``), release and write ``txn_end vm=<vm> vcpu=<n>`` to
trace_marker. A vCPU that finds the lock taken writes ``spin_begin vm=..
vcpu=.. lock=..``, spins (a PAUSE exit, Intel reason 40, every ``ple_us``),
and after ``pv_spin_us`` parks with HLT (pv_wait); the releasing vCPU kicks
the first parked waiter with ``kvm_hypercall nr=5`` (KVM_HC_KICK_CPU, a1 =
the waiter's APIC id = vCPU index) and the host wakes its thread, which logs
``kvm_vcpu_wakeup`` (ns = time since its HLT exit) before re-entering. On taking
the lock the spinner writes ``spin_end``. Host preemption shows as an
EXTERNAL_INTERRUPT exit then ``sched_switch`` with prev_state R.

The simulation steps in 1 µs ticks; timestamps are those ticks plus a few
ns of ordering inside a tick.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any

from cratrace.synth.scenarios._common import (
    EXIT_EXTERNAL_INTERRUPT,
    EXIT_HLT,
    EXIT_MSR_WRITE,
    EXIT_PAUSE,
    EXIT_VMCALL,
    KVM_HC_KICK_CPU,
    TASK_INTERRUPTIBLE,
    TASK_RUNNING,
    USER_RIP,
    Builder,
    Param,
    Result,
    host_declaration,
)
from cratrace.synth.episodes import SpilledEpisodes
from cratrace.synth.tracedat_writer import TraceDatStream

NAME = "kvm-heavy-spin"
VERSION = 4  # 4: the truth declares its host (scheduler, affinity)
SUMMARY = "Oversubscribed KVM VMs with lock-holder preemption: PAUSE exits, PV kicks, spin markers."
PARAMS = {
    "vms": Param(2, "number of VMs"),
    "vcpus": Param(4, "vCPUs per VM"),
    "pcpus": Param(2, "host CPUs (vCPU threads are pinned round-robin onto them)"),
    "duration_ms": Param(40, "simulated time"),
    "slice_us": Param(800, "host time slice before a runnable sibling preempts"),
    "work_us": Param(60, "mean guest work between lock acquisitions (±50%)"),
    "hold_us": Param(30, "lock hold time"),
    "locks": Param(1, "spinlocks per VM"),
    "ple_us": Param(8, "spin time between PAUSE exits (PLE window)"),
    "pv_spin_us": Param(100, "spin time before parking with HLT (pv_wait)"),
    "exit_every_us": Param(50, "mean interval of other exits (interrupts, MSR writes) while working"),
}


def generate(p: dict[str, Any], seed: int) -> Result:
    rng = random.Random(seed)
    nvm, nvcpu, npcpu = p["vms"], p["vcpus"], p["pcpus"]
    b = Builder(npcpu)
    vcpus: dict[int, dict[str, Any]] = {}
    runq: list[deque[int]] = [deque() for _ in range(npcpu)]
    for i in range(nvm):
        qpid = 1000 + 100 * i
        b.thread(qpid, "qemu-system-x86_64", qpid, "vmm", vm=f"vm{i}")
        for j in range(nvcpu):
            tid = b.thread(qpid + 1 + j, f"CPU {j}/KVM", qpid, "vcpu", vm=f"vm{i}", vcpu=j)
            g = i * nvcpu + j
            pc = g % npcpu
            vcpus[tid] = dict(tid=tid, vm=f"vm{i}", vcpu=j, pcpu=pc, mode="work",
                              left=_work(rng, p), lock=None, spun=0, ep=None,
                              work_ns=0, spin_ns=0, run_ns=0, txns=0)
            runq[pc].append(tid)
    b.forks()
    holder: dict[tuple[str, int], int | None] = {}
    waiters: dict[tuple[str, int], list[int]] = {}
    episodes: list[dict[str, Any]] = []
    slice_left = [p["slice_us"]] * npcpu

    def resume(t_ns: int, cpu: int, tid: int) -> None:
        """Back in the guest; a vCPU that halted first reports how long it was blocked."""
        v = vcpus[tid]
        if v.get("halted_at") is not None:
            b.emit(t_ns, cpu, "kvm_vcpu_wakeup", tid, ns=b.t0 + t_ns - v["halted_at"], waited=1, valid=1)
            v["halted_at"] = None
        b.kvm_entry(t_ns, cpu, tid, v["vcpu"])

    def switch_in(t_ns: int, cpu: int, tid: int) -> None:
        b.switch(t_ns, cpu, tid)
        resume(t_ns, cpu, tid)
        slice_left[cpu] = p["slice_us"]

    def next_on(t_ns: int, cpu: int, prev_state: int) -> None:
        if runq[cpu]:
            nxt = runq[cpu].popleft()
            b.switch(t_ns, cpu, nxt, prev_state)
            resume(t_ns, cpu, nxt)
            slice_left[cpu] = p["slice_us"]
        else:
            b.switch(t_ns, cpu, 0, prev_state)

    def try_acquire(t_ns: int, cpu: int, v: dict[str, Any]) -> None:
        key = (v["vm"], v["lock"])
        h = holder.get(key)
        if h is None:
            holder[key] = v["tid"]
            if v["ep"] is not None:
                ts = b.marker(t_ns, cpu, v["tid"], f"spin_end vm={v['vm']} vcpu={v['vcpu']} lock={v['lock']}")
                ep = v["ep"]
                ep["end"] = ts
                ep["dur"] = ts - ep["start"]
                episodes.append(ep)
                v["ep"] = None
            v["mode"], v["left"] = "cs", p["hold_us"]
            return
        if v["ep"] is None:
            ts = b.marker(t_ns, cpu, v["tid"], f"spin_begin vm={v['vm']} vcpu={v['vcpu']} lock={v['lock']}")
            hv = vcpus[h]
            v["ep"] = dict(vm=v["vm"], vcpu=v["vcpu"], tid=v["tid"], lock=v["lock"], start=ts, end=None,
                           holder_vcpu=hv["vcpu"], holder_preempted=b.current[hv["pcpu"]] != h,
                           pause_exits=0, halts=0, kicks=0, clearer_vcpu=None)
        v["mode"], v["spun"] = "spin", 0

    dur_us = p["duration_ms"] * 1000
    for cpu in range(npcpu):
        if runq[cpu]:
            switch_in(0, cpu, runq[cpu].popleft())
    spilled = _native_loop(b, p, rng, dur_us, vcpus, runq, slice_left)
    for t in range(0 if spilled is not None else dur_us):
        t_ns = t * 1000
        for cpu in range(npcpu):
            tid = b.current[cpu]
            if tid == 0:
                continue
            v = vcpus[tid]
            v["run_ns"] += 1000
            mode = v["mode"]
            if mode == "work":
                v["work_ns"] += 1000
                v["left"] -= 1
                if rng.random() < 1.0 / p["exit_every_us"]:
                    reason = EXIT_EXTERNAL_INTERRUPT if rng.random() < 0.6 else EXIT_MSR_WRITE
                    b.kvm_exit(t_ns + 100, cpu, tid, v["vcpu"], reason, rip=USER_RIP)
                    b.kvm_entry(t_ns + 600, cpu, tid, v["vcpu"], rip=USER_RIP)
                if v["left"] <= 0:
                    v["lock"] = rng.randrange(p["locks"])
                    try_acquire(t_ns + 900, cpu, v)
            elif mode == "spin":
                v["spin_ns"] += 1000
                v["spun"] += 1
                if holder.get((v["vm"], v["lock"])) is None:
                    try_acquire(t_ns + 900, cpu, v)
                elif v["spun"] >= p["pv_spin_us"]:
                    v["halted_at"] = b.kvm_exit(t_ns + 900, cpu, tid, v["vcpu"], EXIT_HLT)
                    v["ep"]["halts"] += 1
                    v["mode"] = "halted"
                    waiters.setdefault((v["vm"], v["lock"]), []).append(tid)
                    next_on(t_ns + 950, cpu, TASK_INTERRUPTIBLE)
                    continue
                elif v["spun"] % p["ple_us"] == 0:
                    b.kvm_exit(t_ns + 500, cpu, tid, v["vcpu"], EXIT_PAUSE)
                    b.kvm_entry(t_ns + 800, cpu, tid, v["vcpu"])
                    v["ep"]["pause_exits"] += 1
            elif mode == "cs":
                v["work_ns"] += 1000
                v["left"] -= 1
                if v["left"] <= 0:
                    key = (v["vm"], v["lock"])
                    holder[key] = None
                    b.marker(t_ns + 300, cpu, tid, f"txn_end vm={v['vm']} vcpu={v['vcpu']}")
                    v["txns"] += 1
                    if waiters.get(key):
                        w = vcpus[waiters[key].pop(0)]
                        b.kvm_exit(t_ns + 400, cpu, tid, v["vcpu"], EXIT_VMCALL)
                        b.emit(t_ns + 450, cpu, "kvm_hypercall", tid, nr=KVM_HC_KICK_CPU, a0=0, a1=w["vcpu"], a2=0, a3=0)
                        b.wakeup(t_ns + 500, cpu, w["tid"], w["pcpu"])
                        b.kvm_entry(t_ns + 700, cpu, tid, v["vcpu"])
                        w["ep"]["kicks"] += 1
                        w["ep"]["clearer_vcpu"] = v["vcpu"]
                        w["mode"], w["spun"] = "spin", 0
                        if b.current[w["pcpu"]] == 0:
                            switch_in(t_ns + 800, w["pcpu"], w["tid"])
                        else:
                            runq[w["pcpu"]].append(w["tid"])
                    v["mode"], v["left"] = "work", _work(rng, p)
            # host time slice
            slice_left[cpu] -= 1
            if slice_left[cpu] <= 0:
                slice_left[cpu] = p["slice_us"]
                if runq[cpu]:
                    b.kvm_exit(t_ns + 960, cpu, tid, v["vcpu"], EXIT_EXTERNAL_INTERRUPT)
                    runq[cpu].append(tid)
                    next_on(t_ns + 980, cpu, TASK_RUNNING)

    end_ns = b.end(b.t0 + dur_us * 1000)
    open_eps = [v["ep"] for v in vcpus.values() if v["ep"] is not None]
    per_vm: dict[str, dict[str, int]] = {}
    for v in vcpus.values():
        d = per_vm.setdefault(v["vm"], dict(work_ns=0, spin_ns=0, run_ns=0, txns=0))
        for k in d:
            d[k] += v[k]
    if spilled is None:
        closed = _totals(episodes)
        spin_episodes: list[dict[str, Any]] | SpilledEpisodes = sorted(episodes, key=lambda e: (e["start"], e["vm"], e["vcpu"]))
    else:
        closed, spin_episodes = spilled
    opened = _totals(open_eps)
    truth = dict(
        start_ns=b.t0,
        end_ns=end_ns,
        threads=b.thread_table(b.end(b.t0 + dur_us * 1000)),
        spin_episodes=spin_episodes,
        open_spin_episodes=len(open_eps),
        per_vm=per_vm,
        per_vcpu=[dict(vm=v["vm"], vcpu=v["vcpu"], tid=v["tid"], pcpu=v["pcpu"], work_ns=v["work_ns"],
                       spin_ns=v["spin_ns"], run_ns=v["run_ns"], txns=v["txns"]) for v in vcpus.values()],
        totals=dict(
            spin_episodes=closed["count"],
            pause_exits=closed["pause_exits"] + opened["pause_exits"],
            kicks=closed["kicks"] + opened["kicks"],
            halts=closed["halts"] + opened["halts"],
            txns=sum(v["txns"] for v in vcpus.values()),
            lhp_episodes=closed["lhp"],
        ),
    )
    truth["vms"] = b.inventory()
    # the host that ran it: each vCPU pinned to its pCPU, round robin with
    # the slice, no wakeup preemption
    truth["host"] = host_declaration("rr", {v["tid"]: [v["pcpu"]] for v in vcpus.values()}, rr_slice_ns=p["slice_us"] * 1000)
    return Result(b.events, truth, dict(cpus=npcpu, comms=b.comms()))


_NATIVE_PARAMS = ("slice_us", "work_us", "hold_us", "locks", "ple_us", "pv_spin_us", "exit_every_us")


def _totals(episodes: list[dict[str, Any]]) -> dict[str, int]:
    """The truth's totals of these episodes (as the native loop returns
    them for the closed ones it wrote out)."""
    return dict(count=len(episodes), pause_exits=sum(e["pause_exits"] for e in episodes), kicks=sum(e["kicks"] for e in episodes),
                halts=sum(e["halts"] for e in episodes), lhp=sum(1 for e in episodes if e["holder_preempted"]))


def _native_loop(b: Builder, p: dict[str, Any], rng: random.Random, dur_us: int, vcpus: dict[int, dict[str, Any]],
                 runq: list[deque[int]], slice_left: list[int]) -> tuple[dict[str, int], SpilledEpisodes] | None:
    """Run the tick loop below in Rust (``_native.synth_kvm_heavy_spin_loop``,
    the same statements, draws from the same generator state) when the
    Builder streams into a trace (issue #47: ~10x the Python loop's
    events/s); updates the state the truth is built from as the loop would
    and returns the closed episodes' totals and the episodes themselves
    (on disk, in the truth's order: `cratrace.synth.episodes`), or returns
    None (the Python loop runs)."""
    if not isinstance(b.events, TraceDatStream):
        return None
    try:
        from cratrace._native import synth_kvm_heavy_spin_loop
    except ImportError:
        return None
    params = {k: p[k] for k in _NATIVE_PARAMS}
    if not all(type(x) is int for x in params.values()) or not 0 < p["locks"] < 2**31 or len(vcpus) != p["vms"] * p["vcpus"]:
        return None
    b.events.flush()  # the set-up's events first: each CPU's come in time order
    version, state, gauss = rng.getstate()
    # the VMs in order of first appearance: the records' VM indices
    spilled = SpilledEpisodes(list(dict.fromkeys(v["vm"] for v in vcpus.values())), b.events.path.parent)
    out = synth_kvm_heavy_spin_loop(
        b.events._spool, dur_us, params, list(state), b.t0, b.last_ts, b.current, b.since, b.oncpu, b.comms(),
        [(v["tid"], v["vm"], v["vcpu"], v["pcpu"], v["left"]) for v in vcpus.values()], [list(q) for q in runq],
        slice_left, spilled.write)
    state, b.last_ts, b.current, b.since, b.oncpu, final, totals = out
    rng.setstate((version, tuple(state), gauss))
    for tid, mode, left, lock, spun, ep, work_ns, spin_ns, run_ns, txns, halted_at in final:
        vcpus[tid].update(mode=mode, left=left, lock=lock, spun=spun, ep=_episode(ep), work_ns=work_ns, spin_ns=spin_ns,
                          run_ns=run_ns, txns=txns, halted_at=halted_at)
    return dict(zip(("count", "pause_exits", "kicks", "halts", "lhp"), totals)), spilled


def _episode(t: tuple | None) -> dict[str, Any] | None:
    """An episode dict as the Python loop builds it (its key order: `dur`
    is added when it closes)."""
    if t is None:
        return None
    ep = dict(zip(("vm", "vcpu", "tid", "lock", "start", "end", "holder_vcpu", "holder_preempted", "pause_exits",
                   "halts", "kicks"), t[:11]))
    ep["clearer_vcpu"], dur = t[11]
    if dur is not None:
        ep["dur"] = dur
    return ep


def _work(rng: random.Random, p: dict[str, Any]) -> int:
    w = p["work_us"]
    return max(1, int(rng.uniform(0.5 * w, 1.5 * w)))
