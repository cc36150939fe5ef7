"""`cratrace fleet-report`: a sweep rolled up across hosts (issue #43)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from cratrace.cli.console import console, esc
from cratrace.cli.options import Verbose


def fleet_report_cmd(
    sweep: Annotated[Path, typer.Argument(help="A sweep directory (`cratrace sweep -o SWEEP`).")],
    out: Annotated[Path, typer.Option("-o", "--output", help="fleet.html (or .md with --format md; '-' prints).")] = Path("fleet.html"),
    fmt: Annotated[str, typer.Option("--format", help="html or md.")] = "html",
    tables: Annotated[Optional[Path], typer.Option("--tables", help="Also write every table (scenarios, hosts, hurts, tenants, headroom) as CSV and Parquet here.")] = None,
    slo_drop: Annotated[str, typer.Option("--slo-drop", help="The throughput drop a host or VM may take before a scenario 'hurts' it, and the limit of headroom: a percentage, e.g. 5% or 2.5.")] = "5%",
    tenants: Annotated[Optional[Path], typer.Option("--tenants", help="JSON {\"VM name\": \"tenant\"}: whose bill each VM is (default: each VM its own tenant; a copy its source VM's).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing report (and the files of --tables).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Also print the figures as JSON.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No message when the report is written.")] = False,
    verbose: Verbose = False,
) -> None:
    """Every policy of a sweep against the recording, across hosts: fleet
    totals and per-host distributions of throughput and energy change,
    the hosts a policy hurts, tenants' bills summed across hosts, and
    each host's headroom for more copies of its typical VM."""
    import math

    from cratrace.errors import UsageError
    from cratrace.fleet.dataset import is_sweep
    from cratrace.fleet.render import render_fleet_html, render_fleet_json, render_fleet_markdown
    from cratrace.fleet.report import build_fleet_report

    if fmt not in ("html", "md"):
        raise UsageError(f"--format {fmt!r}: allowed html, md")
    try:
        slo = float(slo_drop.strip().removesuffix("%"))
    except ValueError:
        slo = float("nan")
    if not (math.isfinite(slo) and 0 <= slo < 100):
        raise UsageError(f"--slo-drop {slo_drop}: expected a percentage from 0 to 100, e.g. 5%")
    if not is_sweep(sweep):
        raise UsageError(f"{sweep}: not a sweep (no sweep.json); make one with `cratrace sweep CAPTURES... -o {sweep}`")
    if as_json and str(out) == "-":
        raise UsageError("--json prints the figures: write the report to a file (-o), not to standard output")
    mapping = None
    if tenants:
        try:
            mapping = json.loads(tenants.read_text())
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
            raise UsageError(f"--tenants {tenants}: {e}") from None
        if not isinstance(mapping, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()):
            raise UsageError(f'--tenants {tenants}: expected a JSON object of VM name to tenant, e.g. {{"web1": "acme"}}')
    if str(out) != "-" and out.exists() and not force:
        from cratrace.errors import OutputExistsError

        raise OutputExistsError(f"{out}: already exists; pass --force to replace it")
    rep = build_fleet_report(sweep, slo, mapping)
    if tables:
        from cratrace.report.build import _write_tables

        _write_tables({k: rep[k] for k in ("scenarios", "hosts", "hurts", "tenants", "headroom")}, tables, force)
    text = render_fleet_markdown(rep) if fmt == "md" else render_fleet_html(rep)
    if str(out) == "-":
        print(text)
    else:
        from cratrace import atomic

        atomic.write_text(out, text)
    if as_json:
        print(json.dumps({**render_fleet_json(rep), "output": str(out), "tables": str(tables) if tables else None}, indent=2, sort_keys=True))
    elif not quiet and str(out) != "-":
        console.print(f"[green]fleet report[/] written to [bold]{esc(out)}[/]")


def register(app: typer.Typer) -> None:
    app.command("fleet-report", rich_help_panel="Fleet")(fleet_report_cmd)
