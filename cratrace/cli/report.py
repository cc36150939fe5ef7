"""`cratrace report`: the comparison a capacity planner takes to a meeting."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Optional

import typer

from cratrace.cli.console import console, esc
from cratrace.cli.options import Verbose


def report_cmd(
    capture: Annotated[Path, typer.Argument(help="Modelled capture.")],
    replays: Annotated[Optional[Path], typer.Option("--replays", help="Output directory of `cratrace replay`.")] = None,
    out: Annotated[Path, typer.Option("-o", "--output", help="report.html (or .md with --format md; '-' prints).")] = Path("report.html"),
    tables: Annotated[Optional[Path], typer.Option("--tables", help="Also write every table as CSV and Parquet here.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="html or md.")] = "html",
    billing_rule: Annotated[str, typer.Option(help="Split of the common pool: proportional, packets, bytes, equal, unallocated.")] = "proportional",
    prices: Annotated[Optional[Path], typer.Option(help="JSON prices, e.g. {\"cpu_second\": 0.00001}.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing report (and the files of --tables).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No message when the report is written.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Also print the figures (summary, best run per column, per-VM throughput, energy, billing) as JSON.")] = False,
    evidence: Annotated[Optional[list[Path]], typer.Option("--evidence", help="The JSON of `python benchmarks/replay_fidelity.py --json` (the gate against the noise floor, per setting) or of `benchmarks/whatif_validation.py --json` (what-ifs against real recordings): shown in the report's Replay fidelity section (repeatable).")] = None,
    verbose: Verbose = False,
) -> None:
    """Throughput, latency, energy and per-VM billing, recorded vs each replay."""
    from cratrace.errors import UsageError
    from cratrace.report import build_report

    if fmt not in ("html", "md"):
        raise UsageError(f"--format {fmt!r}: allowed html, md")
    if as_json and str(out) == "-":
        raise UsageError("--json prints the figures: write the report to a file (-o), not to standard output")
    price_map = None
    if prices:
        try:
            price_map = json.loads(prices.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise UsageError(f"--prices {prices}: {e}") from None
        price_map = _checked_prices(prices, price_map)
    evidence_docs = []
    for path in evidence or []:
        try:
            evidence_docs.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
            raise UsageError(f"--evidence {path}: {e}") from None
    rep = build_report(capture, replays, out, fmt=fmt, tables_dir=tables, rule=billing_rule, prices=price_map, force=force, evidence=evidence_docs)  # type: ignore[arg-type]
    if as_json:
        from cratrace.report.render import render_json

        print(json.dumps({**render_json(rep), "output": str(out), "tables": str(tables) if tables else None}, indent=2, sort_keys=True))
    elif not quiet and str(out) != "-":
        console.print(f"[green]report[/] written to [bold]{esc(out)}[/]")


def register(app: typer.Typer) -> None:
    app.command("report", rich_help_panel="Pipeline")(report_cmd)


#: what a price file may set (a typo would otherwise bill at the default)
PRICES = {"cpu_second": "price of one CPU second"}


def _checked_prices(path: Path, prices: object) -> dict[str, float]:
    from cratrace.errors import UsageError

    if not isinstance(prices, dict):
        raise UsageError(f'--prices {path}: expected a JSON object such as {{"cpu_second": 0.00001}}')
    for k, v in prices.items():
        if k not in PRICES:
            raise UsageError(f"--prices {path}: unknown price {k!r} (allowed: {', '.join(f'{n} ({d})' for n, d in PRICES.items())})")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise UsageError(f"--prices {path}: {k} = {v!r}: expected a number >= 0")
    return {k: float(v) for k, v in prices.items()}

