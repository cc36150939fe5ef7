"""`cratrace synth`: generated traces with known truth."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from cratrace.cli.console import console
from cratrace.errors import UsageError


def synth_cmd(
    scenario: Annotated[str, typer.Argument(help="Scenario name (see --list).")] = "kvm-heavy-spin",
    out: Annotated[Optional[Path], typer.Option("-o", "--output", help="Trace file to write (plus FILE.truth.json).")] = None,
    seed: Annotated[int, typer.Option(help="Random seed: same seed, same file.")] = 1,
    sets: Annotated[Optional[list[str]], typer.Option("--set", help="key=value scenario parameter.")] = None,
    list_: Annotated[bool, typer.Option("--list", help="List scenarios and their parameters.")] = False,
    force: Annotated[bool, typer.Option("--force")] = False,
) -> None:
    """Write a real trace file for a scenario, with a ground-truth sidecar."""
    from cratrace.synth.run import synth
    from cratrace.synth.scenarios import SCENARIOS

    if list_:
        for name, mod in SCENARIOS.items():
            console.print(f"[bold]{name}[/]: {mod.__doc__.strip().splitlines()[0]}")
            for k, (v, doc) in mod.PARAMS.items():
                console.print(f"    {k}={v}  {doc}")
        return
    if out is None:
        raise UsageError("-o/--output is required")
    params = {}
    for s in sets or []:
        if "=" not in s:
            raise UsageError(f"--set {s!r}: expected key=value")
        k, v = s.split("=", 1)
        params[k] = v
    truth = synth(scenario, out, seed, params, force)
    console.print(f"[green]wrote[/] {out} and {out}.truth.json ({len(truth.get('spin_episodes', []))} true spin episodes)")


def register(app: typer.Typer) -> None:
    app.command("synth", rich_help_panel="Explore")(synth_cmd)
