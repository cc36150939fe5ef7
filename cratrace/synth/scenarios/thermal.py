"""`thermal`: vCPUs of uneven power on a few cores, with DVFS and
temperature (papers/thermal.md).

Each core runs ``vcpus_per_core`` pinned vCPU threads of VMs ``vm0..``;
the first ``hot_vcpus`` vCPUs draw ``hot_w`` watts ("hot", e.g. vector-heavy) and
``cold_w`` otherwise, at the nominal frequency ``max_khz``. Every
millisecond each core's temperature follows a first-order RC model,
``T += dt/C · (P − (T − T_amb)/R)``, with P the power of what ran (idle:
``idle_w``), and is logged as ``thermal_temperature`` (zone ``cpu<n>``,
m°C) every ``sample_ms``. Above ``trip_c`` the core throttles to
``throttle_khz`` (``cpu_frequency``); below ``trip_c − 1.5`` it returns to
``max_khz``. Power scales with frequency (P ∝ f). The truth gives per-vCPU
energy, run time and cycles and each core's temperature samples.
"""

from __future__ import annotations

import random
from typing import Any

from cratrace.synth.scenarios._common import Builder, Param, Result, host_declaration
from cratrace.synth.scenarios._core import CoreSim, VThread

NAME = "thermal"
VERSION = 3  # 3: the truth declares its host (scheduler, affinity)
SUMMARY = "vCPUs of uneven power on a few cores, with cpu_frequency throttling, cpu_idle and temperatures."
PARAMS = {
    "cores": Param(2, "host CPUs"),
    "vcpus_per_core": Param(2, "pinned vCPU threads per core"),
    "duration_ms": Param(80, "simulated time"),
    "slice_us": Param(4000, "host time slice"),
    "hot_vcpus": Param(2, "how many vCPUs are hot (the first ones: by default core 0's)"),
    "hot_w": Param(12.0, "power of a hot vCPU at max_khz"),
    "cold_w": Param(4.0, "power of a cold vCPU at max_khz"),
    "idle_w": Param(1.0, "idle core power"),
    "max_khz": Param(2800000, "nominal frequency"),
    "throttle_khz": Param(1600000, "throttled frequency"),
    "trip_c": Param(57.0, "throttle above this temperature (°C)"),
    "ambient_c": Param(45.0, "ambient temperature (°C)"),
    "start_c": Param(55.0, "core temperature at the start (°C)"),
    "r_c_per_w": Param(2.0, "thermal resistance (°C/W)"),
    "c_j_per_c": Param(0.05, "thermal capacitance (J/°C)"),
    "sample_ms": Param(2, "thermal_temperature sampling period"),
}

ALLOW_ZERO = ("hot_vcpus",)


def generate(p: dict[str, Any], seed: int) -> Result:
    rng = random.Random(seed)
    ncore = p["cores"]
    b = Builder(ncore)
    sims: list[CoreSim] = []
    power: dict[int, float] = {}
    energy: dict[int, float] = {}
    k = 0
    for c in range(ncore):
        ths = []
        for _ in range(p["vcpus_per_core"]):
            q = 5000 + 100 * k
            vm = f"vm{k}"
            b.thread(q, "qemu-system-x86_64", q, "vmm", vm=vm)
            tid = b.thread(q + 1, "CPU 0/KVM", q, "vcpu", vm=vm, vcpu=0)
            power[tid] = p["hot_w"] if k < p["hot_vcpus"] else p["cold_w"]
            energy[tid] = 0.0
            ths.append(VThread(tid, 0, "cpu"))
            k += 1
        sim = CoreSim(b, c, ths, p["slice_us"] * 1000, rng)
        sim.freq_khz = p["max_khz"]
        b.emit(0, c, "cpu_frequency", 0, state=p["max_khz"], cpu_id=c)
        sims.append(sim)
    b.forks()
    temp = [p["start_c"]] * ncore
    samples: list[dict[str, Any]] = []
    freq_changes: list[dict[str, Any]] = []
    core_energy = [0.0] * ncore
    dt_ns = 1_000_000
    for ms in range(p["duration_ms"]):
        t1 = (ms + 1) * dt_ns
        for c, sim in enumerate(sims):
            before = {th.tid: th.run_ns for th in sim.threads}
            idle_before = sim.idle_ns
            scale = sim.freq_khz / p["max_khz"]
            sim.advance(t1)
            e = 0.0
            for th in sim.threads:
                run_s = (th.run_ns - before[th.tid]) / 1e9
                ej = power[th.tid] * scale * run_s
                energy[th.tid] += ej
                e += ej
            e += p["idle_w"] * (sim.idle_ns - idle_before) / 1e9
            core_energy[c] += e
            pw = e / (dt_ns / 1e9)
            prev = temp[c]
            temp[c] += (dt_ns / 1e9) / p["c_j_per_c"] * (pw - (temp[c] - p["ambient_c"]) / p["r_c_per_w"])
            if (ms + 1) % p["sample_ms"] == 0:
                ts = b.emit(t1, c, "thermal_temperature", b.current[c], thermal_zone=f"cpu{c}", id=c,
                            temp_prev=int(prev * 1000), temp=int(temp[c] * 1000))
                samples.append(dict(cpu=c, ts=ts, temp_mc=int(temp[c] * 1000)))
            want = p["throttle_khz"] if temp[c] > p["trip_c"] else (p["max_khz"] if temp[c] < p["trip_c"] - 1.5 else sim.freq_khz)
            if want != sim.freq_khz:
                sim.freq_khz = want
                ts = b.emit(t1, c, "cpu_frequency", b.current[c], state=want, cpu_id=c)
                freq_changes.append(dict(cpu=c, ts=ts, khz=want))
    vcpus = []
    for c, sim in enumerate(sims):
        for th in sim.threads:
            t = b.threads[th.tid]
            vcpus.append(dict(vm=t["vm"], vcpu=0, tid=th.tid, core=c, power_w_at_max=power[th.tid],
                              hot=power[th.tid] == p["hot_w"], run_ns=th.run_ns, cycles=th.cycles,
                              energy_j=round(energy[th.tid], 9)))
    truth = dict(
        start_ns=b.t0, end_ns=b.end(b.t0 + p["duration_ms"] * dt_ns), threads=b.thread_table(b.end(b.t0 + p["duration_ms"] * dt_ns)),
        per_vcpu=vcpus,
        cores=[dict(cpu=c, energy_j=round(core_energy[c], 9), idle_ns=sims[c].idle_ns, final_temp_c=round(temp[c], 3))
               for c in range(ncore)],
        temperature_samples=samples,
        frequency_changes=freq_changes,
        notes="energy_j per vCPU = power_w_at_max * (freq/max_khz) * run time; core energy adds idle_w * idle time",
    )
    truth["vms"] = b.inventory()
    # each core time-slices its pinned threads round robin (CoreSim)
    # its power model: each vCPU's own power (P ∝ f, no static part), its
    # one-node RC thermal model (no sink between core and ambient) and trip
    truth["host"] = host_declaration(
        "rr", {th.tid: [c] for c, sim in enumerate(sims) for th in sim.threads}, rr_slice_ns=p["slice_us"] * 1000,
        static_w=0.0, idle_w=p["idle_w"], ambient_c=p["ambient_c"], throttle_c=p["trip_c"],
        r_core_c_per_w=p["r_c_per_w"], c_core_j_per_c=p["c_j_per_c"], r_sink_c_per_w=1e-3, c_sink_j_per_c=1.0,
    )
    truth["host"]["power_w"] = {str(tid): w for tid, w in sorted(power.items())}
    return Result(b.events, truth, dict(cpus=ncore, comms=b.comms()))
