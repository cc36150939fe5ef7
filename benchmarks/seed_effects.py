"""Each published effect behind cratrace's policies, the paper's figure
beside what the replayed mechanism gives, the condition the paper varied
and whether the trend follows: one table, every figure computed in this
run from the engine or the pipeline (synth → import → model → replay or
report), none copied from the papers except their own column.

    python benchmarks/seed_effects.py [--quick] [--json] [--markdown]

Rows (papers under ../shared/papers/):
- energy-balance (thermal.md, Klee 2007): throughput lost to forced
  swaps at 1-1000 Hz and the share of decided swaps realised at 1 kHz,
  on a kernel-build-like demand; the thermal scenario's core energy
  spread and hottest core, recorded placement against the balancer.
- spin responses (spin.md, Umeno et al.) under their dispatcher `lpar`:
  light spin, WAPD against RSLP with 3 and 6 VMs, WOPD's tail
  (benchmarks/spin_behaviour.py).
- billing (billing.md, Woo 2012): the CPU-NET case's driver-domain work
  per second and its excess over one CPU-second, from a generated capture
  through `cratrace report`, KVM and Xen.
- postcopy (postcopy.md) and asymmetric (asym.md) rows come from their
  own benchmarks when present.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from benchmarks.quick import scratch

WORK, BLOCK, ACQUIRE, RELEASE, MARK = range(5)


def _cli(*args: object) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "cratrace", *map(str, args)], capture_output=True, text=True)
    if p.returncode not in (0, 1):
        raise SystemExit(f"cratrace {' '.join(map(str, args[:2]))} exited with {p.returncode}: {p.stderr.strip()[-400:]}")
    return p


def _pipeline(tmp: Path, scenario: str, sets: dict[str, object]) -> Path:
    raw, cap = tmp / f"{scenario}-raw", tmp / f"{scenario}-cap"
    _cli("synth", scenario, "-o", raw, "--raw", "--seed", "1", *[a for k, v in sets.items() for a in ("--set", f"{k}={v}")])
    _cli("import", raw, "-o", cap, "-q")
    _cli("model", cap, "-q")
    return cap


def energy_balance_rows(quick: bool) -> list[dict]:
    """Klee 2007's mechanism check (Tables 6.3/6.4) on the engine."""
    from cratrace import _native

    txns = 100 if quick else 400
    pt, pk, pa = [], [], []
    for c in range(2):
        for k in range(txns):
            for kind, a in ((WORK, 4_800_000 + 10_000 * ((k + c) % 5)), (BLOCK, 200_000), (MARK, 0)):
                pt.append(c)
                pk.append(kind)
                pa.append(a)
    w = dict(thread_tid=[1, 2], thread_vm=[0, 0], thread_vcpu=[0, 1], thread_start=[0, 0], phase_thread=pt, phase_kind=pk, phase_a=pa, phase_b=[0] * len(pt), vm_names=["vm0"], vm_weights=[512], vm_cpu_intensive=[None], vm_elasticity=[None])

    def run(params: dict) -> dict:
        return dict(_native.replay(**w, freq_khz=[3_000_000] * 2, recorded_khz=3_000_000, elasticity=-1.0, policy="fair+energy-balance", params=params, costs={}, limit_ns=10**15))

    base = run({"balance_k": 1e12})["end_ns"]
    loss, realised = [], 0.0
    for hz in (1, 10, 20, 100, 1000):
        r = run({"force_swap_hz": hz})
        loss.append(100 * (r["end_ns"] / base - 1))
        realised = r["swaps_realised"] / max(r["swaps_decided"], 1)
    rows = [
        dict(policy="energy-balance", effect="throughput lost to forced swaps at 1, 10, 20, 100, 1000 Hz", condition="swap rate", paper="2.1, 2.1, 3.2, 6.4, 11.8%", ours=", ".join(f"{x:.2f}" for x in loss) + "%", trend_agrees=all(b >= a for a, b in zip(loss, loss[1:])), agrees=False, why="the replay charges a swap its two migrations (5 us each) and waits for safe points; the paper's 2% at 1 Hz is its instrumented kernel's own cost, its growth a 2007 CPU's cache refill"),
        dict(policy="energy-balance", effect="decided swaps realised at 1 kHz", condition="swap rate", paper="66%", ours=f"{100 * realised:.0f}%", trend_agrees=realised < 1, agrees=abs(realised - 0.66) < 0.1, why="a swap waits for both vCPUs' safe points (a KVM vCPU exits every 4 ms tick) and the next decision supersedes it"),
    ]
    tmp = scratch("seed-effects-thermal")
    try:
        cap = _pipeline(tmp, "thermal", {"duration_ms": 500 if quick else 2000, "hot_vcpus": 1, "trip_c": 200, "start_c": 45})
        res = json.loads(_cli("replay", cap, "-p", "rr", "-p", "fair+energy-balance", "-o", tmp / "rep", "--json").stdout)
        rr, eb = res["rr"]["energy"], res["fair+energy-balance"]["energy"]
        rows.append(dict(policy="energy-balance", effect="per-core energy spread; hottest core's peak (thermal scenario, one 12 W vCPU among 4 W ones)", condition="placement: recorded (rr) vs balanced", paper="none: the policy was never evaluated (thermal.md 6.1)", ours=f"{rr['core_energy_spread_pct']:.1f}% -> {eb['core_energy_spread_pct']:.1f}%; {max(rr['core_peak_c']):.1f} -> {max(eb['core_peak_c']):.1f} C", trend_agrees=eb["core_energy_spread_pct"] < rr["core_energy_spread_pct"], agrees=None, why="an extrapolation, as the paper's summary says to label it"))
    finally:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def spin_rows(quick: bool) -> list[dict]:  # noqa: ARG001
    from benchmarks.spin_behaviour import LIGHT, heavy, scenario

    # whole runs even when quick: the engine takes well under a second for
    # all of them, and a tenth of the transactions is a transient
    def run(case: tuple) -> dict:
        _, vms, vc, pc, txns, crit, work, block = case
        return scenario(vms, vc, pc, txns, crit, work, block, "lpar")

    light = run(LIGHT)
    spread = max(abs(m["etr"] / light["spin"]["etr"] - 1) for m in light.values()) * 100
    h3, h6 = run(heavy(3, 10)), run(heavy(6, 10))
    long3 = run(heavy(3, 300))
    g3 = 100 * (h3["wapd"]["etr"] / h3["rslp"]["etr"] - 1)
    g6 = 100 * (h6["wapd"]["etr"] / h6["rslp"]["etr"] - 1)
    gl = 100 * (long3["wapd"]["etr"] / long3["rslp"]["etr"] - 1)
    tail = (h3["wopd"]["retries_max"], h3["wapd"]["retries_max"], h3["rslp"]["retries_max"])
    return [
        dict(policy="wapd/wopd/rslp", effect="light spin: largest ETR difference from native; excessive spins", condition="spin intensity", paper="~2%; none", ours=f"{spread:.1f}%; {sum(m['excessive'] for m in light.values())}", trend_agrees=spread <= 2, agrees=spread <= 2),
        dict(policy="wapd/wopd/rslp", effect="heavy spin, 3 VMs: WAPD's ETR over RSLP's (10 us sections; 300 us)", condition="critical section length", paper="+3 to +4%", ours=f"{g3:+.1f}%; {gl:+.1f}%", trend_agrees=g3 > 0, agrees=g3 > 0, why="with the holder running WAPD's spinner spins on while RSLP's gives the CPU away: the longer the section, the more it costs WAPD"),
        dict(policy="wapd/wopd/rslp", effect="more VMs (6): WAPD's ETR over RSLP's (10 us sections)", condition="VMs", paper="+9.6% (Table 2 row 1)", ours=f"{g6:+.1f}%", trend_agrees=g6 > g3, agrees=False, why="RSLP's loss with more VMs is not reproduced"),
        dict(policy="wapd/wopd/rslp", effect="worst episode's uncleared re-dispatches, WOPD / WAPD / RSLP", condition="response", paper="WOPD's tail long, the others small", ours="/".join(map(str, tail)), trend_agrees=tail[0] > max(tail[1:]), agrees=tail[0] >= 10 * max(tail[1], tail[2], 1)),
    ]


def billing_rows(quick: bool) -> list[dict]:
    """Woo 2012's CPU-NET case (Table 4.1) through the report."""
    woo = {"workload": "cpu-net", "link_pps": 59524, "rx_per_tx": 0.5, "rx_cost_ns": 1463, "tx_cost_ns": 906, "common_ms_per_s": 45.25, "duration_ms": 300 if quick else 1000}
    rows = []
    tmp = scratch("seed-effects-billing")
    try:
        for scenario in ("kvm-io-billing", "xen-io-billing"):
            cap = _pipeline(tmp, scenario, woo)
            rep = json.loads(_cli("report", cap, "-o", tmp / f"{scenario}.html", "--json").stdout)
            net = max((r for r in rep["billing"] if r["run"] == "recorded"), key=lambda r: r["attributed_ms_per_s"])
            rows.append(dict(policy="billing", effect=f"CPU-NET: driver-domain work for the networking VM; excess over one CPU-second ({scenario})", condition="the paper's setup as generator inputs", paper="110.2 ms/s; 11%", ours=f"{net['host_work_ms_per_s']:.1f} ms/s; {net['excess_per_cpu_s_pct']:.1f}%", trend_agrees=None, agrees=abs(net["host_work_ms_per_s"] - 110.2) < 1.0))
    finally:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def other_rows(quick: bool) -> list[dict]:
    """Rows the postcopy and asymmetric benchmarks give (`effects()`)."""
    rows = []
    for mod in ("benchmarks.postcopy_tasks", "benchmarks.asymmetric_effects"):
        try:
            m = __import__(mod, fromlist=["effects"])
        except ModuleNotFoundError:
            continue
        if hasattr(m, "effects"):
            rows += m.effects(quick)
    return rows


def table(rows: list[dict]) -> str:
    mark = {True: "yes", False: "no", None: "-"}
    out = ["| policy | effect | condition varied | paper | ours | trend | agrees |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['policy']} | {r['effect']} | {r['condition']} | {r['paper']} | {r['ours']} | {mark[r['trend_agrees']]} | {mark[r['agrees']]} |")
    notes = [f"- {r['policy']}, {r['effect']}: {r['why']}" for r in rows if r.get("why")]
    return "\n".join(out + ([""] + notes if notes else []))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="shorter demand and captures: seconds, for the test suite")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = energy_balance_rows(a.quick) + spin_rows(a.quick) + billing_rows(a.quick) + other_rows(a.quick)
    if a.json:
        print(json.dumps(rows, indent=2))
    else:
        print(table(rows))


if __name__ == "__main__":
    main()
