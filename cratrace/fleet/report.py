"""The fleet report's figures, from a sweep's metrics dataset.

Every replayed scenario (a policy, its settings, a what-if, a seed) is
compared host by host with the recording (the ``policy=recording``
partition), as `cratrace report` compares one capture's replays:

* ``hosts``: per scenario and host, the change in host throughput and
  energy (and energy per unit of work, the equal-work form), the worst
  VM's throughput change, and whether the scenario hurts the host (its
  throughput, or any VM's, down by more than the SLO);
* ``scenarios``: per scenario, across hosts: the fleet's energy total
  against the recording's, the per-host distributions (p50, p95, worst),
  and how many hosts it hurts;
* ``tenants``: per scenario and tenant, bills summed across hosts (direct
  + attributed + common share, CPU-seconds), beside the recording's;
* ``headroom``: per host and policy, how many more copies of its typical
  VM (the sweep's ``--headroom`` runs, ``add-vm=@typical:k``) fit before
  any VM's throughput drops by more than the SLO against the same
  policy's replay of the host as recorded (so the replay's own error
  against the recording does not count against it).
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from cratrace.fleet.dataset import RECORDING, read_sweep_json, scan_metrics
from cratrace.fleet.plan import OWN_POLICY

TYPICAL_ADD = re.compile(r"^add-vm=@typical:(\d+)$")


def _pct(a: pl.Expr, b: pl.Expr) -> pl.Expr:
    return pl.when(b > 0).then(100 * (a / b - 1))


def scenario_labels(m: pl.DataFrame, param_cols: list[str], own: bool = False) -> pl.DataFrame:
    """`m` with a `scenario` column: the policy (`own` for each host's
    own when the sweep asked for that: a fleet's KVM and Xen hosts have
    different ones), the settings that vary across the sweep, the
    what-if."""
    varying = [c for c in param_cols if m.filter(pl.col("policy") != RECORDING)[c].n_unique() > 1]
    parts = [pl.when(pl.col("own_policy") & pl.lit(own)).then(pl.lit(OWN_POLICY)).otherwise(pl.col("policy"))]
    for c in varying:
        value = pl.col(c).cast(pl.String).str.replace(r"\.0$", "")
        parts.append(pl.when(pl.col(c).is_not_null()).then(pl.lit(f" {c.removeprefix('param_')}=") + value).otherwise(pl.lit("")))
    parts.append(pl.when(pl.col("what_if") != "").then(pl.lit(", what-if ") + pl.col("what_if")).otherwise(pl.lit("")))
    if m.filter(pl.col("policy") != RECORDING)["seed"].n_unique() > 1:
        parts.append(pl.lit(" seed=") + pl.col("seed").cast(pl.String))
    return m.with_columns(pl.when(pl.col("policy") == RECORDING).then(pl.lit(RECORDING)).otherwise(pl.concat_str(parts)).alias("scenario"))


def load(sweep: Path) -> tuple[pl.DataFrame, list[str], dict]:
    doc = read_sweep_json(sweep)
    m = scan_metrics(sweep).collect()
    params = [c for c in m.columns if c.startswith("param_")]
    return scenario_labels(m, params, OWN_POLICY in doc.get("policies", [])), params, doc


def host_changes(m: pl.DataFrame, slo_drop_pct: float) -> pl.DataFrame:
    hosts = m.filter(pl.col("kind") == "host")
    rec = hosts.filter(pl.col("policy") == RECORDING).select(
        "capture", pl.col("throughput_per_s").alias("rec_tp"), pl.col("energy_j").alias("rec_j"), pl.col("duration_s").alias("rec_dur"))
    vms = m.filter((pl.col("kind") == "vm") & (pl.col("policy") != RECORDING)).group_by("run_id").agg(
        pl.when(pl.col("recorded_throughput_per_s") > 0).then(_pct(pl.col("throughput_per_s"), pl.col("recorded_throughput_per_s"))).min().alias("worst_vm_change_pct"),
        pl.col("vm").sort_by(pl.col("throughput_per_s") / pl.col("recorded_throughput_per_s")).first().alias("worst_vm"))
    rep = hosts.filter(pl.col("policy") != RECORDING).join(rec, on="capture", how="inner").join(vms, on="run_id", how="left")
    work, rec_work = pl.col("throughput_per_s") * pl.col("duration_s"), pl.col("rec_tp") * pl.col("rec_dur")
    out = rep.select(
        "scenario", "policy", "what_if", "capture", "host", "run_id",
        _pct(pl.col("throughput_per_s"), pl.col("rec_tp")).round(3).alias("throughput_change_pct"),
        _pct(pl.col("energy_j"), pl.col("rec_j")).round(3).alias("energy_change_pct"),
        pl.when((work > 0) & (rec_work > 0)).then(_pct(pl.col("energy_j") / work, pl.col("rec_j") / rec_work)).round(3).alias("energy_per_work_change_pct"),
        pl.col("worst_vm_change_pct").round(3), "worst_vm",
        pl.col("energy_j").round(3), pl.col("rec_j").round(3).alias("recorded_energy_j"),
    )
    hurt = (pl.col("throughput_change_pct") < -slo_drop_pct) | (pl.col("worst_vm_change_pct") < -slo_drop_pct)
    return out.with_columns(hurt.fill_null(False).alias("hurts")).sort("scenario", "capture")


def scenario_summary(h: pl.DataFrame) -> pl.DataFrame:
    q = lambda c, p: pl.col(c).quantile(p, "linear").round(3)  # noqa: E731
    return h.group_by("scenario").agg(
        pl.col("capture").n_unique().alias("hosts"),
        pl.col("hurts").sum().cast(pl.Int64).alias("hosts hurt"),
        pl.col("throughput_change_pct").mean().round(3).alias("throughput Δ% mean"),
        q("throughput_change_pct", 0.5).alias("throughput Δ% p50"),
        q("throughput_change_pct", 0.95).alias("throughput Δ% p95"),
        pl.col("throughput_change_pct").min().round(3).alias("throughput Δ% worst"),
        pl.col("energy_j").sum().round(3).alias("energy J"),
        pl.col("recorded_energy_j").sum().round(3).alias("recorded energy J"),
        q("energy_change_pct", 0.5).alias("energy Δ% p50"),
        q("energy_change_pct", 0.95).alias("energy Δ% p95"),
        q("energy_per_work_change_pct", 0.5).alias("energy/work Δ% p50"),
    ).with_columns((100 * (pl.col("energy J") / pl.col("recorded energy J") - 1)).round(3).alias("fleet energy Δ%")).sort("scenario")


def tenant_bills(m: pl.DataFrame, tenants: dict[str, str] | None = None) -> pl.DataFrame:
    """Bills per scenario and tenant, summed across hosts; a VM's tenant
    is `tenants[vm]` (a copy's: its source VM's), else the VM's name."""
    tenants = tenants or {}
    v = m.filter(pl.col("kind") == "vm").with_columns(pl.col("source_vm").replace(tenants).alias("tenant"))
    b = v.group_by("scenario", "tenant").agg(
        pl.col("capture").n_unique().alias("hosts"),
        *(pl.col(c).sum().round(4) for c in ("direct_ms_per_s", "attributed_ms_per_s", "common_share_ms_per_s", "usage_ms_per_s", "bill_cpu_s")),
    )
    rec = b.filter(pl.col("scenario") == RECORDING).select("tenant", pl.col("bill_cpu_s").alias("_rec"))
    return b.join(rec, on="tenant", how="left").with_columns(_pct(pl.col("bill_cpu_s"), pl.col("_rec")).round(3).alias("bill Δ% vs recorded")).drop("_rec").sort(
        pl.col("scenario") != RECORDING, "scenario", "tenant")


def headroom(m: pl.DataFrame, param_cols: list[str], slo_drop_pct: float) -> pl.DataFrame:
    """Per host and policy (and settings), copies of the typical VM that
    fit within the SLO."""
    reps = m.filter(pl.col("policy") != RECORDING)
    adds = reps.filter(pl.col("what_if").str.contains(TYPICAL_ADD.pattern)).with_columns(pl.col("what_if").str.extract(TYPICAL_ADD.pattern).cast(pl.Int64).alias("k"))
    if adds.height == 0:
        return pl.DataFrame()
    group = ["capture", "host", "policy", *param_cols, "seed"]
    ref = reps.filter((pl.col("what_if") == "") & (pl.col("kind") == "vm")).select(*group, pl.col("vm").alias("source_vm"), pl.col("throughput_per_s").alias("ref_tp"))
    v = adds.filter(pl.col("kind") == "vm").join(ref, on=[*group, "source_vm"], how="inner", nulls_equal=True)
    v = v.with_columns(_pct(pl.col("throughput_per_s"), pl.col("ref_tp")).alias("change"))
    per_k = v.group_by(*group, "k").agg(
        pl.col("change").min().alias("worst"),
        pl.col("vm").sort_by("change").first().alias("worst_vm"),
        pl.col("vm").filter(pl.col("vm") != pl.col("source_vm")).first().str.replace(r"\+\d+$", "").alias("typical_vm"),
    ).sort(*group, "k", nulls_last=True)
    rows = []
    for key, d in per_k.group_by(group, maintain_order=True):
        ks = d["k"].to_list()
        fits = 0
        limit = None
        for k, worst, wvm in zip(ks, d["worst"].to_list(), d["worst_vm"].to_list()):
            if k != fits + 1:
                break
            if worst is not None and worst < -slo_drop_pct:
                limit = (wvm, round(worst, 3))
                break
            fits = k
        rec = dict(zip(group, key))
        rows.append({"capture": rec["capture"], "host": rec["host"], "policy": rec["policy"], **{c: rec[c] for c in param_cols},
                     "typical_vm": d["typical_vm"].drop_nulls().first() if d["typical_vm"].drop_nulls().len() else None,
                     "copies tried": max(ks), "headroom": fits, "at least": limit is None and fits == max(ks),
                     "limited by": limit[0] if limit else None, "its Δ% then": limit[1] if limit else None})
    out = pl.DataFrame(rows)
    # the settings that tell the rows apart, not those every run shares
    return out.drop([c for c in param_cols if out[c].n_unique() == 1]).sort("policy", "capture")


def build_fleet_report(sweep: Path, slo_drop_pct: float = 5.0, tenants: dict[str, str] | None = None) -> dict:
    sweep = Path(sweep)
    m, params, doc = load(sweep)
    h = host_changes(m, slo_drop_pct)
    failures = pl.read_parquet(sweep / "failures.parquet") if (sweep / "failures.parquet").is_file() else pl.DataFrame()
    notes = []
    if not doc.get("complete", True):
        notes.append(f"the sweep is not complete ({doc.get('finished', 0)} of {len(doc.get('runs', []))} runs finished, {doc.get('failed', 0)} failed): the figures cover the finished runs")
    if failures.height:
        notes.append(f"{failures.height} runs or captures failed (SWEEP/failures.parquet); first: {failures.row(0, named=True)['capture']}: {failures.row(0, named=True)['error']}")
    hosts_recorded = m.filter((pl.col("policy") == RECORDING) & (pl.col("kind") == "host")).height
    return {
        "title": f"cratrace fleet report: {sweep.resolve().name}",
        "sweep": str(sweep),
        "slo_drop_pct": slo_drop_pct,
        "hosts_recorded": hosts_recorded,
        "scenarios": scenario_summary(h) if h.height else pl.DataFrame(),
        "hosts": h,
        "hurts": h.filter(pl.col("hurts")).drop("hurts", "run_id") if h.height else pl.DataFrame(),
        "tenants": tenant_bills(m, tenants),
        "headroom": headroom(m, params, slo_drop_pct),
        "failures": failures,
        "notes": notes,
    }
