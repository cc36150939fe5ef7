"""Benchmark: `cratrace model` against `cratrace import` on the same trace.

Uses the 1x trace recorded by benchmarks/import_tracedat.py (≥2 million
events; run that first, or pass --trace). Prints medians over --runs of
the import time, the model build time and their ratio (target: model ≤
import).

    python benchmarks/model_build.py [--trace benchmarks/out/bench1x.dat] [--runs 3]
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

OUT = Path(__file__).resolve().parent / "out"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace", type=Path, default=OUT / "bench1x.dat")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    if not args.trace.exists():
        raise SystemExit(f"{args.trace} not found: run benchmarks/import_tracedat.py first")
    cap = OUT / "model-bench.capture"
    imp, mod = [], []
    for _ in range(args.runs):
        shutil.rmtree(cap, ignore_errors=True)
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "cratrace", "import", str(args.trace), "-o", str(cap), "-q"], check=True)
        imp.append(time.perf_counter() - t)
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "cratrace", "model", str(cap), "-q"], check=True)
        mod.append(time.perf_counter() - t)
    events = sum(json.loads((cap / "capture.json").read_text())["events"].values())
    i, m = statistics.median(imp), statistics.median(mod)
    print(f"{events:,} events: import {i:.2f} s, model {m:.2f} s, model/import {m / i:.2f} (medians of {args.runs})")


if __name__ == "__main__":
    main()
