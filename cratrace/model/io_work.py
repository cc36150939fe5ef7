"""`io_work`: host work done on behalf of each VM, per window.

Woo 2012's accounting (papers/billing.md): work the host does for one VM is
attributed to it (D, per direction, from the guest's side); network work
that serves no single VM (the NIC's interrupt, its NET_RX/NET_TX softirq)
is the common pool (K, rows with vm null).

KVM (ftrace). Worker threads (vhost, iothreads; netback/blkback in a Xen
dom0 traced with ftrace) are charged to their VM by the threads table;
their own work is their CPU time (cpu_slices) minus the network
interrupts that ran on top of them (`oncpu - irq`: billing.md §6.6).
A network interrupt is a NET softirq (`softirq_entry/exit` vec NET_TX or
NET_RX), a hardirq that raised one (`softirq_raise` inside its handler),
and the gap between such a hardirq's exit and the softirq it runs on the
way out (the next softirq on the CPU, no switch between); they are the
common pool wherever they ran, their rows naming the thread they
interrupted (`worker_tid`, 0 the idle task), so billing can take them off a
vCPU's direct CPU too. Other interrupts (timer ticks) stay with the thread
they interrupted, as the kernel's CPU accounting charges them.

Packets and bytes are a worker's `net_dev_xmit` (guest Rx: host to guest)
and `netif_receive_skb`/`netif_rx` (guest Tx) events. Its own time is split
between the directions by Woo's cost model, D_d = k_d x P_d (Fig. 4.4):
`k_rx` and `k_tx` fitted by non-negative least squares over the workers'
slices (own time against the slice's packets), pooled over the host.

Xen (xentrace). No dom0 threads to see: dom0's running intervals are its
work. In each, every guest's page exchanges are counted (grant map: guest
Tx; grant transfer: guest Rx; Cherkasova & Gardner 2005), and dom0's
running time per interval is fitted as `k_rx x Rx + k_tx x Tx + c`
(non-negative least squares over the intervals): a guest is charged
`k_d` per exchange, and the rest of each interval (the part that does not
grow with packets, Woo's Fig. 4.3) is common. With too few intervals, or
exchanges that do not vary, the fit cannot tell the two apart: dom0's time
is then split by exchanges as before, nothing common.
"""

from __future__ import annotations

import itertools

import polars as pl

from cratrace.model.frames import _union, conform, empty, top_buffer

NET_SOFTIRQS = (2, 3)  # NET_TX, NET_RX
SOFTIRQ_NAMES = {2: "NET_TX", 3: "NET_RX"}
#: events a worker logs per packet, by the guest's direction: the host
#: transmitting on the VM's tap/vif is the guest receiving (billing.md §6.1)
PACKET_EVENTS = (("net_dev_xmit", "rx"), ("netif_receive_skb", "tx"), ("netif_rx", "tx"))


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


def nnls(sums: dict[tuple[str, str], float], names: list[str], y: str = "y") -> dict[str, float] | None:
    """Least squares with every coefficient >= 0, from the cross sums
    (`sums[(a, b)]` = sum of a*b over the samples, `y` the response; a
    constant term is a column of ones). Small problems only: every subset
    of the columns is solved and the feasible one with the least residual
    kept. None if no subset can be solved."""
    best, best_rss = None, None
    for r in range(len(names), 0, -1):
        for sub in itertools.combinations(names, r):
            beta = _solve([[sums[_k(a, b)] for b in sub] for a in sub], [sums[_k(a, y)] for a in sub])
            if beta is None or any(b < 0 for b in beta):
                continue
            rss = sums[(y, y)] - 2 * sum(b * sums[_k(a, y)] for a, b in zip(sub, beta)) + sum(
                ba * bb * sums[_k(a, b)] for (a, ba), (b, bb) in itertools.product(zip(sub, beta), repeat=2)
            )
            if best_rss is None or rss < best_rss - 1e-9 * abs(sums[(y, y)]):
                best, best_rss = dict(zip(sub, beta)), rss
    if best is None:
        return None
    return {n: best.get(n, 0.0) for n in names}


def _k(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def _solve(a: list[list[float]], b: list[float]) -> list[float] | None:
    """Gaussian elimination with partial pivoting; None when singular."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    scale = max((abs(m[i][i]) for i in range(n)), default=0.0)
    if scale == 0:
        return None
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        if abs(m[p][c]) <= 1e-9 * scale:
            return None
        m[c], m[p] = m[p], m[c]
        for r in range(c + 1, n):
            f = m[r][c] / m[c][c]
            for k in range(c, n + 1):
                m[r][k] -= f * m[c][k]
    x = [0.0] * n
    for c in range(n - 1, -1, -1):
        x[c] = (m[c][n] - sum(m[c][k] * x[k] for k in range(c + 1, n))) / m[c][c]
    return x


def _cross_sums(df: pl.DataFrame, cols: list[str]) -> dict[tuple[str, str], float]:
    exprs = [(pl.col(a).cast(pl.Float64) * pl.col(b).cast(pl.Float64)).sum().alias(f"{a}\x00{b}") for a, b in itertools.combinations_with_replacement(cols, 2)]
    row = df.select(exprs).row(0, named=True)
    return {_k(*k.split("\x00")): float(v or 0.0) for k, v in row.items()}


def net_interrupts(ev: dict[str, pl.LazyFrame]) -> pl.DataFrame:
    """Network interrupt time per CPU as disjoint intervals (cpu, start,
    end, kind, worker): NET softirqs, the hardirqs that raised them, and
    the gap from such a hardirq's exit to the softirq it ran on its way
    out."""
    out_schema = {"cpu": pl.Int32, "start": pl.Int64, "end": pl.Int64, "kind": pl.String, "worker": pl.String}
    if "softirq_entry" not in ev or "softirq_exit" not in ev:
        return pl.DataFrame(schema=out_schema)
    s_all = top_buffer(ev["softirq_entry"]).select(pl.col("cpu").cast(pl.Int32), pl.col("ts").alias("s_start"), pl.col("vec").cast(pl.Int64)).collect().sort("s_start")
    ex = top_buffer(ev["softirq_exit"]).filter(pl.col("vec").is_in(NET_SOFTIRQS)).select(pl.col("cpu").cast(pl.Int32), pl.col("ts").alias("s_end"), pl.col("vec").cast(pl.Int64)).collect().sort("s_end")
    # the softirq entry before each one on its CPU (any vector)
    s_all = s_all.sort("cpu", "s_start").with_columns(pl.col("s_start").shift(1).over("cpu").alias("prev_soft")).sort("s_start")
    soft = s_all.filter(pl.col("vec").is_in(NET_SOFTIRQS)).join_asof(ex, left_on="s_start", right_on="s_end", by=["cpu", "vec"], strategy="forward", check_sortedness=False).drop_nulls("s_end")
    if soft.height == 0:
        return pl.DataFrame(schema=out_schema)
    parts = [soft.select("cpu", pl.col("s_start").alias("start"), pl.col("s_end").alias("end"), pl.lit("softirq").alias("kind"), pl.col("vec").replace_strict(SOFTIRQ_NAMES, return_dtype=pl.String).alias("worker"))]
    if "irq_handler_entry" in ev and "irq_handler_exit" in ev:
        he = top_buffer(ev["irq_handler_entry"]).select(pl.col("cpu").cast(pl.Int32), pl.col("ts").alias("h_start"), "irq", "name").collect().sort("h_start")
        hx = top_buffer(ev["irq_handler_exit"]).select(pl.col("cpu").cast(pl.Int32), pl.col("ts").alias("h_end"), "irq").collect().sort("h_end")
        hard = he.join_asof(hx, left_on="h_start", right_on="h_end", by=["cpu", "irq"], strategy="forward", check_sortedness=False).drop_nulls("h_end").sort("h_end")
        raised = None
        if "softirq_raise" in ev:
            rz = top_buffer(ev["softirq_raise"]).filter(pl.col("vec").is_in(NET_SOFTIRQS)).select(pl.col("cpu").cast(pl.Int32), pl.col("ts").alias("r_ts")).collect().sort("r_ts")
            # hardirqs with a NET raise inside their handler
            raised = rz.join_asof(hard.sort("h_start").select("cpu", "h_start", "h_end"), left_on="r_ts", right_on="h_start", by="cpu", strategy="backward", check_sortedness=False).filter(pl.col("r_ts") <= pl.col("h_end")).select("cpu", "h_start").unique()
        if hard.height:
            # the hardirq each NET softirq followed, and the last switch on its CPU
            j = soft.join_asof(hard.select("cpu", "h_start", "h_end", "name"), left_on="s_start", right_on="h_end", by="cpu", strategy="backward", check_sortedness=False).drop_nulls("h_end")
            if "sched_switch" in ev:
                sw = top_buffer(ev["sched_switch"]).select(pl.col("cpu").cast(pl.Int32), pl.col("ts").alias("sw_ts")).collect().sort("sw_ts")
                j = j.join_asof(sw, left_on="s_start", right_on="sw_ts", by="cpu", strategy="backward", check_sortedness=False)
            else:
                j = j.with_columns(pl.lit(None, pl.Int64).alias("sw_ts"))
            # run on the hardirq's way out: no switch and no other softirq since its exit
            on_exit = (pl.col("sw_ts").is_null() | (pl.col("sw_ts") < pl.col("h_end"))) & (pl.col("prev_soft").is_null() | (pl.col("prev_soft") < pl.col("h_end")))
            merged = j.filter(on_exit).select("cpu", "h_start", "h_end", "s_start", "name")
            if raised is not None:
                merged = merged.join(raised, on=["cpu", "h_start"], how="semi")
            nets = merged.select("cpu", "h_start", "h_end", "name")
            if raised is not None:
                nets = pl.concat([nets, hard.join(raised, on=["cpu", "h_start"], how="semi").select("cpu", "h_start", "h_end", "name")]).unique(["cpu", "h_start"])
            parts.append(nets.select("cpu", pl.col("h_start").alias("start"), pl.col("h_end").alias("end"), pl.lit("irq").alias("kind"), pl.col("name").alias("worker")))
            parts.append(merged.select("cpu", pl.col("h_end").alias("start"), pl.col("s_start").alias("end"), pl.lit("irq").alias("kind"), pl.col("name").alias("worker")))
    iv = pl.concat(parts).filter(pl.col("end") >= pl.col("start"))
    u = _union(iv.select("cpu", "start", "end"), ["cpu"]).rename({"o_start": "start", "o_end": "end"}).filter(pl.col("end") > pl.col("start")).sort("start")
    # each union interval named after the softirq inside it (or its hardirq)
    names = iv.sort("start").join_asof(u.select("cpu", pl.col("start").alias("u_start")), left_on="start", right_on="u_start", by="cpu", strategy="backward", check_sortedness=False)
    names = names.sort("cpu", "u_start", pl.col("kind") != "softirq", "start").group_by("cpu", "u_start", maintain_order=True).agg(pl.col("kind").first(), pl.col("worker").first())
    return u.join(names, left_on=["cpu", "start"], right_on=["cpu", "u_start"], how="left").select(list(out_schema)).cast(out_schema).sort("cpu", "start")


def on_threads(iv: pl.DataFrame, slices: pl.DataFrame) -> pl.DataFrame:
    """`iv` (cpu, start, end, ...) with the thread each ran on top of
    (`tid`; null where no slice covers it) and that slice's start."""
    if slices.height == 0:
        return iv.with_columns(pl.lit(None, pl.Int64).alias("tid"), pl.lit(None, pl.Int64).alias("slice_start"))
    sl = slices.select(pl.col("cpu").cast(pl.Int32), "tid", pl.col("start").alias("slice_start"), pl.col("end").alias("slice_end")).sort("slice_start")
    j = iv.sort("start").join_asof(sl, left_on="start", right_on="slice_start", by="cpu", strategy="backward", check_sortedness=False)
    inside = pl.col("start") < pl.col("slice_end")
    return j.with_columns(pl.when(inside).then(pl.col("tid")).alias("tid"), pl.when(inside).then(pl.col("slice_start")).alias("slice_start")).drop("slice_end")


def _packets(ev: dict[str, pl.LazyFrame], workers: pl.DataFrame) -> pl.DataFrame:
    """Each worker's packet events: (ts, tid, direction, bytes)."""
    parts = []
    for name, direction in PACKET_EVENTS:
        if name not in ev:
            continue
        pk = top_buffer(ev[name]).select(pl.col("ts"), pl.col("pid").cast(pl.Int64).alias("tid"), pl.col("len").cast(pl.Int64).alias("bytes")).collect()
        parts.append(pk.join(workers.select("tid"), on="tid", how="semi").with_columns(pl.lit(direction).alias("direction")))
    if not parts:
        return pl.DataFrame(schema={"ts": pl.Int64, "tid": pl.Int64, "bytes": pl.Int64, "direction": pl.String})
    return pl.concat(parts).sort("ts")


def _by_direction(df: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Packets and bytes per `keys`, rx and tx side by side."""
    return df.group_by(keys).agg(
        *(((pl.col("direction") == d).sum().cast(pl.Int64)).alias(f"p_{d}") for d in ("rx", "tx")),
        *((pl.when(pl.col("direction") == d).then(pl.col("bytes")).otherwise(0).sum().cast(pl.Int64)).alias(f"b_{d}") for d in ("rx", "tx")),
    )


def direction_costs(samples: pl.DataFrame) -> tuple[float, float]:
    """(k_rx, k_tx): ns per packet, fitted through the origin over samples
    (y, p_rx, p_tx); equal costs (a split by packets) if they cannot be
    told apart."""
    if samples.height:
        k = nnls(_cross_sums(samples, ["y", "p_rx", "p_tx"]), ["p_rx", "p_tx"])
        if k is not None and k["p_rx"] + k["p_tx"] > 0:
            return k["p_rx"], k["p_tx"]
    return 1.0, 1.0


def worker_rows(ev: dict[str, pl.LazyFrame], workers: pl.DataFrame, slices: pl.DataFrame, nets: pl.DataFrame, window_ns: int, t0: int) -> list[pl.DataFrame]:
    """Each worker's own time per window (its slices less the network
    interrupts on top of them), split by direction."""
    w = slices.join(workers, on="tid").select("tid", "vm", "worker", "cpu", "start", "end")
    if w.height == 0:
        return []
    on_w = nets.join(workers.select("tid"), on="tid", how="semi")
    own = pl.concat([
        _clip_to_windows(w.select("tid", "start", "end"), window_ns, t0).select("window_start", "tid", "cpu_ns"),
        _clip_to_windows(on_w.select("tid", "start", "end"), window_ns, t0).select("window_start", "tid", -pl.col("cpu_ns")),
    ]).group_by("window_start", "tid").agg(pl.col("cpu_ns").sum())
    pk = _packets(ev, workers)
    # the fit: per slice, own time against its packets
    per_slice = w.select("tid", "start", "end", (pl.col("end") - pl.col("start")).alias("y")).join(
        on_w.group_by("tid", "slice_start").agg((pl.col("end") - pl.col("start")).sum().alias("irq")), left_on=["tid", "start"], right_on=["tid", "slice_start"], how="left"
    ).with_columns((pl.col("y") - pl.col("irq").fill_null(0)).alias("y"))
    if pk.height:
        in_slice = pk.join_asof(per_slice.select("tid", pl.col("start").alias("s0"), pl.col("end").alias("s1")).sort("s0"), left_on="ts", right_on="s0", by="tid", strategy="backward", check_sortedness=False).filter(pl.col("ts") < pl.col("s1"))
        counts = _by_direction(in_slice, ["tid", "s0"])
        samples = per_slice.join(counts, left_on=["tid", "start"], right_on=["tid", "s0"]).filter((pl.col("p_rx") + pl.col("p_tx")) > 0)
    else:
        samples = pl.DataFrame()
    k_rx, k_tx = direction_costs(samples)
    per_win = _by_direction(_windows(pk.rename({"ts": "start"}), window_ns, t0), ["window_start", "tid"]) if pk.height else pl.DataFrame(schema={"window_start": pl.Int64, "tid": pl.Int64, "p_rx": pl.Int64, "p_tx": pl.Int64, "b_rx": pl.Int64, "b_tx": pl.Int64})
    j = own.join(per_win, on=["window_start", "tid"], how="full", coalesce=True).with_columns(pl.col("cpu_ns", "p_rx", "p_tx", "b_rx", "b_tx").fill_null(0))
    j = j.join(workers, on="tid").with_columns((pl.col("p_rx") * k_rx).alias("_e_rx"), (pl.col("p_tx") * k_tx).alias("_e_tx"))
    e = pl.col("_e_rx") + pl.col("_e_tx")
    rx_ns = pl.when(e > 0).then((pl.col("cpu_ns") * pl.col("_e_rx") / e).round().cast(pl.Int64))
    j = j.with_columns(rx_ns.alias("_rx_ns"))
    kind = pl.when(pl.col("worker").str.starts_with("vhost")).then(pl.lit("vhost")).when(pl.col("worker").str.contains("netback|^vif")).then(pl.lit("netback")).when(pl.col("worker").str.contains("blkback")).then(pl.lit("blkback")).otherwise(pl.lit("iothread"))
    base = [pl.col("window_start"), pl.col("vm"), pl.col("tid").alias("worker_tid"), pl.col("worker"), kind.alias("kind")]
    split = j.filter(e > 0)
    rows = [
        split.select(*base, pl.lit("rx").alias("direction"), pl.col("_rx_ns").alias("cpu_ns"), pl.col("p_rx").alias("packets"), pl.col("b_rx").alias("bytes")),
        split.select(*base, pl.lit("tx").alias("direction"), (pl.col("cpu_ns") - pl.col("_rx_ns")).alias("cpu_ns"), pl.col("p_tx").alias("packets"), pl.col("b_tx").alias("bytes")),
        # windows without packets: the worker's time, no direction
        j.filter(e <= 0).select(*base, pl.lit(None, pl.String).alias("direction"), "cpu_ns", pl.lit(0, pl.Int64).alias("packets"), pl.lit(0, pl.Int64).alias("bytes")),
    ]
    return [r for r in rows if r.height]


def common_rows(nets: pl.DataFrame, window_ns: int, t0: int) -> pl.DataFrame:
    """Network interrupt time per window and interrupted thread: the common pool."""
    c = _clip_to_windows(nets.select("tid", "kind", "worker", "start", "end"), window_ns, t0)
    return c.group_by("window_start", "tid", "kind", "worker").agg(pl.col("cpu_ns").sum()).select(
        "window_start", pl.lit(None, pl.String).alias("vm"), pl.col("tid").alias("worker_tid"), "worker", "kind", pl.lit(None, pl.String).alias("direction"), "cpu_ns"
    )


def xen_netback(grants: pl.LazyFrame, vcpu_states: pl.DataFrame | pl.LazyFrame, span: tuple[int, int], window_ns: int) -> pl.DataFrame | None:
    """dom0's running time per window: each guest's exchanges at the fitted
    per-exchange costs, the rest of each running interval common."""
    t0, _ = span
    ex = grants.filter(pl.col("op").is_in(["map", "transfer"]) & (pl.col("dom") != 0)).select(pl.col("ts"), pl.col("cpu").cast(pl.Int32), "dom", pl.when(pl.col("op") == "map").then(pl.lit("tx")).otherwise(pl.lit("rx")).alias("direction")).collect()
    runs = vcpu_states.lazy().filter((pl.col("vm") == "dom0") & (pl.col("state") == "guest")).select(pl.col("pcpu").cast(pl.Int32).alias("cpu"), "start", "end").collect().sort("start").with_row_index("run")
    if ex.height == 0 or runs.height == 0:
        return None
    # each exchange in the dom0 running interval it happened in
    ex = ex.sort("ts").join_asof(runs.select("cpu", "run", "start", pl.col("end").alias("run_end")), left_on="ts", right_on="start", by="cpu", strategy="backward", check_sortedness=False).filter(pl.col("ts") < pl.col("run_end"))
    per = ex.group_by("run", "dom").agg(*((pl.col("direction") == d).sum().cast(pl.Int64).alias(f"p_{d}") for d in ("rx", "tx")))
    tot = per.group_by("run").agg(pl.col("p_rx").sum(), pl.col("p_tx").sum())
    samples = runs.join(tot, on="run", how="left").with_columns(pl.col("p_rx", "p_tx").fill_null(0), (pl.col("end") - pl.col("start")).alias("y"), pl.lit(1.0).alias("one"))
    k = nnls(_cross_sums(samples, ["y", "p_rx", "p_tx", "one"]), ["p_rx", "p_tx", "one"]) if samples.height >= 4 else None
    if k is None or k["p_rx"] + k["p_tx"] <= 0:
        # no fit: all of dom0's time by exchanges (the proxy alone)
        k = {"p_rx": 1.0, "p_tx": 1.0, "one": 0.0}
        scale = samples.with_columns((pl.col("y") / (pl.col("p_rx") + pl.col("p_tx"))).alias("_s")).select("run", "_s")
    else:
        # dom0's time in a run is the guests' up to what it ran
        scale = samples.with_columns((pl.col("y") / (k["p_rx"] * pl.col("p_rx") + k["p_tx"] * pl.col("p_tx"))).clip(upper_bound=1.0).alias("_s")).select("run", "_s")
    # each run's parts (guest and direction, or common) as fractions of its time
    att = per.join(scale, on="run").join(samples.select("run", "y"), on="run")
    att = pl.concat([att.select("run", "dom", pl.lit(d).alias("direction"), (k[f"p_{d}"] * pl.col(f"p_{d}") * pl.col("_s") / pl.col("y")).alias("frac")) for d in ("rx", "tx")])
    # spread over the windows each run overlaps, in proportion to its time
    # there; the common part is what is left of dom0's time in the window
    pieces = _clip_to_windows(runs.select("run", "start", "end"), window_ns, t0).select("run", "window_start", "cpu_ns")
    guests = pieces.join(att, on="run").group_by("window_start", "dom", "direction").agg((pl.col("cpu_ns") * pl.col("frac")).sum().round().cast(pl.Int64).alias("cpu_ns"))
    dom0 = pieces.group_by("window_start").agg(pl.col("cpu_ns").sum().alias("dom0_ns"))
    common = dom0.join(guests.group_by("window_start").agg(pl.col("cpu_ns").sum().alias("_g")), on="window_start", how="left").select(
        "window_start", pl.lit(None, pl.Int64).alias("dom"), pl.lit(None, pl.String).alias("direction"), (pl.col("dom0_ns") - pl.col("_g").fill_null(0)).alias("cpu_ns")
    )
    # packets in the window they happened in
    pk = _windows(ex.select(pl.col("ts").alias("start"), "dom", "direction"), window_ns, t0).group_by("window_start", "dom", "direction").agg(pl.len().cast(pl.Int64).alias("packets"))
    out = pl.concat([guests, common]).join(pk, on=["window_start", "dom", "direction"], how="full", coalesce=True).with_columns(pl.col("cpu_ns", "packets").fill_null(0))
    return out.filter((pl.col("cpu_ns") > 0) | (pl.col("packets") > 0)).select(
        "window_start",
        pl.when(pl.col("dom").is_not_null()).then(pl.concat_str(pl.lit("dom"), pl.col("dom").cast(pl.String))).alias("vm"),
        pl.lit(None, pl.Int64).alias("worker_tid"),
        pl.lit("dom0").alias("worker"),
        pl.lit("netback").alias("kind"),
        "direction",
        "cpu_ns",
        "packets",
    )


def io_work(ev: dict[str, pl.LazyFrame], threads: pl.DataFrame, slices: pl.DataFrame, span: tuple[int, int], window_ns: int = 100_000_000, vcpu_states: pl.DataFrame | pl.LazyFrame | None = None) -> pl.DataFrame:
    t0, _ = span
    parts = []
    if "xen_grant" in ev and vcpu_states is not None:
        xen = xen_netback(ev["xen_grant"], vcpu_states, span, window_ns)
        if xen is not None:
            parts.append(xen)
    workers = threads.filter(pl.col("role") == "io-worker").select("tid", "vm", pl.col("comm").alias("worker"))
    nets = on_threads(net_interrupts(ev), slices)
    if workers.height and slices.height:
        parts += worker_rows(ev, workers, slices, nets, window_ns, t0)
    if nets.height:
        parts.append(common_rows(nets, window_ns, t0))
    if not parts:
        return empty("io_work")
    df = pl.concat([conform(p.with_columns((pl.col("window_start") + window_ns).alias("window_end")), "io_work") for p in parts])
    df = df.with_columns(pl.col("packets").fill_null(0), pl.col("bytes").fill_null(0), pl.col("requests").fill_null(0), pl.col("cpu_ns").fill_null(0))
    # every key column: rows of one window, VM and worker (a Xen domain's
    # rx and tx share a null worker_tid) came out of group_by in any order
    return df.sort("window_start", "vm", "worker_tid", "worker", "kind", "direction", nulls_last=True)
