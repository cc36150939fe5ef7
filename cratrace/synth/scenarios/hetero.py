"""`hetero`: CPU-bound and I/O-bound VMs on a host with fast and slow cores,
for fast/slow core placement studies (papers/asym.md).

The first ``fast_cores`` host CPUs run at ``fast_khz``, the rest at
``slow_khz`` (one ``cpu_frequency`` event per CPU at the start). VMs
``cpu0..`` are CPU-bound (always runnable); VMs ``io0..`` run bursts of
``burst_us`` then wait ``io_wait_us`` for I/O (IO_INSTRUCTION or HLT exit,
then sleep). Every VM has ``vcpus`` vCPU threads, pinned round-robin over
all cores in the order cpu0, io0, cpu1, io1, ... (a placement that mixes
kinds on both core types); each core time-slices its threads (``slice_us``).
The truth gives each vCPU's run time and cycles (run time × the core's
frequency), so a placement policy's replay can be checked.
"""

from __future__ import annotations

import random
from typing import Any

from cratrace.synth.scenarios._common import Builder, Param, Result, host_declaration
from cratrace.synth.scenarios._core import CoreSim, VThread

NAME = "hetero"
VERSION = 3  # 3: the truth declares its host (scheduler, affinity)
SUMMARY = "CPU-bound and I/O-bound VMs on fast and slow cores (asymmetric placement studies)."
PARAMS = {
    "cpu_vms": Param(2, "CPU-bound VMs"),
    "io_vms": Param(2, "I/O-bound VMs"),
    "vcpus": Param(1, "vCPUs per VM"),
    "cores": Param(4, "host CPUs"),
    "fast_cores": Param(2, "how many of them are fast"),
    "fast_khz": Param(3000000, "fast core frequency"),
    "slow_khz": Param(1200000, "slow core frequency"),
    "duration_ms": Param(60, "simulated time"),
    "slice_us": Param(3000, "host time slice (credit-like 30 ms scaled down)"),
    "burst_us": Param(300, "I/O-bound VM run burst (±50%)"),
    "io_wait_us": Param(900, "I/O wait between bursts (±50%)"),
}

ALLOW_ZERO = ("fast_cores", "cpu_vms", "io_vms")


def check(p: dict[str, Any]) -> None:
    from cratrace.errors import UsageError

    if p["fast_cores"] > p["cores"]:
        raise UsageError(f"--set fast_cores={p['fast_cores']}: more than cores={p['cores']}")


def generate(p: dict[str, Any], seed: int) -> Result:
    check(p)
    rng = random.Random(seed)
    ncore = p["cores"]
    b = Builder(ncore)
    freqs = [p["fast_khz"] if c < p["fast_cores"] else p["slow_khz"] for c in range(ncore)]
    per_core: list[list[VThread]] = [[] for _ in range(ncore)]
    meta = []
    g = 0
    order = []  # interleave kinds so both core types get both (cpu0, io0, cpu1, io1, ...)
    for i in range(max(p["cpu_vms"], p["io_vms"])):
        order += [("cpu", i)] if i < p["cpu_vms"] else []
        order += [("io", i)] if i < p["io_vms"] else []
    for kind, i in order:
        if True:
            vm = f"{kind}{i}"
            q = 4000 + 100 * len(meta)
            b.thread(q, "qemu-system-x86_64", q, "vmm", vm=vm)
            meta.append(vm)
            for j in range(p["vcpus"]):
                tid = b.thread(q + 1 + j, f"CPU {j}/KVM", q, "vcpu", vm=vm, vcpu=j)
                th = VThread(tid, j, kind, burst_ns=p["burst_us"] * 1000, wait_ns=p["io_wait_us"] * 1000)
                per_core[g % ncore].append(th)
                g += 1
    b.forks()
    end = p["duration_ms"] * 1_000_000
    sims = []
    for c in range(ncore):
        b.emit(0, c, "cpu_frequency", 0, state=freqs[c], cpu_id=c)
        sim = CoreSim(b, c, per_core[c], p["slice_us"] * 1000, rng)
        sim.freq_khz = freqs[c]
        sim.advance(end)
        sims.append(sim)
    vcpus = []
    for c, sim in enumerate(sims):
        for th in sim.threads:
            t = b.threads[th.tid]
            vcpus.append(dict(vm=t["vm"], vcpu=th.vcpu, tid=th.tid, kind=th.kind, core=c, core_khz=freqs[c],
                              fast=c < p["fast_cores"], run_ns=th.run_ns, cycles=th.cycles, bursts=th.bursts))
    truth = dict(
        start_ns=b.t0, end_ns=b.end(b.t0 + end), threads=b.thread_table(b.end(b.t0 + end)),
        cores=[dict(cpu=c, khz=freqs[c], fast=c < p["fast_cores"], idle_ns=sims[c].idle_ns) for c in range(ncore)],
        per_vcpu=sorted(vcpus, key=lambda v: (v["vm"], v["vcpu"])),
        notes="cycles = run_ns * core kHz / 1e6; io bursts end in IO_INSTRUCTION or HLT exits",
    )
    truth["vms"] = b.inventory()
    # each core time-slices its pinned threads round robin (CoreSim)
    truth["host"] = host_declaration("rr", {th.tid: [c] for c, sim in enumerate(sims) for th in sim.threads}, rr_slice_ns=p["slice_us"] * 1000)
    return Result(b.events, truth, dict(cpus=ncore, comms=b.comms()))
