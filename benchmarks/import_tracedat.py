"""Benchmark: `cratrace import` vs `trace-cmd report` on the same trace.

Records (with trace-cmd, under the machine-wide tracing lock) a trace of
sched, irq and timer events plus trace_marker writes from a busy
multi-threaded program, at two lengths (1x, at least 2 million events, and
4x; recorded once and reused from benchmarks/out/, --record records them
anew), then measures in one run, medians over --runs:

* events/s of `cratrace import` (native reader → Parquet, end to end,
  wall clock: the reader decodes on one thread while Parquet is encoded on
  a second), and events per CPU-second (user + system time of both);
* events/s of `trace-cmd report > /dev/null` on the same file;
* their ratio (target ≥ 10x, on one core: the same two commands with
  every thread pinned to CPU 0 are measured too);
* peak RSS of the import for 1x and 4x (streaming: must not grow ~4x);
* the import's floor (issue 47), everything on one core, in turns with
  the above: `_native.tracedat_floor` passes over the same file, in this
  process: decompress-only (every page read and zstd-decompressed),
  decode-only (and every record's fields decoded into plain values,
  stream by stream: no merge, rows or Parquet) and rows (the whole read,
  merge and row batches, into a sink that drops them: no Parquet); then
  the reader into Parquet (`_native.read_tracedat`) and the whole import
  (`write_capture`) in this process, the import as a command, and
  `trace-cmd report`. The differences between them say where the time
  goes; import/floor is the command's time over decode-only's, and "at
  the floor" the multiple of trace-cmd an import at decode-only's pace
  would be.

cratrace's bytecode is compiled first, as an installed package has it
(benchmarks/as_installed.py).

    python benchmarks/import_tracedat.py [--runs 3] [--seconds 3.5] [--record] [--json] [--cpu 0]
    python benchmarks/import_tracedat.py --quick   # 0.1 s recordings, one run (skips where trace-cmd cannot record)
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.as_installed import compile_cratrace

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
BUFFER_SIZE = Path("/sys/kernel/tracing/buffer_size_kb")
# the CPU the one-core measurements run on (--cpu)
ONE_CPU = 0


def _run(cmd: list[str], stdout=subprocess.DEVNULL, one_core: bool = False) -> tuple[float, int, float]:
    """(wall seconds, peak RSS in MiB, CPU seconds) of a child process;
    `one_core`: the child and all its threads on CPU `ONE_CPU` only."""
    t0 = time.perf_counter()
    pin = (lambda: os.sched_setaffinity(0, {ONE_CPU})) if one_core else None
    p = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE, preexec_fn=pin)
    _, status, ru = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode not in (0, 1):
        raise SystemExit(f"{cmd[0]} failed ({p.returncode}): {p.stderr.read().decode()[-400:]}")
    return dt, ru.ru_maxrss // 1024, ru.ru_utime + ru.ru_stime


def record(seconds: float, name: str) -> Path:
    OUT.mkdir(exist_ok=True)
    exe = OUT / "busy_markers"
    if not exe.exists():
        subprocess.run(["cc", "-O2", "-pthread", "-o", str(exe), str(HERE / "busy_markers.c")], check=True)
    dat = OUT / f"{name}.dat"
    enable = HERE.parent.parent / "shared" / "sandbox" / "enable-tracing.sh"
    if enable.exists():
        subprocess.run([str(enable)], capture_output=True, check=False)
    with open("/tmp/cratrace-tracing.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # `-b` leaves its size behind: give the ring buffer back as found
        # (as tests/conftest.py's tracing_lock does), for whoever traces next
        size = BUFFER_SIZE.read_text().strip()
        try:
            subprocess.run(
                ["trace-cmd", "record", "-q", "-b", "20000", "-e", "sched", "-e", "irq", "-e", "timer", "-o", str(dat), "--", str(exe), "4", str(seconds)],
                check=True,
                capture_output=True,
                cwd=OUT,
            )
        finally:
            if size.isdigit() and BUFFER_SIZE.read_text().strip() != size:
                BUFFER_SIZE.write_text(size + "\n")
    return dat


def events_in(capture: Path) -> int:
    return sum(json.loads((capture / "capture.json").read_text())["events"].values())


def count_events(dat: Path) -> int:
    cap = OUT / f"{dat.stem}.count.capture"
    subprocess.run([sys.executable, "-m", "cratrace", "import", str(dat), "-o", str(cap), "-q", "--force"], check=True)
    n = events_in(cap)
    shutil.rmtree(cap, ignore_errors=True)
    return n


def trace_of(seconds: float, name: str, at_least: int, again: bool) -> tuple[Path, int]:
    """The benchmark trace `name` and its event count: the one recorded
    before unless `again`; recorded (longer, as often as needed) until it
    holds `at_least` events. How many events a second of the workload
    makes depends on the machine's speed at the time (0.9 M to 2.9 M in
    3.5 s seen here), and runs compare only on the same file."""
    dat = OUT / f"{name}.dat"
    if dat.exists() and not again and (n := count_events(dat)) >= at_least:
        return dat, n
    for _ in range(4):
        dat = record(seconds, name)
        n = count_events(dat)
        if n >= at_least:
            return dat, n
        seconds *= 1.2 * at_least / max(n, 1)
    raise SystemExit(f"{name}: {n:,} events, fewer than the {at_least:,} needed, after four recordings")


def _cpu_self() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _in_process(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process's threads) of `fn()` run
    in this process on CPU `ONE_CPU` (the threads it starts inherit the
    pin), the affinity given back after. On a shared machine the CPU
    seconds are the steadier figure: time others take of the core is not
    in them."""
    was = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {ONE_CPU})
    try:
        c0, t0 = _cpu_self(), time.perf_counter()
        fn()
        return time.perf_counter() - t0, _cpu_self() - c0
    finally:
        os.sched_setaffinity(0, was)


FLOOR_STAGES = ("decompress", "decode", "rows")


def bench_file(dat: Path, runs: int) -> dict:
    from cratrace import _native
    from cratrace.importer import write_capture

    cap = OUT / f"{dat.stem}.capture"
    imp, rss, cpu, rep, imp1, rep1 = [], [], [], [], [], []
    # wall and CPU seconds of each one-core pass, by name
    passes = ("decompress", "decode", "rows", "reader_parquet", "import_in_process", "import_command", "trace_cmd_report")
    wall: dict[str, list[float]] = {k: [] for k in passes}
    cpus: dict[str, list[float]] = {k: [] for k in passes}
    floor_info: dict[str, dict] = {}
    importing = [sys.executable, "-m", "cratrace", "import", str(dat), "-o", str(cap), "-q"]

    def one_core(name: str, timed: tuple) -> None:
        wall[name].append(timed[0])
        cpus[name].append(timed[-1])

    for _ in range(runs):
        shutil.rmtree(cap, ignore_errors=True)
        t, m, c = _run(importing)
        imp.append(t)
        rss.append(m)
        cpu.append(c)
        t, _, _ = _run(["trace-cmd", "report", str(dat)])
        rep.append(t)
        # the target's terms: both on one core (our reader and Parquet
        # threads then share it)
        shutil.rmtree(cap, ignore_errors=True)
        timed = _run(importing, one_core=True)
        imp1.append(timed[0])
        one_core("import_command", timed)
        timed = _run(["trace-cmd", "report", str(dat)], one_core=True)
        rep1.append(timed[0])
        one_core("trace_cmd_report", timed)
        # the floor and the in-process import, on the same core, in turn
        for stage in FLOOR_STAGES:
            box: dict = {}
            one_core(stage, _in_process(lambda: box.update(_native.tracedat_floor(str(dat), stage))))  # called at once
            floor_info[stage] = box
        parquet_dir = OUT / f"{dat.stem}.reader-parquet"
        shutil.rmtree(parquet_dir, ignore_errors=True)
        parquet_dir.mkdir()
        one_core("reader_parquet", _in_process(lambda: _native.read_tracedat(str(dat), str(parquet_dir))))
        shutil.rmtree(parquet_dir, ignore_errors=True)
        inproc = OUT / f"{dat.stem}.inproc.capture"
        shutil.rmtree(inproc, ignore_errors=True)
        one_core("import_in_process", _in_process(lambda: write_capture([dat], inproc, force=True)))
        shutil.rmtree(inproc, ignore_errors=True)
    n = events_in(cap)
    if floor_info["decode"]["records"] != n or floor_info["rows"]["records"] != n:
        raise SystemExit(f"{dat.name}: the floor passes decoded {floor_info['decode']['records']:,} / {floor_info['rows']['records']:,} records, the import {n:,}")
    one = {f"{k}_s": statistics.median(v) for k, v in wall.items()}
    one_cpu = {f"{k}_s": statistics.median(v) for k, v in cpus.items()}
    return {
        "file": dat.name,
        "bytes": dat.stat().st_size,
        "events": n,
        "decompressed_bytes": floor_info["decompress"]["bytes"],
        "pages": floor_info["decompress"]["pages"],
        "cratrace_import_s": statistics.median(imp),
        "trace_cmd_report_s": statistics.median(rep),
        "cratrace_events_per_s": n / statistics.median(imp),
        "cratrace_events_per_cpu_s": n / statistics.median(cpu),
        "trace_cmd_events_per_s": n / statistics.median(rep),
        "ratio": statistics.median(rep) / statistics.median(imp),
        "one_core_cratrace_events_per_s": n / statistics.median(imp1),
        "one_core_trace_cmd_events_per_s": n / statistics.median(rep1),
        "one_core_ratio": statistics.median(rep1) / statistics.median(imp1),
        "import_peak_rss_mib": statistics.median(rss),
        # issue 47's floor, all on one core (seconds, medians)
        "one_core": one,
        "one_core_cpu": one_cpu,
        "import_over_floor": one["import_command_s"] / one["decode_s"],
        "trace_cmd_multiple_at_floor": one["trace_cmd_report_s"] / one["decode_s"],
        "import_over_floor_cpu": one_cpu["import_command_s"] / one_cpu["decode_s"],
        "trace_cmd_multiple_at_floor_cpu": one_cpu["trace_cmd_report_s"] / one_cpu["decode_s"],
    }


def floor_line(k: str, r: dict) -> str:
    """The floor's figures of one file: each pass's time and events/s on
    one core, and the ratios."""
    o, n = r["one_core"], r["events"]
    names = (
        ("decompress", "decompress_s"),
        ("decode", "decode_s"),
        ("rows", "rows_s"),
        ("reader→Parquet", "reader_parquet_s"),
        ("import in process", "import_in_process_s"),
        ("import command", "import_command_s"),
        ("trace-cmd report", "trace_cmd_report_s"),
    )
    parts = ", ".join(f"{label} {o[key]:.3f} s ({n / o[key] / 1e6:.1f} M ev/s)" for label, key in names)
    c = r["one_core_cpu"]
    cpu_parts = ", ".join(f"{label} {c[key]:.3f}" for label, key in names)
    return (
        f"{k} floor, one core: {parts}; import/floor (decode-only) {r['import_over_floor']:.1f}x, "
        f"import vs trace-cmd {o['trace_cmd_report_s'] / o['import_command_s']:.1f}x, "
        f"at the decode floor {r['trace_cmd_multiple_at_floor']:.1f}x (target 25x, within 3x of the floor)\n"
        f"{k} floor, CPU seconds: {cpu_parts}; import/floor {r['import_over_floor_cpu']:.1f}x, "
        f"import vs trace-cmd {c['trace_cmd_report_s'] / c['import_command_s']:.1f}x, at the decode floor {r['trace_cmd_multiple_at_floor_cpu']:.1f}x"
    )


def main() -> None:
    global OUT, ONE_CPU
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.5, help="workload length of the 1x trace (≥2M events here)")
    ap.add_argument("--record", action="store_true", help="record the traces anew (by default the ones under benchmarks/out/ are reused)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--cpu", type=int, default=0, help="the CPU the one-core measurements are pinned to")
    ap.add_argument("--quick", action="store_true", help="recordings of 0.1 s and 0.4 s (at least 20,000 events) in a scratch directory, one run")
    args = ap.parse_args()
    ONE_CPU = args.cpu
    compile_cratrace()
    at_least = 2_000_000
    if args.quick:
        from benchmarks.quick import scratch, tracing_unavailable

        if why := tracing_unavailable():
            print(f"skipped: {why}")
            return
        OUT = scratch("import-tracedat")
        args.seconds, args.runs, args.record, at_least = 0.1, 1, True, 20_000
    try:
        one, n_one = trace_of(args.seconds, "bench1x", at_least, args.record)
        four, _ = trace_of(4 * args.seconds, "bench4x", 4 * n_one, args.record)
        r1, r4 = bench_file(one, args.runs), bench_file(four, args.runs)
    finally:
        if args.quick:
            shutil.rmtree(OUT, ignore_errors=True)
    result = {"runs": args.runs, "1x": r1, "4x": r4, "rss_growth_4x": r4["import_peak_rss_mib"] / max(r1["import_peak_rss_mib"], 1)}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for k, r in (("1x", r1), ("4x", r4)):
        print(
            f"{k}: {r['events']:,} events ({r['bytes'] / 2**20:.0f} MiB): cratrace import {r['cratrace_events_per_s'] / 1e6:.2f} M ev/s "
            f"({r['cratrace_import_s']:.2f} s), trace-cmd report {r['trace_cmd_events_per_s'] / 1e6:.2f} M ev/s ({r['trace_cmd_report_s']:.2f} s), "
            f"ratio {r['ratio']:.1f}x, import peak RSS {r['import_peak_rss_mib']} MiB; "
            f"per CPU-second {r['cratrace_events_per_cpu_s'] / 1e6:.2f} M ev/s ({r['cratrace_events_per_cpu_s'] / r['trace_cmd_events_per_s']:.1f}x trace-cmd's wall rate); "
            f"both on one core: {r['one_core_cratrace_events_per_s'] / 1e6:.2f} vs {r['one_core_trace_cmd_events_per_s'] / 1e6:.2f} M ev/s, ratio {r['one_core_ratio']:.1f}x (target 10x)"
        )
    for k, r in (("1x", r1), ("4x", r4)):
        print(floor_line(k, r))
    print(f"peak RSS 4x/1x: {result['rss_growth_4x']:.2f} (medians of {args.runs} runs)")


if __name__ == "__main__":
    main()
