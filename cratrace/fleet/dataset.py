"""A sweep's results as one Parquet dataset, declared here as data.

Layout of a sweep directory::

    SWEEP/sweep.json                         what was asked, and the runs' ids
    SWEEP/metrics/capture=L/policy=P/part-0.parquet
                                             one row per VM per run, one per host
    SWEEP/runs/<run-id>/                     each run: model/*.parquet (the
                                             replay's canonical tables),
                                             metrics.json, spec.json, rows.parquet
    SWEEP/failures.parquet                   runs that failed twice, one line each
    SWEEP/timings.parquet                    wall time and peak memory per run

The metrics hold only what the inputs and seed determine, rows sorted and
columns in the declared order, so the same sweep gives byte-identical
files on one worker or eight; wall-clock figures live in timings.parquet.
The recording itself is the partition ``policy=recording`` (its figures
computed as the per-capture report computes them), the baseline every
policy is compared with.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, Iterable

from cratrace.tables import BOOL, F64, I32, I64, STR, Column, Table, _c

#: the recording's partition (a policy name no replay has)
RECORDING = "recording"
#: the host's figure in a {vm: recorded throughput} map
HOST_KEY = ""

#: a setting's column: `param_<key>`, dots and dashes as underscores
def param_column(key: str) -> str:
    return "param_" + re.sub(r"[^A-Za-z0-9_]", "_", key)


IDENTITY = (
    _c("run_id", STR, "the run: a hash of the capture's fingerprint, policy, settings, what-if, seed and cratrace version (SWEEP/runs/<run_id>/)", nullable=False),
    _c("kind", STR, "host (the whole host) or vm (one VM)", nullable=False),
    _c("vm", STR, "the VM (null on host rows); a copy added by a what-if is NAME+k"),
    _c("source_vm", STR, "whose recorded demand the VM replays: itself, or the VM a copy was made of"),
    _c("host", STR, "the host's name (capture.json), else the capture's label", nullable=False),
    _c("capture_ref", STR, "the capture as the sweep named it (path or URL)", nullable=False),
    _c("own_policy", BOOL, "the run's policy is the one that produced the capture (true for the recording)", nullable=False),
    _c("what_if", STR, "the what-if as given (drop-vm=..;add-vm=..;KEY=V), empty: the host as recorded", nullable=False),
    _c("added_copies", I32, "VM copies the what-if added", nullable=False),
    _c("seed", I64, "the replay's seed (null: the recording)"),
)
MEASURES = (
    _c("duration_s", F64, "the run's span (the recording's, or until the replayed demand ran out)", "s"),
    _c("throughput_per_s", F64, "VM: transactions per second over its active window, else useful guest seconds per second; host: its VMs' transactions per second summed when any VM has markers, else their useful guest s/s summed", "1/s"),
    _c("throughput_unit", STR, "marks/s or useful guest s/s"),
    _c("recorded_throughput_per_s", F64, "the same figure in the recording (a copy: its source VM's)", "1/s"),
    _c("marks", I64, "transactions counted (throughput markers)"),
    _c("cpu_s", F64, "CPU time: a VM's vCPUs' running time; the host's busy time", "s"),
    _c("spin_s", F64, "time spent spinning on held locks", "s"),
    _c("busy_pct", F64, "host: busy CPU time over all CPUs' time", "%"),
    _c("guest_util_pct", F64, "host: useful guest time over all CPUs' time", "%"),
    _c("sched_overhead_pct", F64, "host: scheduling costs (switches, migrations, calls) over all CPUs' time (replays)", "%"),
    _c("pcpus", I32, "host: CPUs of the (replayed) host"),
    _c("energy_j", F64, "energy over the run from the report's power model: a VM's threads' share, or the host total (VMs + idle + unattributed)", "J"),
    _c("direct_ms_per_s", F64, "VM bill: its vCPUs' own CPU per second", "ms/s"),
    _c("attributed_ms_per_s", F64, "VM bill: host I/O work done on its behalf (as recorded)", "ms/s"),
    _c("common_share_ms_per_s", F64, "VM bill: its share of common host work (proportional rule)", "ms/s"),
    _c("usage_ms_per_s", F64, "VM bill: direct + attributed + common share", "ms/s"),
    _c("bill_cpu_s", F64, "VM bill: usage over the run, in CPU-seconds", "CPU s"),
    _c("cpu_time_err_pct", F64, "host, replays: the worst thread's CPU-time error against the recording", "%"),
    _c("throughput_err_pct", F64, "host, replays: the worst VM's throughput error against the recording", "%"),
)
#: what a run's rows.parquet holds, as a worker writes it: what its id
#: determines. The sweep's own view of the run (its id, the capture's
#: path, the what-if's text, the settings as columns) is added on assembly.
ROW_COLUMNS = tuple(c for c in IDENTITY if c.name in ("kind", "vm", "source_vm", "host")) + MEASURES
RUN_COLUMNS = IDENTITY + MEASURES

METRICS = Table(
    "sweep metrics",
    "One row per VM per run and one per host (kind), hive-partitioned by capture (its label) and policy (`recording`: the recorded run); "
    "each run's settings are columns param_<key> (null where the run had none), between the identity columns and the measures.",
    (_c("capture", STR, "partition: the capture's label", nullable=False), _c("policy", STR, "partition: the replay's policy, or `recording`", nullable=False)) + RUN_COLUMNS,
)
FAILURES = Table(
    "sweep failures",
    "Runs (and capture scans) that failed twice, with the error's first line.",
    (
        _c("run_id", STR, "the run (the recording's id for a scan)"),
        _c("stage", STR, "scan (reading the capture) or run (the replay)", nullable=False),
        _c("capture", STR, "the capture's label", nullable=False),
        _c("capture_ref", STR, "the capture as the sweep named it", nullable=False),
        _c("policy", STR, "the policy (null for a scan)"),
        _c("what_if", STR, "the what-if (null for a scan)"),
        _c("params", STR, "the run's settings as JSON (null for a scan)"),
        _c("error", STR, "what went wrong, one line", nullable=False),
    ),
)
TIMINGS = Table(
    "sweep timings",
    "Wall time and peak memory of each run this sweep ran (not deterministic; kept out of the metrics).",
    (
        _c("run_id", STR, "the run", nullable=False),
        _c("stage", STR, "scan or run", nullable=False),
        _c("wall_s", F64, "the task's wall time on its worker", "s"),
        _c("peak_rss_mb", F64, "the worker process's peak resident memory when the task ended", "MiB"),
        _c("worker", STR, "the worker's address"),
    ),
)


def polars_schema(columns: Iterable[Column]) -> dict:
    import polars as pl

    types = {I64: pl.Int64, I32: pl.Int32, F64: pl.Float64, STR: pl.String, BOOL: pl.Boolean}
    return {c.name: types[c.type] for c in columns}


def frame(rows: list[dict], columns: Iterable[Column]):
    import polars as pl

    return pl.DataFrame(rows, schema=polars_schema(columns), orient="row") if rows else pl.DataFrame(schema=polars_schema(columns))


# --- one run's rows (on a worker) ---------------------------------------

def _r(x: Any, nd: int = 9) -> float | None:
    """Rounded to `nd` decimals: sums whose last bits depend on how a
    thread pool split them must not make two sweeps' files differ."""
    if x is None:
        return None
    x = float(x)
    return round(x, nd) if x == x else None


def measure_run(run, cap, identity: dict, source_of: dict[str, str] | None = None, recorded: dict | None = None) -> list[dict]:
    """The rows of one run (a `cratrace.report.runs.Run`: the recording or
    a replay): its host and each VM, with energy and bills computed as
    `cratrace report` computes them. `recorded`: the recording's VM
    throughputs, for a copy's recorded figure."""
    from cratrace.report.build import owned_slices, run_bill
    from cratrace.report.energy import PowerModel, energy

    source_of = source_of or {}
    m = run.metrics
    per, tot = energy(*owned_slices(run, cap), PowerModel())
    joules = dict(per.iter_rows())
    bill, _ = run_bill(run, "proportional", None, [])
    bills = {r["vm"]: r for r in bill.iter_rows(named=True)} if bill.height else {}
    vms = m["vms"]
    counted = any(v.get("marks") for v in vms.values())
    rows = []
    h = m["host"]
    fid = m.get("fidelity") or {}
    host_tp = sum(v["throughput_per_s"] for v in vms.values() if v.get("marks")) if counted else sum(v["throughput_per_s"] for v in vms.values())
    rec_host = recorded.get(HOST_KEY) if recorded is not None else None
    rows.append({
        **identity, "kind": "host", "vm": None, "source_vm": None,
        "duration_s": _r(run.duration_s), "throughput_per_s": _r(host_tp), "throughput_unit": "marks/s" if counted else "useful guest s/s",
        "recorded_throughput_per_s": _r(rec_host), "marks": sum(int(v.get("marks") or 0) for v in vms.values()),
        "cpu_s": _r(sum(v["cpu_s"] for v in vms.values())), "spin_s": _r(sum(v["spin_s"] for v in vms.values())),
        "busy_pct": _r(h.get("busy_pct")), "guest_util_pct": _r(h.get("guest_util_pct")), "sched_overhead_pct": _r(h.get("sched_overhead_pct")),
        "pcpus": int(h["pcpus"]) if h.get("pcpus") is not None else None, "energy_j": _r(tot["total_j"]),
        "cpu_time_err_pct": _r(fid.get("cpu_time_err_pct")), "throughput_err_pct": _r(fid.get("throughput_err_pct")),
    })
    for name in sorted(vms):
        v = vms[name]
        src = source_of.get(name, name)
        b = bills.get(name, {})
        # the recording's own figure (for a copy, its source VM's), one
        # definition for every run of the capture
        rec_tp = recorded.get(src) if recorded is not None else None
        rows.append({
            **identity, "kind": "vm", "vm": name, "source_vm": src,
            "duration_s": _r(run.duration_s), "throughput_per_s": _r(v["throughput_per_s"]),
            "throughput_unit": v.get("throughput_unit") or ("marks/s" if v.get("marks") else "useful guest s/s"),
            "recorded_throughput_per_s": _r(rec_tp), "marks": int(v.get("marks") or 0), "cpu_s": _r(v["cpu_s"]), "spin_s": _r(v["spin_s"]),
            "energy_j": _r(joules.get(name, 0.0)),
            "direct_ms_per_s": _r(b.get("direct_ms_per_s")), "attributed_ms_per_s": _r(b.get("attributed_ms_per_s")),
            "common_share_ms_per_s": _r(b.get("common_share_ms_per_s")), "usage_ms_per_s": _r(b.get("usage_ms_per_s")), "bill_cpu_s": _r(b.get("bill")),
        })
    return rows


# --- the dataset (on the driver) ----------------------------------------

def _param_value_type(values: list[str]):
    """Float64 when every value of a setting is a number, else String."""
    import polars as pl

    try:
        [float(v) for v in values]
    except ValueError:
        return pl.String
    return pl.Float64


def assemble(sweep: Path, partitions: dict[tuple[str, str], list[dict]], param_keys: list[str]) -> int:
    """Write SWEEP/metrics from the finished runs: `partitions` maps
    (capture label, policy) to the runs' specs (`run_id`, `capture`,
    `own_policy`, `what_if`, `add_vms`, `seed`, `params`), each run's rows
    read from its rows.parquet. The new dataset replaces the old one
    whole. Returns the rows written."""
    import polars as pl

    from cratrace import atomic

    values: dict[str, list[str]] = {k: [] for k in param_keys}
    for specs in partitions.values():
        for s in specs:
            for k, v in s["params"].items():
                values.setdefault(k, []).append(v)
    ptypes = {k: _param_value_type(values[k]) for k in param_keys}
    pcols = [param_column(k) for k in param_keys]
    identity = [c.name for c in IDENTITY]
    order = identity + pcols + [c.name for c in MEASURES]
    dest = sweep / "metrics"
    tmp = atomic.temp_dir(dest)
    total = 0
    try:
        for (label, policy), specs in sorted(partitions.items()):
            frames = []
            for s in sorted(specs, key=lambda s: s["run_id"]):
                rows = pl.read_parquet(sweep / "runs" / s["run_id"] / "rows.parquet")
                params = s["params"]
                rows = rows.with_columns(
                    pl.lit(s["run_id"]).alias("run_id"),
                    pl.lit(s["capture"]).alias("capture_ref"),
                    pl.lit(bool(s["own_policy"])).alias("own_policy"),
                    pl.lit(s["what_if"]).alias("what_if"),
                    pl.lit(sum(c for _, c in s["add_vms"]), dtype=pl.Int32).alias("added_copies"),
                    pl.lit(s["seed"], dtype=pl.Int64).alias("seed"),
                    *(pl.lit(params[k] if k in params else None, dtype=pl.String).cast(ptypes[k]).alias(param_column(k)) for k in param_keys),
                )
                frames.append(rows.select(order))
            if not frames:
                continue
            df = pl.concat(frames, how="vertical")
            df = df.sort(["what_if", *pcols, "seed", "run_id", "kind", "vm"], nulls_last=True, maintain_order=True)
            part = tmp / f"capture={label}" / f"policy={policy}"
            part.mkdir(parents=True)
            df.write_parquet(part / "part-0.parquet", compression="zstd", statistics=True)
            total += df.height
        old = None
        if dest.exists():
            old = dest.with_name(f".{dest.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.rename(dest, old)
        os.rename(tmp, dest)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return total


def write_table(path: Path, rows: list[dict], table: Table, sort: list[str]) -> None:
    """A small table (failures, timings), sorted, written atomically."""
    from cratrace import atomic

    df = frame(rows, table.columns)
    if df.height:
        df = df.sort(sort, nulls_last=True, maintain_order=True)
    atomic.write_with(path, lambda tmp: df.write_parquet(tmp, compression="zstd"))


def is_sweep(path: Path) -> bool:
    return (Path(path) / "sweep.json").is_file()


def read_sweep_json(path: Path) -> dict:
    from cratrace.errors import CaptureError

    p = Path(path) / "sweep.json"
    try:
        return json.loads(p.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CaptureError(f"{p}: unreadable ({e})") from None


def scan_metrics(path: Path):
    """The sweep's metrics as a polars LazyFrame (partition columns as strings)."""
    import polars as pl

    from cratrace.errors import CaptureError

    path = Path(path)
    files = sorted((path / "metrics").glob("capture=*/policy=*/*.parquet"))
    if not files:
        raise CaptureError(f"{path}: a sweep without metrics (no finished runs yet); run `cratrace sweep ... -o {path}` again")
    return pl.scan_parquet(str(path / "metrics" / "**" / "*.parquet"), hive_partitioning=True, hive_schema={"capture": pl.String, "policy": pl.String}, try_parse_hive_dates=False)


def sweep_duckdb(path: Path):
    """An in-memory DuckDB connection over a sweep: views `metrics` (the
    dataset), `hosts` and `vms` (its host and VM rows), `failures` and
    `timings`."""
    import duckdb

    path = Path(path)
    con = duckdb.connect()
    q = lambda p: str(p).replace("'", "''")  # noqa: E731
    if sorted((path / "metrics").glob("capture=*/policy=*/*.parquet")):
        glob_ = q(path / "metrics" / "**" / "*.parquet")
        con.execute(f"CREATE VIEW metrics AS SELECT * FROM read_parquet('{glob_}', hive_partitioning = true, hive_types_autocast = false)")
        con.execute("CREATE VIEW hosts AS SELECT * FROM metrics WHERE kind = 'host'")
        con.execute("CREATE VIEW vms AS SELECT * FROM metrics WHERE kind = 'vm'")
    for name in ("failures", "timings"):
        if (path / f"{name}.parquet").is_file():
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{q(path / (name + '.parquet'))}')")
    return con


def render_markdown() -> str:
    """The sweep's tables as the reference section of docs/fleet.md
    (``python -m cratrace.fleet.dataset``)."""
    out = ["<!-- generated by `python -m cratrace.fleet.dataset`: do not edit by hand -->", ""]
    for t in (METRICS, FAILURES, TIMINGS):
        out += [f"### {t.name}", "", t.doc, "", "| column | type | unit | nullable | meaning |", "|---|---|---|---|---|"]
        for c in t.columns:
            out.append(f"| `{c.name}` | {c.type} | {c.unit} | {'yes' if c.nullable else 'no'} | {c.doc} |")
            if t is METRICS and c.name == "seed":
                out.append("| `param_<key>` | double or string | | yes | each setting a run of the sweep may carry (--set, --grid, a what-if's KEY=V), a number when every value is one |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(render_markdown())
