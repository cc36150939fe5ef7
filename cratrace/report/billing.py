"""Per-VM billing: direct CPU + host work done on its behalf + a declared
share of the common pool (Woo 2012; ../shared/papers/billing.md).

Per window, each VM's attributed host work (io_work rows with a VM: D,
per guest direction) is charged to it; the common pool (rows with no VM:
K) is split among the VMs by a rule:

* ``proportional`` (default): in proportion to attributed time;
* ``packets`` / ``bytes``: in proportion to the VM's packets or bytes;
* ``equal``: equally among the VMs with I/O in the window;
* ``unallocated``: not split, reported as its own line.

A window whose VMs have none of what the rule weighs (``bytes`` on Xen,
whose grant records carry no lengths; ``packets`` with only block work)
is split by the next that they have (bytes, then packets, then attributed
time), and the reconciliation says so (``rule_fallbacks``).

The excess is the paper's ``(U - S) / S``, given twice: ``excess_pct``
over the VM's own direct CPU, and ``excess_per_cpu_s_pct`` over one
CPU-second per second, the denominator of the thesis's "11%" (a 1-vCPU
CPU-bound VM; billing.md §6.8).

Every nanosecond of host work lands in exactly one place, so
``sum(VM bills) + unallocated common + residual = host total``.
"""

from __future__ import annotations

from typing import Literal

import polars as pl

BillingRule = Literal["proportional", "packets", "bytes", "equal", "unallocated"]
RULES = ("proportional", "packets", "bytes", "equal", "unallocated")
#: what each rule weighs, then what it falls back on in a window whose VMs have none of it
WEIGHTS = {"proportional": ("cpu_ns", "packets"), "packets": ("packets", "cpu_ns"), "bytes": ("bytes", "packets", "cpu_ns")}
#: one CPU-second per second: the thesis's denominator of the excess
CPU_SECOND_MS_PER_S = 1000.0


def _with_columns(io_work: pl.DataFrame) -> pl.DataFrame:
    """io_work with the columns billing reads (a frame built by hand may lack some)."""
    add = [pl.lit(d, t).alias(c) for c, d, t in (("direction", None, pl.String), ("packets", 0, pl.Int64), ("bytes", 0, pl.Int64)) if c not in io_work.columns]
    return io_work.with_columns(add) if add else io_work


def common_shares(io_work: pl.DataFrame, rule: BillingRule, fallbacks: dict[str, int] | None = None) -> pl.DataFrame:
    """(vm, common_share_ns) and the unallocated remainder as vm = null.
    `fallbacks` (if given) counts the windows split by a fallback weight."""
    if rule not in RULES:
        from cratrace.errors import UsageError

        raise UsageError(f"billing rule {rule!r}: allowed {', '.join(RULES)}")
    io_work = _with_columns(io_work)
    att = io_work.filter(pl.col("vm").is_not_null()).group_by("window_start", "vm").agg(pl.col("cpu_ns").sum(), pl.col("packets").sum(), pl.col("bytes").sum())
    com = io_work.filter(pl.col("vm").is_null()).group_by("window_start").agg(pl.col("cpu_ns").sum().alias("common_ns"))
    if com.height == 0:
        return pl.DataFrame(schema={"vm": pl.String, "common_share_ns": pl.Float64})
    if rule == "unallocated" or att.height == 0:
        return pl.DataFrame({"vm": [None], "common_share_ns": [float(com["common_ns"].sum())]}, schema={"vm": pl.String, "common_share_ns": pl.Float64})
    if rule == "equal":
        w = att.filter((pl.col("cpu_ns") > 0) | (pl.col("packets") > 0)).with_columns(pl.lit(1.0).alias("w"))
    else:
        # the rule's weight, or in a window where it is zero for every VM the next one
        keys = WEIGHTS[rule]
        w = att.with_columns(*(pl.col(k).cast(pl.Float64).sum().over("window_start").alias(f"_tot_{k}") for k in keys))
        pick = pl.when(pl.col(f"_tot_{keys[0]}") > 0).then(pl.lit(keys[0]))
        for k in keys[1:]:
            pick = pick.when(pl.col(f"_tot_{k}") > 0).then(pl.lit(k))
        w = w.with_columns(pick.alias("_key"))
        value = pl.when(pl.col("_key") == keys[0]).then(pl.col(keys[0]).cast(pl.Float64))
        for k in keys[1:]:
            value = value.when(pl.col("_key") == k).then(pl.col(k).cast(pl.Float64))
        w = w.with_columns(value.alias("w"))
        if fallbacks is not None:
            used = w.join(com, on="window_start").filter(pl.col("_key").is_not_null() & (pl.col("_key") != keys[0])).group_by("_key").agg(pl.col("window_start").n_unique())
            for k, n in used.iter_rows():
                fallbacks[k] = fallbacks.get(k, 0) + int(n)
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

    ``direct_cpu_ns``: CPU of each VM's vCPU threads, their own (network
    interrupts on top of them are common work, not theirs).
    ``host_total_ns``: all busy host CPU outside the VMs' own (io workers,
    interrupts, host threads); what is neither attributed nor common is
    the residual.
    """
    prices = prices or {}
    io_work = _with_columns(io_work)
    fallbacks: dict[str, int] = {}
    by_vm = io_work.filter(pl.col("vm").is_not_null())
    att = by_vm.group_by("vm").agg(
        pl.col("cpu_ns").sum().alias("attributed_ns"),
        *(pl.col("cpu_ns").filter(pl.col("direction") == d).sum().alias(f"attributed_{d}_ns") for d in ("rx", "tx")),
        pl.col("packets").sum(),
        *(pl.col("packets").filter(pl.col("direction") == d).sum().alias(f"packets_{d}") for d in ("rx", "tx")),
        pl.col("bytes").sum(),
        *(pl.col("bytes").filter(pl.col("direction") == d).sum().alias(f"bytes_{d}") for d in ("rx", "tx")),
    )
    shares = common_shares(io_work, rule, fallbacks)
    vms = sorted(set(direct_cpu_ns) | set(att["vm"].to_list()))
    base = pl.DataFrame({"vm": vms, "direct_ns": [float(direct_cpu_ns.get(v, 0)) for v in vms]}, schema={"vm": pl.String, "direct_ns": pl.Float64})
    df = base.join(att, on="vm", how="left").join(shares.filter(pl.col("vm").is_not_null()), on="vm", how="left").fill_null(0)
    per_s = 1e6 * max(duration_s, 1e-12)  # ns → ms per second
    df = df.with_columns(
        (pl.col("direct_ns") / per_s).alias("direct_ms_per_s"),
        *((pl.col(f"attributed{d}_ns") / per_s).alias(f"attributed{d}_ms_per_s") for d in ("", "_rx", "_tx")),
        (pl.col("common_share_ns") / per_s).alias("common_share_ms_per_s"),
    ).with_columns(
        (pl.col("attributed_ms_per_s") + pl.col("common_share_ms_per_s")).alias("host_work_ms_per_s"),
    ).with_columns(
        (pl.col("direct_ms_per_s") + pl.col("host_work_ms_per_s")).alias("usage_ms_per_s"),
        # (U - S) / S, S the VM's own direct CPU ...
        pl.when(pl.col("direct_ms_per_s") > 0).then(100 * pl.col("host_work_ms_per_s") / pl.col("direct_ms_per_s")).alias("excess_pct"),
        pl.col("direct_ms_per_s").alias("excess_denominator_ms_per_s"),
        # ... and S one CPU-second per second, as the thesis's 11%
        (100 * pl.col("host_work_ms_per_s") / CPU_SECOND_MS_PER_S).alias("excess_per_cpu_s_pct"),
    )
    price_cpu_s = float(prices.get("cpu_second", 1.0))
    df = df.with_columns((pl.col("usage_ms_per_s") / 1000 * duration_s * price_cpu_s).alias("bill"))
    unalloc = float(shares.filter(pl.col("vm").is_null())["common_share_ns"].sum()) if shares.height else 0.0
    attributed = float(df["attributed_ns"].sum())
    common_total = float(io_work.filter(pl.col("vm").is_null())["cpu_ns"].sum())
    host_work = attributed + common_total
    total = float(host_total_ns) if host_total_ns is not None else host_work
    residual = total - host_work
    rec = {
        "rule": rule,
        "duration_s": duration_s,
        "vm_host_work_ms_per_s": float(df["host_work_ms_per_s"].sum()),
        "common_ms_per_s": common_total / per_s,
        "common_unallocated_ms_per_s": unalloc / per_s,
        "residual_ms_per_s": residual / per_s,
        "host_total_ms_per_s": total / per_s,
        # every ns of common work shared out or left unallocated, and no
        # more host work billed than the host did
        "reconciles": abs(float(df["attributed_ns"].sum() + df["common_share_ns"].sum()) + unalloc + residual - total) < 1e-6 * max(total, 1) and residual >= -1e-6 * max(total, 1),
        "price_per_cpu_second": price_cpu_s,
        "excess_denominator": "excess_pct: the VM's own direct CPU; excess_per_cpu_s_pct: one CPU-second per second (Woo 2012's 11%)",
        "rule_fallbacks": {k: f"{n} windows split by {k} (no {WEIGHTS[rule][0]} in them)" for k, n in fallbacks.items()} if rule in WEIGHTS else {},
    }
    cols = (
        "vm", "direct_ms_per_s", "attributed_ms_per_s", "attributed_rx_ms_per_s", "attributed_tx_ms_per_s", "common_share_ms_per_s", "host_work_ms_per_s",
        "usage_ms_per_s", "excess_pct", "excess_denominator_ms_per_s", "excess_per_cpu_s_pct", "packets", "packets_rx", "packets_tx", "bytes", "bytes_rx", "bytes_tx", "bill",
    )
    return df.select(cols), rec
