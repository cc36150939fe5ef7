"""Benchmark: `cratrace model` against `cratrace import` on the same trace.

Uses the traces recorded by benchmarks/import_tracedat.py (run that
first): the 1x trace (≥2 million events; the target is on it: model ≤
import) and, when present, the 4x one (how time and memory grow). Prints,
per trace, medians over --runs of the import time, the model build time,
their ratio, and the model command's peak RSS.

    python benchmarks/model_build.py [--runs 3] [--no-4x]
    python benchmarks/model_build.py --quick   # generated 1x and 4x traces (kvm-heavy-spin), one run each
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.as_installed import compile_cratrace

OUT = Path(__file__).resolve().parent / "out"


def run(cmd: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one command."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd)
    _, status, usage = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        raise SystemExit(f"{' '.join(cmd)} exited with {p.returncode}")
    return dt, usage.ru_maxrss


def measure(trace: Path, runs: int) -> str:
    cap = OUT / f"model-bench-{trace.stem}.capture"
    imp, mod, rss = [], [], []
    for _ in range(runs):
        shutil.rmtree(cap, ignore_errors=True)
        imp.append(run([sys.executable, "-m", "cratrace", "import", str(trace), "-o", str(cap), "-q"])[0])
        dt, kib = run([sys.executable, "-m", "cratrace", "model", str(cap), "-q"])
        mod.append(dt)
        rss.append(kib)
    events = sum(json.loads((cap / "capture.json").read_text())["events"].values())
    i, m = statistics.median(imp), statistics.median(mod)
    return f"{trace.name}: {events:,} events: import {i:.2f} s, model {m:.2f} s, model/import {m / i:.2f}, model peak RSS {statistics.median(rss) / 1024:.0f} MiB (medians of {runs})"


def main() -> None:
    global OUT
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace", type=Path, default=OUT / "bench1x.dat")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-4x", action="store_true", help="skip the 4x trace")
    ap.add_argument("--quick", action="store_true", help="generated 1x and 4x traces of 100 and 400 simulated ms (kvm-heavy-spin) in a scratch directory, one run each")
    args = ap.parse_args()
    compile_cratrace()
    if args.quick:
        from benchmarks.quick import scratch, synth

        OUT = scratch("model-build")
        args.trace, args.runs = synth("kvm-heavy-spin", OUT / "bench1x.dat", duration_ms=100), 1
        synth("kvm-heavy-spin", OUT / "bench4x.dat", duration_ms=400)
    try:
        if not args.trace.exists():
            raise SystemExit(f"{args.trace} not found: run benchmarks/import_tracedat.py first")
        print(measure(args.trace, args.runs), flush=True)
        four = OUT / "bench4x.dat"
        if not args.no_4x and args.trace == OUT / "bench1x.dat" and four.exists():
            print(measure(four, args.runs))
    finally:
        if args.quick:
            shutil.rmtree(OUT, ignore_errors=True)


if __name__ == "__main__":
    main()
