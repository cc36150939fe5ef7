"""`cratrace model`: build the canonical model tables of a capture."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from cratrace.cli.console import console, err_console, esc, print_outcomes
from cratrace.cli.options import verbose_option


def model_cmd(
    captures: Annotated[list[Path], typer.Argument(help="Capture directory (from `cratrace import`); several (e.g. caps/*/) are modelled in parallel on Dask.")],
    spin_gap_us: Annotated[float, typer.Option(help="PAUSE exits closer than this belong to one spin episode.")] = 50.0,
    window_ms: Annotated[float, typer.Option(help="Window of the io_work table.")] = 100.0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress or summary.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Rows per table, the VMs found and the notes, as JSON.")] = False,
    sets: Annotated[Optional[list[str]], typer.Option("--set", help="key=value. vm_pattern=REGEX: vCPU threads named otherwise than the recognised VMMs' (a regular expression over the whole thread name; group `vcpu`, or else the first group, is the vCPU index; an optional group `vm` names the VM), e.g. '^worker-(\\d+)$'.")] = None,
    scheduler: Annotated[Optional[str], typer.Option("--scheduler", help="With several captures: an existing Dask scheduler (default: DASK_SCHEDULER_ADDRESS, else a local cluster).")] = None,
    workers: Annotated[Optional[int], typer.Option("--workers", help="With several captures: worker processes of the local cluster (default: one per core).")] = None,
    verbose: Annotated[bool, verbose_option("Name each table as it is built, also off a terminal")] = False,
) -> None:
    """Build (or rebuild) threads, cpu_slices, vcpu_states, spin_episodes,
    io_work, power, faults and markers into CAPTURE/model/.

    VMs come from the capture's inventory (host.json, written by `cratrace
    record`) or, without one, from thread names: QEMU `CPU n/KVM`,
    Firecracker `fc_vcpu n`, Cloud Hypervisor `vcpuN`, crosvm
    `crosvm_vcpuN`, kvmtool `kvm-vcpu-N`, threads that ran `kvm_entry`,
    and Xen domains. Exits 1 when the VMs had to be guessed (several VMs
    whose vCPU threads were created before the trace, grouped by thread
    id). The tables are documented in docs/tables.md; `cratrace sql` and
    `cratrace.open()` see them beside the event tables.
    """
    import math
    import sys

    from cratrace.errors import UsageError

    if not (math.isfinite(spin_gap_us) and spin_gap_us >= 0):
        raise UsageError(f"--spin-gap-us {spin_gap_us}: expected a number of µs >= 0")
    if not (math.isfinite(window_ms) and window_ms >= 0.001):
        raise UsageError(f"--window-ms {window_ms}: expected a window of at least 0.001 ms")
    settings = {}
    for item in sets or []:
        key, eq, value = item.partition("=")
        if not eq:
            raise UsageError(f"--set {item!r}: expected key=value")
        if key != "vm_pattern":
            raise UsageError(f"--set {key}: unknown setting; model takes vm_pattern=REGEX")
        settings[key] = value
    if "vm_pattern" in settings:
        from cratrace.model.vms import vcpu_names

        vcpu_names(settings["vm_pattern"])  # a bad pattern is refused before any work
    if len(captures) > 1:
        _model_many(captures, int(spin_gap_us * 1000), int(window_ms * 1e6), settings.get("vm_pattern"), scheduler, workers, quiet, as_json)
        return
    if scheduler or workers:
        raise UsageError("--scheduler and --workers go with several captures; one is modelled here")
    capture = captures[0]
    # Marker lines are parsed (in Rust, without the GIL) while polars is
    # imported: on marker-heavy captures each takes about a third of a second.
    from cratrace import atomic
    from cratrace.errors import CaptureError
    from cratrace.model.marker_parse import MarkerParse

    if not (capture / "capture.json").is_file():  # before a lock file is made beside it
        raise CaptureError(f"{capture}: not a capture (no capture.json); create one with `cratrace import`")
    with atomic.locked(capture), MarkerParse(capture) as early:
        from cratrace.model.build import build_model

        say = None if (quiet or as_json or not (verbose or sys.stderr.isatty())) else (lambda name: err_console.print(f"[dim]model: {esc(name)}[/]"))
        rows = build_model(capture, spin_gap_ns=int(spin_gap_us * 1000), window_ns=int(window_ms * 1e6), progress=say, marker_parse=early, vm_pattern=settings.get("vm_pattern"))
    import cratrace
    from cratrace.model.build import model_notes

    meta = cratrace.open(capture).meta
    guessed, remarks = model_notes(meta)
    # Everything alive now lives until exit: frozen, interpreter shutdown's
    # collections skip it (exit took 125 ms after a build of the model
    # benchmark's capture, 35 ms frozen). Not for every command: DuckDB's
    # bindings report objects never collected as leaks.
    gc.freeze()
    if as_json:
        print(json.dumps({"tables": rows, "vms": meta["model"]["vms"], "guessed": guessed, "remarks": remarks}, indent=2))
    elif not quiet:
        console.print("model tables: " + ", ".join(f"{k} {v:,}" for k, v in rows.items()))
        vms = meta["model"]["vms"]
        if vms:
            console.print("VMs: " + ", ".join(f"{esc(v['vm'])} ({v['vcpus']} vCPUs, {v['evidence']})" for v in vms), highlight=False, soft_wrap=True)
        for line in remarks:
            err_console.print(f"note: {esc(line)}", highlight=False, soft_wrap=True)
    for line in guessed:
        err_console.print(f"[yellow]warning:[/] {esc(line)}", highlight=False, soft_wrap=True)
    if guessed:
        raise typer.Exit(1)


def _model_many(captures: list[Path], spin_gap_ns: int, window_ns: int, vm_pattern: str | None, scheduler: str | None, workers: int | None, quiet: bool, as_json: bool) -> None:
    """Each capture's model as a task on Dask; exit 1 when any failed or
    had its VMs guessed (each said in one line), 2 when every one failed
    (as `import --fleet`: nothing was done)."""
    from cratrace.cli.console import progress_bar
    from cratrace.errors import UsageError
    from cratrace.fleet.cluster import dask_client
    from cratrace.fleet.many import run_each
    from cratrace.fleet.tasks import model_one

    jobs: dict[str, tuple] = {}
    for c in captures:
        if not (c / "capture.json").is_file():
            raise UsageError(f"{c}: not a capture (no capture.json); create one with `cratrace import`")
        jobs.setdefault(str(c), (str(c.resolve()), spin_gap_ns, window_ns, vm_pattern))
    with dask_client(scheduler, workers) as client, progress_bar("modelling captures", len(jobs), quiet=quiet or as_json) as cb:
        results = run_each(client, model_one, jobs, lambda done, total: cb(done))
    failed = {n: r["error"] for n, r in results.items() if "error" in r}
    guessed = {n: r["ok"]["guessed"] for n, r in results.items() if "ok" in r and r["ok"]["guessed"]}
    if as_json:
        print(json.dumps({n: ({k: r["ok"][k] for k in ("tables", "vms", "guessed", "remarks")} if "ok" in r else {"error": r["error"]}) for n, r in results.items()}, indent=2))
    elif not quiet:
        for n, r in results.items():
            if "ok" in r:
                console.print(f"{esc(n)}: {sum(r['ok']['tables'].values()):,} rows in {len(r['ok']['tables'])} tables; VMs: {esc(', '.join(r['ok']['vms']) or 'none')}", highlight=False, soft_wrap=True)
        console.print(f"[green]modelled[/] {len(results) - len(failed)} of {len(results)} captures", highlight=False)
    if print_outcomes(failed, guessed):
        raise typer.Exit(2 if failed and len(failed) == len(results) else 1)


def register(app: typer.Typer) -> None:
    app.command("model", rich_help_panel="Pipeline")(model_cmd)
