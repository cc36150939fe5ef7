"""Where in their work the running vCPUs were preempted, recorded and
replayed: the mechanism behind a native-spinlock replay's spin time.

A vCPU of the workload lab computes a burst, takes its VM's lock, works
`critical_ns` under it, releases and marks `txn_end`. Preempted inside
that critical section, it leaves its siblings spinning until it runs
again (lock-holder preemption); preempted in the burst, it costs nobody.
For each capture kept by `replay_fidelity.py --keep-over` (and replayed
there: its `rep/<policy>/`), this prints, recorded and replayed:

- the preemptions of a vCPU running guest code (not spinning) and the
  share of them that fell inside the critical section (the last
  `critical_ns` of guest time before its next `txn_end`), against the
  share that critical sections are of the guest time (uniform timing);
- the spin episodes of a millisecond or more (a spinner that waited out
  a preempted holder) and all the spinning, in seconds.

    python benchmarks/replay_fidelity.py --replay-kept benchmarks/out/fidelity-kept-s36   # replays first
    python benchmarks/lock_holder_preemption.py benchmarks/out/fidelity-kept-s36 [--policy eevdf]
    python benchmarks/lock_holder_preemption.py --quick   # on a generated capture, replayed here (the test suite's run)
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
from pathlib import Path

import polars as pl

LONG_SPIN_NS = 1_000_000


def preemption_positions(states: pl.DataFrame, markers: pl.DataFrame, critical_ns: dict[str, int]) -> tuple[int, int, float]:
    """(preemptions of running guest code, how many fell in a critical
    section, critical sections' share of guest time) from a timeline
    (`vcpu_states`) and its `markers`: a preemption's position is the
    vCPU's guest time left until its next `txn_end`."""
    s = (
        states.filter(pl.col("vm").is_not_null())
        .sort("tid", "start")
        .with_columns(pl.when(pl.col("state") == "guest").then(pl.col("dur")).otherwise(0).cum_sum().over("tid").alias("guest_at_end"))
    )
    pre = s.filter((pl.col("state") == "guest") & (pl.col("state").shift(-1).over("tid") == "preempted")).select("tid", "vm", pl.col("guest_at_end").alias("at"))
    # the guest time done when each txn_end was written: the stretch it
    # falls in, less that stretch's part after it
    ends = markers.filter(pl.col("name") == "txn_end").select("tid", "ts").sort("tid", "ts")
    seg = s.select("tid", "start", "end", "state", "guest_at_end").sort("tid", "start")
    at_mark = (
        ends.join_asof(seg, left_on="ts", right_on="start", by="tid", strategy="backward", check_sortedness=False)
        .filter(pl.col("guest_at_end").is_not_null())
        .select("tid", (pl.col("guest_at_end") - pl.when(pl.col("state") == "guest").then((pl.col("end") - pl.col("ts")).clip(0)).otherwise(0)).alias("mark_at"))
        .sort("tid", "mark_at")
    )
    crit = pl.DataFrame({"vm": list(critical_ns), "crit": list(critical_ns.values())}, schema={"vm": pl.String, "crit": pl.Int64})
    left = (
        pre.sort("tid", "at")
        .join_asof(at_mark, left_on="at", right_on="mark_at", by="tid", strategy="forward", check_sortedness=False)
        .filter(pl.col("mark_at").is_not_null())
        .join(crit, on="vm", how="left")
    )
    in_cs = left.filter(pl.col("mark_at") - pl.col("at") <= pl.col("crit")).height
    guest_ns = int(s.filter(pl.col("state") == "guest")["dur"].sum())
    cs_ns = sum(critical_ns.get(vm, 0) * n for vm, n in ends.join(s.select("tid", "vm").unique(), on="tid").group_by("vm").len().iter_rows())
    return left.height, in_cs, cs_ns / guest_ns if guest_ns else 0.0


def spins(episodes: pl.DataFrame) -> tuple[int, float]:
    """(spin episodes of LONG_SPIN_NS or more, all spinning in seconds)."""
    return int((episodes["dur"] >= LONG_SPIN_NS).sum()), float(episodes["dur"].sum()) / 1e9


def measure(d: Path, policy: str) -> dict[str, dict] | None:
    rep = d / "rep" / policy
    if not (rep / "metrics.json").exists():
        return None
    crit = json.loads((rep / "metrics.json").read_text()).get("critical_ns") or {}
    out = {}
    for side, model in (("recorded", d / "cap" / "model"), ("replayed", rep / "model")):
        n, in_cs, share = preemption_positions(pl.read_parquet(model / "vcpu_states.parquet"), pl.read_parquet(model / "markers.parquet"), crit)
        long_spins, spin_s = spins(pl.read_parquet(model / "spin_episodes.parquet"))
        out[side] = {"preemptions": n, "in_critical_section": in_cs, "critical_share_of_guest_time": share, "long_spins": long_spins, "spin_s": spin_s}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("kept", type=Path, nargs="*", help="directories of captures kept by replay_fidelity.py, replayed there")
    ap.add_argument("--policy", default="eevdf", help="the replay to compare (its rep/<policy>/); eevdf+recorded: the recorded placement")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="read one short generated capture instead (kvm-heavy-spin, laid out as a kept one and replayed under --policy)")
    a = ap.parse_args()
    if not a.kept and not a.quick:
        ap.error("give the directories of kept captures, or --quick")
    if a.quick:
        from benchmarks.quick import kept_captures, scratch

        tmp = scratch("lock-holder")
        try:
            report([kept_captures(tmp, a.policy)], a.policy, a.json)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    report(a.kept, a.policy, a.json)


def report(kept: list[Path], policy: str, as_json: bool) -> None:
    rows = {}
    for d in sorted(p.parent for k in kept for p in k.glob("*/setting.json")):
        setting = json.loads((d / "setting.json").read_text())
        if setting["lock"] != "spin":
            continue
        m = measure(d, policy)
        if m is None:
            continue
        k = setting["vcpus"]
        label = f"{setting['lock']} lock, {2 * k[0] if len(k) == 1 else sum(k)} vCPUs"
        rows.setdefault(label, []).append((d.name, m))
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    for label, runs in rows.items():
        for name, m in runs:
            r, p = m["recorded"], m["replayed"]
            print(f"{name} ({label}): preemptions in the critical section recorded {_share(r)}, replayed {_share(p)} "
                  f"(uniform: {100 * r['critical_share_of_guest_time']:.0f}%); spins of 1 ms or more {r['long_spins']} / {p['long_spins']}; "
                  f"spinning {r['spin_s']:.2f} / {p['spin_s']:.2f} s")
        spun = [m for _, m in runs if m["recorded"]["spin_s"] > 0]
        if not spun:
            continue
        frac = lambda side: statistics.median(100 * m[side]["in_critical_section"] / max(m[side]["preemptions"], 1) for m in spun)  # noqa: E731
        less = sum(m["replayed"]["spin_s"] < m["recorded"]["spin_s"] for m in spun)
        print(f"  {label}, median over {len(spun)} captures that spun: in the critical section recorded {frac('recorded'):.0f}%, replayed {frac('replayed'):.0f}%; "
              f"spinning replayed/recorded {statistics.median(m['replayed']['spin_s'] / m['recorded']['spin_s'] for m in spun):.2f}, less than recorded in {less}")


def _share(x: dict) -> str:
    return f"{x['in_critical_section']}/{x['preemptions']} ({100 * x['in_critical_section'] / max(x['preemptions'], 1):.0f}%)"


if __name__ == "__main__":
    main()
