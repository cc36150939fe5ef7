"""`faults`: EPT/NPT faults and async page faults per vCPU (postcopy).

Async page faults pair `kvm_async_pf_not_present` with the
`kvm_async_pf_ready` of the same token; the pair's latency is stored on
the not-present row.
"""

from __future__ import annotations

import polars as pl

from cratrace.model.frames import conform, empty, top_buffer, total_order

KINDS = {
    "kvm_page_fault": ("ept", "fault_address", None),
    "kvm_async_pf_not_present": ("apf-not-present", "gva", "token"),
    "kvm_async_pf_ready": ("apf-ready", "gva", "token"),
    "kvm_async_pf_completed": ("apf-completed", "gva", None),
    "kvm_try_async_get_page": ("async-get-page", "gva", None),
}


def faults(ev: dict[str, pl.LazyFrame], threads: pl.DataFrame) -> pl.DataFrame:
    parts = []
    for name, (kind, addr, token) in KINDS.items():
        if name not in ev:
            continue
        lf = top_buffer(ev[name])
        cols = lf.collect_schema().names()
        parts.append(
            lf.select(
                "ts",
                pl.col("pid").cast(pl.Int64).alias("tid"),
                pl.lit(kind).alias("kind"),
                (pl.col(addr).cast(pl.Int64) if addr in cols else pl.lit(None, pl.Int64)).alias("address"),
                (pl.col(token).cast(pl.Int64) if token and token in cols else pl.lit(None, pl.Int64)).alias("token"),
            ).collect()
        )
    if not parts:
        return empty("faults")
    df = pl.concat(parts).join(threads.select("tid", "vm", "vcpu"), on="tid", how="left")
    np_ = df.filter(pl.col("kind") == "apf-not-present").select("token", pl.col("ts").alias("np_ts"))
    rd = df.filter(pl.col("kind") == "apf-ready").group_by("token").agg(pl.col("ts").min().alias("rd_ts"))
    lat = np_.join(rd, on="token").select("token", "np_ts", (pl.col("rd_ts") - pl.col("np_ts")).alias("latency_ns")).filter(pl.col("latency_ns") >= 0)
    df = df.join(lat, left_on=["token", "ts"], right_on=["token", "np_ts"], how="left")
    return total_order(conform(df, "faults"), "ts")
