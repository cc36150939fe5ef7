"""The fidelity gate measured on real lab captures at several
oversubscription levels: record the workload lab (2 VMs × k vCPUs on this
machine's CPUs), import, model, replay under the policy that produced it
(`eevdf` on Linux 6.6+, else `fair`; native spinning) and print the worst
per-thread CPU-time error and worst per-VM throughput error (target:
within 5%), the same for the other Linux scheduler model on the same
capture, and, from the recording, how much of the vCPUs' runnable waiting
(`preempted` in vcpu_states) happened while some CPU was idle, and how
often a waking vCPU preempted a running sibling, recorded and replayed
(`fidelity.diagnostics` in metrics.json), and the baseline again with
the recorded placement (`+recorded`: each stretch of work on the CPU the
capture ran it on), which shows how much of a miss is placement, and
with the host's scheduling groups the other way round (the baseline
replays them when each VM had a group of its own: `sched_groups=auto`;
the comparison forces `recorded` or `off`), and with each CPU run at
the speed its vCPUs' transactions showed over time (`cpu_speed=markers`:
on a shared host the same work takes longer while a core's sibling
works). Each
level is recorded with the lab's counted bursts (fixed work and no system
calls while computing, as a vCPU in guest mode; --work-clocks count,cpu
adds bursts that read the thread CPU clock in their loop, wall bursts
that shrink when preempted) and with each of the lab's locks (--locks:
native spinlocks, and paravirtual ones that halt after 2^15 PAUSEs until
the holder's unlock kicks them, as KVM guests' do). --vm-sessions own
gives each VM a session (an autogroup) of its own, as libvirt's per-VM
cgroups do. Captures differ run to run (the kernel's placement of the
vCPUs decides how much lock-holder preemption there is): quote several
runs. With several captures of a setting, the summary also says how far
its recordings are apart from each other (throughput, and CPU seconds
per useful guest second, which does not move with the machine's speed)
next to how far each replay is from its own recording: the floor under
what a replay can be held to.

    python benchmarks/replay_fidelity.py [--levels 1,2,3] [--seconds 1.5] [--work-clocks count] [--locks spin,pv] [--vm-sessions shared] [--runs 1] [--keep-over PCT]
    python benchmarks/replay_fidelity.py --replay-kept benchmarks/out/fidelity-kept   # the kept captures again
    python benchmarks/replay_fidelity.py --replay-kept DIR --set busy_balance_load=0   # ... with a model setting changed
"""

from __future__ import annotations

import argparse
import bisect
import fcntl
import itertools
import json
import os
import shutil
import statistics
import tempfile
from pathlib import Path

import polars as pl

import cratrace_collect as cc
from cratrace.capture import Capture
from cratrace.importer import import_capture
from cratrace.lab import LabParams, executable
from cratrace.model import build_model
from cratrace.replay import replay_capture
from cratrace.replay.plan import baseline_policy


def stranded_wait(cap: Path, states: pl.DataFrame, step_ns: int = 20_000) -> tuple[float, float]:
    """(vCPU thread-seconds runnable but waiting, of them while a CPU was
    idle), sampled every `step_ns` over the vCPU timelines (`states`: the
    capture's vcpu_states)."""
    slices = pl.read_parquet(cap / "model" / "cpu_slices.parquet").filter(pl.col("tid") == 0)
    waits = states.filter(pl.col("state") == "preempted")
    if waits.height == 0:
        return 0.0, 0.0
    grid = range(waits["start"].min(), waits["end"].max(), step_ns)

    def open_at(df: pl.DataFrame) -> list[int]:
        s, e = sorted(df["start"].to_list()), sorted(df["end"].to_list())
        return [bisect.bisect_right(s, g) - bisect.bisect_right(e, g) for g in grid]

    idle, waiting = open_at(slices), open_at(waits)
    return sum(waiting) * step_ns / 1e9, sum(min(w, i) for w, i in zip(waiting, idle)) * step_ns / 1e9


def measure(d: Path, setting: dict, cpus: int, extra: dict[str, str] | None = None, seed: int = 0) -> tuple[str, dict]:
    """Replay the capture under `d` (its `cap/`) and compare: the
    baseline, the other Linux scheduler model, the recorded placement and
    the host's scheduling groups the other way round; `extra` are `--set`
    settings for every replay, `seed` their `--seed`."""
    cap = d / "cap"
    policy = baseline_policy(Capture(cap))
    # the other Linux scheduler model on the same capture, to compare
    sched, _, spin = policy.partition("+")
    other = ("fair" if sched == "eevdf" else "eevdf") + (f"+{spin}" if spin else "")
    placed = f"{policy}+recorded"
    extra = dict(extra or {})
    ms = replay_capture(cap, [policy, other, placed], d / "rep", settings=extra or None, seed=seed)
    f, g, h = ms[policy]["fidelity"], ms[other]["fidelity"], ms[placed]["fidelity"]
    mode = ms[policy]["host"]["sched_groups_mode"]
    flip = "off" if mode == "recorded" else "recorded"
    grouped = replay_capture(cap, [policy], d / "rep-groups", settings={**extra, "sched_groups": flip}, seed=seed)[policy]["fidelity"]
    # each CPU at its recorded speed over time (unless asked for already)
    speeds = extra.get("cpu_speed", "off") != "markers"
    sped = replay_capture(cap, [policy], d / "rep-speed", settings={**extra, "cpu_speed": "markers"}, seed=seed)[policy]["fidelity"] if speeds else f
    states = pl.read_parquet(cap / "model" / "vcpu_states.parquet")
    wait_s, stranded_s = stranded_wait(cap, states)
    on_cpu = per_vm_on_cpu(states)
    k = setting["vcpus"]
    n = 2 * k[0] if len(k) == 1 else sum(k)
    sizes = "" if len(k) == 1 else f", VMs of {'+'.join(map(str, k))} vCPUs"
    label = f"{setting['clock']} clock, {setting['lock']} lock, {setting['vm_sessions']} sessions, {n / cpus:.0f}x ({n} vCPUs on {cpus} CPUs{sizes})"
    return label, {
        "capture": d.name,
        "policy": policy,
        "cpu_time_err_pct": f["cpu_time_err_pct"],
        "throughput_err_pct": f["throughput_err_pct"],
        "passed": f["passed"],
        "other_policy": other,
        "other_cpu_time_err_pct": g["cpu_time_err_pct"],
        "other_throughput_err_pct": g["throughput_err_pct"],
        "recorded_placement_cpu_time_err_pct": h["cpu_time_err_pct"],
        "recorded_placement_throughput_err_pct": h["throughput_err_pct"],
        "groups_mode": mode,
        "groups_flipped": flip,
        "groups_cpu_time_err_pct": grouped["cpu_time_err_pct"],
        "groups_throughput_err_pct": grouped["throughput_err_pct"],
        "cpu_speed_cpu_time_err_pct": sped["cpu_time_err_pct"],
        "cpu_speed_throughput_err_pct": sped["throughput_err_pct"],
        "recorded_wait_s": wait_s,
        "recorded_wait_with_idle_cpu_s": stranded_s,
        "sibling_wakeup_preemption_pct": f.get("diagnostics", {}).get("sibling_wakeup_preemption_pct"),
        "vcpu_migrations": f.get("diagnostics", {}).get("vcpu_migrations"),
        # per vCPU (vm/index), its recorded CPU time, to compare
        # recordings of one setting with each other thread by thread
        "vcpus": vcpu_cpu_s(cap),
        # per VM, to compare recordings of one setting with each other
        "vms": {
            vm: {
                "recorded_throughput_per_s": m["recorded_throughput_per_s"],
                "replayed_throughput_per_s": m["throughput_per_s"],
                "recorded_spin_s": m["recorded_spin_s"],
                "replayed_spin_s": m["spin_s"],
                "recorded_cpu_per_useful": cpu_per_useful(*on_cpu.get(vm, (0.0, 0.0))),
                "replayed_cpu_per_useful": cpu_per_useful(m["cpu_s"] - m["spin_s"], m["spin_s"]),
            }
            for vm, m in ms[policy]["vms"].items()
        },
    }


def vcpu_cpu_s(cap: Path) -> dict[str, float]:
    """Each vCPU's recorded CPU time (s), keyed `vm/index`: the same
    vCPU of another recording of one setting has the same key."""
    th = pl.read_parquet(cap / "model" / "threads.parquet").filter(pl.col("role") == "vcpu").select("tid", "vm", "vcpu")
    sl = pl.read_parquet(cap / "model" / "cpu_slices.parquet").join(th, on="tid")
    return {f"{vm}/{v}": ns / 1e9 for vm, v, ns in sl.group_by("vm", "vcpu").agg(pl.col("dur").sum()).iter_rows()}


#: the noise floor's measures: (name, the pairwise gap between two
#: recordings, the replay's gap from its own recording)
def _thread_gap(a: dict, b: dict) -> float | None:
    gaps = [abs(b["vcpus"][k] - v) / v * 100 for k, v in a.get("vcpus", {}).items() if v and k in b.get("vcpus", {})]
    return max(gaps) if gaps else None


FLOOR_MEASURES = (
    ("worst-thread CPU time", _thread_gap, lambda r: r["cpu_time_err_pct"]),
    ("worst-VM throughput", lambda a, b: worst_vm_gap(a["vms"], b["vms"], "recorded_throughput_per_s", "recorded_throughput_per_s"), lambda r: r["throughput_err_pct"]),
    ("CPU per useful second", lambda a, b: worst_vm_gap(a["vms"], b["vms"], "recorded_cpu_per_useful", "recorded_cpu_per_useful"), lambda r: worst_vm_gap(r["vms"], r["vms"], "recorded_cpu_per_useful", "replayed_cpu_per_useful")),
)


def _p90(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(0.9 * (len(s) - 1))))]


def noise_floor(runs: list[dict]) -> dict | None:
    """The gate against the noise floor for one setting's captures: per
    measure, the distribution of differences between pairs of its
    recordings (ordered pairs) and of each replay's error against its own
    recording, their medians and p90s, and the ratios replay / recordings.
    The replay passes when no ratio is above 1: it is no farther from its
    recording than the recordings are from each other. None with fewer
    than two captures."""
    if len(runs) < 2:
        return None
    out: dict = {"captures": len(runs), "measures": {}}
    verdicts = []
    for name, pair_gap, replay_err in FLOOR_MEASURES:
        spread = [g for a, b in itertools.permutations(runs, 2) if (g := pair_gap(a, b)) is not None]
        errs = [e for r in runs if (e := replay_err(r)) is not None]
        if not spread or not errs:
            continue
        m = {
            "recordings_median_pct": round(statistics.median(spread), 2),
            "recordings_p90_pct": round(_p90(spread), 2),
            "replay_median_pct": round(statistics.median(errs), 2),
            "replay_p90_pct": round(_p90(errs), 2),
        }
        m["median_ratio"] = round(m["replay_median_pct"] / m["recordings_median_pct"], 2) if m["recordings_median_pct"] else None
        m["p90_ratio"] = round(m["replay_p90_pct"] / m["recordings_p90_pct"], 2) if m["recordings_p90_pct"] else None
        m["within"] = m["replay_median_pct"] <= m["recordings_median_pct"] and m["replay_p90_pct"] <= m["recordings_p90_pct"]
        verdicts.append(m["within"])
        out["measures"][name] = m
    out["within"] = bool(verdicts) and all(verdicts)
    return out


def per_vm_on_cpu(states: pl.DataFrame) -> dict[str, tuple[float, float]]:
    """Per VM, its vCPUs' recorded (guest, spinning) seconds on a CPU
    (`states`: the capture's vcpu_states)."""
    sums = states.filter(pl.col("state").is_in(["guest", "spinning"])).group_by("vm").agg(
        (pl.col("dur").filter(pl.col("state") == "guest").sum() / 1e9).alias("guest"),
        (pl.col("dur").filter(pl.col("state") == "spinning").sum() / 1e9).alias("spin"),
    )
    return {vm: (guest, spin) for vm, guest, spin in sums.iter_rows()}


def cpu_per_useful(useful_s: float, spin_s: float) -> float | None:
    """CPU seconds a VM's vCPUs spent per second of useful guest work: 1
    without spinning. Unlike throughput it does not move with the
    machine's speed, so recordings made at different times compare."""
    return (useful_s + spin_s) / useful_s if useful_s > 0 else None


def worst_vm_gap(a: dict, b: dict, key_a: str, key_b: str) -> float | None:
    """The largest relative difference (%) over the VMs of `b[key_b]` from
    `a[key_a]` (two rows' `vms`)."""
    gaps = [abs(b[vm][key_b] - a[vm][key_a]) / a[vm][key_a] * 100 for vm in a if vm in b and a[vm][key_a] and b[vm][key_b] is not None]
    return max(gaps) if gaps else None


def recording_spread(runs: list[dict], key: str) -> float | None:
    """How far two recordings of one setting are apart: the median, over
    ordered pairs of its captures, of the worst VM's difference in `key`.
    The floor under what a replay of one of them can be held to when the
    workload's outcome turns on microscopic timing."""
    gaps = [g for a, b in itertools.permutations(runs, 2) if (g := worst_vm_gap(a["vms"], b["vms"], key, key)) is not None]
    return statistics.median(gaps) if gaps else None


def replay_gap(runs: list[dict]) -> float | None:
    """The same measure between each replay and its own recording."""
    gaps = [g for r in runs if (g := worst_vm_gap(r["vms"], r["vms"], "recorded_cpu_per_useful", "replayed_cpu_per_useful")) is not None]
    return statistics.median(gaps) if gaps else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--levels", default="1,2,3", help="vCPUs per VM (2 VMs); 1+3: a 1-vCPU and a 3-vCPU VM")
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--work-clocks", default="count", help="the lab's burst clocks to record with (count: fixed work, no system calls; cpu: fixed work, reading the thread CPU clock; wall: bursts shrink when preempted)")
    ap.add_argument("--vm-sessions", default="shared", choices=["shared", "own"], help="the VMs share the lab's session (one autogroup) or each has its own")
    ap.add_argument("--locks", default="spin,pv", help="the lab's locks to record with (spin: native; pv: paravirtual, halting)")
    ap.add_argument("--runs", type=int, default=1, help="captures per setting (each recorded anew); the summary gives medians")
    ap.add_argument("--keep-over", type=float, default=None, metavar="PCT", help="keep the captures (raw, imported, replays) whose baseline misses by more than PCT%% (worst of CPU time and throughput) under benchmarks/out/fidelity-kept/, to study them")
    ap.add_argument("--replay-kept", default=None, metavar="DIR", help="record nothing: replay again the captures kept under DIR (by --keep-over; --keep-over -1 keeps every capture), to compare replay changes on the same captures")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a `cratrace replay --set` setting for every replay (to compare model parameters on the same kept captures)")
    ap.add_argument("--seed", type=int, default=0, help="the replays' --seed (the engine's random draws: newidle balancing's odds, for one)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    bad = [s for s in a.set if "=" not in s]
    if bad:
        ap.error(f"--set {bad[0]}: expected KEY=VALUE")
    extra = dict(s.split("=", 1) for s in a.set)
    cpus = os.cpu_count() or 1
    res = {}
    kept = Path(__file__).parent / "out" / "fidelity-kept"
    if a.replay_kept:
        # the same captures again (after a replay change): no recording
        for d in sorted(p.parent for p in Path(a.replay_kept).glob("*/setting.json")):
            setting = json.loads((d / "setting.json").read_text())
            shutil.rmtree(d / "rep", ignore_errors=True)
            shutil.rmtree(d / "rep-groups", ignore_errors=True)
            shutil.rmtree(d / "rep-speed", ignore_errors=True)
            label, row = measure(d, setting, cpus, extra, a.seed)
            res.setdefault(label, []).append(row)
    settings = [(c, lk, tuple(int(n) for n in k.split("+"))) for c in a.work_clocks.split(",") for lk in a.locks.split(",") for k in a.levels.split(",")]
    recordings = [] if a.replay_kept else [s for s in settings for _ in range(a.runs)]
    for clock, lock_kind, k in recordings:
        d = Path(tempfile.mkdtemp(prefix="cratrace-fid-"))
        try:
            setting = {"clock": clock, "lock": lock_kind, "vcpus": list(k), "vm_sessions": a.vm_sessions}
            with open("/tmp/cratrace-tracing.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                cc.collect(d / "raw", "kvm-sched", duration=a.seconds + 5, perf_stat=False, command=LabParams(vms=2, vcpus=k if len(k) > 1 else k[0], duration_s=a.seconds, work_clock=clock, lock=lock_kind, vm_sessions=a.vm_sessions).argv(executable()))
            (d / "setting.json").write_text(json.dumps(setting))
            build_model(import_capture([d / "raw"], d / "cap"))
            label, f = measure(d, setting, cpus, extra, a.seed)
            res.setdefault(label, []).append(f)
            if a.keep_over is not None and max(f["cpu_time_err_pct"], f["throughput_err_pct"]) > a.keep_over:
                kept.mkdir(parents=True, exist_ok=True)
                shutil.move(str(d), kept / d.name)
                print(f"kept {kept / d.name}: {f['cpu_time_err_pct']:.1f} / {f['throughput_err_pct']:.1f}%", flush=True)
        finally:
            shutil.rmtree(d, ignore_errors=True)
    floors = {lvl: noise_floor(runs) for lvl, runs in res.items()}
    if a.json:
        print(json.dumps({"captures": res, "noise_floor": floors}, indent=2))
        return
    for lvl, runs in res.items():
        for f in runs:
            print(
                f"{lvl}, {f['policy']}: worst thread CPU-time error {f['cpu_time_err_pct']:.1f}%, worst VM throughput error {f['throughput_err_pct']:.1f}% -> {'within' if f['passed'] else 'outside'} 5%; "
                f"({f['other_policy']}: {f['other_cpu_time_err_pct']:.1f}% / {f['other_throughput_err_pct']:.1f}%; "
                f"+recorded: {f['recorded_placement_cpu_time_err_pct']:.1f}% / {f['recorded_placement_throughput_err_pct']:.1f}%; "
                f"groups {f['groups_flipped']}: {f['groups_cpu_time_err_pct']:.1f}% / {f['groups_throughput_err_pct']:.1f}%; "
                f"CPU speeds read: {f['cpu_speed_cpu_time_err_pct']:.1f}% / {f['cpu_speed_throughput_err_pct']:.1f}%); "
                f"recorded vCPU runnable wait {f['recorded_wait_s']:.2f} thread-s, {f['recorded_wait_with_idle_cpu_s']:.2f} of it with a CPU idle; "
                f"wakeups preempting a running sibling: recorded {_pct(f, 'recorded')}, replayed {_pct(f, 'replayed')}; "
                f"vCPU moves between CPUs: recorded {_moves(f, 'recorded')}, replayed {_moves(f, 'replayed')}; "
                f"throughput replayed against recorded {_signed(f)}, spinning {_spin_ratio(f)}"
            )
    if any(len(runs) > 1 for runs in res.values()):
        print("medians (worst thread CPU-time / worst VM throughput error):")
        for lvl, runs in res.items():
            print(f"  {lvl}, {runs[0]['policy']} (groups {'/'.join(sorted({r['groups_mode'] for r in runs}))}): {_median(runs, 'cpu_time_err_pct'):.1f}% / {_median(runs, 'throughput_err_pct'):.1f}% over {len(runs)} captures; {runs[0]['other_policy']}: {_median(runs, 'other_cpu_time_err_pct'):.1f}% / {_median(runs, 'other_throughput_err_pct'):.1f}%; "
                  f"+recorded: {_median(runs, 'recorded_placement_cpu_time_err_pct'):.1f}% / {_median(runs, 'recorded_placement_throughput_err_pct'):.1f}%; "
                  f"groups {'/'.join(sorted({r['groups_flipped'] for r in runs}))}: {_median(runs, 'groups_cpu_time_err_pct'):.1f}% / {_median(runs, 'groups_throughput_err_pct'):.1f}%; "
                  f"CPU speeds read: {_median(runs, 'cpu_speed_cpu_time_err_pct'):.1f}% / {_median(runs, 'cpu_speed_throughput_err_pct'):.1f}%, {sum(max(r['cpu_speed_cpu_time_err_pct'], r['cpu_speed_throughput_err_pct']) <= 5 for r in runs)} of {len(runs)} within 5% ({sum(r['passed'] for r in runs)} without)")
        print("which way the replays miss (median over the captures' VMs): throughput replayed against recorded, and spinning replayed / recorded:")
        for lvl, runs in res.items():
            vms = [v for r in runs for v in r.get("vms", {}).values()]
            tput = [_signed_pct(v) for v in vms if v["recorded_throughput_per_s"]]
            spun = [v for v in vms if v["recorded_spin_s"] > 0]
            if tput:
                spin = f"{statistics.median(v['replayed_spin_s'] / v['recorded_spin_s'] for v in spun):.2f}, less than recorded for {sum(v['replayed_spin_s'] < v['recorded_spin_s'] for v in spun)} of {len(spun)} VMs" if spun else "n/a (no spinning recorded)"
                print(f"  {lvl}: throughput {statistics.median(tput):+.1f}%, spinning {spin}")
        print("the gate against the noise floor (per setting: the replays' errors against their own recordings, and the recordings' differences from each other; median / p90, ratio replay / recordings; within: no ratio above 1):")
        for lvl, fl in floors.items():
            if fl is None:
                continue
            parts = [f"{name} {m['replay_median_pct']:.1f}/{m['replay_p90_pct']:.1f}% vs {m['recordings_median_pct']:.1f}/{m['recordings_p90_pct']:.1f}% (x{m['median_ratio']}/x{m['p90_ratio']})" for name, m in fl["measures"].items()]
            print(f"  {lvl} ({fl['captures']} captures): {'; '.join(parts)} -> {'within' if fl['within'] else 'above'} the noise floor")
        print("recordings of one setting against each other (median over pairs of the worst VM's difference), and each replay against its recording:")
        for lvl, runs in res.items():
            if len(runs) > 1 and all("vms" in r for r in runs):
                print(f"  {lvl}: recorded throughput {_fmt(recording_spread(runs, 'recorded_throughput_per_s'))}, "
                      f"CPU per useful second {_fmt(recording_spread(runs, 'recorded_cpu_per_useful'))} between recordings; "
                      f"{_fmt(replay_gap(runs))} replay to recording")


def _signed_pct(vm: dict) -> float:
    """A VM's replayed throughput against its recorded one, signed (%)."""
    return (vm["replayed_throughput_per_s"] / vm["recorded_throughput_per_s"] - 1) * 100


def _signed(f: dict) -> str:
    gaps = [_signed_pct(v) for v in f.get("vms", {}).values() if v["recorded_throughput_per_s"]]
    return "n/a" if not gaps else "/".join(f"{g:+.1f}%" for g in gaps)


def _spin_ratio(f: dict) -> str:
    vms = list(f.get("vms", {}).values())
    rec, rep = sum(v["recorded_spin_s"] for v in vms), sum(v["replayed_spin_s"] for v in vms)
    return "none recorded" if rec <= 0 else f"{rep / rec:.2f} of the recorded"


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _fmt(pct: float | None) -> str:
    return "n/a" if pct is None else f"{pct:.1f}%"


def _moves(f: dict, side: str) -> str:
    v = (f.get("vcpu_migrations") or {}).get(side)
    return "n/a" if v is None else str(v)


def _pct(f: dict, side: str) -> str:
    v = (f.get("sibling_wakeup_preemption_pct") or {}).get(side)
    return "n/a" if v is None else f"{v:.0f}%"


if __name__ == "__main__":
    main()
