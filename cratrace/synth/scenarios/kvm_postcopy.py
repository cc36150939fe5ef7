"""`kvm-postcopy`: a VM of many guest processes touching pages after a
postcopy migration switch, with KVM asynchronous page faults
(papers/postcopy.md §1.2, §5).

Before ``switch_ms`` every page is present and vCPUs only take ordinary
exits. From the switch on, each page is absent until fetched; a guest
process's first touch of one of its ``pages_per_proc`` pages makes the vCPU
exit (EPT_VIOLATION, reason 48) and KVM log ``kvm_page_fault``,
``kvm_try_async_get_page`` and ``kvm_async_pf_not_present`` (token, gva);
the vCPU re-enters after ``notify_us`` and runs another runnable process.
The page arrives ``fetch_us`` (±30%) later: a ``kworker`` on the vCPU's CPU
preempts the vCPU (EXTERNAL_INTERRUPT exit), logs
``kvm_async_pf_completed``, and on re-entry KVM logs ``kvm_async_pf_ready``
(same token). When every process of a vCPU waits, the vCPU halts (HLT exit,
sleeps) until the next page arrives. Each vCPU thread is pinned to its own
host CPU. With ``async_pf=false`` (the paper's baseline) a fault instead
blocks the vCPU thread (``sched_switch`` prev_state D) until the page
arrives; no async-PF events are logged.
"""

from __future__ import annotations

import heapq
import random
from typing import Any

from cratrace.synth.scenarios._common import (
    EXIT_EPT_VIOLATION,
    EXIT_EXTERNAL_INTERRUPT,
    EXIT_HLT,
    TASK_INTERRUPTIBLE,
    TASK_UNINTERRUPTIBLE,
    USER_RIP,
    Builder,
    Param,
    Result,
    host_declaration,
)

NAME = "kvm-postcopy"
VERSION = 4  # 4: the truth declares its host (scheduler, affinity)
SUMMARY = "A VM of many processes touching absent pages after a postcopy switch, with async page faults."
PARAMS = {
    "vcpus": Param(2, "vCPUs (one host CPU each)"),
    "procs": Param(16, "guest processes (spread over the vCPUs)"),
    "pages_per_proc": Param(24, "distinct pages each process touches after the switch"),
    "duration_ms": Param(30, "simulated time"),
    "switch_ms": Param(5, "when the VM switches to the destination (pages become absent)"),
    "compute_us": Param(40, "guest compute between page touches (±50%)"),
    "fetch_us": Param(300, "time to fetch an absent page (±30%)"),
    "notify_us": Param(40, "vCPU time lost per not-present notification"),
    "async_pf": Param(True, "guest-cooperative async page faults; false = baseline, the vCPU blocks per fault"),
}


def generate(p: dict[str, Any], seed: int) -> Result:
    rng = random.Random(seed)
    n = p["vcpus"]
    b = Builder(n)
    qpid = 3000
    b.thread(qpid, "qemu-system-x86_64", qpid, "vmm", vm="pc0")
    faults: list[dict[str, Any]] = []
    per_vcpu = []
    token_seq = [0]
    for v in range(n):
        b.thread(qpid + 1 + v, f"CPU {v}/KVM", qpid, "vcpu", vm="pc0", vcpu=v)
        b.thread(60 + v, f"kworker/{v}:1", 2, "host")
    b.forks()
    for v in range(n):
        procs = [i for i in range(p["procs"]) if i % n == v]
        per_vcpu.append(_run_vcpu(b, rng, p, v, qpid + 1 + v, 60 + v, procs, faults, token_seq))
    faults.sort(key=lambda f: f["fault_ts"])
    truth = dict(
        start_ns=b.t0,
        end_ns=b.end(b.t0 + p["duration_ms"] * 1_000_000),
        switch_ns=b.t0 + p["switch_ms"] * 1_000_000,
        threads=b.thread_table(b.end(b.t0 + p["duration_ms"] * 1_000_000)),
        faults=faults,
        per_vcpu=per_vcpu,
        totals=dict(
            faults=len(faults),
            completed=sum(1 for f in faults if f["completed_ts"] is not None),
            sync=sum(1 for f in faults if f["kind"] == "sync"),
            blocked_ns=sum(v["blocked_ns"] for v in per_vcpu),
            ready=sum(1 for f in faults if f["ready_ts"] is not None),
            halts=sum(v["halts"] for v in per_vcpu),
        ),
        notes="latency_ns = ready_ts - not_present_ts; gva = process base + page * 4096; gfn = gva >> 12 here",
    )
    truth["vms"] = b.inventory()
    # each vCPU and its CPU's kworker pinned to that CPU; the kworker's
    # wakeup preempts the vCPU at once, as the fair class does
    truth["host"] = host_declaration("fair", {t: [v] for v in range(n) for t in (qpid + 1 + v, 60 + v)})
    return Result(b.events, truth, dict(cpus=n, comms=b.comms()))


def _run_vcpu(b, rng, p, v, tid, kw, procs, faults, token_seq) -> dict[str, Any]:
    cpu = v
    end = p["duration_ms"] * 1_000_000
    switch = p["switch_ms"] * 1_000_000
    present: set[int] = set()
    todo = {pr: list(range(p["pages_per_proc"])) for pr in procs}
    for pages in todo.values():
        rng.shuffle(pages)
    runnable = list(procs)
    arrivals: list[tuple[int, int, dict[str, Any]]] = []  # (time, seq, fault)
    guest_ns = halt_ns = blocked_ns = 0
    halts = 0
    t = 0
    b.switch(t, cpu, tid)
    b.kvm_entry(t, cpu, tid, v, rip=USER_RIP)

    def deliver(t: int) -> int:
        """An arrived page: kworker runs, then the vCPU re-enters with page-ready."""
        at, _, f = heapq.heappop(arrivals)
        b.switch(t, cpu, kw)
        f["completed_ts"] = b.emit(t + 2000, cpu, "kvm_async_pf_completed", kw, address=0x7F0000000000 + f["gva"], gva=f["gva"])
        b.wakeup(t + 2500, cpu, tid, cpu)
        b.switch(t + 3000, cpu, tid, TASK_INTERRUPTIBLE)
        f["ready_ts"] = b.emit(t + 3500, cpu, "kvm_async_pf_ready", tid, token=f["token"], gva=f["gva"])
        f["latency_ns"] = f["ready_ts"] - f["not_present_ts"]
        b.kvm_entry(t + 4000, cpu, tid, v, rip=USER_RIP)
        present.add(f["gva"])
        runnable.append(f["proc"])
        return t + 4000

    while t < end:
        if arrivals and arrivals[0][0] <= t:
            b.kvm_exit(t, cpu, tid, v, EXIT_EXTERNAL_INTERRUPT, rip=USER_RIP)
            t = deliver(t + 500)
            continue
        if not runnable:
            if not arrivals:
                break
            b.kvm_exit(t, cpu, tid, v, EXIT_HLT, rip=0xFFFFFFFF81F00000)
            halts += 1
            b.switch(t + 500, cpu, 0, TASK_INTERRUPTIBLE)
            nt = max(arrivals[0][0], t + 1000)
            if nt >= end:
                break
            halt_ns += nt - t
            t = deliver(nt)
            continue
        pr = runnable.pop(0)
        c = int(rng.uniform(0.5, 1.5) * p["compute_us"] * 1000)
        if arrivals:
            c = min(c, max(1000, arrivals[0][0] - t))
        t += c
        guest_ns += c
        if t >= end:
            break
        if t < switch or not todo[pr]:
            runnable.append(pr)
            if rng.random() < 0.2:
                b.kvm_exit(t, cpu, tid, v, EXIT_EXTERNAL_INTERRUPT, rip=USER_RIP)
                b.kvm_entry(t + 500, cpu, tid, v, rip=USER_RIP)
            continue
        page = todo[pr].pop()
        gva = 0x7F3A00000000 + pr * 0x1000000 + page * 4096
        if gva in present:
            runnable.append(pr)
            continue
        fetch = int(rng.uniform(0.7, 1.3) * p["fetch_us"] * 1000)
        b.kvm_exit(t, cpu, tid, v, EXIT_EPT_VIOLATION, rip=USER_RIP, info1=0x181)
        fault_ts = b.emit(t + 300, cpu, "kvm_page_fault", tid, vcpu_id=v, guest_rip=USER_RIP,
                          fault_address=gva >> 12 << 12, error_code=0x181)
        if not p["async_pf"]:
            # baseline: the vCPU thread blocks in the host until the page arrives
            blocked_at = b.switch(t + 600, cpu, 0, TASK_UNINTERRUPTIBLE)
            back = max(t + fetch, t + 1000)
            b.wakeup(back, cpu, tid, cpu)
            resumed = b.switch(back, cpu, tid)
            b.kvm_entry(back, cpu, tid, v, rip=USER_RIP)
            faults.append(dict(vm="pc0", vcpu=v, tid=tid, proc=pr, kind="sync", token=None, gva=gva, gfn=gva >> 12,
                               fault_ts=fault_ts, not_present_ts=None, completed_ts=None,
                               ready_ts=None, latency_ns=None, blocked_ns=resumed - blocked_at))
            blocked_ns += resumed - blocked_at
            present.add(gva)
            runnable.append(pr)
            t = back
            continue
        token_seq[0] += 1
        token = (token_seq[0] << 12) | v  # KVM: (apf.id++ << 12) | vcpu_id
        b.emit(t + 600, cpu, "kvm_try_async_get_page", tid, gva=gva, gfn=gva >> 12)
        npts = b.emit(t + 900, cpu, "kvm_async_pf_not_present", tid, token=token, gva=gva)
        f = dict(vm="pc0", vcpu=v, tid=tid, proc=pr, kind="async", token=token, gva=gva, gfn=gva >> 12,
                 fault_ts=fault_ts, not_present_ts=npts, completed_ts=None, ready_ts=None, latency_ns=None, blocked_ns=None)
        faults.append(f)
        heapq.heappush(arrivals, (t + fetch, token, f))
        t += p["notify_us"] * 1000
        b.kvm_entry(t, cpu, tid, v, rip=USER_RIP)
    return dict(vm="pc0", vcpu=v, tid=tid, guest_ns=guest_ns, halt_ns=halt_ns, halts=halts,
                blocked_ns=blocked_ns, procs=len(procs))
