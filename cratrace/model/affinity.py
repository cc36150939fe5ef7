"""Which CPUs each thread was allowed to run on.

From the capture's host.json when the collector read them (each VM
thread's `Cpus_allowed_list`), else inferred from the trace for vCPU
threads: a vCPU that ran only on a set of CPUs, smaller than the host,
and stayed waiting in its run queue while a CPU outside the set was idle
long enough that Linux's load balancing (newidle and periodic, every few
milliseconds) would have pulled it, was not allowed there. A vCPU that
merely never left one CPU in a busy host says nothing: balanced load
stays put.
"""

from __future__ import annotations

import polars as pl

#: inferred only from vCPUs that ran this many stretches...
MIN_RUNS = 20
#: ...and waited beside an idle CPU outside their set this long, in all
#: (and this share of their waiting)
MIN_IDLE_WAIT_NS = 5_000_000
MIN_IDLE_WAIT_SHARE = 0.05


def parse_cpulist(text: str) -> list[int]:
    """Linux's CPU list format (`0-3,8,10-11`) as sorted CPU numbers."""
    out: set[int] = set()
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        a, sep, b = part.partition("-")
        if not a.isdigit() or (sep and not b.isdigit()):
            raise ValueError(f"not a CPU list: {text!r}")
        out.update(range(int(a), int(b) + 1) if sep else [int(a)])
    return sorted(out)


def cpulist(cpus) -> str:
    """CPU numbers as Linux's CPU list (`0-3,8`)."""
    cs = sorted(set(int(c) for c in cpus))
    runs: list[list[int]] = []
    for c in cs:
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def recorded(affinity: dict | None, ncpus: int) -> pl.DataFrame:
    """(tid, allowed_cpus, affinity_evidence) of host.json's affinity
    ({tid: CPU list}); a list of every CPU is no restriction."""
    rows = []
    for tid, cpus in (affinity or {}).items():
        try:
            allowed = parse_cpulist(cpus) if isinstance(cpus, str) else sorted(int(c) for c in cpus)
        except (TypeError, ValueError):
            continue
        if allowed and not (ncpus and set(range(ncpus)) <= set(allowed)):
            rows.append((int(tid), cpulist(allowed), "host.json"))
    return pl.DataFrame(rows, schema={"tid": pl.Int64, "allowed_cpus": pl.String, "affinity_evidence": pl.String}, orient="row")


def inferred(states: pl.DataFrame | pl.LazyFrame, slices: pl.DataFrame, ncpus: int) -> pl.DataFrame:
    """(tid, allowed_cpus, affinity_evidence) inferred from the vCPU
    timelines (`states`: tid, state, start, end, pcpu) and the CPUs' idle
    slices (see the module's rule)."""
    empty = pl.DataFrame(schema={"tid": pl.Int64, "allowed_cpus": pl.String, "affinity_evidence": pl.String})
    if ncpus < 2:
        return empty
    # lazily, the columns each step reads: filtering the whole timeline
    # copied its strings too (3 of 5 s of a 10 M-event model's affinity)
    lf = states.lazy()
    running = lf.select("tid", "pcpu").filter(pl.col("pcpu").is_not_null() & pl.col("tid").is_not_null())
    # runs per (thread, CPU) first: a list of each thread's distinct CPUs
    # from every row of it took three times as long
    sets = running.group_by("tid", "pcpu").len().group_by("tid").agg(pl.col("pcpu").sort().alias("cpus"), pl.col("len").sum().cast(pl.UInt32).alias("runs"))
    # streamed: a long capture's timeline is read a row group at a time
    # (collected whole, its two columns were 550 MB of 87 M segments)
    sets = sets.filter((pl.col("runs") >= MIN_RUNS) & (pl.col("cpus").list.len() < ncpus)).collect(engine="streaming")
    if sets.height == 0:
        return empty
    idle = slices.filter(pl.col("tid") == 0).select("cpu", "start", "end")
    waits = lf.select("tid", "state", "start", "end").filter(pl.col("state") == "preempted").collect(engine="streaming").join(sets.select("tid", "cpus"), on="tid")
    rows = []
    for (tid,), w in waits.group_by(["tid"]):
        allowed = set(w["cpus"][0])
        outside = idle.filter(~pl.col("cpu").is_in(list(allowed)))
        waited = int((w["end"] - w["start"]).sum())
        if outside.height == 0 or waited == 0:
            continue
        # time it waited while some CPU outside its set idled (the union
        # of those CPUs' idle time, so two idle CPUs do not count twice)
        beside = _overlap(w.select("start", "end"), _union(outside.select("start", "end")))
        if beside >= MIN_IDLE_WAIT_NS and beside >= MIN_IDLE_WAIT_SHARE * waited:
            rows.append((int(tid), cpulist(allowed), "trace"))
    return pl.DataFrame(rows, schema=empty.schema, orient="row")


def _union(iv: pl.DataFrame) -> pl.DataFrame:
    """Intervals merged where they overlap or touch."""
    iv = iv.sort("start")
    grp = (pl.col("start") > pl.col("end").cum_max().shift(1)).fill_null(True).cum_sum()
    return iv.group_by(grp.alias("_g")).agg(pl.col("start").min(), pl.col("end").max()).drop("_g").sort("start")


def _overlap(a: pl.DataFrame, b: pl.DataFrame) -> int:
    """Total time the intervals of `a` overlap those of `b` (each set
    disjoint within itself): the sum over `a` of F(end) - F(start), where
    F(t) is how much of `b` lies before t (the last `b` interval to begin
    at or before t: the lengths of those before it, and its part before
    t). Two as-of joins, not a Python loop over every interval."""
    if a.height == 0 or b.height == 0:
        return 0
    b = b.sort("start").with_columns((pl.col("end") - pl.col("start")).cum_sum().shift(1, fill_value=0).alias("_before"))

    def before(col: str) -> int:
        pts = a.select(pl.col(col).alias("t")).sort("t")
        j = pts.join_asof(b, left_on="t", right_on="start", strategy="backward", check_sortedness=False)
        return int(j.select((pl.col("_before") + pl.min_horizontal("t", "end") - pl.col("start")).fill_null(0).sum()).item())

    return before("end") - before("start")
