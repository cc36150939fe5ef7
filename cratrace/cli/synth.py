"""`cratrace synth`: generate a scenario's trace file and its ground truth.

Scenarios and their parameters are listed with ``--list``; each writes
FILE (trace.dat v7, zstd, read by `trace-cmd report`) plus
FILE.truth.json (see docs/synth.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from cratrace.cli.console import console, err_console, esc
from cratrace.cli.options import Verbose
from cratrace.errors import UsageError


def _scenario_help() -> str:
    from cratrace.synth.scenarios import SCENARIOS

    lines = []
    for name, mod in SCENARIOS.items():
        lines.append(f"{name}: {mod.SUMMARY}")
        for k, p in mod.PARAMS.items():
            lines.append(f"    {k}={p.default!r}  {p.help}")
    return "\n".join(lines)


def synth(
    scenario: Annotated[Optional[str], typer.Argument(help="scenario name (see --list)")] = None,
    output: Annotated[Optional[Path], typer.Option("-o", "--output", help="trace file to write")] = None,
    seed: Annotated[int, typer.Option(help="random seed; same seed and parameters give a byte-identical file")] = 0,
    set_: Annotated[Optional[list[str]], typer.Option("--set", help="override a parameter: key=value (repeatable)")] = None,
    force: Annotated[bool, typer.Option("--force", help="overwrite FILE and FILE.truth.json")] = False,
    list_: Annotated[bool, typer.Option("--list", help="list scenarios and their parameters, then exit")] = False,
    file_version: Annotated[int, typer.Option("--file-version", help="trace.dat version: 6 or 7")] = 7,
    compression: Annotated[Optional[str], typer.Option(help="v7 compression: none, zlib or zstd [default: zstd; v6 files are never compressed]")] = None,
    raw: Annotated[bool, typer.Option("--raw", help="write -o DIR as a raw capture (manifest.json, host.json with the VM inventory, trace.dat or xentrace.bin, truth) for `cratrace import DIR`")] = False,
    json_: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress or summary")] = False,
    verbose: Verbose = False,
) -> None:
    """Generate a synthetic trace with known ground truth.

    Writes FILE (trace.dat, v7 + zstd by default; `trace-cmd report` reads it)
    and FILE.truth.json (parameters, seed, event counts and the scenario's
    ground truth; see docs/synth.md). Scenarios:

    kvm-heavy-spin: VMs x vCPUs oversubscribed on pCPUs; lock-holder preemption,
    PAUSE exits (reason 40), PV kicks (kvm_hypercall nr 5), HLT parking,
    spin_begin/spin_end/txn_end trace_marker lines.

    kvm-io-billing: CPU-bound and networking VMs (cpu-cpu, cpu-net, net-net,
    net1..net4) sharing a saturated link; vhost work and packets per VM,
    common NIC irq/NET_RX softirq work.

    xen-io-billing: the Xen counterpart, written as a xentrace file (FILE is
    xentrace binary; `xenalyze --cpu-hz=2.4G FILE` reads it): guests'
    runstates and dom0 netback work with grant map/unmap/transfer records.

    kvm-postcopy: a VM of many processes touching absent pages after a
    postcopy switch; kvm_page_fault, kvm_try_async_get_page and
    kvm_async_pf_not_present/completed/ready.

    hetero: CPU-bound and I/O-bound VMs on fast and slow cores (cpu_frequency).

    thermal: hot and cold vCPUs on a few cores; RC temperature model,
    thermal_temperature, cpu_frequency throttling, cpu_idle.

    Run with --list for every parameter and its default; change one with
    --set key=value.
    """
    from cratrace.synth.generate import synthesize

    if list_:
        if json_:
            from cratrace.synth.scenarios import SCENARIOS

            console.print_json(json.dumps({
                name: dict(summary=mod.SUMMARY, version=mod.VERSION,
                           params={k: dict(default=p.default, help=p.help) for k, p in mod.PARAMS.items()})
                for name, mod in SCENARIOS.items()
            }))
        else:
            console.print(_scenario_help(), markup=False, highlight=False)
        return
    if scenario is None:
        raise UsageError("give a SCENARIO (see `cratrace synth --list`)")
    if output is None:
        raise UsageError("give the output file with -o FILE")
    if file_version not in (6, 7):
        raise UsageError(f"--file-version: expected 6 or 7, got {file_version}")
    if compression is None:
        compression = "zstd" if file_version == 7 else "none"
    if compression not in ("none", "zlib", "zstd"):
        raise UsageError(f"--compression: expected none, zlib or zstd, got {compression!r}")
    if file_version == 6 and compression != "none":
        raise UsageError(f"--compression {compression}: trace.dat version 6 has no compression (use --file-version 7)")
    overrides = {}
    for item in set_ or []:
        if "=" not in item:
            raise UsageError(f"--set {item!r}: expected key=value")
        k, v = item.split("=", 1)
        overrides[k.strip()] = v.strip()
    import contextlib
    import sys

    spinner = (err_console.status(f"generating {scenario}...") if sys.stderr.isatty() and not (json_ or quiet)
               else contextlib.nullcontext())
    with spinner:
        truth = synthesize(scenario, output, seed=seed, overrides=overrides, force=force,
                           version=file_version, compression=compression, raw=raw)
    xen = truth.get("file", {}).get("format") == "xentrace"
    trace = output / ("xentrace.bin" if xen else "trace.dat") if raw else output
    n = truth["total_records"] if xen else truth["total_events"]
    summary = dict(file=str(trace), truth=str(trace) + ".truth.json", scenario=scenario, seed=seed,
                   events=n, bytes=trace.stat().st_size)
    if json_:
        console.print_json(json.dumps(summary))
    elif not quiet:
        err_console.print(f"wrote {esc(summary['file'])} ({summary['bytes']} bytes, {summary['events']} {'records' if xen else 'events'}) "
                          f"and {esc(summary['truth'])}", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command("synth", rich_help_panel="Explore")(synth)
