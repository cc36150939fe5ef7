"""Every stage on every trace: import → info → model → replay → report.

    python benchmarks/corpus.py [PATH ...] [--lab] [--work DIR] [--json]

Runs the whole pipeline, as a user would (the `cratrace` command, one
process per stage), on each trace it is given: trace.dat files (v6, v7),
xentrace and perf.data files, raw capture directories (`cratrace record`'s
output, with manifest.json). Directories are searched for them. Without
PATH: the shared fixtures (../shared/fixtures, when present), the bundled
sample traces and one small capture of every `cratrace synth` scenario.
`--lab` also records the workload lab with plain `trace-cmd record`
(root; no host.json, as a trace from another host) in each VMM's thread
names, marker style, event set, trace clock, one CPU and a buffer
instance (`LAB_VARIANTS`).

One row per trace and stage: its exit status, seconds and the first line
of its standard error. A stage passes when it exits 0, or 1 with a one-line
reason; it fails on any other status, a traceback, "internal error" or a
Rust panic. The script exits 1 when any stage failed. xentrace files
without a host.json are imported with `--cpu-hz` (default 2.4e9, the
fixture's host).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_FIXTURES = REPO.parent / "shared" / "fixtures"

#: the replays each capture gets: the policy that produced it (no -p),
#: then two others that take other paths through the engine
OTHER_POLICIES = ("fair", "eevdf+wapd", "asymmetric+yield")

TRACE_MAGIC = {b"\x17\x08\x44tracing": "trace.dat", b"PERFILE2": "perf.data"}

#: the lab recorded as a foreign host's trace would be: (name, lab
#: settings, trace-cmd options, whether the VMs start before the recording)
LAB_VARIANTS = (
    ("qemu-lab-sched-irq", {"vmm": "qemu", "markers": "lab"}, ["-e", "sched", "-e", "irq"], True),
    ("qemu-bare-issue40", {"vmm": "qemu", "markers": "bare", "vms": 2, "vcpus": 4}, ["-e", "sched", "-e", "irq", "-e", "block", "-e", "net", "--file-version", "7", "--compression", "zstd"], True),
    ("firecracker-bare-sched", {"vmm": "firecracker", "markers": "bare"}, ["-e", "sched"], False),
    ("cloud-hypervisor-rtapp-kvm", {"vmm": "cloud-hypervisor", "markers": "rtapp"}, ["-e", "sched", "-e", "kvm", "-e", "task"], False),
    ("crosvm-free-block-net", {"vmm": "crosvm", "markers": "free"}, ["-e", "sched", "-e", "block", "-e", "net"], True),
    ("kvmtool-none", {"vmm": "kvmtool", "markers": "none"}, ["-e", "sched:sched_switch", "-e", "sched:sched_wakeup"], True),
    ("qemu-clock-global", {"markers": "bare"}, ["-e", "sched", "-C", "global"], False),
    ("qemu-clock-mono", {"markers": "lab"}, ["-e", "sched", "-C", "mono"], True),
    ("qemu-clock-x86-tsc", {"markers": "lab"}, ["-e", "sched", "-C", "x86-tsc"], False),
    ("qemu-one-cpu", {"markers": "lab"}, ["-e", "sched", "-M", "1"], True),
    ("qemu-instance", {"markers": "lab"}, ["-e", "sched", "-B", "cratrace_corpus", "-e", "sched:sched_switch"], True),
    # perf instead of trace-cmd (it records no trace_marker lines)
    ("qemu-perf-sched.perf", {"markers": "lab"}, ["perf", "-e", "sched:sched_switch", "-e", "sched:sched_wakeup", "-e", "sched:sched_process_fork"], False),
)


@dataclass
class Stage:
    trace: str
    stage: str
    exit: int | None
    seconds: float
    message: str = ""
    ok: bool = True


@dataclass
class Result:
    trace: str
    stages: list[Stage] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.stages)


def kind_of(path: Path) -> str | None:
    """What `path` is: trace.dat, perf.data, xentrace, raw (a capture
    directory) or None."""
    if path.is_dir():
        return "raw" if (path / "manifest.json").is_file() else None
    try:
        head = path.open("rb").read(10)
    except OSError:
        return None
    for magic, kind in TRACE_MAGIC.items():
        if head.startswith(magic):
            return kind
    if path.suffix in (".bin", ".xentrace") or path.name.startswith("xentrace"):
        return "xentrace"
    return None


def find_traces(paths: list[Path]) -> list[Path]:
    out = []
    for p in paths:
        if kind_of(p):
            out.append(p)
        elif p.is_dir():
            out += sorted(q for q in p.rglob("*") if kind_of(q) and not any(kind_of(a) == "raw" for a in q.parents if a != p and p in a.parents))
    return out


def _verdict(code: int | None, stderr: str) -> tuple[bool, str]:
    lines = [line for line in stderr.splitlines() if line.strip()]
    first = lines[0].strip() if lines else ""
    bad = next((w for w in ("Traceback", "internal error", "panicked", "RUST_BACKTRACE") if w in stderr), None)
    if code is None:
        return False, "timed out"
    if bad:
        return False, f"{bad}: {first}"
    if code == 0:
        return True, first
    if code == 1:
        return bool(first), first or "exit 1 without a reason on stderr"
    return False, first or f"exit {code}"


def run_stage(res: Result, stage: str, args: list[str], timeout: float = 600) -> bool:
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-m", "cratrace", *args], capture_output=True, text=True, timeout=timeout)
        code, err = p.returncode, p.stderr
    except subprocess.TimeoutExpired as e:
        code, err = None, (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
    ok, msg = _verdict(code, err)
    res.stages.append(Stage(res.trace, stage, code, round(time.perf_counter() - t0, 2), msg, ok))
    return ok and code in (0, 1)


def pipeline(src: Path, work: Path, cpu_hz: float) -> Result:
    """Every stage on `src`, in `work` (created); stops at a stage that
    did not run."""
    res = Result(str(src))
    cap, rep = work / "cap", work / "replays"
    imp = ["import", str(src), "-o", str(cap), "--force"]
    if kind_of(src) == "xentrace" and not (src.parent / "host.json").exists():
        imp += ["--cpu-hz", str(cpu_hz)]
    if not run_stage(res, "import", imp) or not (cap / "capture.json").exists():
        return res
    run_stage(res, "info", ["info", str(cap), "--json"])
    if not run_stage(res, "model", ["model", str(cap), "--json"]):
        return res
    run_stage(res, "replay", ["replay", str(cap), "-o", str(rep), "--force"])
    others = [a for p in OTHER_POLICIES for a in ("-p", p)]
    run_stage(res, "replay " + " ".join(OTHER_POLICIES), ["replay", str(cap), "-o", str(rep), *others, "--force"])
    if not rep.is_dir():
        return res
    base = ["report", str(cap), "--replays", str(rep), "--force"]
    run_stage(res, "report html", [*base, "-o", str(work / "report.html")])
    run_stage(res, "report md", [*base, "--format", "md", "-o", str(work / "report.md")])
    run_stage(res, "report --tables", [*base, "--format", "md", "-o", str(work / "report2.md"), "--tables", str(work / "tables")])
    run_stage(res, "report --json", [*base, "-o", str(work / "report3.html"), "--json"])
    return res


def synth_traces(out: Path) -> list[Path]:
    """One small capture of every `cratrace synth` scenario."""
    from cratrace.synth import SCENARIOS

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in sorted(SCENARIOS):
        ext = ".bin" if name.startswith("xen") else ".dat"
        f = out / f"{name}{ext}"
        if not f.exists():
            p = subprocess.run([sys.executable, "-m", "cratrace", "synth", name, "-o", str(f), "--seed", "1", *SYNTH_SHORT.get(name, [])], capture_output=True, text=True)
            if p.returncode != 0:
                raise RuntimeError(f"cratrace synth {name}: {p.stderr.strip()}")
        paths.append(f)
    return paths


#: settings that keep each scenario's capture small (a few thousand events)
SYNTH_SHORT = {
    "kvm-heavy-spin": ["--set", "duration_ms=300"],
    "kvm-io-billing": ["--set", "duration_ms=300"],
    "xen-io-billing": ["--set", "duration_ms=300"],
    "hetero": ["--set", "duration_ms=300"],
    "thermal": ["--set", "duration_ms=300"],
}


#: an instance's function-tracer filter files, which trace-cmd writes
FILTER_FILES = ("set_ftrace_filter", "set_ftrace_notrace", "set_graph_function", "set_graph_notrace", "set_ftrace_pid", "set_ftrace_notrace_pid")


def prepare_instance(name: str, scratch: Path, tracefs: Path = Path("/sys/kernel/tracing")) -> None:
    """Create ftrace instance `name` with its filter files writable: this
    project's sandboxed VMs refuse writes to them, as they do to the top
    level's (../shared/sandbox/enable-tracing.sh); elsewhere a no-op."""
    inst = tracefs / "instances" / name
    inst.mkdir(exist_ok=True)
    scratch.mkdir(parents=True, exist_ok=True)
    for f in FILTER_FILES:
        p = inst / f
        if not p.exists():
            continue
        try:
            p.write_text("\n")
        except OSError:
            s = scratch / f
            s.write_text("\n")
            subprocess.run(["mount", "--bind", str(s), str(p)], check=False, capture_output=True)


def mask_cpus(mask: str) -> set[int]:
    """The CPUs of trace-cmd's `-M` hexadecimal CPU mask."""
    bits = int(mask, 16)
    return {c for c in range(bits.bit_length()) if bits >> c & 1}


def record_lab_variants(out: Path, only: list[str] | None = None) -> list[Path]:
    """`LAB_VARIANTS` recorded with plain trace-cmd (root): a trace.dat each
    (no host.json). Holds the machine's tracing lock while recording."""
    import fcntl

    from cratrace.lab import LabParams, start

    out.mkdir(parents=True, exist_ok=True)
    made = []
    for name, lab, opts, before in LAB_VARIANTS:
        if only and name not in only:
            continue
        perf = opts[0] == "perf"
        f = out / (f"{name}.data" if perf else f"{name}.dat")
        params = LabParams(**{"vms": 2, "vcpus": 2, "duration_s": 2.5, **lab})
        with open("/tmp/cratrace-tracing.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if "-B" in opts:
                prepare_instance(opts[opts.index("-B") + 1], out / "scratch")
            # `-M MASK` traces only those CPUs: the VMs run there too, as on
            # a host of that many CPUs (else a vCPU that never ran on a
            # traced CPU is not in the trace at all)
            cpus = mask_cpus(opts[opts.index("-M") + 1]) if "-M" in opts else None
            if cpus is not None and not before:
                raise ValueError(f"{name}: -M needs the VMs started before the recording")
            proc = start(params, cpus) if before else None
            if proc is not None:
                time.sleep(0.5)  # the VMs' threads exist before the trace starts
            cmd = ["perf", "record", "-q", "-a", *opts[1:], "-o", str(f), "--"] if perf else ["trace-cmd", "record", "-q", *opts, "-o", str(f)]
            if before:
                cmd += ["sleep", "1"]
            else:
                from cratrace.lab import executable

                cmd += params.argv(executable())
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            if proc is not None:
                proc.wait(timeout=60)
        if r.returncode != 0 or not f.exists():
            raise RuntimeError(f"{cmd[0]} record for {name}: {r.stderr.strip()[-300:]}")
        made.append(f)
    return made


def run_corpus(traces: list[Path], work: Path, cpu_hz: float = 2.4e9, jobs: int = 1) -> list[Result]:
    from concurrent.futures import ThreadPoolExecutor

    def one(i_src):
        i, src = i_src
        return pipeline(src, work / f"{i:03d}-{src.name}", cpu_hz)

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        return list(pool.map(one, enumerate(traces)))


def print_table(results: list[Result]) -> None:
    w = max((len(Path(r.trace).name) for r in results), default=5)
    for r in results:
        for s in r.stages:
            mark = "ok " if s.ok else "FAIL"
            print(f"{mark} {Path(r.trace).name:<{w}}  {s.stage:<34} exit {s.exit if s.exit is not None else '-':>2}  {s.seconds:6.2f} s  {s.message[:110]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", type=Path, help="traces or directories of traces (default: fixtures, samples, synth scenarios)")
    ap.add_argument("--lab", action="store_true", help="also record the lab variants with trace-cmd (root)")
    ap.add_argument("--work", type=Path, help="where captures are written (default: a temporary directory, removed)")
    ap.add_argument("--cpu-hz", type=float, default=2.4e9, help="CPU Hz for xentrace files without host.json")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="traces run at once")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    a = ap.parse_args(argv)
    work = a.work or Path(tempfile.mkdtemp(prefix="cratrace-corpus-"))
    try:
        if a.paths:
            traces = find_traces(a.paths)
        else:
            traces = find_traces([p for p in (SHARED_FIXTURES, REPO / "sample-traces") if p.is_dir()]) + synth_traces(work / "synth")
        if a.lab:
            traces += record_lab_variants(work / "lab")
        if not traces:
            print("corpus: no traces found", file=sys.stderr)
            return 2
        results = run_corpus(traces, work / "runs", a.cpu_hz, a.jobs)
        if a.json:
            print(json.dumps([asdict(s) for r in results for s in r.stages], indent=2))
        else:
            print_table(results)
        bad = [r for r in results if not r.ok]
        print(f"corpus: {len(results)} traces, {sum(len(r.stages) for r in results)} stages, {len(bad)} traces with a failed stage", file=sys.stderr)
        return 1 if bad else 0
    finally:
        if a.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
