"""`kvm-io-billing`: CPU-bound and networking VMs on a KVM host, with the host
work each VM causes (vhost) and the common work nobody can be billed for
(NIC interrupts and NET_RX softirq), shaped after papers/billing.md.

Workloads (``workload``): ``cpu-cpu``, ``cpu-net``, ``net-net`` (two
1-vCPU VMs, Table 4.1) or ``net1``..``net4`` (four VMs, the first N
networking, Table 4.2). Networking VMs share a saturated link of
``link_pps`` packets/s in uneven shares (0.8–1.2), guest Rx = ``rx_per_tx`` ×
guest Tx (2, as in Table 4.2; Table 4.1 reads 0.5, papers/billing.md §6.1). Each VM's ``vhost-<qemu pid>`` thread handles its packets:
``net_dev_xmit dev=tap<i>`` for guest Rx, ``netif_receive_skb dev=tap<i>``
for guest Tx, costing ``rx_cost_ns``/``tx_cost_ns`` per packet (the
thesis's ≈1.5/0.9 µs). Common work is ``common_ms_per_s`` of CPU per second
for one networking VM, growing by ``common_growth`` per extra networking VM
(Fig. 4.3: K grows with N, not with packets); it appears as
``irq_handler_entry/exit`` of the NIC plus ``softirq_entry/exit`` vec 3
(NET_RX) around ``napi_poll dev=eth0``, between thread slices.

The host runs in 1 ms windows; in each window every pCPU runs vhost work,
then networking vCPUs (guest work per packet, virtio kicks as
EPT_MISCONFIG exits, then HLT), then CPU-bound vCPUs fill the rest.
"""

from __future__ import annotations

import random
from typing import Any

from cratrace.errors import UsageError
from cratrace.synth.scenarios._common import (
    EXIT_EPT_MISCONFIG,
    EXIT_EXTERNAL_INTERRUPT,
    EXIT_HLT,
    TASK_INTERRUPTIBLE,
    TASK_RUNNING,
    USER_RIP,
    Builder,
    Param,
    Result,
    host_declaration,
)

NAME = "kvm-io-billing"
VERSION = 4  # 4: rx_per_tx (3: the truth declares its host)
SUMMARY = "CPU-bound and networking KVM VMs sharing a saturated link; vhost work and common NIC/softirq work."
WORKLOADS = ("cpu-cpu", "cpu-net", "net-net", "net1", "net2", "net3", "net4")
PARAMS = {
    "workload": Param("cpu-net", "one of " + ", ".join(WORKLOADS)),
    "pcpus": Param(2, "host CPUs"),
    "duration_ms": Param(40, "simulated time (1 ms windows)"),
    "link_pps": Param(60000, "packets/s on the saturated link, all networking VMs together (Rx+Tx)"),
    "rx_cost_ns": Param(1500, "vhost CPU per guest-Rx packet"),
    "tx_cost_ns": Param(900, "vhost CPU per guest-Tx packet"),
    "guest_ns_per_pkt": Param(700, "guest (vCPU) CPU per packet in a networking VM"),
    "common_ms_per_s": Param(45.0, "common (unattributable) NIC/softirq CPU per second, one networking VM"),
    "common_growth": Param(0.45, "relative growth of the common work per extra networking VM"),
    "rx_bytes": Param(1514, "bytes per guest-Rx packet"),
    "rx_per_tx": Param(2.0, "guest Rx packets per guest Tx packet (Table 4.2: 2; Table 4.1 reads 0.5)"),
}
ALLOW_ZERO = ("common_growth",)
NET_RX_SOFTIRQ = 3
NIC_IRQ = 33


def check(p: dict[str, Any]) -> None:
    if p["workload"] not in WORKLOADS:
        raise UsageError(f"--set workload={p['workload']}: expected one of {', '.join(WORKLOADS)}")


def _layout(workload: str) -> list[str]:
    if workload.startswith("net") and workload[3:].isdigit():
        n = int(workload[3:])
        return ["net"] * n + ["idle"] * (4 - n)
    return workload.split("-")


def window_packets(shares: dict[Any, float], link_pps: float, carry: dict[Any, list[float]], rng: random.Random, rx_per_tx: float = 2.0) -> dict[Any, tuple[int, int]]:
    """Guest (Rx, Tx) packets of each networking VM in one 1 ms window: the
    link shared by `shares`, Rx = `rx_per_tx` x Tx, ±10% jitter, and a
    fractional carry so the rates are exact over time. (Shared with
    xen-io-billing.)"""
    tot = sum(shares.values()) or 1.0
    pk = {}
    for key, share in shares.items():
        pps = link_pps * share / tot
        c = carry[key]
        c[0] += pps * rx_per_tx / (rx_per_tx + 1) / 1000 * rng.uniform(0.9, 1.1)
        c[1] += pps / (rx_per_tx + 1) / 1000 * rng.uniform(0.9, 1.1)
        rx, tx = int(c[0]), int(c[1])
        c[0] -= rx
        c[1] -= tx
        pk[key] = (rx, tx)
    return pk


def generate(p: dict[str, Any], seed: int) -> Result:
    check(p)
    rng = random.Random(seed)
    kinds = _layout(p["workload"])
    npcpu = p["pcpus"]
    b = Builder(npcpu)
    vms = []
    for i, kind in enumerate(kinds):
        q = 2000 + 100 * i
        vm = f"vm{i}"
        b.thread(q, "qemu-system-x86_64", q, "vmm", vm=vm)
        vcpu = b.thread(q + 1, "CPU 0/KVM", q, "vcpu", vm=vm, vcpu=0)
        vhost = b.thread(q + 50, f"vhost-{q}", q, "io-worker", vm=vm)
        vms.append(dict(vm=vm, kind=kind, vcpu_tid=vcpu, vhost_tid=vhost, tap=f"tap{i}",
                        vcpu_cpu=i % npcpu, vhost_cpu=(i + 1) % npcpu,
                        share=rng.uniform(0.8, 1.2) if kind == "net" else 0.0,
                        S_ns=0, D_rx_ns=0, D_tx_ns=0, P_rx=0, P_tx=0, B_rx=0, B_tx=0, kicks=0))
    b.forks()
    net = [v for v in vms if v["kind"] == "net"]
    n_net = len(net)
    k_ns_per_ms = (p["common_ms_per_s"] * 1e6 / 1000 * (1 + p["common_growth"] * (n_net - 1))) if n_net else 0.0
    common = dict(K_ns=0, irqs=0, softirqs=0, napi_polls=0)
    windows = []
    skb = 0xFFFF888100000000
    carry = {v["vm"]: [0.0, 0.0] for v in net}

    hog_tids = {v["vcpu_tid"] for v in vms if v["kind"] == "cpu"}
    for w in range(p["duration_ms"]):
        t0 = w * 1_000_000
        win = dict(window_start=b.t0 + t0, window_end=b.t0 + t0 + 1_000_000, vms={})
        pk = window_packets({v["vm"]: v["share"] for v in net}, p["link_pps"], carry, rng, p["rx_per_tx"])
        for cpu in range(npcpu):
            # segments are contiguous: each starts with the sched_switch that ends
            # the previous one, so on-CPU time per thread is exact by construction
            t = t0
            hogs = [v for v in vms if v["kind"] == "cpu" and v["vcpu_cpu"] == cpu]
            k_here = int(k_ns_per_ms / npcpu)
            vhosts = [v for v in net if v["vhost_cpu"] == cpu and sum(pk[v["vm"]]) > 0]
            k_chunk = k_here // max(len(vhosts), 1) if vhosts else 0
            for v in vhosts:
                rx, tx = pk[v["vm"]]
                cur = b.current[cpu]
                if cur in hog_tids:
                    b.kvm_exit(t, cpu, cur, 0, EXIT_EXTERNAL_INTERRUPT, rip=USER_RIP)
                b.wakeup(t, cpu, v["vhost_tid"], cpu)
                b.switch(t, cpu, v["vhost_tid"], _prev_state(b, cpu, vms))
                cost = rx * p["rx_cost_ns"] + tx * p["tx_cost_ns"]
                step = cost / max(rx + tx, 1)
                order = ["rx"] * rx + ["tx"] * tx
                rng.shuffle(order)
                for k, d in enumerate(order):
                    skb += 0x100
                    tt = t + int(k * step)
                    if d == "rx":
                        b.emit(tt, cpu, "net_dev_xmit", v["vhost_tid"], skbaddr=skb, len=p["rx_bytes"], rc=0, name=v["tap"])
                        v["B_rx"] += p["rx_bytes"]
                    else:
                        ln = rng.choice((66, 1514))
                        b.emit(tt, cpu, "netif_receive_skb", v["vhost_tid"], skbaddr=skb, len=ln, name=v["tap"])
                        v["B_tx"] += ln
                v["P_rx"] += rx
                v["P_tx"] += tx
                v["D_rx_ns"] += rx * p["rx_cost_ns"]
                v["D_tx_ns"] += tx * p["tx_cost_ns"]
                win["vms"].setdefault(v["vm"], {}).update(D_rx_ns=rx * p["rx_cost_ns"], D_tx_ns=tx * p["tx_cost_ns"], P_rx=rx, P_tx=tx)
                t += cost
                if k_chunk:  # common work: NIC interrupt + NET_RX softirq on top of vhost
                    t = _common(b, cpu, t, k_chunk, common, rng)
            for v in net:
                if v["vcpu_cpu"] != cpu:
                    continue
                rx, tx = pk[v["vm"]]
                busy = 20_000 + (rx + tx) * p["guest_ns_per_pkt"]
                cur = b.current[cpu]
                if cur in hog_tids:
                    b.kvm_exit(t, cpu, cur, 0, EXIT_EXTERNAL_INTERRUPT, rip=USER_RIP)
                b.switch(t, cpu, v["vcpu_tid"], _prev_state(b, cpu, vms))
                b.kvm_entry(t, cpu, v["vcpu_tid"], 0, rip=USER_RIP)
                kicks = max(1, (rx + tx) // 32)
                for k in range(kicks):
                    tt = t + int((k + 1) * busy / (kicks + 2))
                    b.kvm_exit(tt, cpu, v["vcpu_tid"], 0, EXIT_EPT_MISCONFIG, rip=USER_RIP, info1=0xFEBF1000)
                    b.kvm_entry(tt + 300, cpu, v["vcpu_tid"], 0, rip=USER_RIP)
                v["kicks"] += kicks
                b.kvm_exit(t + busy - 100, cpu, v["vcpu_tid"], 0, EXIT_HLT, rip=0xFFFFFFFF81F00000)
                t += busy
                v["S_ns"] += busy
                b.switch(t, cpu, 0, TASK_INTERRUPTIBLE)
            rest = k_here - k_chunk * len(vhosts)
            window_end = t0 + 1_000_000
            if hogs:
                part = (window_end - t - max(rest, 0)) // len(hogs)
                for i, v in enumerate(hogs):
                    if part <= 0:
                        break
                    if b.current[cpu] != v["vcpu_tid"]:
                        cur = b.current[cpu]
                        if cur in hog_tids:
                            b.kvm_exit(t, cpu, cur, 0, EXIT_EXTERNAL_INTERRUPT, rip=USER_RIP)
                        b.switch(t, cpu, v["vcpu_tid"], _prev_state(b, cpu, vms))
                        b.kvm_entry(t, cpu, v["vcpu_tid"], 0, rip=USER_RIP)
                    # the last hog keeps the CPU until the next window's first switch
                    run = part if i < len(hogs) - 1 else window_end - t - max(rest, 0)
                    if rest > 0 and i == len(hogs) - 1:
                        t = _common(b, cpu, t + run // 2, rest, common, rng) + (run - run // 2)
                        rest = 0
                    else:
                        t += run
                    v["S_ns"] += run
            if rest > 0:
                t = _common(b, cpu, t, rest, common, rng)
            if b.current[cpu] in hog_tids:  # the host tick at the window's end (HZ=1000)
                b.kvm_exit(window_end - 2, cpu, b.current[cpu], 0, EXIT_EXTERNAL_INTERRUPT, rip=USER_RIP)
                b.kvm_entry(window_end - 1, cpu, b.current[cpu], 0, rip=USER_RIP)
        windows.append(win)

    # S is what the schedule shows: the vCPU thread's on-CPU time minus the
    # common work nested in it (exact, from the emitted sched_switch times)
    table = {t["tid"]: t for t in b.thread_table(b.end(0))}
    for v in vms:
        v.pop("share")
        v["S_model_ns"] = v["S_ns"]
        v["S_ns"] = table[v["vcpu_tid"]]["oncpu_ns"] - table[v["vcpu_tid"]]["irq_ns"]
    truth = dict(
        start_ns=b.t0,
        end_ns=b.end(b.t0 + p["duration_ms"] * 1_000_000),
        threads=b.thread_table(b.end(b.t0 + p["duration_ms"] * 1_000_000)),
        per_vm=[{k: v[k] for k in ("vm", "kind", "vcpu_tid", "vhost_tid", "tap", "S_ns", "D_rx_ns", "D_tx_ns",
                                   "S_model_ns", "P_rx", "P_tx", "B_rx", "B_tx", "kicks")} for v in vms],
        common=common,
        windows=windows,
        notes="direction is the guest's: Rx = net_dev_xmit on tap (host->guest), Tx = netif_receive_skb on tap; "
              "S_ns = vCPU thread on-CPU time minus nested irq (measured from the schedule); S_model_ns = the "
              "simulation's intent; D_* = vhost packet cost per direction (vhost oncpu_ns - irq_ns equals "
              "D_rx_ns + D_tx_ns within a few ns per window); K_ns = irq+softirq time.",
    )
    truth["vms"] = b.inventory()
    # vCPUs and vhost threads pinned to their CPUs; each CPU's 1 ms
    # windows run the woken work (vhost, networking vCPUs) before the CPU
    # hogs, as the fair class's wakeup preemption does
    truth["host"] = host_declaration("fair", {t: [c] for v in vms for t, c in ((v["vcpu_tid"], v["vcpu_cpu"]), (v["vhost_tid"], v["vhost_cpu"]))})
    return Result(b.events, truth, dict(cpus=npcpu, comms=b.comms()))


def _prev_state(b: Builder, cpu: int, vms: list[dict[str, Any]]) -> int:
    cur = b.current[cpu]
    for v in vms:
        if cur == v["vcpu_tid"] and v["kind"] == "cpu":
            return TASK_RUNNING
    return TASK_INTERRUPTIBLE


def _common(b: Builder, cpu: int, t: int, dur: int, acc: dict[str, int], rng: random.Random) -> int:
    """NIC interrupt + NET_RX softirq of ``dur`` ns on top of the current thread.

    K is accounted as the span between the emitted ``irq_handler_entry`` and
    ``softirq_exit`` timestamps, so it is exactly what the file shows."""
    pid = b.current[cpu]
    t_in = b.emit(t, cpu, "irq_handler_entry", pid, irq=NIC_IRQ, name="eth0-TxRx-0")
    b.emit(t + 800, cpu, "softirq_raise", pid, vec=NET_RX_SOFTIRQ)
    b.emit(t + 900, cpu, "irq_handler_exit", pid, irq=NIC_IRQ, ret=1)
    b.emit(t + 1000, cpu, "softirq_entry", pid, vec=NET_RX_SOFTIRQ)
    b.emit(t + dur // 2, cpu, "napi_poll", pid, napi=0xFFFF888104A3C000, dev_name="eth0", work=rng.randint(8, 64), budget=64)
    t_out = b.emit(t + dur, cpu, "softirq_exit", pid, vec=NET_RX_SOFTIRQ)
    acc["K_ns"] += t_out - t_in
    acc["irqs"] += 1
    acc["softirqs"] += 1
    acc["napi_polls"] += 1
    b.nested_irq(cpu, t_out - t_in)
    return t + dur
