"""Benchmark: how `cratrace model` grows with the length of a KVM capture.

Generated captures of the kvm-heavy-spin scenario (2 VMs x 4 vCPUs on 2
pCPUs, lock-holder preemption, PAUSE exits, spin markers: every model
table has rows) at several lengths, imported, then modelled --runs times.
Prints per length the events, the model's wall time and peak RSS
(medians), and at the end how time and memory grew against the events:
a build that is linear in the trace keeps time per event flat, and its
memory beyond a fixed base in proportion.

The build used to join every vCPU run with every kvm_entry/exit of its
thread and every segment with every spin episode of its vCPU; a second
of this scenario took 20 s and 8.4 GB, three seconds ran out of memory.

    python benchmarks/model_scaling.py [--ms 250,500,1000,2000] [--runs 3] [--quick]
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
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{' '.join(cmd)} exited with {os.waitstatus_to_exitcode(status)}")
    return dt, usage.ru_maxrss


def capture(ms: int) -> Path:
    trace = OUT / f"kvm-heavy-spin-{ms}ms.dat"
    if not trace.exists():
        subprocess.run([sys.executable, "-m", "cratrace", "synth", "kvm-heavy-spin", "-o", str(trace), "--seed", "1", "--set", f"duration_ms={ms}", "--force"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cap = OUT / f"kvm-heavy-spin-{ms}ms.capture"
    subprocess.run([sys.executable, "-m", "cratrace", "import", str(trace), "-o", str(cap), "-q", "--force"], check=True)
    return cap


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ms", default="250,500,1000,2000", help="capture lengths in simulated ms")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="50 and 100 ms, one run each, in a scratch directory")
    a = ap.parse_args()
    global OUT
    compile_cratrace()
    if a.quick:
        from benchmarks.quick import scratch

        OUT = scratch("model-scaling")
        try:
            measure("50,100", 1)
        finally:
            shutil.rmtree(OUT, ignore_errors=True)
        return
    OUT.mkdir(exist_ok=True)
    measure(a.ms, a.runs)


def measure(lengths_ms: str, runs: int) -> None:
    rows = []
    for ms in (int(x) for x in lengths_ms.split(",")):
        cap = capture(ms)
        events = sum(json.loads((cap / "capture.json").read_text())["events"].values())
        times, rss = [], []
        for _ in range(runs):
            shutil.rmtree(cap / "model", ignore_errors=True)
            dt, kib = run([sys.executable, "-m", "cratrace", "model", str(cap), "-q"])
            times.append(dt)
            rss.append(kib)
        t, m = statistics.median(times), statistics.median(rss) / 1024
        rows.append((ms, events, t, m))
        print(f"{ms} ms: {events:,} events: model {t:.2f} s ({t / events * 1e6:.2f} µs/event), peak RSS {m:.0f} MiB (medians of {runs})", flush=True)
    (ms0, e0, t0, m0), (ms1, e1, t1, m1) = rows[0], rows[-1]
    print(f"{ms1} ms against {ms0} ms: {e1 / e0:.1f}x the events, {t1 / t0:.2f}x the time, {m1 / m0:.2f}x the peak RSS")


if __name__ == "__main__":
    main()
