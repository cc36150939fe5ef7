"""Postcopy with async page faults against the number of guest tasks
(issue #41, item 4): how much faster N sequential readers finish with
async page faults than without, on the paper's 1-vCPU setup (10 GbE,
30 µs RTT, ≈ 100 µs idle fetch; docs/replay-policies.md), on a 1 GbE link,
and with 4 vCPUs, where the link can fill.

Every figure comes from `cratrace replay --scenario postcopy`'s engine with
its documented defaults; nothing is fitted to the paper's 44%. The paper
measured one point (4 readers of 200 MB: 9.8 s against 17.6 s, guest
time 55% against 38%); it is printed above ours.

    python benchmarks/postcopy_tasks.py            # 200 MB per reader, as the paper
    python benchmarks/postcopy_tasks.py --quick    # 4 MB per reader (the test suite's run)

`effects(quick)` gives the same figures as rows of benchmarks/seed_effects.py.
"""

from __future__ import annotations

import argparse
import shutil
import time

from benchmarks.quick import scratch
from cratrace.replay.postcopy import run_postcopy

TASKS = (1, 2, 4, 8, 16)
GBE = "125000000"  # 1 GbE in bytes/s

PAPER = "paper (Hirofuchi et al. 2015, postcopy.md §4): 4 readers x 200 MB, 1 vCPU, 10 GbE: with async PF 9.8 s, without 17.6 s: 44% faster; vCPU in guest 55% vs 38%; other task counts not measured (Apache: the gain grows from 4 to 16 to 128 processes)"


def measure(task_mb: int, tasks: tuple[int, ...], **sets: str) -> list[dict]:
    """One postcopy run (with and without async PF) per task count."""
    tmp = scratch("postcopy")
    try:
        return [run_postcopy(None, tmp, {"tasks": str(n), "task_mb": str(task_mb), **sets}, force=True) for n in tasks]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _guest(r: dict) -> float:
    return max(r["vcpu_guest_fraction"])


def sweep(title: str, task_mb: int, tasks: tuple[int, ...], **sets: str) -> list[dict]:
    print(f"ours, {title}, {task_mb} MB per reader:")
    print("  tasks  async PF s  without s  faster   guest APF/without  link busy APF/without  fetch us mean/idle")
    results = measure(task_mb, tasks, **sets)
    for n, res in zip(tasks, results):
        a, b = res["runs"]["async_pf"], res["runs"]["no_async_pf"]
        print(
            f"  {n:5d}  {a['mean_task_s']:10.3f}  {b['mean_task_s']:9.3f}  {res['async_pf_speedup_pct']:5.1f}%"
            f"   {_guest(a):6.1%} / {_guest(b):6.1%}     {a['fetch']['link_utilisation']:6.1%} / {b['fetch']['link_utilisation']:6.1%}"
            f"      {a['fetch']['mean_us']:.1f} / {a['fetch']['idle_us']:.1f}"
        )
    return results


def effects(quick: bool) -> list[dict]:
    """Rows for benchmarks/seed_effects.py: the paper's 4-reader check,
    the guest shares, the trend over tasks, and the link what-if."""
    mb = 4 if quick else 200
    runs = measure(mb, TASKS)
    gains = [r["async_pf_speedup_pct"] for r in runs]
    four = runs[TASKS.index(4)]
    a, b = four["runs"]["async_pf"], four["runs"]["no_async_pf"]
    ten, one = (measure(mb, (8,), vcpus="4", **link)[0]["async_pf_speedup_pct"] for link in ({}, {"link_bytes_per_s": GBE}))
    return [
        dict(policy="postcopy", effect=f"async PF speed-up, 4 sequential readers, 1 vCPU, 10 GbE ({mb} MB each)", condition="async PF on/off", paper="44% (9.8 s vs 17.6 s)", ours=f"{gains[2]:.1f}% ({a['mean_task_s']:.2f} s vs {b['mean_task_s']:.2f} s)", trend_agrees=gains[2] > 0, agrees=abs(gains[2] - 44) <= 5, why="bound by the one vCPU (compute 63.8 us + 29 us async-PF overhead per page against 63.8 + 104 us stalled), not the link (under 4% busy); absolute times differ since the paper's 86 us per page is below its own 100 us fetch"),
        dict(policy="postcopy", effect="vCPU in guest, async PF / without", condition="async PF on/off", paper="55% / 38%", ours=f"{_guest(a):.0%} / {_guest(b):.0%}", trend_agrees=_guest(a) > _guest(b), agrees=abs(_guest(a) - 0.55) <= 0.05, why="38% is the input that sets the compute per page; the paper's guest time per page falls from 33 to 26 us with async PF, which no fixed compute gives"),
        dict(policy="postcopy", effect="async PF speed-up over 1, 2, 4, 8, 16 readers (1 vCPU)", condition="runnable tasks", paper="grows with processes (Apache: 4 subtle, 16 clear, 128 large)", ours=", ".join(f"{g:.1f}" for g in gains) + "%", trend_agrees=gains[-1] > gains[0] and all(y >= x - 0.5 for x, y in zip(gains, gains[1:])), agrees=None, why="grows until the vCPU always has a task to run (2 readers at 63.8 us of compute per page), then flat"),
        dict(policy="postcopy", effect="4 vCPUs x 2 readers: speed-up on 10 GbE -> 1 GbE", condition="link bandwidth (not varied by the paper)", paper="none", ours=f"{ten:.1f}% -> {one:.1f}%", trend_agrees=None, agrees=None, why="an extrapolation: on 1 GbE the replies fill the link and fetches queue"),
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="4 MB per reader instead of the paper's 200 MB (seconds)")
    a = ap.parse_args()
    mb = 4 if a.quick else 200
    t0 = time.perf_counter()
    print(PAPER)
    sweep("1 vCPU, 10 GbE (the defaults)", mb, TASKS)
    sweep("1 vCPU, 1 GbE", mb, TASKS, link_bytes_per_s=GBE)
    sweep("4 vCPUs, 10 GbE", mb, (4, 8, 16), vcpus="4")
    sweep("4 vCPUs, 1 GbE", mb, (4, 8, 16), vcpus="4", link_bytes_per_s=GBE)
    print(f"({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
