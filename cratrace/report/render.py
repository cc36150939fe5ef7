"""Renderers: self-contained HTML (plotly.js inlined once, works offline),
a terminal Markdown summary, and the figures as JSON for scripts. Every
string from a trace is escaped in HTML, and in the charts from plotly's
own markup (`escape_figure`)."""

from __future__ import annotations

import functools
import html
import math

import plotly.graph_objects as go
import polars as pl

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5rem auto;max-width:1200px;padding:0 1rem;color:#1d2330}
h1{font-size:1.5rem} h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #dde} table{border-collapse:collapse;margin:.5rem 0;font-size:.9rem}
td,th{border:1px solid #ccd;padding:.25rem .5rem;text-align:right} th{background:#f2f4f8} td:first-child,th:first-child{text-align:left}
.best{background:#e3f6e3;font-weight:600} .note{color:#8a5a00} .ok{color:#176d17} .bad{color:#a11}
"""


FIDELITY_NOTE = (
    "Each replay against the recording: the worst thread's CPU-time error and the worst VM's throughput error "
    "(the gate, 5%, applies to the policy that produced the capture), then why a replay departs, recorded (rec) "
    "beside replayed (rep): how often a waking vCPU took the CPU from a running sibling, how much of each VM's vCPU "
    "time ran on its busiest CPU (100%: packed, where lock-holder preemption storms start), and how often vCPUs "
    "moved between CPUs."
)
NOISE_NOTE = (
    "The gate against the noise floor (benchmarks/replay_fidelity.py): per setting, how far the replays are from their own "
    "recordings beside how far the recordings of that setting are from each other; within: no wider."
)
WHATIF_NOTE = (
    "What-ifs against real recordings (benchmarks/whatif_validation.py): each what-if's predicted change in host throughput "
    "beside the recorded change, and its error against the target setting's own noise."
)
FIDELITY_NOTE_HTML = f"<h2>Replay fidelity</h2><p>{html.escape(FIDELITY_NOTE)}</p>"


#: the billing columns a page shows (--tables has them all)
BILL_COLUMNS = ("run", "vm", "direct_ms_per_s", "attributed_ms_per_s", "common_share_ms_per_s", "usage_ms_per_s", "excess_pct", "excess_per_cpu_s_pct", "bill")
#: what the two excess columns are over (billing.md §6.8: always print the denominator)
EXCESS_NOTE = "excess_pct = host work / the VM's own direct CPU; excess_per_cpu_s_pct = host work / one CPU-second per second (the denominator of Woo 2012's 11%)"


def bill_view(df: pl.DataFrame) -> pl.DataFrame:
    return df.select([c for c in BILL_COLUMNS if c in df.columns]) if df.height else df


def recon_line(name: str, rec: dict) -> str:
    return (f"{name}: host total {rec['host_total_ms_per_s']:.3f} ms/s = VMs {rec['vm_host_work_ms_per_s']:.3f} + unallocated common "
            f"{rec['common_unallocated_ms_per_s']:.3f} + residual {rec['residual_ms_per_s']:.3f} ({'reconciled' if rec['reconciles'] else 'does NOT reconcile'})")


def esc(v) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def table_html(df: pl.DataFrame, best: dict[str, str] | None = None, key: str = "run") -> str:
    if df.height == 0:
        return "<p class=note>(no rows)</p>"
    head = "".join(f"<th>{esc(c)}</th>" for c in df.columns)
    rows = []
    for r in df.iter_rows(named=True):
        cells = []
        for c in df.columns:
            cls = ' class="best"' if best and best.get(c) == r.get(key) else ""
            v = r[c]
            txt = f"{v:,.4g}" if isinstance(v, float) else v
            cells.append(f"<td{cls}>{esc(txt)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


@functools.cache
def _template() -> go.layout.Template:
    # given by name, plotly looks the template up and copies it for each
    # figure: 0.23 s of a report's five charts
    import plotly.io as pio

    return pio.templates["plotly_white"]


def plot_text(v):
    """A string as plotly should show it: plotly reads its own markup
    (<a href>, <b>, <br>...) in labels, hover text and titles, so a VM
    named `<a href=...>` became a link; `&`, `<` and `>` as entities,
    which it shows as the characters. Anything else unchanged."""
    if not isinstance(v, str) or not any(c in v for c in "&<>"):
        return v
    return v.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


#: the trace attributes that plotly shows as text (as a label, a legend
#: entry, a category on an axis or in the hover box)
_TEXT_ATTRIBUTES = ("name", "text", "hovertext", "x", "y", "labels")


def escape_figure(fig: go.Figure) -> go.Figure:
    """Every string of `fig` that plotly shows, through plot_text: each
    trace's name, texts and category values, the titles of the figure,
    its axes and legend, and its annotations. Templates (hovertemplate)
    are ours and keep their markup."""
    for trace in fig.data:
        for attr in _TEXT_ATTRIBUTES:
            if attr not in trace:
                continue
            v = trace[attr]
            if isinstance(v, str):
                trace[attr] = plot_text(v)
            elif isinstance(v, (tuple, list)) and any(isinstance(x, str) and plot_text(x) is not x for x in v):
                trace[attr] = [plot_text(x) for x in v]
    lay = fig.layout
    titled = [lay] + [lay[k] for k in lay if k.startswith(("xaxis", "yaxis"))] + [lay.legend]
    for obj in titled:
        if obj.title is not None and obj.title.text is not None:
            obj.title.text = plot_text(obj.title.text)
    for note in lay.annotations:
        note.text = plot_text(note.text)
    return fig


def _fig_html(fig: go.Figure, i: int) -> str:
    escape_figure(fig)
    fig.update_layout(height=360, margin={"l": 50, "r": 20, "t": 40, "b": 40}, template=_template())
    # each chart's element named by its place, not a fresh random id, so
    # that the same runs give the same report, byte for byte
    return fig.to_html(full_html=False, include_plotlyjs=i == 0, div_id=f"chart-{i}", config={"displaylogo": False, "responsive": True})


def bars(df: pl.DataFrame, by: str, x: str, y: str, *, title: str, barmode: str = "group", **layout) -> go.Figure:
    """One bar trace per value of `by` (in order of appearance), `x`
    against `y`: the host and fleet reports' grouped and stacked bars."""
    f = go.Figure()
    for name in df[by].unique(maintain_order=True):
        d = df.filter(pl.col(by) == name)
        f.add_bar(name=name, x=d[x].to_list(), y=d[y].to_list())
    f.update_layout(title=title, barmode=barmode, **layout)
    return f


def render_html(rep: dict) -> str:
    figs = []
    pv = rep["per_vm"]
    if pv.height:
        figs.append(bars(pv, "run", "vm", "throughput_per_s", title="Throughput per VM (transactions/s, or useful guest s/s)"))
    ser = rep["series"]
    if ser.height:
        f = go.Figure()
        for run in ser["run"].unique(maintain_order=True):
            d = ser.filter(pl.col("run") == run)
            f.add_scatter(name=run, x=d["t_s"].to_list(), y=d["per_s"].to_list(), mode="lines")
        f.update_layout(title="Host throughput over time (txn/s, 100 ms bins)", xaxis_title="s", yaxis_title="txn/s")
        figs.append(f)
    en = rep["energy"].filter(~pl.col("owner").str.starts_with("TOTAL"))
    if en.height:
        figs.append(bars(en, "owner", "run", "joules", title="Energy by owner (J): VMs + idle + unattributed = host total", barmode="stack"))
    es = rep.get("energy_series", pl.DataFrame())
    if es.height:
        f = go.Figure()
        for (run, owner), d in es.group_by(["run", "owner"], maintain_order=True):
            f.add_scatter(name=f"{run}: {owner}", x=d["t_s"].to_list(), y=(d["joules"] * 10).to_list(), mode="lines")
        f.update_layout(title="Power over time by owner (W, 100 ms bins)", xaxis_title="s", yaxis_title="W")
        figs.append(f)
    bl = rep["billing"]
    if bl.height:
        f = go.Figure()
        who = [f"{r}: {v}" for r, v in zip(bl["run"], bl["vm"])] if "run" in bl.columns else bl["vm"].to_list()
        for col in ("direct_ms_per_s", "attributed_ms_per_s", "common_share_ms_per_s"):
            f.add_bar(name=col.replace("_ms_per_s", ""), x=who, y=bl[col].to_list())
        f.update_layout(title="Host CPU per VM and run (ms per second): direct + attributed + common share", barmode="stack")
        figs.append(f)
    charts = [_fig_html(f, i) for i, f in enumerate(figs)]
    rec = rep["reconciliation"]
    parts = [
        f"<!doctype html><html lang=en><head><meta charset=utf-8><meta name=viewport content='width=device-width,initial-scale=1'><title>{esc(rep['title'])}</title><style>{CSS}</style></head><body>",
        f"<h1>{esc(rep['title'])}</h1><p>Capture <code>{esc(rep['capture'])}</code>.</p>",
        "".join(f"<p class=note>{esc(m)}</p>" for m in rep["missing"]),
        "<h2>Policy comparison</h2>",
        table_html(rep["summary"], rep["best"]),
        "<p>Best replayed value per column is highlighted.</p><ul>" + "".join(f"<li>{esc(s)}</li>" for s in rep["sentences"]) + "</ul>",
        FIDELITY_NOTE_HTML if rep.get("fidelity") is not None and rep["fidelity"].height else "",
        table_html(rep["fidelity"]) if rep.get("fidelity") is not None and rep["fidelity"].height else "",
        f"<p>{esc(NOISE_NOTE)}</p>" + table_html(rep["noise_floor"]) if rep.get("noise_floor") is not None and rep["noise_floor"].height else "",
        f"<p>{esc(WHATIF_NOTE)}</p>" + table_html(rep["what_ifs"], key="what-if") if rep.get("what_ifs") is not None and rep["what_ifs"].height else "",
        "<h2>Throughput and latency</h2>",
        table_html(rep["per_vm"]),
        charts[0] if charts else "",
        charts[1] if len(charts) > 1 else "",
        "<h2>Energy</h2><p>Power model: static + C·f·V² while busy, idle power while idle; per-VM energy + idle + unattributed = host total (computed per core, independently). Joules per owner, one row per run:</p>",
        table_html(rep.get("energy_by_run", rep["energy"])),
        f"<p>{esc(PER_WORK_NOTE)}</p>",
        table_html(rep.get("energy_per_work", pl.DataFrame())),
        "<p>Per core:</p>",
        table_html(rep.get("energy_per_core", pl.DataFrame())),
        charts[2] if len(charts) > 2 else "",
        charts[3] if len(charts) > 3 else "",
        "<h2>Billing</h2>",
        f"<p>What each tenant would pay under each run: direct CPU as the run had it, host I/O work as recorded (a replay does not replay it). Rule <b>{esc(rec['rule'])}</b>; {esc(EXCESS_NOTE)}. "
        + "; ".join(f"<span class={'ok' if r['reconciles'] else 'bad'}>{esc(recon_line(n, r))}</span>" for n, r in rep.get("reconciliations", {"recorded": rec}).items())
        + ".</p>",
        table_html(bill_view(rep["billing"]), key="vm"),
        charts[4] if len(charts) > 4 else "",
        "</body></html>",
    ]
    return "\n".join(parts)


#: what the energy-per-work table says, in the HTML and the Markdown
PER_WORK_NOTE = (
    "Per unit of work, one row per run: the same energy over the work the run did (transactions, or seconds of vCPU work without markers), "
    "the run's span per unit (delay) and their product (energy-delay, E·T/W²). Equal time hides work: slow cores draw less power and do less. "
    "An asymmetric replay's columns compare it with its all-fast baseline (negative: less)."
)


def render_markdown(rep: dict) -> str:
    def md(df: pl.DataFrame) -> str:
        if df.height == 0:
            return "(no rows)\n"
        lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
        for r in df.iter_rows():
            lines.append("| " + " | ".join("" if v is None else (f"{v:,.4g}" if isinstance(v, float) else str(v)) for v in r) + " |")
        return "\n".join(lines) + "\n"

    rec = rep["reconciliation"]
    out = [f"# {rep['title']}", ""] + [f"> {m}" for m in rep["missing"]] + ["", "## Policy comparison", md(rep["summary"])]
    out += [f"- {s}" for s in rep["sentences"]]
    if rep.get("fidelity") is not None and rep["fidelity"].height:
        out += ["", "## Replay fidelity", FIDELITY_NOTE, "", md(rep["fidelity"])]
    for key, note in (("noise_floor", NOISE_NOTE), ("what_ifs", WHATIF_NOTE)):
        if rep.get(key) is not None and rep[key].height:
            out += [note, "", md(rep[key])]
    out += ["", "## Throughput per VM", md(rep["per_vm"]), "## Energy (J per owner)", md(rep.get("energy_by_run", rep["energy"])), "### Per unit of work", PER_WORK_NOTE, "", md(rep.get("energy_per_work", pl.DataFrame())), "## Billing", f"Rule {rec['rule']}; {EXCESS_NOTE}.", "", md(bill_view(rep["billing"]))]
    out += [recon_line(n, r) for n, r in rep.get("reconciliations", {"recorded": rec}).items()]
    return "\n".join(out)


#: the report's parts `--json` gives, in its own words (the time series
#: stay in the HTML and in --tables)
JSON_PARTS = ("summary", "best", "sentences", "fidelity", "noise_floor", "what_ifs", "per_vm", "energy", "energy_by_run", "energy_per_core", "energy_per_work", "billing", "reconciliation", "reconciliations", "missing")


def render_json(rep: dict) -> dict:
    """The report's figures as plain JSON values: tables as lists of rows,
    numbers that are not finite as null (JSON has no NaN)."""

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

    return {"title": rep["title"], "capture": rep["capture"], **{k: plain(rep[k]) for k in JSON_PARTS}}
