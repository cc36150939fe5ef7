"""Energy of a run from its CPU slices and a per-core power model.

Busy time draws its thread's own power when the capture says
(`threads.power_w`, at the host's highest recorded frequency, scaled by
the slice's frequency), else static + dynamic power (C·f·V² at the
slice's frequency, or the model's nominal frequency when the capture has
none); idle time draws the idle power. Busy energy goes to the VM whose thread ran (vCPUs
and the VM's I/O workers), other busy time is *unattributed*, idle is its
own row. The host total is summed per core independently, so the
conservation check is real.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl


@dataclass(frozen=True)
class PowerModel:
    static_w: float = 1.0
    idle_w: float = 0.5
    capacitance: float = 2.0  # W / (GHz · V²)
    volt: float = 1.0
    nominal_ghz: float = 2.0  # cratrace.replay.workload.NOMINAL_KHZ: a capture without frequencies

    def busy_w(self, ghz: pl.Expr, volt: pl.Expr | None = None) -> pl.Expr:
        v = pl.lit(self.volt) if volt is None else volt
        return self.static_w + self.capacitance * ghz * v**2


def energy(slices: pl.DataFrame, threads: pl.DataFrame, model: PowerModel = PowerModel(), core_volt: list[float] | None = None) -> tuple[pl.DataFrame, dict]:
    """Per-owner energy rows (owner = VM, 'idle' or 'unattributed') and totals.
    `core_volt`: each core's voltage as a replay ran it (the asymmetric
    pools' 1.40 / 0.65 V, from its metrics.json), else the model's; with
    the replay's slices carrying its cores' frequencies, a replay's energy
    is the engine's (static + C·f·V² busy, idle power idle)."""
    power = pl.col("power_w") if "power_w" in threads.columns else pl.lit(None, pl.Float64)
    s = slices.join(threads.select("tid", "vm", power.alias("power_w")), on="tid", how="left")
    ghz = (pl.col("freq_khz").cast(pl.Float64) / 1e6).fill_null(model.nominal_ghz)
    # a thread's own power (threads.power_w: at the host's highest recorded
    # frequency) scales with the frequency it ran at (P ∝ f at one voltage)
    top = s["freq_khz"].max() if "freq_khz" in s.columns and s["freq_khz"].drop_nulls().len() else None
    own = pl.col("power_w") * (ghz / (top / 1e6) if top else pl.lit(1.0))
    volt = pl.col("cpu").replace_strict(list(range(len(core_volt))), core_volt, default=model.volt, return_dtype=pl.Float64) if core_volt else None
    busy = pl.when(pl.col("power_w").is_not_null()).then(own).otherwise(model.busy_w(ghz, volt))
    # Each slice's energy in whole nanojoules (W x ns), summed as integers:
    # a multi-threaded sum of floats depends on how the rows were split
    # between threads, and the report's tables changed in their last
    # digits from one run to the next; integer sums do not.
    s = s.with_columns(
        pl.when(pl.col("tid") == 0).then(pl.lit("idle")).when(pl.col("vm").is_not_null()).then(pl.col("vm")).otherwise(pl.lit("unattributed")).alias("owner"),
        (pl.when(pl.col("tid") == 0).then(pl.lit(model.idle_w)).otherwise(busy) * pl.col("dur")).round().cast(pl.Int64).alias("_nj"),
    )
    joules = (pl.col("_nj").sum() / 1e9).alias("joules")
    # idle is always a row of its own, 0 J on a host that never idled
    owner_nj = pl.concat([s.group_by("owner").agg(pl.col("_nj").sum()), pl.DataFrame({"owner": ["idle"], "_nj": [0]}, schema={"owner": pl.String, "_nj": pl.Int64})]).group_by("owner").agg(pl.col("_nj").sum()).sort("owner")
    per_owner = owner_nj.select("owner", (pl.col("_nj") / 1e9).alias("joules"))
    # over time: 100 ms bins by slice start (slices are short next to a bin)
    t0 = s["start"].min() if s.height else 0
    series = s.with_columns(((pl.col("start") - t0) // 100_000_000 / 10).alias("t_s")).group_by("t_s", "owner").agg(joules).sort("t_s", "owner")
    per_core = s.group_by("cpu").agg(pl.col("_nj").sum()).sort("cpu").with_columns((pl.col("_nj") / 1e9).alias("joules"))
    total = int(per_core["_nj"].sum()) / 1e9
    # the owners' rows add up to the cores' total (each slice has one owner)
    parts = int(owner_nj["_nj"].sum()) / 1e9
    return per_owner, {"total_j": total, "parts_j": parts, "conserved": abs(total - parts) <= 1e-9 * max(total, 1.0), "per_core_j": per_core["joules"].to_list(), "series": series}
