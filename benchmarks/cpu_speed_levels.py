"""How fast each CPU of the recording host ran, over time: the evidence
behind `--set cpu_speed=markers` (cratrace/replay/cpu_speed.py).

The lab's vCPUs do the same work in every transaction (a counted loop),
so a transaction's guest time is the speed of the CPU it ran on. For each
capture kept by `replay_fidelity.py`, this prints:

- per half second, each CPU's median transaction (µs): on a host whose
  cores are shared, levels that change every second or so, per CPU;
- how far apart (median |ln ratio|) a transaction is from the one before
  it on the same CPU, from the nearest in time on another CPU, and from
  one drawn at random: if the speed belongs to the CPU and the time, the
  first is small and the other two are not.

    python benchmarks/cpu_speed_levels.py benchmarks/out/fidelity-kept-s37 [...]
    python benchmarks/cpu_speed_levels.py --quick   # on a generated capture (the test suite's run)
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import polars as pl

from cratrace.replay.cpu_speed import transactions

HALF_S = 500_000_000


def levels(tx: pl.DataFrame, t0: int) -> pl.DataFrame:
    """Per half second and CPU, the median transaction in µs."""
    return tx.group_by(((pl.col("end") - t0) // HALF_S).alias("half_s"), "cpu").agg((pl.col("guest_ns").median() / 1e3).round(0).alias("us")).sort("half_s", "cpu")


def spreads(tx: pl.DataFrame, seed: int = 0) -> dict[str, float]:
    """Median |ln ratio| of a transaction to the previous one on its CPU,
    to the nearest in time on another CPU, and to a random one."""
    tx = tx.sort("end").with_columns(pl.col("guest_ns").log().alias("ln"))
    same = tx.with_columns(pl.col("ln").shift(1).over("cpu").alias("o")).drop_nulls("o")
    other = []
    for (c,), mine in tx.group_by(["cpu"]):
        rest = tx.filter(pl.col("cpu") != c).select("end", pl.col("ln").alias("o"))
        if rest.height:
            other.append(mine.join_asof(rest, on="end", strategy="nearest"))
    rand = tx.with_columns(tx["ln"].sample(fraction=1.0, shuffle=True, seed=seed).alias("o"))
    med = lambda f: float((f["ln"] - f["o"]).abs().median())  # noqa: E731
    return {"same_cpu": med(same), "other_cpu": med(pl.concat(other)) if other else float("nan"), "random": med(rand)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("kept", type=Path, nargs="*", help="directories of captures kept by replay_fidelity.py")
    ap.add_argument("--quick", action="store_true", help="read one short generated capture instead (kvm-heavy-spin, laid out as a kept one)")
    a = ap.parse_args()
    if not a.kept and not a.quick:
        ap.error("give the directories of kept captures, or --quick")
    if a.quick:
        from benchmarks.quick import kept_captures, scratch

        tmp = scratch("cpu-speed")
        try:
            report([kept_captures(tmp)])
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    report(a.kept)


def report(kept: list[Path]) -> None:
    for d in sorted(p.parent for k in kept for p in k.glob("*/setting.json")):
        setting = json.loads((d / "setting.json").read_text())
        model = d / "cap" / "model"
        states = pl.read_parquet(model / "vcpu_states.parquet").filter(pl.col("state") == "guest")
        marks = pl.read_parquet(model / "markers.parquet").filter(pl.col("name") == "txn_end").select("vm", "vcpu", "ts")
        tx = transactions(states, marks)
        if tx.height < 10:
            continue
        t0 = int(states["start"].min())
        lv = levels(tx, t0)
        per = " ".join(f"{h}:{'/'.join(str(int(u)) for u in g['us'])}" for (h,), g in lv.group_by("half_s", maintain_order=True))
        s = spreads(tx)
        print(f"{d.name} ({setting['lock']}, {setting['vcpus']} vCPUs/VM): |ln ratio| same CPU {s['same_cpu']:.3f}, other CPU {s['other_cpu']:.3f}, random {s['random']:.3f}; "
              f"median transaction per 0.5 s, CPU 0/1/… (µs): {per}")


if __name__ == "__main__":
    main()
