"""What the replay finds about the spin responses against Umeno et al.'s
claims (papers/spin.md §4, Q1-Q8), on generated workloads with known
demand, under the dispatcher they measured on (`lpar`: one queue in
proper-ready, slice-end and out-service subqueues, per-VM service
quantities) and, as a cross-check, Xen's `credit` and Linux's `fair`.

Cases (every one oversubscribed, 3 or 6 VMs of 4 vCPUs on 4 CPUs):
light spin (5 µs sections, long work: few calls), heavy spin (300 µs
sections, a saturated host) and heavy with twice the VMs (RSLP should
degrade). Per policy: ETR and its change against native spinning, spin
CPU-seconds, scheduling overhead (switches, calls, scans: % of CPU),
hypervisor calls per busy second, uncleared re-dispatches (the paper's
retries: a spinner dispatched again while its lock is still held) with
the worst episode's count, and episodes beyond `excess_retries` (3).

    python benchmarks/spin_behaviour.py [--json] [--quick] [--schedulers lpar,credit,fair]
"""

from __future__ import annotations

import argparse
import json

import polars as pl

from benchmarks.replay_engine import WORK, run_engine, workload

RESPONSES = ["spin", "yield", "wapd", "wopd", "rslp"]

#: (name, VMs, vCPUs each, CPUs, transactions per vCPU, critical section,
#: work between sections, block after each transaction), ns; every case
#: oversubscribed (3 or 6 VMs of 4 vCPUs on 4 CPUs); heavy cases are batch
#: jobs that never block, so a vCPU leaves its CPU at its slice's end,
#: inside a critical section or not (lock-holder preemption)
LIGHT = ("light (3 VMs x 4 vCPUs on 4 CPUs, 5 us sections)", 3, 4, 4, 1500, 5_000, 400_000, 300_000)
SECTIONS_US = (10, 30, 100, 300)


def heavy(vms: int, section_us: int) -> tuple:
    txns = 3000 * 3 // vms if section_us <= 30 else 800 * 3 // vms
    return (f"heavy ({vms} VMs x 4 vCPUs on 4 CPUs, {section_us} us sections, batch)", vms, 4, 4, txns, section_us * 1000, 100_000, 0)


CASES = [LIGHT] + [heavy(v, s) for s in SECTIONS_US for v in (3, 6)]


def scenario(vms: int, vcpus: int, pcpus: int, txns: int, crit_ns: int, work_ns: int, block_ns: int, scheduler: str) -> dict:
    w = workload(vms, vcpus, txns)
    # rescale the phases: (work, acquire, crit, release, mark, block) repeats
    for i in range(len(w["phase_kind"])):
        j = i % 6
        if j == 0:
            w["phase_a"][i] = work_ns + (i // 6 % 7) * work_ns // 10
        elif j == 2:
            w["phase_a"][i] = crit_ns
        elif j == 5:
            # no block at all for a batch job that never waits: a vCPU
            # then leaves its CPU only at its slice's end, lock or no lock
            w["phase_a"][i] = block_ns
            if block_ns == 0:
                w["phase_kind"][i] = WORK
    out = {}
    for resp in RESPONSES:
        r = run_engine(w, pcpus, f"{scheduler}+{resp}")
        T = r["end_ns"] / 1e9
        busy = sum(r["cpu_ns"])
        retries = pl.DataFrame(r["episodes"])["retries"]
        out[resp] = {
            "etr": len(r["marks"]) / T,  # the marks table: a row per mark replayed
            "spin_s": sum(r["spin_ns"]) / 1e9,
            "overhead_pct": 100 * r["overhead_ns"] / (pcpus * r["end_ns"]),
            "calls_per_busy_s": sum(r["calls"]) / (busy / 1e9 / pcpus) if busy else 0,
            "uncleared": sum(r["uncleared"]),
            "retries_max": int(retries.max() or 0),
            "excessive": sum(r["excessive"]),
        }
    return out


def claims(res: dict) -> list[str]:
    """Umeno et al.'s claims (papers/spin.md §4) against the lpar runs."""
    lp = res["lpar"]
    d = lambda m, base: 100 * (m["etr"] / base["etr"] - 1)  # noqa: E731
    light = lp[LIGHT[0]]
    out = [f"Q1 light spin: every response within {max(abs(d(m, light['spin'])) for m in light.values()):.1f}% of native (paper: ~2%), {sum(m['excessive'] for m in light.values())} excessive spins (paper: none)"]
    for s_us in SECTIONS_US:
        h3, h6 = lp[heavy(3, s_us)[0]], lp[heavy(6, s_us)[0]]
        gap3 = 100 * (h3["wapd"]["etr"] / h3["rslp"]["etr"] - 1)
        gap6 = 100 * (h6["wapd"]["etr"] / h6["rslp"]["etr"] - 1)
        tail = (h3["wopd"]["retries_max"], h3["wapd"]["retries_max"], h3["rslp"]["retries_max"])
        ovh = [m["overhead_pct"] for m in (*h3.values(), *h6.values())]
        out.append(
            f"{s_us:>3} us sections: WAPD vs RSLP ETR {gap3:+.1f}% at 3 VMs (paper Q4: +3-4%), {gap6:+.1f}% at 6 VMs (paper Q7: +9.6%);"
            f" worst episode's uncleared re-dispatches WOPD/WAPD/RSLP {tail[0]}/{tail[1]}/{tail[2]} (paper Q2: WOPD's tail);"
            f" overhead {min(ovh):.2f}-{max(ovh):.2f}% (paper 0.2-2.5%)"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="a tenth of the transactions, lpar only")
    ap.add_argument("--schedulers", default="lpar,credit,fair", help="comma-separated; lpar is the paper's dispatcher")
    a = ap.parse_args()
    per = 10 if a.quick else 1
    schedulers = ["lpar"] if a.quick else a.schedulers.split(",")
    if "lpar" not in schedulers:
        schedulers.insert(0, "lpar")
    # the cross-check schedulers at the paper's light case and the shortest sections
    cross = {LIGHT[0], heavy(3, SECTIONS_US[0])[0], heavy(6, SECTIONS_US[0])[0]}
    res = {
        s: {name: scenario(vms, vc, pc, txns // per, crit, work, block, s) for name, vms, vc, pc, txns, crit, work, block in CASES if s == "lpar" or name in cross}
        for s in schedulers
    }
    if a.json:
        print(json.dumps({"runs": res, "claims": claims(res)}, indent=2))
        return
    for s, cases in res.items():
        print(f"== {s}")
        for name, out in cases.items():
            print(name)
            base = out["spin"]["etr"]
            for p, m in out.items():
                print(
                    f"  {p:6} ETR {m['etr']:9.1f}/s ({100 * (m['etr'] / base - 1):+5.1f}%)  spin {m['spin_s']:7.3f} s  overhead {m['overhead_pct']:5.2f}%"
                    f"  calls/busy-s {m['calls_per_busy_s']:9.1f}  uncleared {m['uncleared']:6d} (max {m['retries_max']:3d})  excessive {m['excessive']}"
                )
    print("== against the paper (lpar)")
    for line in claims(res):
        print(line)


if __name__ == "__main__":
    main()
