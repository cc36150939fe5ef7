"""Assemble a report: summary, throughput and latency, energy, billing."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from cratrace import atomic
from cratrace.capture import Capture
from cratrace.model.domains import domain_runs, domain_threads, domain_vcpus, with_idle
from cratrace.model.frames import conform
from cratrace.report.billing import BillingRule, billing
from cratrace.report.energy import PowerModel, energy
from cratrace.report.fidelity import fidelity_table
from cratrace.report.render import render_html, render_markdown
from cratrace.report.runs import Run, recorded_run, replay_runs, wakeup_latency_us
from cratrace.report.tenants import process_tenants

HIGHER_BETTER = {"ETR /s": True, "ITR /s": True, "guest util %": True, "spin s": False, "wakeup p95 µs": False, "energy J": False, "fidelity err %": False}


def summary_table(runs: list[Run], energies: dict[str, float], latencies: dict[str, dict]) -> pl.DataFrame:
    rows = []
    for r in runs:
        h = r.metrics["host"]
        lat = latencies[r.name]
        fid = r.metrics.get("fidelity")
        # the recording counted transactions (a replay may complete none)
        counted = any(v.get("marks") or v.get("recorded_throughput_per_s") for v in r.metrics["vms"].values())
        rows.append({
            "run": r.name,
            # None, not 0, when no VM's transactions were counted (no markers)
            "ETR /s": round(h["etr"], 2) if counted else None,
            "ITR /s": round(h["itr"], 2) if counted and h.get("itr") else None,
            "guest util %": round(h["guest_util_pct"], 2),
            "spin s": round(sum(v["spin_s"] for v in r.metrics["vms"].values()), 4),
            "wakeup p95 µs": lat["p95"],
            "energy J": round(energies.get(r.name, 0.0), 3),
            "fidelity err %": round(max(fid["cpu_time_err_pct"], fid["throughput_err_pct"]), 2) if fid else None,
        })
    return pl.DataFrame(rows)


def owned_slices(r: Run, cap: Capture) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The slices a run's energy is split by, and the threads owning them.
    A recorded Xen run has no slices (its domains' vCPUs are no host
    threads): their running intervals, under the stand-in ids a replay
    gives them, and idle between (billing keeps to the runstates)."""
    sl = r.table("cpu_slices")
    th = process_tenants(r.table("threads") if r.table("threads").height else cap.model["threads"].collect())
    states = r.scan("vcpu_states")
    if sl.height or states is None:
        return sl, th
    rows, domains = states.select(pl.len(), pl.col("tid").is_null().any()).collect(engine="streaming").row(0)
    if not rows or not domains:
        return sl, th
    st = r.table("vcpu_states")
    lo, hi = cap.meta.get("time_range_ns") or [0, 1]
    sl = conform(with_idle(domain_runs(st), hi + 1, lo, int(r.metrics["host"]["pcpus"])), "cpu_slices")
    return sl, pl.concat([th, domain_threads(domain_vcpus(st))], how="diagonal_relaxed")


def best_marks(summary: pl.DataFrame) -> dict[str, str]:
    best = {}
    for col, higher in HIGHER_BETTER.items():
        s = summary.filter(pl.col("run") != "recorded").drop_nulls(col)
        if s.height:
            # a tie goes to the first run by name, not to whichever row came first
            best[col] = s.sort([col, "run"], descending=[higher, False])["run"][0]
    return best


def sentences(summary: pl.DataFrame) -> list[str]:
    rec = summary.filter(pl.col("run") == "recorded")
    if rec.height == 0:
        return []
    base = rec.row(0, named=True)
    out = []
    for r in summary.filter(pl.col("run") != "recorded").iter_rows(named=True):
        if base["ETR /s"] and r["ETR /s"] is not None:
            tput = f"throughput {100 * (r['ETR /s'] / base['ETR /s'] - 1):+.1f}% vs recorded"
        else:
            tput = "throughput not compared (no transaction markers)"
        d_spin = r["spin s"] - base["spin s"]
        fid = f"; fidelity error {r['fidelity err %']}%" if r["fidelity err %"] is not None else ""
        out.append(f"{r['run']}: {tput}, spin waste {d_spin:+.3f} s, guest utilisation {r['guest util %']}%{fid}.")
    return out


def per_vm_throughput(runs: list[Run]) -> pl.DataFrame:
    rows = [{"run": r.name, "vm": vm, "throughput_per_s": round(v["throughput_per_s"], 3), "cpu_s": round(v["cpu_s"], 4), "spin_s": round(v["spin_s"], 4), "excessive_spins": v.get("excessive_spins", 0)} for r in runs for vm, v in r.metrics["vms"].items()]
    return pl.DataFrame(rows) if rows else pl.DataFrame(schema={"run": pl.String, "vm": pl.String})


def throughput_series(r: Run, bin_ms: float = 100.0) -> pl.DataFrame | None:
    """A run's transaction ends per second in `bin_ms` bins (None without markers)."""
    marks = r.scan("markers")
    if marks is None:
        return None
    n, first = marks.select(pl.len(), pl.col("ts").min()).collect().row(0)
    if n == 0:
        return None
    t0 = r.table("cpu_slices")["start"].min() if r.table("cpu_slices").height else first
    # counted as the markers stream past (a 30 s capture's 0.9 M were 80 MB held whole)
    s = marks.filter(pl.col("name") == "txn_end").select(((pl.col("ts") - t0) // int(bin_ms * 1e6) * bin_ms / 1000).alias("t_s"))
    return s.group_by("t_s").len().collect(engine="streaming").with_columns(pl.lit(r.name).alias("run"), (pl.col("len") / (bin_ms / 1000)).alias("per_s")).select("run", "t_s", "per_s")


def run_bill(rec: Run, rule: BillingRule, prices: dict | None, missing: list[str]) -> tuple[pl.DataFrame, dict]:
    """Billing of a run (the recording or a replay): its VMs' direct CPU
    time, and the host's I/O work (as recorded: a replay does not replay
    it) shared out by `rule`.

    A VM's direct CPU is its vCPU threads' own time: their slices less the
    network interrupts that ran on top of them (io_work's common rows name
    the thread they interrupted), which are common work. The host total
    is every other busy nanosecond: host threads' slices (the io workers'
    with the interrupts on top of them) and the network interrupts on a
    vCPU or the idle task."""
    threads = rec.table("threads")
    tenants = process_tenants(threads)
    # a Xen capture's VMs are domains, with no host threads of their own
    states = rec.scan("vcpu_states")
    domains = states is not None and states.filter(pl.col("vm").is_not_null()).head(1).collect().height > 0
    if tenants is not threads and not domains:
        # no VMs: each process is a tenant, billed for its threads' CPU
        note = "no VMs: the bills and energy are per process (threads grouped by process where the trace tells, else by name; kernel threads as `kernel`)"
        if note not in missing:
            missing.append(note)
        threads = tenants.with_columns(pl.when(pl.col("vm").is_not_null()).then(pl.lit("vcpu")).otherwise("role").alias("role"))
    sl = rec.table("cpu_slices").join(threads.select("tid", "vm", "role"), on="tid", how="left")
    io = rec.table("io_work")
    if io.height == 0 and rec.name == "recorded":
        missing.append("no io_work in the capture (no vhost/netback/softirq events): bills are direct CPU only")
    vcpu_tids = threads.filter(pl.col("role") == "vcpu").select("tid", "vm")
    # network interrupts as recorded, by the thread they ran on top of
    on_top = io.filter(pl.col("vm").is_null()).group_by("worker_tid").agg(pl.col("cpu_ns").sum()) if io.height else pl.DataFrame(schema={"worker_tid": pl.Int64, "cpu_ns": pl.Int64})
    on_vcpus = on_top.join(vcpu_tids, left_on="worker_tid", right_on="tid")
    irq = {vm: int(n) for vm, n in on_vcpus.group_by("vm").agg(pl.col("cpu_ns").sum()).iter_rows()}
    direct = {vm: int(n) - irq.get(vm, 0) for vm, n in sl.filter(pl.col("role") == "vcpu").group_by("vm").agg(pl.col("dur").sum()).iter_rows()}
    host_threads = sl.filter((pl.col("tid") != 0) & (pl.col("role") != "vcpu"))
    outside = on_top.filter(pl.col("worker_tid").is_null() | (pl.col("worker_tid") == 0) | pl.col("worker_tid").is_in(vcpu_tids["tid"].implode()))
    host_total = int(host_threads["dur"].sum()) + int(outside["cpu_ns"].sum()) if sl.height else 0
    if not direct:
        # Xen: no host threads; guests' running time from their runstates,
        # and dom0 (the driver domain) is the host work
        vs = rec.table("vcpu_states")
        if vs.height and vs["tid"].is_null().all():
            run = vs.filter(pl.col("state") == "guest").group_by("vm").agg(pl.col("dur").sum())
            direct = {vm: int(n) for vm, n in run.iter_rows() if vm != "dom0"}
            host_total = int(run.filter(pl.col("vm") == "dom0")["dur"].sum())
    if rec.name != "recorded" and io.height:
        # a replay's host threads ran as it placed them; its host I/O is the recording's
        host_total = max(host_total, int(io["cpu_ns"].sum()))
    bill, recon = billing(direct, io if io.height else pl.DataFrame(schema={"window_start": pl.Int64, "vm": pl.String, "cpu_ns": pl.Int64, "packets": pl.Int64, "bytes": pl.Int64}), rec.duration_s, rule, prices, host_total_ns=host_total)
    if rec.name == "recorded":
        missing += [f"billing rule {rule}: {text}" for text in recon["rule_fallbacks"].values()]
    return bill, recon


def vm_attribution(meta: dict) -> str:
    """One line: the VMs and the evidence that grouped their threads."""
    vms = (meta.get("model") or {}).get("vms")
    if vms is None:
        return "VMs: as the model found them (a model built before VM evidence was recorded)"
    if not vms:
        return "VMs: none found; the report shows the host's threads"
    return "VMs: " + ", ".join(f"{v['vm']} ({v['vcpus']} vCPUs, by {v['evidence']})" for v in vms)


def energy_per_work(runs: list[Run], energies: dict[str, float]) -> pl.DataFrame:
    """One row per run: its energy (the report's, as in the summary) per
    unit of work, the delay per unit (the run's span over its work) and
    their product (J·s per unit², E·T/W²: for two runs of the same work,
    the ratio of E·T). The unit is the transaction when any run counted
    transactions (every VM's, summed), else a second of vCPU work done (a
    replay's in the recorded demand's own seconds, the recording's its
    vCPUs' guest time less spinning). An asymmetric replay adds its saving
    against its all-fast baseline per unit of work and, beside it, the
    equal-time (mean power) one."""
    txns = {r.name: sum(v.get("marks") or 0 for v in r.metrics["vms"].values()) for r in runs}
    unit = "txn" if any(txns.values()) else "work s"
    rows = []
    for r in runs:
        pw = (r.metrics.get("energy") or {}).get("per_work") or {}
        if unit == "txn":
            work = float(txns[r.name])
        elif pw.get("work_s"):
            work = float(pw["work_s"]["work"])
        else:
            work = sum(v["cpu_s"] - v["spin_s"] for v in r.metrics["vms"].values())
        j, T = energies.get(r.name, 0.0), r.duration_s
        a = r.metrics.get("asymmetric") or {}
        rows.append({
            "run": r.name,
            "unit": unit,
            "work": round(work, 6),
            "energy J": round(j, 3),
            "J per unit": float(f"{j / work:.6g}") if work else None,
            "s per unit": float(f"{T / work:.6g}") if work else None,
            "EDP J·s per unit²": float(f"{j * T / work**2:.6g}") if work else None,
            "vs all-fast: energy per work %": -a["energy_saving_per_work_pct"] if a.get("energy_saving_per_work_pct") is not None else None,
            "vs all-fast: power, equal time %": -a["power_saving_equal_time_pct"] if a.get("power_saving_equal_time_pct") is not None else None,
            "vs all-fast: throughput %": a.get("throughput_change_pct"),
        })
    df = pl.DataFrame(rows)
    # the asymmetric columns only where an asymmetric run has them
    return df.drop([c for c in df.columns if c.startswith("vs all-fast") and df[c].null_count() == df.height])


def energy_by_run(rows: pl.DataFrame) -> pl.DataFrame:
    """The energy table as one row per run: each owner's joules in a
    column, then the host total (which the owners add up to)."""
    if rows.height == 0:
        return rows
    total = rows.filter(pl.col("owner").str.starts_with("TOTAL")).select("run", pl.col("joules").alias("total J"))
    parts = rows.filter(~pl.col("owner").str.starts_with("TOTAL")).pivot(on="owner", index="run", values="joules", aggregate_function="sum")
    owners = sorted(c for c in parts.columns if c != "run")
    return parts.select("run", *owners).join(total, on="run", how="left", maintain_order="left").fill_null(0.0)


def evidence_tables(docs: list) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the gate against the noise floor per setting, the what-ifs against
    real recordings) from the benchmarks' JSON outputs: replay_fidelity.py
    gives `{"noise_floor": {setting: ...}}`, whatif_validation.py a list of
    pairs."""
    from cratrace.errors import UsageError

    floors, pairs = [], []
    for doc in docs:
        if isinstance(doc, dict) and isinstance(doc.get("noise_floor"), dict):
            for setting, fl in doc["noise_floor"].items():
                for name, m in ((fl or {}).get("measures") or {}).items():
                    floors.append({"setting": setting, "measure": name, "replay median %": m["replay_median_pct"], "recordings median %": m["recordings_median_pct"],
                                   "replay p90 %": m["replay_p90_pct"], "recordings p90 %": m["recordings_p90_pct"], "within": m["within"]})
        elif isinstance(doc, list) and all(isinstance(r, dict) and "what_if" in r for r in doc):
            pairs += [{"what-if": r["what_if"], "replay": r["replay_args"], "recorded change %": r["recorded_change_pct"], "predicted change %": r["predicted_change_pct"],
                       "prediction error %": r["prediction_error_pct"], "target noise %": r["target_noise_pct"], "same sign": r["same_sign"]} for r in doc]
        else:
            raise UsageError("--evidence: not the JSON of benchmarks/replay_fidelity.py --json or benchmarks/whatif_validation.py --json")
    return pl.DataFrame(floors), pl.DataFrame(pairs)


#: the tables `--tables` writes, each as CSV and Parquet
TABLE_NAMES = ("summary", "fidelity", "throughput_per_vm", "throughput_series", "energy", "energy_by_run", "energy_per_core", "energy_per_work", "energy_series", "billing")
#: the file in a --tables directory naming the files cratrace wrote there
#: (only those does --force replace)
TABLES_MARK = ".cratrace-tables"


def build_report(capture: Capture | str | Path, replays: Path | None, out: Path, *, fmt: str = "html", tables_dir: Path | None = None, rule: BillingRule = "proportional", prices: dict | None = None, force: bool = False, evidence: list | None = None) -> dict:
    """Build the report of `capture` (and the replays under `replays`)
    into `out` (``-`` prints the Markdown); with `tables_dir`, every table
    as CSV and Parquet there. The outputs are locked and checked before
    anything is computed (issue 42) and appear whole or not at all."""
    import contextlib

    cap = capture if isinstance(capture, Capture) else Capture(capture)
    to_stdout = fmt == "md" and (not out or str(out) == "-")
    with contextlib.ExitStack() as outputs:
        dest = None if to_stdout else outputs.enter_context(atomic.Destination(Path(out), force=force, ours=is_report, what="report", directory=False))
        if tables_dir:
            tables_dir = Path(tables_dir)
            tables_dir.parent.mkdir(parents=True, exist_ok=True)
            outputs.enter_context(atomic.locked(tables_dir))
            _check_tables(tables_dir, force)
        report, tables = _report(cap, replays, rule, prices, evidence)
        if tables_dir:
            _write_tables(tables, tables_dir, force)
        text = render_markdown(report) if fmt == "md" else render_html(report)
        if dest is None:
            print(text)
        else:
            tmp = dest.temp()
            tmp.write_text(text)
            dest.commit(tmp)
    return report


def is_report(p: Path) -> bool:
    """An existing output `report --force` may replace: a report cratrace
    wrote (its title says so), HTML or Markdown."""
    try:
        with open(p, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return head.startswith(b"# cratrace report") or (head.startswith(b"<!doctype html>") and b"<title>cratrace report" in head)


def _report(cap: Capture, replays: Path | None, rule: BillingRule, prices: dict | None, evidence: list | None) -> tuple[dict, dict[str, pl.DataFrame]]:
    # every model table the report reads, there and intact
    cap.require_model(sorted(set(cap.model_paths) | {"cpu_slices", "threads"}))
    runs = [recorded_run(cap)] + (replay_runs(replays) if replays else [])
    from cratrace.model.build import model_notes

    guessed, remarks = model_notes(cap.meta)
    missing = [vm_attribution(cap.meta), *guessed, *remarks]
    if not replays:
        missing.append("no replays given (--replays OUT): only the recorded run is shown")
    energies, latencies, energy_rows, core_rows, energy_series, series, bills, recons = {}, {}, [], [], [], [], [], {}
    # One run at a time: what the report needs of a run's tables is taken
    # from them, then they are let go (a report held every run's timelines
    # at once, and its memory grew with the number of replays).
    for r in runs:
        per, tot = energy(*owned_slices(r, cap), PowerModel(), core_volt=(r.metrics.get("energy") or {}).get("core_volt"))
        energies[r.name] = tot["total_j"]
        energy_rows += [{"run": r.name, "owner": o, "joules": round(j, 6)} for o, j in per.iter_rows()]
        energy_rows.append({"run": r.name, "owner": "TOTAL (per core, independent)", "joules": round(tot["total_j"], 6)})
        core_rows += [{"run": r.name, "cpu": i, "joules": round(j, 6)} for i, j in enumerate(tot["per_core_j"])]
        energy_series.append(tot["series"].with_columns(pl.lit(r.name).alias("run")))
        latencies[r.name] = wakeup_latency_us(r.scan("vcpu_states"))
        if (s := throughput_series(r)) is not None:
            series.append(s)
        # what each tenant pays in each run: the question a policy answers
        bill, recons[r.name] = run_bill(r, rule, prices, missing)
        if bill.height:
            bills.append(bill.with_columns(pl.lit(r.name).alias("run")).select("run", *bill.columns))
        r.release()
    bill = pl.concat(bills, how="diagonal_relaxed") if bills else pl.DataFrame()
    recon = recons["recorded"]
    summary = summary_table(runs, energies, latencies)
    report = {
        "title": f"cratrace report: {cap.path.name}",
        "capture": str(cap.path),
        "summary": summary,
        "best": best_marks(summary),
        "sentences": sentences(summary),
        "per_vm": per_vm_throughput(runs),
        "fidelity": fidelity_table(runs),
        "noise_floor": evidence_tables(evidence or [])[0],
        "what_ifs": evidence_tables(evidence or [])[1],
        "series": pl.concat(series).sort("run", "t_s") if series else pl.DataFrame(),
        "energy": pl.DataFrame(energy_rows),
        # one row per run, the owners as columns (VMs, idle, unattributed)
        "energy_by_run": energy_by_run(pl.DataFrame(energy_rows)),
        "energy_per_core": pl.DataFrame(core_rows),
        # the same energy per unit of work, with its delay and their product
        "energy_per_work": energy_per_work(runs, energies),
        "energy_series": pl.concat(energy_series) if energy_series else pl.DataFrame(),
        "billing": bill,
        "reconciliation": recon,
        "reconciliations": recons,
        "missing": missing,
    }
    tables = {"summary": summary, "fidelity": report["fidelity"], "throughput_per_vm": report["per_vm"], "throughput_series": report["series"], "energy": report["energy"], "energy_by_run": report["energy_by_run"], "energy_per_core": report["energy_per_core"], "energy_per_work": report["energy_per_work"], "energy_series": report["energy_series"], "billing": bill}
    return report, tables


def _table_paths(tables_dir: Path, names: tuple[str, ...] = TABLE_NAMES) -> dict[tuple[str, str], Path]:
    return {(name, ext): tables_dir / f"{name}.{ext}" for name in names for ext in ("csv", "parquet")}


def _check_tables(tables_dir: Path, force: bool, names: tuple[str, ...] = TABLE_NAMES) -> None:
    """Refuse to replace an earlier report's tables without `force`, and
    with it any file there that cratrace did not write (not named in the
    directory's TABLES_MARK)."""
    from cratrace.errors import OutputExistsError

    there = [p for p in _table_paths(tables_dir, names).values() if p.exists()]
    if there and not force:
        raise OutputExistsError(f"{there[0]}: already exists; pass --force to replace the report's tables")
    try:
        ours = set((tables_dir / TABLES_MARK).read_text().split())
    except OSError:
        ours = set()
    foreign = [p for p in there if p.name not in ours]
    if foreign:
        raise OutputExistsError(f"{foreign[0]}: not a table cratrace wrote; --force replaces only those: move it away or choose another --tables directory")


def _write_tables(tables: dict[str, pl.DataFrame], tables_dir: Path, force: bool) -> None:
    """Each table as CSV and Parquet in `tables_dir` (checked again), all
    replaced together; a file that appeared meanwhile is not replaced.
    The tables are the host report's or, given other names, any report's
    (the fleet report's)."""
    names = tuple(tables)
    _check_tables(tables_dir, force, names)
    paths = _table_paths(tables_dir, names)
    tables_dir.mkdir(parents=True, exist_ok=True)
    there = {p for p in paths.values() if p.exists()}
    # one set: written whole before any replaces an earlier report's
    atomic.write_all({path: (tables[name].write_csv if ext == "csv" else tables[name].write_parquet) for (name, ext), path in paths.items()}, replace=there)
    atomic.write_text(tables_dir / TABLES_MARK, "".join(f"{p.name}\n" for p in paths.values()))
