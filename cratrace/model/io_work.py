"""`io_work`: host work done on behalf of each VM, per window.

Worker threads (vhost, iothreads; netback/blkback in a Xen dom0) are
charged to their VM by the threads table; their CPU time per window comes
from cpu_slices. Packets and bytes come from net_dev_xmit /
netif_receive_skb on devices a VM owns (`vnet*`/`tap*` devices named in
the inventory), block requests from block_rq_issue by worker threads.
NET softirq time on other threads cannot be attributed and goes to the
common pool (vm null).

On Xen (xentrace) there are no dom0 threads to see: dom0's running time in
each window is split among the guests by their grant page exchanges in it
(grant map for guest Tx, grant transfer for guest Rx; Cherkasova & Gardner
2005, the proxy papers/billing.md names). Windows without exchanges leave
dom0's time unattributed.
"""

from __future__ import annotations

import polars as pl

from cratrace.model.frames import conform, empty, top_buffer

NET_SOFTIRQS = (2, 3)  # NET_TX, NET_RX


def _windows(df: pl.DataFrame, window_ns: int, t0: int) -> pl.DataFrame:
    return df.with_columns(((pl.col("start") - t0) // window_ns * window_ns + t0).alias("window_start"))


def _clip_to_windows(s: pl.DataFrame, window_ns: int, t0: int) -> pl.DataFrame:
    """Split intervals at window boundaries."""
    s = s.with_columns(((pl.col("start") - t0) // window_ns).alias("_w0"), ((pl.col("end") - 1 - t0) // window_ns).alias("_w1"))
    s = s.with_columns(pl.int_ranges("_w0", pl.col("_w1") + 1).alias("_w")).explode("_w")
    ws = pl.col("_w") * window_ns + t0
    return s.with_columns(
        ws.alias("window_start"), (pl.min_horizontal("end", ws + window_ns) - pl.max_horizontal("start", ws)).alias("cpu_ns")
    ).drop("_w0", "_w1", "_w")


def xen_grant_proxy(grants: pl.LazyFrame, vcpu_states: pl.DataFrame, span: tuple[int, int], window_ns: int) -> pl.DataFrame | None:
    """dom0 running time per window, split by each guest's page exchanges."""
    t0, _ = span
    ex = grants.filter(pl.col("op").is_in(["map", "transfer"]) & (pl.col("dom") != 0)).select(pl.col("ts").alias("start"), "dom", "op").collect()
    d0 = vcpu_states.filter((pl.col("vm") == "dom0") & (pl.col("state") == "guest")).select("start", "end")
    if ex.height == 0 or d0.height == 0:
        return None
    ex = _windows(ex, window_ns, t0).group_by("window_start", "dom", "op").agg(pl.len().cast(pl.Int64).alias("packets"))
    ex = ex.with_columns((pl.col("packets") / pl.col("packets").sum().over("window_start")).alias("share"))
    run = _clip_to_windows(d0, window_ns, t0).group_by("window_start").agg(pl.col("cpu_ns").sum().alias("dom0_ns"))
    j = ex.join(run, on="window_start")
    return j.select(
        "window_start",
        pl.concat_str(pl.lit("dom"), pl.col("dom").cast(pl.String)).alias("vm"),
        pl.lit(None, pl.Int64).alias("worker_tid"),
        pl.lit("dom0").alias("worker"),
        pl.lit("netback").alias("kind"),
        pl.when(pl.col("op") == "map").then(pl.lit("tx")).otherwise(pl.lit("rx")).alias("direction"),
        (pl.col("dom0_ns") * pl.col("share")).round().cast(pl.Int64).alias("cpu_ns"),
        "packets",
    )


def io_work(ev: dict[str, pl.LazyFrame], threads: pl.DataFrame, slices: pl.DataFrame, span: tuple[int, int], window_ns: int = 100_000_000, vcpu_states: pl.DataFrame | None = None) -> pl.DataFrame:
    t0, _ = span
    parts = []
    if "xen_grant" in ev and vcpu_states is not None:
        xen = xen_grant_proxy(ev["xen_grant"], vcpu_states, span, window_ns)
        if xen is not None:
            parts.append(xen)
    workers = threads.filter(pl.col("role") == "io-worker").select("tid", "vm", pl.col("comm").alias("worker"))
    if workers.height and slices.height:
        w = slices.join(workers, on="tid").select("tid", "vm", "worker", "start", "end")
        w = _clip_to_windows(w, window_ns, t0)
        kind = pl.when(pl.col("worker").str.starts_with("vhost")).then(pl.lit("vhost")).when(pl.col("worker").str.contains("netback|^vif")).then(pl.lit("netback")).when(pl.col("worker").str.contains("blkback")).then(pl.lit("blkback")).otherwise(pl.lit("iothread"))
        parts.append(w.group_by("window_start", "vm", "tid", "worker").agg(pl.col("cpu_ns").sum()).with_columns(pl.col("tid").alias("worker_tid"), kind.alias("kind"), pl.lit(None, pl.String).alias("direction")))
    # softirq NET time: common pool
    if "softirq_entry" in ev and "softirq_exit" in ev:
        en = top_buffer(ev["softirq_entry"]).filter(pl.col("vec").is_in(NET_SOFTIRQS)).select("cpu", pl.col("ts").alias("start"), "vec").collect().sort("start")
        ex = top_buffer(ev["softirq_exit"]).filter(pl.col("vec").is_in(NET_SOFTIRQS)).select("cpu", pl.col("ts").alias("end"), "vec").collect().sort("end")
        if en.height and ex.height:
            sirq = en.join_asof(ex, left_on="start", right_on="end", by=["cpu", "vec"], strategy="forward", check_sortedness=False).drop_nulls("end")
            sirq = _clip_to_windows(sirq.select("start", "end", "vec"), window_ns, t0)
            parts.append(
                sirq.group_by("window_start", "vec").agg(pl.col("cpu_ns").sum()).with_columns(
                    pl.lit(None, pl.String).alias("vm"),
                    pl.lit(None, pl.Int64).alias("worker_tid"),
                    pl.when(pl.col("vec") == 3).then(pl.lit("NET_RX")).otherwise(pl.lit("NET_TX")).alias("worker"),
                    pl.lit("softirq").alias("kind"),
                    pl.when(pl.col("vec") == 3).then(pl.lit("rx")).otherwise(pl.lit("tx")).alias("direction"),
                )
            )
    # packets and bytes per worker thread and direction
    for name, direction in (("net_dev_xmit", "tx"), ("netif_receive_skb", "rx")):
        if name not in ev or workers.height == 0:
            continue
        pk = top_buffer(ev[name]).select(pl.col("ts").alias("start"), pl.col("pid").cast(pl.Int64).alias("tid"), pl.col("len").cast(pl.Int64).alias("bytes")).collect()
        pk = _windows(pk.join(workers, on="tid"), window_ns, t0)
        parts.append(
            pk.group_by("window_start", "vm", "tid", "worker").agg(pl.len().cast(pl.Int64).alias("packets"), pl.col("bytes").sum()).with_columns(
                pl.col("tid").alias("worker_tid"), pl.lit("vhost").alias("kind"), pl.lit(direction).alias("direction"), pl.lit(0, pl.Int64).alias("cpu_ns")
            )
        )
    if not parts:
        return empty("io_work")
    df = pl.concat([conform(p.with_columns((pl.col("window_start") + window_ns).alias("window_end")), "io_work") for p in parts])
    df = df.with_columns(pl.col("packets").fill_null(0), pl.col("bytes").fill_null(0), pl.col("requests").fill_null(0), pl.col("cpu_ns").fill_null(0))
    # every key column: rows of one window, VM and worker (a Xen domain's
    # rx and tx share a null worker_tid) came out of group_by in any order
    return df.sort("window_start", "vm", "worker_tid", "worker", "kind", "direction", nulls_last=True)
