"""`cratrace lab`: a workload that behaves like VMs, to capture here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from cratrace.cli.console import console, esc
from cratrace.cli.options import Verbose

lab_app = typer.Typer(help="Workload lab: QEMU-like processes with `CPU n/KVM` threads, spin locks and trace_marker annotations.", no_args_is_help=True)

VMS = typer.Option(help="Number of VM processes.")
VCPUS = typer.Option(help="vCPU threads per VM: one count for every VM, or one per VM, comma-separated (1,3: a 1-vCPU and a 3-vCPU VM; the last count repeats).")
LOCK = typer.Option(help="The VMs' lock: spin (native spinlock, spins until free) or pv (paravirtual spinlock as in KVM guests: spins 2^15 PAUSEs, then halts until the holder's unlock kicks it).")
WORK_CLOCK = typer.Option(help="How bursts and critical sections are measured: count (a calibrated loop with no system calls, as a guest computes in guest mode), cpu (thread CPU time read in the loop: fixed work, but a system call every few µs) or wall (a preempted burst shrinks).")
VMM = typer.Option(help="Name the VM processes and threads as this VMM does: qemu (`CPU n/KVM`), firecracker (`fc_vcpu n`), cloud-hypervisor (`vcpuN`, created by a `vmm` thread), crosvm (`crosvm_vcpuN`) or kvmtool (`kvm-vcpu-N`).")
MARKERS = typer.Option(help="The guests' trace_marker lines: lab (`txn_end vm=X vcpu=N`, spin_begin/spin_end with the same fields), bare (`txn_end n=K`, spin_begin, spin_end), rtapp (rt-app's `rtapp_loop: event=end ...`), free (free text) or none.")
QUIET = typer.Option("--quiet", "-q", help="No summary; the exit code says how it went.")
JSON = typer.Option("--json", help="Print the summary as JSON.")
VM_SESSIONS = typer.Option(help="shared: the VMs share the lab's session (one autogroup); own: each VM process gets its own session, so with autogroups on the kernel shares CPUs between VMs first, as libvirt's per-VM cgroups make it.")


def _vcpus(text: str) -> int | tuple[int, ...]:
    from cratrace.lab import LabError

    try:
        counts = tuple(int(n) for n in text.split(","))
    except ValueError:
        raise LabError(f"--vcpus must be a count or comma-separated counts, got {text!r}") from None
    return counts[0] if len(counts) == 1 else counts


@lab_app.command("run")
def run_cmd(
    vms: Annotated[int, VMS] = 2,
    vcpus: Annotated[str, VCPUS] = "2",
    burst_us: Annotated[int, typer.Option(help="Compute burst between critical sections (µs).")] = 300,
    hold_us: Annotated[int, typer.Option(help="Critical section under the VM's spin lock (µs).")] = 100,
    sleep_us: Annotated[int, typer.Option(help="Sleep standing in for I/O after each transaction (µs).")] = 200,
    duration: Annotated[float, typer.Option(help="Seconds.")] = 2.0,
    work_clock: Annotated[str, WORK_CLOCK] = "count",
    lock: Annotated[str, LOCK] = "spin",
    vm_sessions: Annotated[str, VM_SESSIONS] = "shared",
    vmm: Annotated[str, VMM] = "qemu",
    markers: Annotated[str, MARKERS] = "lab",
    quiet: Annotated[bool, QUIET] = False,
    as_json: Annotated[bool, JSON] = False,
    verbose: Verbose = False,
) -> None:
    """Run the lab workload in the foreground."""
    from cratrace.lab import LabParams, run

    from cratrace.lab import LabError

    r = run(LabParams(vms, _vcpus(vcpus), burst_us, hold_us, sleep_us, duration, work_clock, lock, vm_sessions, vmm, markers))
    if r.returncode != 0:
        raise LabError(f"the lab exited with status {r.returncode}: {(r.stderr or '').strip()[-200:]}")
    if as_json:
        print(json.dumps({"vms": vms, "vcpus": vcpus, "duration_s": duration, "returncode": r.returncode}, indent=2))
    elif not quiet:
        console.print(f"lab ran {vms} VMs x {vcpus} vCPUs for {duration} s")


@lab_app.command("capture")
def capture_cmd(
    out: Annotated[Path, typer.Option("-o", "--output", help="Capture directory to create (imported and modelled).")],
    vms: Annotated[int, VMS] = 2,
    vcpus: Annotated[str, VCPUS] = "2",
    burst_us: Annotated[int, typer.Option(help="Compute burst (µs).")] = 300,
    hold_us: Annotated[int, typer.Option(help="Critical section (µs).")] = 100,
    sleep_us: Annotated[int, typer.Option(help="Sleep after each transaction (µs).")] = 200,
    duration: Annotated[float, typer.Option(help="Seconds.")] = 2.0,
    work_clock: Annotated[str, WORK_CLOCK] = "count",
    lock: Annotated[str, LOCK] = "spin",
    vm_sessions: Annotated[str, VM_SESSIONS] = "shared",
    vmm: Annotated[str, VMM] = "qemu",
    markers: Annotated[str, MARKERS] = "lab",
    preset: Annotated[str, typer.Option(help="Capture preset.")] = "kvm-sched",
    force: Annotated[bool, typer.Option("--force")] = False,
    quiet: Annotated[bool, QUIET] = False,
    as_json: Annotated[bool, JSON] = False,
    verbose: Verbose = False,
) -> None:
    """Record the lab under `cratrace record`, then import and model it."""
    import shutil
    import tempfile

    from cratrace_collect import CollectError, collect
    from cratrace.cli.record import RecordError
    from cratrace.importer import import_capture
    from cratrace.lab import LabParams, start
    from cratrace.model import build_model

    from cratrace import atomic

    params = LabParams(vms, _vcpus(vcpus), burst_us, hold_us, sleep_us, duration, work_clock, lock, vm_sessions, vmm, markers)
    # OUT is locked and checked before the capture is spent, and stays
    # locked through the import and the model (issue 42)
    with atomic.Destination(out, force=force, ours=atomic.is_capture, what="capture"):
        raw = Path(tempfile.mkdtemp(prefix="cratrace-lab-raw-"))
        try:
            try:
                collect(raw, preset, duration=duration + 5, force=True, workload_popen=lambda: start(params))
            except CollectError as e:
                raise RecordError(str(e)) from None
            # the raw capture is deleted below: the capture says so rather
            # than naming a path that will be gone
            cap = import_capture([raw], out, force=force, removed_after="cratrace lab capture")
            rows = build_model(cap)
        finally:
            shutil.rmtree(raw, ignore_errors=True)
    if as_json:
        print(json.dumps({"capture": str(out), "events": cap.meta["events"], "model": rows}, indent=2))
    elif not quiet:
        console.print(f"[green]lab capture[/] {esc(out)}: {sum(cap.meta['events'].values()):,} events; model: " + ", ".join(f"{k} {v:,}" for k, v in rows.items()))


def register(app: typer.Typer) -> None:
    app.add_typer(lab_app, name="lab", rich_help_panel="Pipeline")
