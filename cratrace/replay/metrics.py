"""A replay's metrics.json: per VM and host figures, the fidelity against
the recording, and each placement's own figures (energy balance,
asymmetric pools). Only what the inputs and seed determine goes here, so
two runs are byte-identical."""

from __future__ import annotations

from typing import Any

import polars as pl

from cratrace.replay.workload import Workload


def _retry_tail(r: dict) -> dict[str, Any]:
    """Spin episodes, uncleared re-dispatches in all, and their tail per
    episode (Umeno et al. report the tail: WOPD's is the long one)."""
    ep = pl.DataFrame(r["episodes"])
    if "retries" not in ep.columns or ep.height == 0:
        return {"spin_episodes": ep.height, "uncleared_redispatches": 0, "retries_p99": 0, "retries_max": 0}
    x = ep["retries"]
    return {
        "spin_episodes": ep.height,
        "uncleared_redispatches": int(x.sum()),
        "retries_p99": int(x.quantile(0.99, "higher")),
        "retries_max": int(x.max()),
    }


def replay_metrics(w: Workload, r: dict, policy: str, seed: int, settings: dict, tolerance: float, gate: bool) -> dict[str, Any]:
    n = len(w.vm_names)
    T = max(int(r["end_ns"]), 1) / 1e9
    # the replayed host's CPUs (`--set pcpus` may differ from the capture's)
    pc = len(r.get("core_busy_ns") or []) or w.pcpus
    cpu = r["cpu_ns"]
    spin = r["spin_ns"]
    vm_cpu = [0] * n
    vm_spin = [0] * n
    vm_exc = [0] * n
    vm_unc = [0] * n
    # Python policies have no spin responses: no re-dispatches to count
    uncleared = r.get("uncleared") or [0] * len(cpu)
    for i, v in enumerate(w.vm_of):
        if v >= 0:
            vm_cpu[v] += cpu[i]
            vm_spin[v] += spin[i]
            vm_exc[v] += r["excessive"][i]
            vm_unc[v] += uncleared[i]
    marks = [0] * n
    last_mark = [0] * n
    mk = pl.DataFrame(r["marks"]).rename({"_t": "t"})
    mk = mk.with_columns(pl.col("t").replace_strict(list(range(len(w.vm_of))), w.vm_of, return_dtype=pl.Int64).alias("vm")).filter(pl.col("vm") >= 0)
    for v, k, last in mk.group_by("vm").agg(pl.len(), pl.col("ts").max()).iter_rows():
        marks[v], last_mark[v] = k, last
    # each VM's active span: its first thread's start to the end of its
    # last run (a VM whose demand ran out before the others' has its own)
    first_start = [min((s for s, v in zip(w.start, w.vm_of) if v == i), default=0) for i in range(n)]
    last_run = [0] * n
    sl = pl.DataFrame(r["slices"])
    if sl.height:
        sl = sl.with_columns(pl.col("_t").replace_strict(list(range(len(w.vm_of))), w.vm_of, return_dtype=pl.Int64).alias("vm")).filter(pl.col("vm") >= 0)
        for v, end in sl.group_by("vm").agg(pl.col("end").max()).iter_rows():
            last_run[v] = int(end)
    # the costs the engine charges (switches, migrations, hypervisor calls,
    # swaps) are paid inside the threads' CPU time (a run is charged from
    # its dispatch), so scheduling overhead is part of busy time, not added
    # to it: busy is what the cores ran (core_busy_ns sums to the same)
    busy = sum(cpu)
    U = busy / (pc * T * 1e9) if T > 0 else 0
    guest = sum(c - s for c, s, v in zip(cpu, spin, w.vm_of) if v >= 0)
    rec_T = w.duration_ns / 1e9
    vms = {}
    tput_err = 0.0
    for i, name in enumerate(w.vm_names):
        rec_marks = w.recorded_marks.get(name, 0)
        # throughput over the VM's own active window (first vCPU start to
        # last transaction), the same definition for recording and replay,
        # so capture set-up time around the workload does not count
        first, rec_last = w.recorded_window.get(name, (0, w.duration_ns))
        # without transactions: useful guest seconds per second of its span
        active = max(last_run[i] - first_start[i], 1) / 1e9
        tp = marks[i] / max((last_mark[i] - first) / 1e9, 1e-9) if marks[i] else (vm_cpu[i] - vm_spin[i]) / 1e9 / active
        rec_tp = rec_marks / max((rec_last - first) / 1e9, 1e-9) if rec_marks else None
        err = abs(tp - rec_tp) / rec_tp * 100 if rec_tp else None
        if err is not None:
            tput_err = max(tput_err, err)
        vms[name] = {
            "cpu_s": round(vm_cpu[i] / 1e9, 6),
            "spin_s": round(vm_spin[i] / 1e9, 6),
            "throughput_per_s": round(tp, 6),
            "throughput_unit": "marks/s" if marks[i] else "useful guest s/s",
            "marks": marks[i],
            "recorded_throughput_per_s": round(rec_tp, 6) if rec_tp else None,
            "recorded_spin_s": round(w.recorded_spin_ns.get(name, 0) / 1e9, 6),
            # Umeno et al.'s retries: re-dispatches of a spinner whose
            # lock was still held
            "uncleared_redispatches": vm_unc[i],
            "excessive_spins": vm_exc[i],
        }
    # the host's throughput: its VMs' transactions per second, summed (each
    # over its own window, as for the recording), so the VMs add up to it
    host_tp = sum(v["throughput_per_s"] for v in vms.values() if v["marks"])
    rec_host_tp = sum(v["recorded_throughput_per_s"] or 0.0 for v in vms.values())
    cpu_err = 0.0
    worst = None
    for i, v in enumerate(w.vm_of):
        rec = w.recorded_cpu_ns[i]
        if v >= 0 and rec > 0:
            e = abs(cpu[i] - rec) / rec * 100
            if e >= cpu_err:
                cpu_err, worst = e, w.tids[i]
    return {
        "policy": policy,
        "seed": seed,
        "params": settings,
        "duration_s": round(T, 6),
        "recorded_duration_s": round(rec_T, 6),
        "vms": vms,
        "host": {
            "pcpus": pc,
            "etr": round(host_tp, 6),
            "recorded_etr": round(rec_host_tp, 6),
            "itr": round(host_tp / U, 6) if U > 0 else None,
            "busy_pct": round(100 * U, 4),
            "guest_util_pct": round(100 * guest / (pc * T * 1e9), 4),
            "hypercalls": int(sum(r["calls"])),
            "hypercalls_per_busy_s": round(sum(r["calls"]) / (T * U), 4) if U > 0 else None,
            "sched_overhead_pct": round(100 * r["overhead_ns"] / (pc * T * 1e9), 4),
            # spin episodes and their tail of uncleared re-dispatches
            **_retry_tail(r),
            # the host's CFS groups the replayed threads were scheduled in
            "sched_groups": len({g for g in w.group_of if g >= 0}),
        },
        "fidelity": {
            "cpu_time_err_pct": round(cpu_err, 4),
            "worst_thread": worst,
            "throughput_err_pct": round(tput_err, 4),
            "tolerance_pct": tolerance,
            "gate_applies": gate,
            "passed": cpu_err <= tolerance and tput_err <= tolerance,
        },
        "events": int(r["events"]),
        "critical_ns": w.critical_ns,
        "energy": energy_metrics(r) | {"per_work": per_work(w, r, T, sum(marks))},
    } | ({"energy_balance": balance_metrics(r)} if r.get("bal_ts") else {})


def energy_metrics(r: dict) -> dict:
    """Per-core busy time and energy from the replay's power model."""
    busy = r.get("core_busy_ns", [])
    dyn = sum(ns * w * 1e-9 for ns, w in zip(busy, r.get("core_dynamic_w", [])))
    per_core = list(r.get("core_energy_j", []))
    total = sum(per_core)
    return {
        "core_khz": list(r.get("core_khz", [])),
        "core_volt": [round(v, 4) for v in r.get("core_volt", [])],
        "core_busy_s": [round(ns / 1e9, 6) for ns in busy],
        "core_energy_j": [round(j, 6) for j in per_core],
        "total_energy_j": round(total, 6),
        "dynamic_energy_j": round(dyn, 6),
        # how unevenly the cores were loaded with energy (what energy
        # balancing evens out), and their heat from the thermal model
        "core_energy_spread_pct": round(100 * (max(per_core) - min(per_core)) / total, 3) if total else None,
        "core_peak_c": [round(t, 3) for t in r.get("core_peak_c", [])],
        "core_hot_s": [round(ns / 1e9, 6) for ns in r.get("core_hot_ns", [])],
    }


def work_s(w: Workload, r: dict) -> float:
    """Seconds of the vCPUs' recorded demand the run completed: work in
    the demand's own ns (at the recorded frequency), however fast the
    cores it ran on (the engine's `work_ns`; a Python policy, which runs
    every core at the recorded speed, gives its vCPUs' CPU time less
    spinning)."""
    if "work_ns" in r:
        return sum(n for n, v in zip(r["work_ns"], w.vm_of) if v >= 0) / 1e9
    return sum(c - s for c, s, v in zip(r["cpu_ns"], r["spin_ns"], w.vm_of) if v >= 0) / 1e9


def per_unit(energy_j: float, dynamic_j: float | None, duration_s: float, work: float, unit: str) -> dict:
    """Energy, delay and their product per unit of work (`unit`: "txn",
    transactions; "work s", seconds of recorded vCPU demand). The delay
    per unit is the run's duration over its work, the host's own rate over
    the span its energy was counted; the energy-delay product per unit is
    their product (J·s per unit², E·T/W²: for two runs of the same work,
    the ratio of E·T)."""
    if work <= 0:
        return {"unit": unit, "work": 0, "j_per_unit": None, "dynamic_j_per_unit": None, "s_per_unit": None, "edp_per_unit": None}
    j, s = energy_j / work, duration_s / work
    return {
        "unit": unit,
        "work": round(work, 9),
        "j_per_unit": _sig(j),
        "dynamic_j_per_unit": _sig(dynamic_j / work) if dynamic_j is not None else None,
        "s_per_unit": _sig(s),
        "edp_per_unit": _sig(j * s),
    }


def _sig(x: float, digits: int = 9) -> float:
    """`x` to `digits` significant digits (per-unit figures span many
    orders of magnitude: a fixed number of decimals lost the small ones)."""
    return float(f"{x:.{digits}g}")


def per_work(w: Workload, r: dict, duration_s: float, txns: int) -> dict:
    """A run's energy per unit of work (issue 41): per transaction when the
    VMs marked any (`txn`, every transaction of every VM), and per second
    of vCPU work done (`work_s`) always; `unit` names the first of them
    that applies, the one comparisons use. Beside them the run's own
    energy-delay product (J·s)."""
    busy = r.get("core_busy_ns", [])
    total = sum(r.get("core_energy_j", []))
    dyn = sum(ns * wt * 1e-9 for ns, wt in zip(busy, r.get("core_dynamic_w", [])))
    done = work_s(w, r)
    out = {"unit": "txn" if txns else "work s", "energy_delay_j_s": round(total * duration_s, 9)}
    out["txn"] = per_unit(total, dyn, duration_s, txns, "txn") if txns else None
    out["work_s"] = per_unit(total, dyn, duration_s, done, "work s")
    return out


def _pct(a: float | None, b: float | None) -> float | None:
    """a against b, %."""
    return round(100 * (a / b - 1), 3) if a is not None and b else None


def asymmetric_metrics(w: Workload, r: dict, base: str, m: dict, mb: dict) -> dict:
    """Pools, and the saving against the same demand under credit on a
    homogeneous host of fast cores (the baseline of Takouna et al.).

    The saving is per unit of work (`energy_saving_per_work_pct`: energy
    per transaction, or per second of vCPU work without markers); the
    equal-time figures beside it compare mean power (energy over each
    run's own span), which is the paper's 44.9% when every core is busy
    and says nothing of the work done: slow cores do less of it in the
    same time. A run whose throughput fell gets a note that says so."""
    pools: dict[str, dict] = {}
    for name, code in (("fast", 0), ("slow", 1)):
        cores = [c for c, p in enumerate(r["core_pool"]) if p == code]
        vcpus = [f"{w.vm_names[v]}/{c}" for v, c, p in zip(w.vm_of, w.vcpu_of, r["vcpu_pool"]) if p == code and v >= 0]
        pools[name] = {"cores": cores, "khz": r["core_khz"][cores[0]] if cores else None, "vcpus": vcpus}

    def tput(x: dict) -> float:
        return sum(v["throughput_per_s"] for v in x["vms"].values())

    e, eb = m["energy"], mb["energy"]
    unit = e["per_work"]["unit"]
    key = "txn" if unit == "txn" else "work_s"
    u, ub = e["per_work"][key] or {}, eb["per_work"][key] or {}
    T, Tb = m["duration_s"], mb["duration_s"]

    def saving(a: float | None, b: float | None) -> float | None:
        return round(100 * (1 - a / b), 3) if a is not None and b else None

    out = {
        "pools": pools,
        "baseline": f"{base} with every core fast",
        "saving_unit": unit,
        "energy_saving_per_work_pct": saving(u.get("j_per_unit"), ub.get("j_per_unit")),
        "dynamic_energy_saving_per_work_pct": saving(u.get("dynamic_j_per_unit"), ub.get("dynamic_j_per_unit")),
        "edp_change_per_work_pct": _pct(u.get("edp_per_unit"), ub.get("edp_per_unit")),
        "power_saving_equal_time_pct": saving(e["total_energy_j"] / T if T else None, eb["total_energy_j"] / Tb if Tb else None),
        "dynamic_power_saving_equal_time_pct": saving(e["dynamic_energy_j"] / T if T else None, eb["dynamic_energy_j"] / Tb if Tb else None),
        "work_change_pct": _pct(u.get("work"), ub.get("work")),
        "throughput_change_pct": _pct(tput(m), tput(mb)),
        "duration_change_pct": _pct(T, Tb),
        "affinity_replaced": int(r.get("affinity_replaced", 0)),
        "notes": [],
    }
    if out["affinity_replaced"]:
        out["notes"].append(f"{out['affinity_replaced']} vCPUs' recorded affinity replaced by their pool (the paper pins VMs to their pool)")
    if (out["throughput_change_pct"] or 0) < 0:
        out["notes"].append(
            f"throughput {out['throughput_change_pct']:+.1f}% against {out['baseline']}: the equal-time power saving "
            f"({out['power_saving_equal_time_pct']}%) is no energy saving for the work; per {unit} it is {out['energy_saving_per_work_pct']}%"
        )
    out["notes"] += starved_vms(w, r, m, mb)
    return out


#: a VM whose throughput under the pools fell below this share of the
#: all-fast baseline's is named in the notes, with the rule that put it there
STARVED_SHARE = 0.5


def starved_vms(w: Workload, r: dict, m: dict, mb: dict) -> list[str]:
    """Notes naming each VM the pools left with under `STARVED_SHARE` of
    its all-fast throughput, its vCPUs' pools and the rule that placed
    them (`vcpu_class`: 0 CPU-class, 1 I/O-class)."""
    notes = []
    classes = r.get("vcpu_class") or [-1] * len(w.vm_of)
    for i, name in enumerate(w.vm_names):
        got, base = m["vms"][name]["throughput_per_s"], mb["vms"][name]["throughput_per_s"]
        if not base or got >= STARVED_SHARE * base:
            continue
        mine = [(p, k) for v, p, k in zip(w.vm_of, r["vcpu_pool"], classes) if v == i]
        slow = sum(1 for p, _ in mine if p == 1)
        why = []
        if any(p == 1 and k == 1 for p, k in mine):
            why.append("I/O-class vCPUs go to the slow pool (the paper's rule 2, whatever that pool's load)")
        if any(p == 1 and k == 0 for p, k in mine):
            why.append("CPU-class vCPUs spilled to the slow pool where a slow core's time was worth more than a crowded fast core's share (asym.md 6.6)")
        if not slow:
            why.append("its vCPUs share the crowded fast pool (spill_slow=0, or the fast cores' share still beat a slow core)")
        notes.append(f"{name}: throughput {100 * (got / base - 1):+.1f}% against all-fast, {slow} of {len(mine)} vCPUs slow: " + "; ".join(why))
    return notes


def balance_metrics(r: dict) -> dict:
    n = max(r["bal_core"]) + 1
    per = [0.0] * n
    for c, j in zip(r["bal_core"], r["bal_energy_j"]):
        per[c] += j
    temps = {}
    for c, t in zip(r["bal_core"], r["bal_temp_c"]):
        temps[c] = max(temps.get(c, 0.0), t)
    total = sum(per)
    waits = sorted(r.get("swap_latency_ns") or [])
    return {
        "swaps_decided": r["swaps_decided"],
        "swaps_realised": r["swaps_realised"],
        # from a decision until both vCPUs could be swapped
        "swap_wait_median_us": round(waits[len(waits) // 2] / 1e3, 3) if waits else None,
        "core_energy_j": [round(x, 6) for x in per],
        "core_energy_spread_pct": round(100 * (max(per) - min(per)) / total, 3) if total else None,
        "max_core_temp_c": [round(temps[c], 3) for c in range(n)],
    }
