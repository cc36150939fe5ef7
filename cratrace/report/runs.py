"""The runs a report compares: the recorded capture and each replay, each
as the same canonical tables plus headline figures."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from cratrace import _native
from cratrace.capture import Capture
from cratrace.errors import CaptureError, UsageError
from cratrace.model.frames import in_order, shift_within

#: the columns of a table the report reads, where it reads fewer than all
#: (the markers' text and fields were a tenth of a report's memory)
READ_COLUMNS = {"markers": ["ts", "name", "vm", "vcpu"]}


@dataclass
class Run:
    """A run's model tables (read when first asked for, and kept until
    released) and its headline figures."""

    name: str
    sources: dict[str, pl.LazyFrame]
    duration_s: float
    metrics: dict = field(default_factory=dict)
    _read: dict[str, pl.DataFrame] = field(default_factory=dict, repr=False)

    def table(self, name: str) -> pl.DataFrame:
        if name not in self._read:
            lf = self.sources.get(name)
            if lf is not None and name in READ_COLUMNS:
                lf = lf.select(READ_COLUMNS[name])
            self._read[name] = lf.collect() if lf is not None else pl.DataFrame()
        return self._read[name]

    def scan(self, name: str) -> pl.LazyFrame | None:
        """The table as a query (None when the run has none): figures that
        need a few columns of it, or a few rows, need not hold it whole."""
        return self.sources.get(name)

    def release(self) -> None:
        """Let go of the tables read so far (read again if asked for)."""
        self._read.clear()


def wakeup_latency_us(states: pl.LazyFrame | pl.DataFrame | None) -> dict[str, float | None]:
    """Percentiles of runnable time right after a block (wakeup → run): a
    `preempted` segment whose vCPU's segment before it was `blocked` or
    `halted`. Timelines are gap-free, so that segment ends where the
    preempted one starts, and only those three states need reading (the
    whole timeline took 250 MB for 3.8 M segments)."""
    none: dict[str, float | None] = {"p50": None, "p95": None, "p99": None}
    if states is None:
        return none
    asleep = ("blocked", "halted")
    s = states.lazy().filter(pl.col("state").is_in(["preempted", *asleep])).select("vm", "vcpu", "state", "start", "end", "dur").collect(engine="streaming")
    if s.height == 0:
        return none
    s = in_order(s, "vm", "vcpu", "start")
    keys = ["vm", "vcpu"]
    woke = (pl.col("state") == "preempted") & shift_within("state", keys, 1).is_in(asleep) & (shift_within("end", keys, 1) == pl.col("start"))
    lat = s.filter(woke.fill_null(False))["dur"] / 1e3
    if lat.len() == 0:
        return none
    return {f"p{q}": round(float(lat.quantile(q / 100)), 3) for q in (50, 95, 99)}


def vm_windows(states: pl.LazyFrame, marks: pl.LazyFrame | None, marker: str) -> dict[str, tuple[int, int, int]]:
    """Per VM, (its first vCPU's start, its last transaction's end, its
    transactions): the window a VM's throughput is measured over, in the
    recording as in every replay (`cratrace.replay.metrics`). A vCPU that
    starts blocked or halted starts when that ends."""
    asleep = ("blocked", "halted")
    first = (
        states.filter(~pl.col("state").is_in(asleep))
        .group_by("vm")
        .agg(pl.col("start").min())
        .collect(engine="streaming")
    )
    out: dict[str, tuple[int, int, int]] = {}
    if marks is None:
        return out
    last = marks.filter(pl.col("name") == marker).group_by("vm").agg(pl.col("ts").max(), pl.len()).collect(engine="streaming")
    starts = dict(first.iter_rows())
    for vm, ts, n in last.iter_rows():
        if vm in starts:
            out[vm] = (int(starts[vm]), int(ts), int(n))
    return out


def recorded_run(cap: Capture, marker: str = "txn_end") -> Run:
    r = Run("recorded", dict(cap.model), 0.0)
    lo, hi = cap.meta.get("time_range_ns") or [0, 1]
    dur = max((hi - lo) / 1e9, 1e-9)
    states, marks = r.scan("vcpu_states"), r.scan("markers")
    vms = {}
    if states is not None:
        windows = vm_windows(states, marks, marker)
        # running and spinning time per VM, the VMs in name order, summed
        # as the timeline streams past: it is not held whole (3.8 M
        # segments took 290 MB read, and a filter inside the aggregation
        # 390 MB more)
        per = (
            states.select(
                "vm",
                pl.when(pl.col("state").is_in(["guest", "vmm", "spinning"])).then(pl.col("dur")).otherwise(0).alias("run"),
                pl.when(pl.col("state") == "spinning").then(pl.col("dur")).otherwise(0).alias("spin"),
            )
            .group_by("vm")
            .agg(pl.col("run").sum(), pl.col("spin").sum())
            .collect(engine="streaming")
            .sort("vm")
        )
        for vm, run, spin in per.iter_rows():
            first, last, n = windows.get(vm, (0, 0, 0))
            tp = n / max((last - first) / 1e9, 1e-9) if n else (run - spin) / 1e9 / dur
            vms[vm] = {"cpu_s": run / 1e9, "spin_s": spin / 1e9, "marks": n, "throughput_per_s": tp}
    # the host's throughput: its VMs' transactions per second, summed
    host_tp = sum(v["throughput_per_s"] for v in vms.values() if v["marks"])
    sl = r.table("cpu_slices")
    # a Xen capture has no host threads' slices: the CPUs it recorded
    pcpus = int(sl["cpu"].max() + 1) if sl.height else int(cap.meta.get("cpus") or 1)
    busy = sl.filter(pl.col("tid") != 0)["dur"].sum() / 1e9 if sl.height else 0
    guest = sum(v["cpu_s"] - v["spin_s"] for v in vms.values())
    U = busy / (pcpus * dur) if dur else 0
    host = {"pcpus": pcpus, "etr": host_tp, "itr": host_tp / U if U else None, "guest_util_pct": 100 * guest / (pcpus * dur), "busy_pct": 100 * U}
    r.duration_s, r.metrics = dur, {"vms": vms, "host": host, "fidelity": None}
    return r


def replay_runs(out: Path) -> list[Run]:
    """The runs under `cratrace replay`'s output directory `out`, one per
    policy (`OUT/<policy>/metrics.json` and its model tables)."""
    out = Path(out)
    if not out.is_dir():
        raise UsageError(f"--replays {out}: not a directory (give the -o OUT of `cratrace replay`)")
    dirs = sorted(p for p in out.iterdir() if (p / "metrics.json").is_file())
    if not dirs:
        raise UsageError(f"--replays {out}: holds no replay (no OUT/<policy>/metrics.json); give the -o OUT of `cratrace replay`")
    runs = []
    for d in dirs:
        try:
            m = json.loads((d / "metrics.json").read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CaptureError(f"{d / 'metrics.json'}: damaged ({e})") from None
        paths = sorted((d / "model").glob("*.parquet"))
        for p in paths:
            _native.parquet_rows(p)  # a damaged table: a one-line error naming it, before any is read
        tables = {p.stem: pl.scan_parquet(p) for p in paths}
        runs.append(Run(m.get("policy", d.name), tables, float(m.get("duration_s") or 1), m))
    return runs
