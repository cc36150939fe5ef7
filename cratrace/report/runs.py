"""The runs a report compares: the recorded capture and each replay, each
as the same canonical tables plus headline figures."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from cratrace.capture import Capture
from cratrace.errors import CaptureError, UsageError


@dataclass
class Run:
    name: str
    tables: dict[str, pl.DataFrame]
    duration_s: float
    metrics: dict = field(default_factory=dict)

    def table(self, name: str) -> pl.DataFrame:
        return self.tables.get(name, pl.DataFrame())


def wakeup_latency_us(states: pl.DataFrame) -> dict[str, float | None]:
    """Percentiles of runnable time right after a block (wakeup → run)."""
    if states.height == 0:
        return {"p50": None, "p95": None, "p99": None}
    s = states.sort("vm", "vcpu", "start").with_columns(pl.col("state").shift(1).over("vm", "vcpu").alias("prev"))
    lat = s.filter((pl.col("state") == "preempted") & pl.col("prev").is_in(["blocked", "halted"]))["dur"] / 1e3
    if lat.len() == 0:
        return {"p50": None, "p95": None, "p99": None}
    return {f"p{q}": round(float(lat.quantile(q / 100)), 3) for q in (50, 95, 99)}


def recorded_run(cap: Capture, marker: str = "txn_end") -> Run:
    tables = {k: lf.collect() for k, lf in cap.model.items()}
    lo, hi = cap.meta.get("time_range_ns") or [0, 1]
    dur = max((hi - lo) / 1e9, 1e-9)
    st = tables.get("vcpu_states", pl.DataFrame())
    mk = tables.get("markers", pl.DataFrame())
    vms = {}
    if st.height:
        for vm, g in st.group_by("vm"):
            run = g.filter(pl.col("state").is_in(["guest", "vmm", "spinning"]))["dur"].sum()
            spin = g.filter(pl.col("state") == "spinning")["dur"].sum()
            n = mk.filter((pl.col("name") == marker) & (pl.col("vm") == vm[0])).height if mk.height else 0
            vms[vm[0]] = {"cpu_s": run / 1e9, "spin_s": spin / 1e9, "marks": n, "throughput_per_s": n / dur if n else (run - spin) / 1e9 / dur}
    ends = sum(v["marks"] for v in vms.values())
    sl = tables.get("cpu_slices", pl.DataFrame())
    # a Xen capture has no host threads' slices: the CPUs it recorded
    pcpus = int(sl["cpu"].max() + 1) if sl.height else int(cap.meta.get("cpus") or 1)
    busy = sl.filter(pl.col("tid") != 0)["dur"].sum() / 1e9 if sl.height else 0
    guest = sum(v["cpu_s"] - v["spin_s"] for v in vms.values())
    U = busy / (pcpus * dur) if dur else 0
    host = {"pcpus": pcpus, "etr": ends / dur, "itr": ends / (dur * U) if U else None, "guest_util_pct": 100 * guest / (pcpus * dur), "busy_pct": 100 * U}
    return Run("recorded", tables, dur, {"vms": vms, "host": host, "fidelity": None})


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
        tables = {p.stem: pl.read_parquet(p) for p in sorted((d / "model").glob("*.parquet"))}
        runs.append(Run(m.get("policy", d.name), tables, float(m.get("duration_s") or 1), m))
    return runs
