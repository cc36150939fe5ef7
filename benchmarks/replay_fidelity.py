"""The fidelity gate measured on real lab captures at several
oversubscription levels: record the workload lab (2 VMs × k vCPUs on this
machine's CPUs), import, model, replay under `fair` (the policy that
produced it: CFS with native spinning) and print the worst per-thread
CPU-time error and worst per-VM throughput error (target: within 5%).

    python benchmarks/replay_fidelity.py [--levels 1,2,3] [--seconds 1.5]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import tempfile
from pathlib import Path

from collectors import cratrace_collect as cc
from cratrace.importer import import_capture
from cratrace.lab import LabParams, executable
from cratrace.model import build_model
from cratrace.replay import replay_capture


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--levels", default="1,2,3", help="vCPUs per VM (2 VMs)")
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    cpus = os.cpu_count() or 1
    res = {}
    for k in map(int, a.levels.split(",")):
        d = Path(tempfile.mkdtemp(prefix="cratrace-fid-"))
        try:
            with open("/tmp/cratrace-tracing.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                cc.collect(d / "raw", "kvm-sched", duration=a.seconds + 5, perf_stat=False, command=LabParams(vms=2, vcpus=k, duration_s=a.seconds).argv(executable()))
            cap = import_capture([d / "raw"], d / "cap")
            build_model(cap)
            m = replay_capture(cap, ["fair"], d / "rep")["fair"]
            f = m["fidelity"]
            res[f"{2 * k / cpus:.0f}x ({2 * k} vCPUs on {cpus} CPUs)"] = {"cpu_time_err_pct": f["cpu_time_err_pct"], "throughput_err_pct": f["throughput_err_pct"], "passed": f["passed"]}
        finally:
            shutil.rmtree(d, ignore_errors=True)
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        for lvl, f in res.items():
            print(f"{lvl}: worst thread CPU-time error {f['cpu_time_err_pct']:.1f}%, worst VM throughput error {f['throughput_err_pct']:.1f}% -> {'within' if f['passed'] else 'outside'} 5%")


if __name__ == "__main__":
    main()
