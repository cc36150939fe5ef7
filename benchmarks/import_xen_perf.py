"""Benchmark: the xentrace and perf.data readers against their peers.

* xentrace: the shared Xen fixture (or --xentrace FILE) and a larger
  generated file (`cratrace synth xen-io-billing`, --xen-synth-ms of
  simulated time, about 0.1 M records per simulated second) against
  `xenalyze --summary` on the same file (target: not slower);
* xentrace, real record mix at scale: the fixture written --tile-copies
  times end to end, later in time each copy, a lost-records record per
  pCPU at each seam (benchmarks/xentrace_tile.py), against `xenalyze
  --summary` on that file. The generated file holds three record kinds, a
  real host's dozens (the fixture fills 31 tables), and a reader's cost
  per record follows the mix;
* perf.data: a trace recorded here with `perf record -a` of sched
  tracepoints under `perf bench sched messaging` (--perf-loops), against
  `perf script > /dev/null` (target: at least 10x), on every core this
  process may use and again with both sides pinned to one.

For each file, records/s of our side measured two ways, medians of --runs
rounds that each time ours and the peer's in turn: ``cli`` is `cratrace
import` as a command (Python start-up included: a 23 kB trace's import
takes 0.07 s here, of which 0.018 s is this sandbox's certifi hook); ``api`` is the same import called in a running Python process
(`cratrace.importer.write_capture`, what a notebook pays). Peers are
measured as commands. Ratios are peer time / our time. cratrace's
bytecode is compiled first, as an installed package has it
(benchmarks/as_installed.py).

    python benchmarks/import_xen_perf.py [--runs 3] [--json]
    python benchmarks/import_xen_perf.py --quick   # small files, one round; a missing peer or tracing is said in a line
    python benchmarks/import_xen_perf.py --only perf.data   # the perf.data rows alone (issue 47's one-core target)
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
from benchmarks.xentrace_tile import write_tiled

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"

# Times one in-process import; prints seconds and records.
API = """
import sys, time
from pathlib import Path
from cratrace.importer import write_capture
src, out, hz = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
t = time.perf_counter()
meta = write_capture([src], out, force=True, cpu_hz=float(hz) if hz else None)
dt = time.perf_counter() - t
s = meta["sources"][0]["summary"]
print(dt, s.get("records") if isinstance(s.get("records"), int) else sum(meta["events"].values()))
"""


def pinned(cpus: set[int] | None):
    """A `preexec_fn` keeping a command (and its threads) on `cpus`."""
    return (lambda: os.sched_setaffinity(0, cpus)) if cpus else None


def timed(cmd: list[str], cpus: set[int] | None = None) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=pinned(cpus))
    return time.perf_counter() - t


def compare(path: Path, runs: int, peer: list[str] | None, peer_name: str, cpu_hz: str | None = None, cpus: set[int] | None = None) -> dict:
    """Medians over `runs` rounds, each timing our command, our in-process
    import and the peer one after the other: the machine's slow and fast
    phases (seconds long here) then fall on all three alike. `peer` None
    (not installed, a quick run): ours only. `cpus`: every command pinned
    to those CPUs (one core: the readers' own pace, no second thread)."""
    cap = OUT / "bench-import.capture"
    cli, api, theirs, n = [], [], [], 0
    extra = ["--cpu-hz", cpu_hz] if cpu_hz else []
    for _ in range(runs):
        shutil.rmtree(cap, ignore_errors=True)
        cli.append(timed([sys.executable, "-m", "cratrace", "import", str(path), "-o", str(cap), "-q", *extra], cpus))
        # into a new directory too: replacing the command's capture (--force)
        # would time deleting it as well
        shutil.rmtree(cap, ignore_errors=True)
        out = subprocess.run([sys.executable, "-c", API, str(path), str(cap), cpu_hz or ""], check=True, capture_output=True, text=True, preexec_fn=pinned(cpus)).stdout.split()
        api.append(float(out[0]))
        n = int(out[1])
        if peer:
            theirs.append(timed(peer, cpus))
    shutil.rmtree(cap, ignore_errors=True)
    cli_s, api_s = statistics.median(cli), statistics.median(api)
    peer_s = statistics.median(theirs) if theirs else None
    return {
        "file": str(path),
        "records": n,
        "peer": peer_name if peer else None,
        "cli_records_per_s": n / cli_s,
        "api_records_per_s": n / api_s,
        "peer_records_per_s": n / peer_s if peer_s else None,
        "ratio_cli": peer_s / cli_s if peer_s else None,
        "ratio_api": peer_s / api_s if peer_s else None,
    }


def main() -> None:
    global OUT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--xentrace", type=Path, default=HERE.parent.parent / "shared" / "fixtures" / "xen_credit2.bin")
    ap.add_argument("--xen-synth-ms", type=int, default=60_000)
    ap.add_argument("--tile-copies", type=int, default=25, help="copies of the fixture in the real-mix file (25: 4.5 M records, 97 MB)")
    ap.add_argument("--perf-loops", type=int, default=5000, help="perf bench sched messaging -l (5000: about 1.7 M samples here)")
    ap.add_argument("--only", choices=("xentrace", "perf.data"), help="measure one reader's files only")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="one round on small files in a scratch directory: 500 simulated ms, the fixture x2, --perf-loops 20")
    a = ap.parse_args()
    compile_cratrace()
    xenalyze, perf = True, True
    if a.quick:
        from benchmarks.quick import peer_installed, scratch, tracing_unavailable

        OUT = scratch("import-xen-perf")
        a.runs, a.xen_synth_ms, a.tile_copies, a.perf_loops = 1, 500, 2, 20
        xenalyze = peer_installed("xenalyze", "the xentrace reader")
        # perf records the perf.data it reads as well as being its peer
        if not shutil.which("perf"):
            print("perf is not installed: no perf.data to read")
            perf = False
        elif why := tracing_unavailable():
            print(f"perf.data not recorded: {why}")
            perf = False
    xentrace = a.only in (None, "xentrace")
    perf = perf and a.only in (None, "perf.data")
    try:
        res = measure_all(a, xenalyze, perf, xentrace)
    finally:
        if a.quick:
            shutil.rmtree(OUT, ignore_errors=True)
    if a.json:
        print(json.dumps(res, indent=2))
        return
    for k, r in res.items():
        ours = f"{k}: {r['records']:,} records: cratrace import {r['cli_records_per_s'] / 1e6:.2f} M/s as a command, {r['api_records_per_s'] / 1e6:.2f} M/s in-process"
        if r["peer"] is None:
            print(f"{ours} (medians of {a.runs})")
            continue
        print(
            f"{ours}; {r['peer']} {r['peer_records_per_s'] / 1e6:.2f} M/s; "
            f"ratio {r['ratio_cli']:.2f}x / {r['ratio_api']:.2f}x (medians of {a.runs})"
        )


def measure_all(a: argparse.Namespace, xenalyze: bool, perf: bool, xentrace: bool = True) -> dict[str, dict]:
    OUT.mkdir(exist_ok=True)
    return (measure_xentrace(a, xenalyze) if xentrace else {}) | (measure_perf(a) if perf else {})


def measure_xentrace(a: argparse.Namespace, xenalyze: bool) -> dict[str, dict]:
    res = {}
    synth = OUT / f"xen-synth-{a.xen_synth_ms}ms.bin"
    if not synth.exists():
        subprocess.run([sys.executable, "-m", "cratrace", "synth", "xen-io-billing", "-o", str(synth), "--seed", "1", "--set", "workload=net4", "--set", f"duration_ms={a.xen_synth_ms}", "--force"], check=True, stderr=subprocess.DEVNULL)
    tiled = OUT / f"{a.xentrace.stem}-x{a.tile_copies}.bin"
    if a.xentrace.exists() and not tiled.exists():
        write_tiled(a.xentrace, tiled, a.tile_copies)
    for label, path in (("xentrace (real fixture)", a.xentrace), ("xentrace (generated)", synth), (f"xentrace (real fixture x{a.tile_copies})", tiled)):
        if path.exists():
            peer = ["xenalyze", "--summary", "--cpu-hz=2.4G", str(path)] if xenalyze else None
            res[label] = compare(path, a.runs, peer, "xenalyze --summary", cpu_hz="2.4e9")
    return res


def measure_perf(a: argparse.Namespace) -> dict[str, dict]:
    res = {}
    pd = OUT / f"sched-{a.perf_loops}.perf.data"
    if not pd.exists():
        # a scheduler-heavy workload: perf's own messaging benchmark
        subprocess.run(
            ["perf", "record", "-q", "-e", "sched:sched_switch", "-e", "sched:sched_wakeup", "-e", "sched:sched_stat_runtime", "-a", "-o", str(pd), "--", "perf", "bench", "sched", "messaging", "-g", "10", "-l", str(a.perf_loops)],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
    res["perf.data"] = compare(pd, a.runs, ["perf", "script", "-i", str(pd)], "perf script")
    # the target is per core: both sides pinned to one CPU
    res["perf.data (one core)"] = compare(pd, a.runs, ["perf", "script", "-i", str(pd)], "perf script", cpus={min(os.sched_getaffinity(0))})
    return res


if __name__ == "__main__":
    main()
