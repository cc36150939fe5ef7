"""How close each replay came to its recording, and why it departs: the
fidelity gate's errors and the diagnostics metrics.json carries
(`cratrace/replay/diagnostics.py`), recorded beside replayed, one row a
replay. A user reading a miss sees where the replay's host behaved
differently from the real one without opening metrics.json."""

from __future__ import annotations

import polars as pl

from cratrace.report.runs import Run

#: (column stem, diagnostics key): each becomes a "rec" and a "rep" column
DIAGNOSTICS = (
    ("sibling preempt %", "sibling_wakeup_preemption_pct"),
    ("VM on one CPU %", "vm_cpu_concentration_pct"),
    ("vCPU moves", "vcpu_migrations"),
)

SCHEMA = {"run": pl.String, "gate": pl.String, "CPU-time err %": pl.Float64, "throughput err %": pl.Float64} | {
    f"{stem} {side}": pl.Float64 for stem, _ in DIAGNOSTICS for side in ("rec", "rep")
}


def _gate(f: dict) -> str:
    if not f.get("gate_applies"):
        return "n/a (not the capture's policy)"
    return "within" if f.get("passed") else "missed"


def fidelity_table(runs: list[Run]) -> pl.DataFrame:
    """One row per replay whose metrics have a fidelity section."""
    rows = []
    for r in runs:
        f = r.metrics.get("fidelity")
        if not f:
            continue
        d = f.get("diagnostics") or {}
        row = {"run": r.name, "gate": _gate(f), "CPU-time err %": f.get("cpu_time_err_pct"), "throughput err %": f.get("throughput_err_pct")}
        for stem, key in DIAGNOSTICS:
            pair = d.get(key) or {}
            row[f"{stem} rec"], row[f"{stem} rep"] = pair.get("recorded"), pair.get("replayed")
        rows.append(row)
    return pl.DataFrame(rows, schema=SCHEMA)
