"""Benchmark: every stage on a production-size capture (issue #47).

Generates (or reuses, from a cache directory in /tmp) a kvm-heavy-spin
trace scaled to about --events events (`cratrace synth kvm-heavy-spin
--set duration_ms=...`: 2 VMs x 4 vCPUs on 2 pCPUs, about 146 events per
simulated ms), then runs `cratrace import`, `model`, `replay -p fair -p
wapd` and `report` on it, each a command of its own, on every core this
process may use and then pinned to one (the 1 -> N core speed-up). Prints per stage
the wall time, events/s, peak RSS, bytes of peak RSS per event, and its
time per event as a multiple of the import's (the import is the peer:
issue #47 asks every later stage for at most 3x its time per event), and
the same for the generation when this run made the trace. Times and RSS
are medians of --runs (each run starts from the previous stage's output;
RSS is each command's own, from wait4).

    python benchmarks/production_scale.py --events 100e6 [--runs 1] [--cache DIR] [--keep]
    python benchmarks/production_scale.py --quick      # about 200k events, one run
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.as_installed import compile_cratrace

SCENARIO = "kvm-heavy-spin"
SEED = 1
# events per simulated ms at the scenario's defaults (4,376,581 in 30 s at
# seed 0; 146.0 at seed 1): the capture's length for a number of events
EVENTS_PER_MS = 145.9
CACHE = Path(tempfile.gettempdir()) / "cratrace-production-scale"


def run(cmd: list[str], cpus: set[int] | None = None) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of one command, on `cpus` only
    if given."""
    t = time.perf_counter()
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, preexec_fn=pin)
    _, status, usage = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{' '.join(cmd)} exited with {os.waitstatus_to_exitcode(status)}")
    return dt, usage.ru_maxrss * 1024


def cratrace(*args: str) -> list[str]:
    return [sys.executable, "-m", "cratrace", *args]


def trace_for(events: float, cache: Path) -> tuple[Path, tuple[float, int] | None]:
    """The cached trace of about `events` events, and the generation's
    (seconds, peak RSS) if this call made it."""
    from cratrace.synth.scenarios import SCENARIOS

    ms = max(1, math.ceil(events / EVENTS_PER_MS))
    version = SCENARIOS[SCENARIO].VERSION
    trace = cache / f"{SCENARIO}-v{version}-seed{SEED}-{ms}ms.dat"
    truth = trace.with_name(trace.name + ".truth.json")
    if trace.exists() and truth.exists():
        return trace, None
    cache.mkdir(parents=True, exist_ok=True)
    made = run(cratrace("synth", SCENARIO, "-o", str(trace), "--seed", str(SEED), "--set", f"duration_ms={ms}", "--force", "-q"))
    return trace, made


def total_events(truth: Path) -> int:
    """The truth's `total_events`, from the head of the file: the whole
    truth (every spin episode) would grow this process, and a child started
    with vfork reports at least its parent's peak RSS as its own."""
    with open(truth) as f:
        head = f.read(1 << 16)
    m = re.search(r'"total_events": (\d+)', head)
    if not m:
        raise SystemExit(f"{truth}: no total_events in its first 64 KiB")
    return int(m.group(1))


def measure(events: float, runs: int, cache: Path, keep: bool) -> None:
    trace, made = trace_for(events, cache)
    n = total_events(trace.with_name(trace.name + ".truth.json"))
    print(f"{trace.name}: {n:,} events, {trace.stat().st_size / 2**20:.1f} MiB ({'generated now' if made else 'reused from ' + str(cache)})", flush=True)
    work = Path(tempfile.mkdtemp(prefix="work-", dir=cache))
    cap, rep = work / "cap", work / "replays"
    stages = [
        ("import", cratrace("import", str(trace), "-o", str(cap), "-q", "--force")),
        ("model", cratrace("model", str(cap), "-q")),
        # the two policies replayed at once when there are two cores
        ("replay -p fair -p wapd", cratrace("replay", str(cap), "-o", str(rep), "-p", "fair", "-p", "wapd", "--force")),
        ("report", cratrace("report", str(cap), "--replays", str(rep), "-o", str(work / "report.html"), "-q", "--force")),
    ]
    rows: list[tuple[str, float, int]] = []
    if made:
        rows.append(("synth (generate + write)", *made))
    try:
        # each stage on every core this process may use, then pinned to
        # one (in turns: the machine's other load hits both alike)
        one = {min(os.sched_getaffinity(0))}
        times: dict[tuple[str, bool], list[float]] = {}
        rss: dict[tuple[str, bool], list[int]] = {}
        for _ in range(runs):
            for pinned in (False, True):
                for name, cmd in stages:
                    if name == "model":
                        shutil.rmtree(cap / "model", ignore_errors=True)
                    dt, peak = run(cmd, one if pinned else None)
                    times.setdefault((name, pinned), []).append(dt)
                    rss.setdefault((name, pinned), []).append(peak)
        rows += [(name, statistics.median(times[name, False]), int(statistics.median(rss[name, False]))) for name, _ in stages]
        pinned_t = {name: statistics.median(times[name, True]) for name, _ in stages}
    finally:
        if keep:
            print(f"outputs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    import_t = dict((name, t) for name, t, _ in rows)["import"]
    print(f"per stage ({'median of ' + str(runs) if runs > 1 else 'one run'}; time per event against the import's):")
    for name, t, peak in rows:
        print(f"  {name}: {t:.2f} s, {n / t / 1e6:.2f} M events/s, peak RSS {peak / 2**20:.0f} MiB "
              f"({peak / n:.0f} bytes/event), {t / import_t:.2f}x the import", flush=True)
    cores = len(os.sched_getaffinity(0))
    print(f"speed-up from 1 core to {cores} (time pinned to one core / time on {cores}):")
    for name, t, _ in rows:
        if name in pinned_t:
            print(f"  {name}: {pinned_t[name]:.2f} s -> {t:.2f} s, {pinned_t[name] / t:.2f}x", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=float, default=10e6, help="about this many events (e.g. 100e6)")
    ap.add_argument("--runs", type=int, default=1, help="runs of each stage (medians)")
    ap.add_argument("--cache", type=Path, default=CACHE, help=f"where traces are kept for reuse (default {CACHE})")
    ap.add_argument("--keep", action="store_true", help="keep the capture, replays and report")
    ap.add_argument("--quick", action="store_true", help="about 200k events, one run")
    a = ap.parse_args()
    compile_cratrace()
    if a.quick:
        measure(200e3, 1, a.cache, keep=False)
        return
    measure(a.events, a.runs, a.cache, a.keep)


if __name__ == "__main__":
    main()
