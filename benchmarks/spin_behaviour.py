"""What the replay finds about the spin responses (issue #5's "behaviour
the methods are known for"), on generated workloads with known demand.

Light spin: short critical sections, few VMs. Heavy spin: long critical
sections, saturated host, several VMs of several vCPUs; then the same with
more VMs (RSLP is expected to degrade). Prints ETR, spin waste, overhead,
hypervisor calls and excessive spins per policy.

    python benchmarks/spin_behaviour.py [--json] [--quick]
"""

from __future__ import annotations

import argparse
import json

from benchmarks.replay_engine import run_engine, workload

POLICIES = ["fair+spin", "fair+yield", "fair+wapd", "fair+wopd", "fair+rslp"]


def scenario(vms: int, vcpus: int, pcpus: int, txns: int, crit_ns: int, work_ns: int, block_ns: int) -> dict:
    w = workload(vms, vcpus, txns)
    # rescale the phases: (work, acquire, crit, release, mark, block) repeats
    for i, k in enumerate(w["phase_kind"]):
        j = i % 6
        if j == 0:
            w["phase_a"][i] = work_ns + (i // 6 % 7) * work_ns // 10
        elif j == 2:
            w["phase_a"][i] = crit_ns
        elif j == 5:
            w["phase_a"][i] = block_ns
    out = {}
    for p in POLICIES:
        r = run_engine(w, pcpus, p)
        T = r["end_ns"] / 1e9
        busy = sum(r["cpu_ns"]) + r["overhead_ns"]
        out[p] = {
            "etr": len(r["marks"]) / T,  # the marks table: a row per mark replayed
            "spin_s": sum(r["spin_ns"]) / 1e9,
            "overhead_pct": 100 * r["overhead_ns"] / (pcpus * r["end_ns"]),
            "calls_per_busy_s": sum(r["calls"]) / (busy / 1e9 / pcpus) if busy else 0,
            "excessive": sum(r["excessive"]),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="a tenth of the transactions")
    a = ap.parse_args()
    per = 10 if a.quick else 1
    cases = {
        "light (2 VMs x 2 vCPUs on 4 pCPUs, 20 µs sections)": scenario(2, 2, 4, 2000 // per, 20_000, 400_000, 300_000),
        "heavy (3 VMs x 4 vCPUs on 4 pCPUs, 300 µs sections, saturated)": scenario(3, 4, 4, 800 // per, 300_000, 300_000, 10_000),
        "heavy, more VMs (6 VMs x 4 vCPUs on 4 pCPUs)": scenario(6, 4, 4, 400 // per, 300_000, 300_000, 10_000),
    }
    if a.json:
        print(json.dumps(cases, indent=2))
        return
    for name, res in cases.items():
        print(name)
        base = res["fair+spin"]["etr"]
        for p, m in res.items():
            print(f"  {p:11} ETR {m['etr']:9.1f}/s ({100 * (m['etr'] / base - 1):+5.1f}%)  spin {m['spin_s']:7.3f} s  overhead {m['overhead_pct']:5.2f}%  calls/busy-s {m['calls_per_busy_s']:9.1f}  excessive {m['excessive']}")


if __name__ == "__main__":
    main()
