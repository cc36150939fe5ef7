"""Benchmark: the xentrace and perf.data readers against their peers.

* xentrace: `cratrace import` of the shared Xen fixture (or --xentrace FILE)
  against `xenalyze --summary` on the same file (target: not slower), and
  the same on a larger generated file (`cratrace synth xen-io-billing`,
  --xen-synth-ms of simulated time, ~1 M records for 10 s) where Python's
  start-up no longer dominates;
* perf.data: a trace recorded here with `perf record` of sched tracepoints
  under a busy workload, `cratrace import` against `perf script > /dev/null`
  (target: at least 10x).

Records/s, medians of --runs, and the ratios, from one run:

    python benchmarks/import_xen_perf.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"


def timed(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--xentrace", type=Path, default=HERE.parent.parent / "shared" / "fixtures" / "xen_credit2.bin")
    ap.add_argument("--xen-synth-ms", type=int, default=10_000)
    a = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    res = {}
    synth = OUT / f"xen-synth-{a.xen_synth_ms}ms.bin"
    if not synth.exists():
        subprocess.run([sys.executable, "-m", "cratrace", "synth", "xen-io-billing", "-o", str(synth), "--seed", "1", "--set", "workload=net4", "--set", f"duration_ms={a.xen_synth_ms}", "--force"], check=True, stderr=subprocess.DEVNULL)
    for label, path in (("xentrace (real fixture)", a.xentrace), ("xentrace (generated)", synth)):
        if not path.exists():
            continue
        cap = OUT / "xen.capture"
        ours = []
        for _ in range(a.runs):
            shutil.rmtree(cap, ignore_errors=True)
            ours.append(timed([sys.executable, "-m", "cratrace", "import", str(path), "-o", str(cap), "--cpu-hz", "2.4e9", "-q"]))
        theirs = [timed(["xenalyze", "--summary", "--cpu-hz=2.4G", str(path)]) for _ in range(a.runs)]
        n = json.loads((cap / "capture.json").read_text())["sources"][0]["summary"]["records"]
        res[label] = {"records": n, "cratrace_records_per_s": n / statistics.median(ours), "xenalyze_records_per_s": n / statistics.median(theirs), "ratio": statistics.median(theirs) / statistics.median(ours)}
    pd = OUT / "bench.perf.data"
    # a scheduler-heavy workload: perf's own messaging benchmark
    subprocess.run(["perf", "record", "-q", "-e", "sched:sched_switch", "-e", "sched:sched_wakeup", "-e", "sched:sched_stat_runtime", "-a", "-o", str(pd), "--", "perf", "bench", "sched", "messaging", "-g", "10", "-l", "1000"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cap = OUT / "perf.capture"
    ours = []
    for _ in range(a.runs):
        shutil.rmtree(cap, ignore_errors=True)
        ours.append(timed([sys.executable, "-m", "cratrace", "import", str(pd), "-o", str(cap), "-q"]))
    theirs = [timed(["perf", "script", "-i", str(pd)]) for _ in range(a.runs)]
    n = sum(json.loads((cap / "capture.json").read_text())["events"].values())
    res["perfdata"] = {"records": n, "cratrace_records_per_s": n / statistics.median(ours), "perf_script_records_per_s": n / statistics.median(theirs), "ratio": statistics.median(theirs) / statistics.median(ours)}
    for k, r in res.items():
        peer = [v for key, v in r.items() if key.endswith("_per_s") and not key.startswith("cratrace")][0]
        print(f"{k}: {r['records']:,} records: cratrace import {r['cratrace_records_per_s'] / 1e6:.2f} M/s, peer {peer / 1e6:.2f} M/s, ratio {r['ratio']:.2f}x (medians of {a.runs})")


if __name__ == "__main__":
    main()
