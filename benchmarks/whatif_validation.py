"""Does a what-if predict what the other setting really does? Record the
workload lab under pairs of settings that correspond to a policy or a
consolidation change, replay the captures of the first setting under the
second's configuration (`cratrace replay` with `-p`, `--drop-vm`,
`--add-vm`, `--set pcpus=`, `cap.VM=`, `sched_groups=per-vm`) and set the
prediction beside real recordings of the second.

For each pair: the recorded change (the target's mean host throughput
against the source's), the predicted change (the mean of the source
captures' what-if replays against the same), the prediction error
(prediction against the target's mean) and the target's noise floor (the
median difference in host throughput between pairs of its own recordings:
a prediction within it is as good as another recording), and whether the
predicted change has the recorded one's sign. Host throughput is the VMs'
transactions per second summed (each over its own window), recorded or
replayed.

    python benchmarks/whatif_validation.py [--runs 4] [--seconds 4] [--json]
    python benchmarks/whatif_validation.py --quick      # one 1 s recording per setting (the test suite's)

Needs root (trace-cmd, a cgroup for the cap) and the lab's C compiler.
"""

from __future__ import annotations

import argparse
import fcntl
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import cratrace_collect as cc
from cratrace.lab import LabParams, executable

#: the recorded settings: the lab's parameters, a wrapper command, a cap
SETTINGS: dict[str, dict] = {
    "native": {"lab": {"lock": "spin"}},
    "pv": {"lab": {"lock": "pv"}},
    "3vms": {"lab": {"lock": "pv", "vms": 3}},
    "one-cpu": {"lab": {"lock": "pv"}, "wrap": ["taskset", "-c", "0"]},
    "capped": {"lab": {"lock": "pv"}, "cap": ("vm0", 50)},
    "own-sessions": {"lab": {"lock": "pv", "vm_sessions": "own"}},
}

#: (what-if, source setting, target setting, replay arguments; {base} is
#: the source's own scheduler)
PAIRS = [
    ("native lock -> pv lock", "native", "pv", ["-p", "{base}+pv"]),
    ("pv lock -> native lock", "pv", "native", ["-p", "{base}+spin"]),
    ("3 VMs -> 2 VMs", "3vms", "pv", ["--drop-vm", "vm2"]),
    ("2 VMs -> 3 VMs", "pv", "3vms", ["--add-vm", "vm0:1"]),
    ("2 CPUs -> 1 CPU", "pv", "one-cpu", ["--set", "pcpus=1"]),
    ("vm0 capped at 50% of a CPU", "pv", "capped", ["--set", "cap.vm0=50"]),
    ("one session -> a session each", "pv", "own-sessions", ["--set", "sched_groups=per-vm"]),
]

CGROUP = Path("/sys/fs/cgroup/cpu/cratrace-whatif")


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cratrace", *map(str, args)], capture_output=True, text=True)


def _cap_vm(vm: str, pct: int, stop: threading.Event) -> None:
    """Move the lab's VM `vm` into a CPU cgroup capped at `pct`% of one
    CPU (cgroup v1 cpu.cfs_quota_us, or v2 cpu.max) as soon as it runs."""
    while not stop.is_set():
        pids = [v["pid"] for v in cc.vmm_vms() if v["name"] == vm]
        if pids:
            (CGROUP / "cgroup.procs").write_text(str(pids[0]))
            return
        time.sleep(0.005)


def record(setting: str, out: Path, seconds: float) -> Path:
    """One recording of `setting` into `out/raw`, imported and modelled
    into `out/cap`."""
    spec = SETTINGS[setting]
    params = LabParams(**{"vms": 2, "vcpus": 2, "duration_s": seconds, **spec["lab"]})
    argv = [*spec.get("wrap", []), *params.argv(executable())]
    stop = threading.Event()
    mover = None
    if "cap" in spec:
        vm, pct = spec["cap"]
        CGROUP.mkdir(exist_ok=True)
        (CGROUP / "cpu.cfs_period_us").write_text("100000")
        (CGROUP / "cpu.cfs_quota_us").write_text(str(pct * 1000))
        mover = threading.Thread(target=_cap_vm, args=(vm, pct, stop), daemon=True)
    with open("/tmp/cratrace-tracing.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)

        def start():
            p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if mover:
                mover.start()
            return p

        try:
            cc.collect(out / "raw", "kvm-sched", duration=seconds + 5, perf_stat=False, workload_popen=start, force=True)
        finally:
            stop.set()
    for args in (["import", out / "raw", "-o", out / "cap", "-q", "--force"], ["model", out / "cap", "-q"]):
        p = _cli(*args)
        if p.returncode not in (0, 1):
            raise RuntimeError(f"cratrace {args[0]} {out}: {p.stderr.strip()}")
    return out / "cap"


def replay(cap: Path, out: Path, args: list[str]) -> dict:
    """The metrics of one replay (the first policy's)."""
    p = _cli("replay", cap, "-o", out, "--json", "--force", *args)
    if p.returncode not in (0, 1):
        raise RuntimeError(f"cratrace replay {cap} {' '.join(args)}: {p.stderr.strip()}")
    return next(iter(json.loads(p.stdout).values()))


def host_tput(metrics: dict, recorded: bool) -> float:
    key = "recorded_throughput_per_s" if recorded else "throughput_per_s"
    return sum(v[key] or 0.0 for v in metrics["vms"].values())


def others_pct(cap: Path) -> float:
    """Percent of the host's CPU time (its CPUs x the capture's span) that
    ran threads of no VM, the idle task aside: the recorder and whatever
    else shared the host. A what-if's recorded change is the host's as
    much as the setting's when this is large (a busy neighbour holding
    one of two CPUs leaves "2 CPUs" recorded on about one)."""
    import polars as pl

    meta = json.loads((cap / "capture.json").read_text())
    lo, hi = meta["time_range_ns"]
    slices = pl.read_parquet(cap / "model" / "cpu_slices.parquet", columns=["tid", "dur"])
    threads = pl.read_parquet(cap / "model" / "threads.parquet", columns=["tid", "vm"])
    other = slices.filter(pl.col("tid") != 0).join(threads, on="tid", how="left").filter(pl.col("vm").is_null())["dur"].sum()
    return 100 * other / (max(1, int(meta.get("cpus") or 1)) * (hi - lo + 1))


def pair_spread(values: list[float]) -> float | None:
    """The median difference (%) between two recordings' values, over
    ordered pairs."""
    gaps = [abs(b - a) / a * 100 for a, b in itertools.permutations(values, 2) if a]
    return statistics.median(gaps) if gaps else None


def validate(work: Path, runs: int, seconds: float, pairs=PAIRS) -> list[dict]:
    needed = sorted({s for _, a, b, _ in pairs for s in (a, b)})
    # recorded in turns (every setting once, then again), so that the
    # host's load drifting over the minutes of recording falls on every
    # setting alike instead of on whichever was recorded last
    caps: dict[str, list[Path]] = {s: [] for s in needed}
    for i in range(runs):
        for s in needed:
            caps[s].append(record(s, work / f"{s}-{i}", seconds))
    # each recording's own figures, from a replay under its own policy
    own: dict[str, list[dict]] = {s: [replay(c, c.parent / "own", []) for c in cs] for s, cs in caps.items()}
    rows = []
    for name, src, tgt, args in pairs:
        base = own[src][0]["policy"].split("+")[0]
        wargs = [a.replace("{base}", base) for a in args]
        predicted = [replay(c, c.parent / f"whatif-{tgt}", wargs) for c in caps[src]]
        src_rec = statistics.mean(host_tput(m, True) for m in own[src])
        tgt_recs = [host_tput(m, True) for m in own[tgt]]
        tgt_rec = statistics.mean(tgt_recs)
        pred = statistics.mean(host_tput(m, False) for m in predicted)
        # the model's own change: the what-if replay against the same
        # captures replayed as recorded, so that a bias the self-replay
        # has (measured: self_replay_error_pct) is not read as the what-if's
        src_replayed = statistics.mean(host_tput(m, False) for m in own[src])
        rec_change = 100 * (tgt_rec / src_rec - 1)
        pred_change = 100 * (pred / src_replayed - 1)
        noise = pair_spread(tgt_recs)
        err = 100 * (pred / tgt_rec - 1)
        rows.append({
            "what_if": name,
            "replay_args": " ".join(wargs),
            "source_throughput": round(src_rec, 1),
            "target_throughput": round(tgt_rec, 1),
            "predicted_throughput": round(pred, 1),
            "recorded_change_pct": round(rec_change, 1),
            "predicted_change_pct": round(pred_change, 1),
            "prediction_error_pct": round(err, 1),
            "self_replay_error_pct": round(100 * (src_replayed / src_rec - 1), 1),
            "target_noise_pct": None if noise is None else round(noise, 1),
            "within_noise": None if noise is None else abs(err) <= noise,
            "same_sign": (rec_change >= 0) == (pred_change >= 0),
            "source_others_pct": round(statistics.mean(others_pct(c) for c in caps[src]), 1),
            "target_others_pct": round(statistics.mean(others_pct(c) for c in caps[tgt]), 1),
            "per_vm": {
                "predicted": {vm: round(statistics.mean(m["vms"][vm]["throughput_per_s"] for m in predicted), 1) for vm in predicted[0]["vms"]},
                "recorded": {vm: round(statistics.mean(m["vms"][vm]["recorded_throughput_per_s"] or 0 for m in own[tgt]), 1) for vm in own[tgt][0]["vms"]},
            },
        })
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=4, help="recordings per setting")
    ap.add_argument("--seconds", type=float, default=4.0, help="each recording's length")
    ap.add_argument("--quick", action="store_true", help="one 1 s recording per setting (the test suite's)")
    ap.add_argument("--work", type=Path, help="keep the captures here (default: a temporary directory, removed)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.quick:
        a.runs, a.seconds = 1, 1.0
    if os.geteuid() != 0 or shutil.which("trace-cmd") is None:
        print("whatif_validation: needs root and trace-cmd to record the lab", file=sys.stderr)
        return 2
    work = a.work or Path(tempfile.mkdtemp(prefix="cratrace-whatif-"))
    try:
        rows = validate(work, a.runs, a.seconds)
    finally:
        if CGROUP.is_dir():
            try:
                CGROUP.rmdir()
            except OSError:
                pass
        if a.work is None:
            shutil.rmtree(work, ignore_errors=True)
    if a.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{a.runs} recordings of {a.seconds:g} s per setting, 2 VMs x 2 vCPUs on {os.cpu_count()} CPUs (host throughput: transactions/s, the VMs summed)")
    print(f"{'what-if':34} {'replay':26} {'recorded':>9} {'predicted':>9} {'error':>7} {'noise':>6} {'self':>7} {'others':>11}  sign")
    for r in rows:
        noise = "-" if r["target_noise_pct"] is None else f"{r['target_noise_pct']:.1f}%"
        print(f"{r['what_if']:34} {r['replay_args']:26} {r['recorded_change_pct']:+8.1f}% {r['predicted_change_pct']:+8.1f}% {r['prediction_error_pct']:+6.1f}% {noise:>6} {r['self_replay_error_pct']:+6.1f}% {r['source_others_pct']:4.0f}/{r['target_others_pct']:3.0f}%  {'same' if r['same_sign'] else 'OPPOSITE'}")
    print("recorded/predicted: the change in host throughput; error: the prediction against the target's recordings;")
    print("noise: how much two recordings of the target differ (median); self: the source captures' replay as recorded against the recording;")
    print("others: the host's CPU time in threads of no VM (the recorder, neighbours), source/target recordings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
