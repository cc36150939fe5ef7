"""Per-VM billing: direct CPU + host work done on its behalf + a declared
share of the common pool (Woo 2012; ../shared/papers/billing.md).

Per window, each VM's attributed host work (io_work rows with a VM) is
charged to it; the common pool (rows with no VM) is split among the VMs by
a rule:

* ``proportional`` (default): in proportion to attributed time;
* ``packets`` / ``bytes``: in proportion to the VM's packets or bytes;
* ``equal``: equally among the VMs with I/O in the window;
* ``unallocated``: not split, reported as its own line.

Every nanosecond of host work lands in exactly one place, so
``sum(VM bills) + unallocated common + residual = host total``.
"""

from __future__ import annotations

from typing import Literal

import polars as pl

BillingRule = Literal["proportional", "packets", "bytes", "equal", "unallocated"]
RULES = ("proportional", "packets", "bytes", "equal", "unallocated")


def common_shares(io_work: pl.DataFrame, rule: BillingRule) -> pl.DataFrame:
    """(vm, common_share_ns) and the unallocated remainder as vm = null."""
    if rule not in RULES:
        from cratrace.errors import UsageError

        raise UsageError(f"billing rule {rule!r}: allowed {', '.join(RULES)}")
    att = io_work.filter(pl.col("vm").is_not_null()).group_by("window_start", "vm").agg(pl.col("cpu_ns").sum(), pl.col("packets").sum(), pl.col("bytes").sum())
    com = io_work.filter(pl.col("vm").is_null()).group_by("window_start").agg(pl.col("cpu_ns").sum().alias("common_ns"))
    if com.height == 0:
        return pl.DataFrame(schema={"vm": pl.String, "common_share_ns": pl.Float64})
    if rule == "unallocated" or att.height == 0:
        return pl.DataFrame({"vm": [None], "common_share_ns": [float(com["common_ns"].sum())]}, schema={"vm": pl.String, "common_share_ns": pl.Float64})
    key = {"proportional": "cpu_ns", "packets": "packets", "bytes": "bytes", "equal": None}[rule]
    w = att.with_columns((pl.lit(1.0) if key is None else pl.col(key).cast(pl.Float64)).alias("w"))
    if key is None:
        w = w.filter((pl.col("cpu_ns") > 0) | (pl.col("packets") > 0))
    w = w.with_columns((pl.col("w") / pl.col("w").sum().over("window_start")).alias("frac"))
    j = com.join(w.select("window_start", "vm", "frac"), on="window_start", how="left")
    shared = j.filter(pl.col("frac").is_not_null() & pl.col("frac").is_not_nan()).group_by("vm").agg((pl.col("common_ns") * pl.col("frac")).sum().alias("common_share_ns"))
    # windows with common work but no VM to share it with stay unallocated
    lonely = j.filter(pl.col("frac").is_null() | pl.col("frac").is_nan()).group_by("window_start").agg(pl.col("common_ns").first())["common_ns"].sum()
    if lonely:
        shared = pl.concat([shared, pl.DataFrame({"vm": [None], "common_share_ns": [float(lonely)]}, schema=shared.schema)])
    return shared


def billing(direct_cpu_ns: dict[str, int], io_work: pl.DataFrame, duration_s: float, rule: BillingRule = "proportional", prices: dict[str, float] | None = None, host_total_ns: int | None = None) -> tuple[pl.DataFrame, dict]:
    """Per-VM bill rows and the host reconciliation.

    ``direct_cpu_ns``: CPU of each VM's vCPU threads. ``host_total_ns``:
    all busy host CPU outside the vCPUs (io workers, softirqs, host
    threads); what is neither attributed nor common is the residual.
    """
    prices = prices or {}
    att = io_work.filter(pl.col("vm").is_not_null()).group_by("vm").agg(pl.col("cpu_ns").sum().alias("attributed_ns"), pl.col("packets").sum(), pl.col("bytes").sum())
    shares = common_shares(io_work, rule)
    vms = sorted(set(direct_cpu_ns) | set(att["vm"].to_list()))
    base = pl.DataFrame({"vm": vms, "direct_ns": [float(direct_cpu_ns.get(v, 0)) for v in vms]}, schema={"vm": pl.String, "direct_ns": pl.Float64})
    df = base.join(att, on="vm", how="left").join(shares.filter(pl.col("vm").is_not_null()), on="vm", how="left").fill_null(0)
    per_s = 1e6 * max(duration_s, 1e-12)  # ns → ms per second
    df = df.with_columns(
        (pl.col("direct_ns") / per_s).alias("direct_ms_per_s"),
        (pl.col("attributed_ns") / per_s).alias("attributed_ms_per_s"),
        (pl.col("common_share_ns") / per_s).alias("common_share_ms_per_s"),
    ).with_columns(
        (pl.col("attributed_ms_per_s") + pl.col("common_share_ms_per_s")).alias("host_work_ms_per_s"),
    ).with_columns(
        (pl.col("direct_ms_per_s") + pl.col("host_work_ms_per_s")).alias("usage_ms_per_s"),
        pl.when(pl.col("direct_ms_per_s") > 0).then(100 * pl.col("host_work_ms_per_s") / pl.col("direct_ms_per_s")).alias("excess_pct"),
        pl.col("direct_ms_per_s").alias("excess_denominator_ms_per_s"),
    )
    price_cpu_s = float(prices.get("cpu_second", 1.0))
    df = df.with_columns((pl.col("usage_ms_per_s") / 1000 * duration_s * price_cpu_s).alias("bill"))
    unalloc = float(shares.filter(pl.col("vm").is_null())["common_share_ns"].sum()) if shares.height else 0.0
    attributed = float(df["attributed_ns"].sum())
    common_total = float(io_work.filter(pl.col("vm").is_null())["cpu_ns"].sum())
    host_work = attributed + common_total
    total = float(host_total_ns) if host_total_ns is not None else host_work
    rec = {
        "rule": rule,
        "duration_s": duration_s,
        "vm_host_work_ms_per_s": float(df["host_work_ms_per_s"].sum()),
        "common_unallocated_ms_per_s": unalloc / per_s,
        "residual_ms_per_s": (total - host_work) / per_s,
        "host_total_ms_per_s": total / per_s,
        "reconciles": abs(float(df["attributed_ns"].sum() + df["common_share_ns"].sum()) + unalloc + (total - host_work) - total) < 1e-6 * max(total, 1),
        "price_per_cpu_second": price_cpu_s,
    }
    return df.select("vm", "direct_ms_per_s", "attributed_ms_per_s", "common_share_ms_per_s", "host_work_ms_per_s", "usage_ms_per_s", "excess_pct", "excess_denominator_ms_per_s", "packets", "bytes", "bill"), rec
