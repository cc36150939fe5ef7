"""`xen-io-billing`: CPU-bound and networking guests on a Xen host whose
dom0 runs the network backend (netback), written as a xentrace file.

The Xen counterpart of ``kvm-io-billing`` (papers/billing.md: Woo 2012's
netback accounting; Cherkasova & Gardner's page-exchange proxy). Guests
``dom1``..``domN`` have one vCPU each; ``workload`` as in kvm-io-billing
(``cpu-cpu``, ``cpu-net``, ``net-net``, ``net1``..``net4``). Networking
guests share a saturated link of ``link_pps`` packets/s in uneven shares
(0.8-1.2), guest Rx = ``rx_per_tx`` x guest Tx (2; Table 4.1 reads 0.5). dom0 (one vCPU, on pCPU 0) handles
every packet: a guest-Tx packet costs ``tx_cost_ns`` of dom0 CPU and maps
the guest's granted page (grant map, then unmap), a guest-Rx packet costs
``rx_cost_ns`` and hands a page over (grant transfer, page flipping).
dom0 also does ``common_ms_per_s`` of common work per second (NIC driver,
bridge), growing by ``common_growth`` per extra networking guest.

The host runs in 1 ms windows. On pCPU 0 dom0 runs its netback and common
work, then guests assigned to pCPU 0 fill the rest; other pCPUs run their
guests; a networking guest runs ``guest_ns_per_pkt`` per packet and then
blocks until the next window, a CPU-bound guest runs the whole window. The
idle domain (32767) runs where nothing else does. Records: runstate
changes (with TSC), grant map/unmap/transfer (dom0's pCPU, the guest's
domid), TRC_SCHED_SWITCH at each dispatch, and a continue-running record
for the running vCPU at every 10 ms tick. TSC = ns x ``cpu_hz``/1e9.
"""

from __future__ import annotations

import random
from typing import Any

from cratrace.errors import UsageError
from cratrace.synth.scenarios._common import Param, host_declaration
from cratrace.synth.scenarios.kvm_io_billing import WORKLOADS, _layout, check, window_packets
from cratrace.synth.xentrace_writer import XentraceWriter

NAME = "xen-io-billing"
VERSION = 4  # 4: netback_rx_ns/netback_tx_ns (3: rx_per_tx; 2: the truth declares its host)
FORMAT = "xentrace"
SUMMARY = "CPU-bound and networking Xen guests; dom0 netback work with grant map/unmap/transfer records (xentrace)."
PARAMS = {
    "workload": Param("cpu-net", "one of " + ", ".join(WORKLOADS)),
    "pcpus": Param(2, "host CPUs"),
    "duration_ms": Param(200, "simulated time (1 ms windows)"),
    "link_pps": Param(60000, "packets/s on the saturated link, all networking guests together (Rx+Tx)"),
    "rx_cost_ns": Param(1500, "dom0 netback CPU per guest-Rx packet"),
    "tx_cost_ns": Param(900, "dom0 netback CPU per guest-Tx packet"),
    "guest_ns_per_pkt": Param(700, "guest vCPU CPU per packet in a networking guest"),
    "common_ms_per_s": Param(45.0, "dom0 common (unattributable) CPU per second, one networking guest"),
    "common_growth": Param(0.45, "relative growth of the common work per extra networking guest"),
    "rx_per_tx": Param(2.0, "guest Rx packets per guest Tx packet (Table 4.2: 2; Table 4.1 reads 0.5)"),
    "cpu_hz": Param(2_400_000_000, "TSC frequency (xenalyze --cpu-hz, host.json cpu_hz)"),
}
ALLOW_ZERO = ("common_growth",)

RUNNING, RUNNABLE, BLOCKED = 0, 1, 2
IDLE_DOM = 32767
RUNSTATE_CHANGE = 0x00021001
SCHED_SWITCH = 0x0002800A
CONTINUE_RUNNING = 0x00021002
GRANT_MAP, GRANT_UNMAP, GRANT_TRANSFER = 0x00100001, 0x00100002, 0x00100003
T0_NS = 1_000_000_000


class _Host:
    """Keeps each vCPU's runstate and each pCPU's current vCPU, and writes
    consistent runstate-change records (what xenalyze checks)."""

    def __init__(self, pcpus: int, hz: int):
        self.w = XentraceWriter()
        self.hz = hz
        self.last = [0] * pcpus
        self.state: dict[tuple[int, int], int] = {}
        self.cur: list[tuple[int, int]] = [(IDLE_DOM, c) for c in range(pcpus)]
        self.running_ns: dict[tuple[int, int], int] = {}
        self.since = [T0_NS] * pcpus

    def tsc(self, cpu: int, t_ns: int) -> int:
        ts = max(T0_NS + t_ns, self.last[cpu] + 1)
        self.last[cpu] = ts
        return ts * self.hz // 1_000_000_000

    def change(self, cpu: int, t_ns: int, dv: tuple[int, int], new: int) -> None:
        old = self.state.get(dv, RUNNABLE)
        if old == new:
            return
        self.state[dv] = new
        ev = RUNSTATE_CHANGE | (old << 8) | (new << 4)
        self.w.record(cpu, ev, [(dv[0] << 16) | dv[1]], tsc=self.tsc(cpu, t_ns))

    def dispatch(self, cpu: int, t_ns: int, nxt: tuple[int, int], prev_becomes: int) -> None:
        prev = self.cur[cpu]
        if prev == nxt:
            return
        now = max(T0_NS + t_ns, self.last[cpu] + 1)
        self.running_ns[prev] = self.running_ns.get(prev, 0) + now - self.since[cpu]
        self.since[cpu] = now
        self.change(cpu, t_ns, prev, prev_becomes if prev[0] != IDLE_DOM else RUNNABLE)
        self.w.record(cpu, SCHED_SWITCH, [prev[0], prev[1], nxt[0], nxt[1]], tsc=self.tsc(cpu, t_ns))
        self.change(cpu, t_ns, nxt, RUNNING)
        self.cur[cpu] = nxt

    def record(self, cpu: int, t_ns: int, event: int, words: list[int]) -> None:
        self.w.record(cpu, event, words, tsc=self.tsc(cpu, t_ns))


def generate(p: dict[str, Any], seed: int) -> XenResult:
    check(p)
    rng = random.Random(seed)
    kinds = _layout(p["workload"])
    npcpu = p["pcpus"]
    if npcpu < 1:
        raise UsageError("--set pcpus: at least 1")
    h = _Host(npcpu, int(p["cpu_hz"]))
    dom0 = (0, 0)
    guests = []
    for i, kind in enumerate(kinds):
        guests.append(dict(dom=i + 1, kind=kind, pcpu=(i + 1) % npcpu if npcpu > 1 else 0,
                           share=rng.uniform(0.8, 1.2) if kind == "net" else 0.0,
                           netback_ns=0, netback_rx_ns=0, netback_tx_ns=0, rx=0, tx=0, grants=dict(map=0, unmap=0, transfer=0), S_ns=0))
    for c in range(npcpu):  # the idle vCPUs start running, everyone else runnable
        h.state[(IDLE_DOM, c)] = RUNNING
    for g in guests:
        h.state[(g["dom"], 0)] = BLOCKED if g["kind"] == "idle" else RUNNABLE
    h.state[dom0] = BLOCKED
    net = [g for g in guests if g["kind"] == "net"]
    kind_of = {g["dom"]: g["kind"] for g in guests}

    def leaves_as(dv: tuple[int, int]) -> int:
        # dom0 and networking guests have finished their work and block;
        # a CPU-bound guest is preempted (the idle vCPU: see dispatch)
        return BLOCKED if dv == dom0 or kind_of.get(dv[0]) == "net" else RUNNABLE

    k_per_ms = p["common_ms_per_s"] * 1e6 / 1000 * (1 + p["common_growth"] * (len(net) - 1)) if net else 0.0
    carry = {g["dom"]: [0.0, 0.0] for g in net}
    common_ns = 0
    for w in range(p["duration_ms"]):
        t0 = w * 1_000_000
        if w % 10 == 0:  # scheduler tick: the running vCPU is picked again
            for cpu in range(npcpu):
                if h.cur[cpu][0] != IDLE_DOM:
                    d, v = h.cur[cpu]
                    h.record(cpu, t0, CONTINUE_RUNNING, [(d << 16) | v])
        pk = window_packets({g["dom"]: g["share"] for g in net}, p["link_pps"], carry, rng, p["rx_per_tx"])
        # pCPU 0: dom0 first (its work was queued by the NIC), then guests
        t = t0
        if net:
            h.change(0, t, dom0, RUNNABLE)  # woken by the NIC interrupt
            h.dispatch(0, t, dom0, RUNNABLE)
            order = [(g, d) for g in net for d in ["rx"] * pk[g["dom"]][0] + ["tx"] * pk[g["dom"]][1]]
            rng.shuffle(order)
            for g, d in order:
                cost = p["rx_cost_ns"] if d == "rx" else p["tx_cost_ns"]
                if d == "tx":
                    h.record(0, t, GRANT_MAP, [g["dom"]])
                    h.record(0, t + cost - 1, GRANT_UNMAP, [g["dom"]])
                    g["grants"]["map"] += 1
                    g["grants"]["unmap"] += 1
                else:
                    h.record(0, t, GRANT_TRANSFER, [g["dom"]])
                    g["grants"]["transfer"] += 1
                g[d] += 1
                g["netback_ns"] += cost
                g[f"netback_{d}_ns"] += cost
                t += cost
            k = int(k_per_ms)
            t += k
            common_ns += k
        dom0_end = t
        for cpu in range(npcpu):
            tc = dom0_end if cpu == 0 else t0
            mine = [g for g in guests if g["pcpu"] == cpu and g["kind"] != "idle"]
            for g in sorted(mine, key=lambda g: g["kind"] != "net"):  # networking guests first, then hogs
                if tc >= t0 + 1_000_000:
                    break
                if g["kind"] == "net":
                    rx, tx = pk[g["dom"]]
                    run = min((rx + tx) * p["guest_ns_per_pkt"], t0 + 1_000_000 - tc)
                else:
                    run = t0 + 1_000_000 - tc
                if run <= 0:
                    continue
                prev_to = leaves_as(h.cur[cpu])
                if h.state.get((g["dom"], 0)) == BLOCKED:
                    h.change(cpu, tc, (g["dom"], 0), RUNNABLE)  # woken by its event channel
                h.dispatch(cpu, tc, (g["dom"], 0), prev_to)
                tc += run
            if tc < t0 + 1_000_000 and h.cur[cpu][0] != IDLE_DOM:
                h.dispatch(cpu, tc, (IDLE_DOM, cpu), leaves_as(h.cur[cpu]))
    end = T0_NS + p["duration_ms"] * 1_000_000
    for cpu in range(npcpu):  # close the books (not a record: xenalyze leaves the last interval open too)
        cur = h.cur[cpu]
        h.running_ns[cur] = h.running_ns.get(cur, 0) + max(end - h.since[cpu], 0)
    for g in guests:
        g["S_ns"] = h.running_ns.get((g["dom"], 0), 0)
    dur_s = p["duration_ms"] / 1000
    truth = dict(
        cpu_hz=int(p["cpu_hz"]),
        start_ns=T0_NS,
        end_ns=end,
        vms=[dict(name=f"dom{g['dom']}", dom=g["dom"], kind=g["kind"], vcpus=1) for g in guests],
        dom0=dict(running_ns=h.running_ns.get(dom0, 0), netback_ns=sum(g["netback_ns"] for g in guests), common_ns=common_ns),
        per_vm={f"dom{g['dom']}": dict(kind=g["kind"], running_ns=g["S_ns"], netback_ns=g["netback_ns"],
                                       netback_rx_ns=g["netback_rx_ns"], netback_tx_ns=g["netback_tx_ns"], rx_packets=g["rx"], tx_packets=g["tx"],
                                       grants=g["grants"], netback_ms_per_s=round(g["netback_ns"] / 1e6 / dur_s, 6)) for g in guests},
        attribution_rule="dom0's running time per running interval fitted as k_rx x Rx + k_tx x Tx + common over the guests' page exchanges "
                         "(grant transfer: guest Rx, grant map: guest Tx; Cherkasova & Gardner 2005): each guest charged k_d per exchange, the rest common",
        # Xen's credit scheduler, switches that cost nothing (domains'
        # vCPUs are no host threads: their pinning is not declared here)
        host=host_declaration("credit", {}),
    )
    return XenResult(writer=h.w, truth=truth, pcpus=npcpu)


class XenResult:
    """A generated xentrace file: the writer holding its records, and the truth."""

    def __init__(self, writer: XentraceWriter, truth: dict[str, Any], pcpus: int):
        self.writer, self.truth, self.pcpus = writer, truth, pcpus

    def record_counts(self) -> dict[str, int]:
        return {f"cpu{c}": len(recs) for c, recs in sorted(self.writer.per_cpu.items())}
