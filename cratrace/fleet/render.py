"""The fleet report as HTML (plotly inlined once, works offline, as the
per-capture report), Markdown, or JSON."""

from __future__ import annotations

import math

import plotly.graph_objects as go
import polars as pl

from cratrace.report.render import CSS, _fig_html, bars, esc, table_html

#: the tables a fleet report has, in its order, with what each says
SECTIONS = {
    "scenarios": ("Policies against the recording, across hosts",
                  "Per scenario (policy, the settings that vary, the what-if): hosts, how many it hurts (host or any VM throughput down by more than the SLO), "
                  "the per-host throughput change (mean, p50, p95, worst), the fleet's energy against the recording's, and the per-host energy change (p50, p95; energy per unit of work: the equal-work form)."),
    "hurts": ("Hosts where a scenario hurts", "Host throughput, or its worst VM's, down by more than the SLO against the recording."),
    "tenants": ("Tenant bills across hosts", "Per scenario, each tenant's bill summed over every host it runs on: direct CPU + host I/O work attributed to it + its share of common work (ms of CPU per second, and CPU-seconds over the runs), as `cratrace report` bills one host."),
    "headroom": ("Headroom", "Per host and policy: how many more copies of its typical VM (median recorded CPU) fit before any VM's throughput drops more than the SLO, "
                 "against the same policy's replay of the host as recorded (`cratrace sweep --headroom N`). 'at least': every copy tried fit."),
    "hosts": ("Every host under every scenario", "The per-host figures the summaries above are made of."),
    "failures": ("Failures", "Runs and captures that failed twice, with their error."),
}


def _figures(rep: dict) -> list[go.Figure]:
    figs = []
    h = rep["hosts"]
    # the policies on the hosts as they are; the what-ifs are capacity
    # questions with their own sections (and swamp the scale)
    if h.height and h.filter(pl.col("what_if") == "").height:
        h = h.filter(pl.col("what_if") == "")
    for col, title in (("throughput_change_pct", "Host throughput change vs recorded (%), one point per host, hosts as recorded"), ("energy_change_pct", "Host energy change vs recorded (%), one point per host, hosts as recorded")):
        if h.height and h[col].drop_nulls().len():
            f = go.Figure()
            for scen in h["scenario"].unique(maintain_order=True):
                d = h.filter(pl.col("scenario") == scen)
                f.add_box(name=scen, y=d[col].to_list(), text=d["host"].to_list(), boxpoints="all", jitter=0.3, pointpos=0)
            f.update_layout(title=title, showlegend=False, yaxis_title="%")
            figs.append(f)
    t = rep["tenants"]
    if t.height:
        figs.append(bars(t, "scenario", "tenant", "bill_cpu_s", title="Tenant bills summed across hosts (CPU-seconds)"))
    hr = rep["headroom"]
    if hr.height:
        figs.append(bars(hr, "policy", "host", "headroom", title=f"Headroom: more copies of the typical VM within a {rep['slo_drop_pct']:g}% throughput drop", yaxis_title="copies"))
    return figs


def render_fleet_html(rep: dict) -> str:
    charts = [_fig_html(f, i) for i, f in enumerate(_figures(rep))]
    parts = [
        f"<!doctype html><html lang=en><head><meta charset=utf-8><meta name=viewport content='width=device-width,initial-scale=1'><title>{esc(rep['title'])}</title><style>{CSS}</style></head><body>",
        f"<h1>{esc(rep['title'])}</h1><p>Sweep <code>{esc(rep['sweep'])}</code>: {rep['hosts_recorded']} hosts; SLO: a throughput drop of at most {rep['slo_drop_pct']:g}%.</p>",
        "".join(f"<p class=note>{esc(n)}</p>" for n in rep["notes"]),
    ]
    for name, (title, note) in SECTIONS.items():
        df = rep[name]
        if name in ("hurts", "failures", "headroom") and df.height == 0:
            if name == "hurts" and rep["hosts"].height:
                parts.append(f"<h2>{esc(title)}</h2><p>None: no scenario hurts any host by more than the SLO.</p>")
            continue
        parts.append(f"<h2>{esc(title)}</h2><p>{esc(note)}</p>")
        parts.append(table_html(df, key="scenario"))
        if name == "scenarios":
            parts += charts[:2]
        elif name == "tenants":
            parts += charts[2:3] if len(charts) > 2 else []
        elif name == "headroom":
            parts += charts[3:4] if len(charts) > 3 else []
    parts.append("</body></html>")
    return "\n".join(parts)


def render_fleet_markdown(rep: dict) -> str:
    def md(df: pl.DataFrame) -> str:
        if df.height == 0:
            return "(no rows)\n"
        lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
        for r in df.iter_rows():
            lines.append("| " + " | ".join("" if v is None else (f"{v:,.4g}" if isinstance(v, float) else str(v)) for v in r) + " |")
        return "\n".join(lines) + "\n"

    out = [f"# {rep['title']}", "", f"{rep['hosts_recorded']} hosts; SLO: a throughput drop of at most {rep['slo_drop_pct']:g}%.", ""] + [f"> {n}" for n in rep["notes"]]
    for name, (title, note) in SECTIONS.items():
        if name == "hosts" or (rep[name].height == 0 and name in ("failures", "headroom")):
            continue
        out += ["", f"## {title}", note, "", md(rep[name])]
    return "\n".join(out)


#: the report's parts --json gives
JSON_PARTS = ("slo_drop_pct", "hosts_recorded", "scenarios", "hurts", "tenants", "headroom", "hosts", "failures", "notes")


def render_fleet_json(rep: dict) -> dict:
    def plain(v):
        if isinstance(v, pl.DataFrame):
            return [plain(r) for r in v.to_dicts()]
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, float) and not math.isfinite(v):
            return None
        return v

    return {"title": rep["title"], "sweep": rep["sweep"], **{k: plain(rep[k]) for k in JSON_PARTS}}

