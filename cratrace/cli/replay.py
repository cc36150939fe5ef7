"""`cratrace replay`: what would the host have done under policy X?"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from cratrace.cli.console import console, err_console, esc
from cratrace.cli.options import ENV_THROUGHPUT_MARKER, Verbose
from cratrace.errors import UsageError


def replay_cmd(
    out: Annotated[Path, typer.Option("-o", "--output", help="Directory for OUT/<policy>/model/*.parquet and metrics.json.")],
    capture: Annotated[Optional[Path], typer.Argument(help="A modelled capture (`cratrace model` first); optional for --scenario postcopy.")] = None,
    policy: Annotated[Optional[list[str]], typer.Option("--policy", "-p", help="Scheduler, spin response and placement: fair (CFS), eevdf (Linux 6.6+), credit (Xen), rr (round robin), lpar (Umeno et al.'s three-subqueue dispatcher, the default under a bare wapd, wopd or rslp); spin, yield, wapd, wopd, rslp, pv (paravirtual spinlock: spin, then halt until kicked); energy-balance, asymmetric (fast/slow core pools, credit), recorded (each stretch of work on the CPU the capture ran it on). Compose with +, e.g. credit+wapd, eevdf+pv, fair+energy-balance, asymmetric+yield, eevdf+recorded. Repeatable; default: the policy that produced the capture (with +pv when its vCPUs halted while spinning). See docs/replay-policies.md.")] = None,
    sets: Annotated[Optional[list[str]], typer.Option("--set", help="key=value: engine parameters (ple_window_ns, respin_ns, balance_k, fast_cores, ...), costs (context_switch_ns, ...), host (pcpus, freq_khz, elasticity), per VM class.VM=cpu|io and elasticity.VM=E, throughput_marker=NAME (a marker the guests write; default txn_end), fidelity_tolerance_pct, sched_groups=auto|recorded|off|per-vm (replay the host's autogroups and CPU cgroups; auto: when the VMs were in different ones; per-vm, a what-if: each VM a group of its own), affinity=recorded|off and affinity.VM=CPUS, cap.VM=PCT, weight.VM=W, cpu_speed=markers|off (markers: read each CPU's speed over time from the vCPUs' transactions and run each CPU at it; off, the default: work takes as long as it did). Unknown keys list the allowed ones.")] = None,
    seed: Annotated[Optional[int], typer.Option(help="Where the policies' random draws start: eevdf's newidle balancing odds (newidle_odds, as Linux 6.18.5+ throws a die), postcopy's guest-kernel faults (kernel_fault_fraction), --add-vm's start offsets; everything else is deterministic. Same inputs and seed, byte-identical outputs. Default 0 (postcopy: 1).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace existing policy outputs.")] = False,
    scenario: Annotated[Optional[str], typer.Option("--scenario", help="`postcopy`: postcopy migration with and without async page faults; fetches share the link and the source (settings via --set: tasks, task_mb, vm_mb, vcpus, compute_ns, link_bytes_per_s, rtt_ns, source_workers, source_service_ns, fetch_overhead_ns, ready_delay_ns, ...; defaults: the paper's setup, docs/replay-policies.md).")] = None,
    drop_vm: Annotated[Optional[list[str]], typer.Option("--drop-vm", help="What-if: replay without this VM's demand (repeatable).")] = None,
    add_vm: Annotated[Optional[list[str]], typer.Option("--add-vm", help="What-if: NAME[:COUNT] more copies of a recorded VM's demand, as VMs NAME+1, NAME+2, ..., each started later by an offset drawn from --seed (repeatable). With --set pcpus=N, cap.VM=PCT (a VM's CPU capped at PCT% of one CPU: cgroup cpu.max, Xen's credit cap) and weight.VM=W (its share, cgroup cpu.weight, default 100; Xen's credit weight 256 is 100), the capacity planner's questions.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print metrics as JSON.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing; the outputs and the exit code say how it went.")] = False,
    throughput_marker: Annotated[Optional[str], typer.Option("--throughput-marker", envvar=ENV_THROUGHPUT_MARKER, help="The marker the guests write once per transaction (default txn_end); the same as --set throughput_marker=NAME, which wins over it.", show_default=False)] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=0, help="Policies replayed at once, each on a CPU of its own (0: one per CPU, at most one per policy, and no more than the available memory holds at about 32 bytes per recorded phase each; 1: one at a time, the least memory: each replay holds its own demand and timeline). The outputs do not depend on it.")] = 0,
    verbose: Verbose = False,
) -> None:
    """Replay the recorded demand under each policy and compare.

    Exits 1 when the replay under the policy that produced the capture
    (eevdf for KVM hosts on Linux 6.6 or later, fair before, credit for
    Xen) misses the fidelity gate.
    """
    from cratrace.replay import replay_capture

    settings: dict[str, str] = {}
    for s in sets or []:
        if "=" not in s:
            raise UsageError(f"--set {s!r}: expected key=value")
        k, v = s.split("=", 1)
        settings[k.strip()] = v.strip()
    if throughput_marker is not None and scenario is None:
        settings.setdefault("throughput_marker", throughput_marker.strip())
    if scenario is not None:
        if scenario != "postcopy":
            raise UsageError(f"--scenario {scenario!r}: allowed postcopy")
        from cratrace.capture import Capture
        from cratrace.replay.postcopy import run_postcopy

        if seed is not None:
            settings.setdefault("seed", str(seed))
        res = run_postcopy(Capture(capture) if capture else None, out, settings, force)
        if as_json:
            print(json.dumps(res, indent=2, sort_keys=True))
        elif not quiet:
            for name, r in res["runs"].items():
                f = r["fetch"]
                fetch = f"fetch {f['mean_us']:.0f} µs (idle {f['idle_us']:.0f}), link busy {f['link_utilisation']:.0%}, " if f["mean_us"] is not None else ""
                console.print(f"{esc(name):12} mean task {r['mean_task_s']:.3f} s, vCPU in guest {', '.join(f'{x:.0%}' for x in r['vcpu_guest_fraction'])}, {fetch}faults {r['faults']}")
            console.print(f"async page faults: {res['async_pf_speedup_pct']}% faster ({res['touches_from']}); outputs in [bold]{esc(out)}/postcopy[/]")
        return
    if capture is None:
        raise UsageError("a capture is required (except for --scenario postcopy)")
    if not policy:
        from cratrace.capture import Capture
        from cratrace.replay.plan import baseline_policy

        policy = [baseline_policy(Capture(capture))]
    res = replay_capture(capture, policy, out, settings=settings, seed=seed or 0, force=force, drop_vms=drop_vm or [], add_vms=add_vm or [], jobs=jobs)
    if as_json:
        print(json.dumps(res, indent=2, sort_keys=True))
    elif not quiet:
        # compact headers, numbers never wrapped: fits an 80-column terminal;
        # the legend below says what each column is
        from rich.table import Table

        t = Table(box=None, pad_edge=False, caption="ETR/ITR: transactions per second of wall / busy time (–: the guests wrote no throughput markers); calls: hypervisor calls per busy s; ovh: scheduling overhead; exc: excessive spins; fidelity: CPU-time / throughput error against the recording (gate 5%, checked for the policy that produced the capture)", caption_justify="left")
        t.add_column("policy", no_wrap=True)
        for name in ("ETR/s", "ITR/s", "guest%", "spin s", "calls", "ovh%", "exc", "fidelity %"):
            t.add_column(name, justify="right", no_wrap=True)
        for p, m in res.items():
            h, f = m["host"], m["fidelity"]
            # the mark is the gate's: for another policy the errors say how far
            # it departs from the recording, which is no pass or fail
            mark = (" [green]✓[/]" if f["passed"] else " [red]✗[/]") if f["gate_applies"] else ""
            fid = f"{f['cpu_time_err_pct']:.1f}/{f['throughput_err_pct']:.1f}" + mark
            # no VM's transactions counted (no markers): a rate of 0 would
            # read as a host that did no work
            counted = any(v["marks"] or v["recorded_throughput_per_s"] for v in m["vms"].values())
            etr, itr = (f"{h['etr']:.0f}", f"{h['itr'] or 0:.0f}") if counted else ("–", "–")
            t.add_row(p, etr, itr, f"{h['guest_util_pct']:.1f}", f"{sum(v['spin_s'] for v in m['vms'].values()):.3f}", f"{h['hypercalls_per_busy_s'] or 0:.0f}", f"{h['sched_overhead_pct']:.2f}", str(sum(v['excessive_spins'] for v in m['vms'].values())), fid)
        console.print(t)
        for p, m in res.items():
            if "energy_balance" in m:
                eb = m["energy_balance"]
                console.print(f"{esc(p)}: {eb['swaps_decided']} swaps decided, {eb['swaps_realised']} realised; per-core energy spread {eb['core_energy_spread_pct']}%")
            if "asymmetric" in m:
                a = m["asymmetric"]
                pools = "; ".join(f"{k} cores {v['cores']} at {v['khz'] / 1e6 if v['khz'] else 0:.2f} GHz: {', '.join(v['vcpus']) or 'no vCPUs'}" for k, v in a["pools"].items())
                console.print(f"{esc(p)}: {esc(pools)}")
                def pct(x: float | None, sign: int = -1) -> str:
                    return "–" if x is None else f"{sign * x:+.1f}%"

                console.print(
                    f"{esc(p)} vs {esc(a['baseline'])}: energy per {esc(a['saving_unit'])} {pct(a['energy_saving_per_work_pct'])} (dynamic {pct(a['dynamic_energy_saving_per_work_pct'])}), "
                    f"energy-delay per {esc(a['saving_unit'])} {pct(a['edp_change_per_work_pct'], 1)}, throughput {pct(a['throughput_change_pct'], 1)}; equal time: power {pct(a['power_saving_equal_time_pct'])} (dynamic {pct(a['dynamic_power_saving_equal_time_pct'])})"
                )
                for note in a["notes"]:
                    console.print(f"  {esc(note)}")
        console.print(f"outputs in [bold]{esc(out)}[/]")
    missed = [(p, m["fidelity"]) for p, m in res.items() if m["fidelity"]["gate_applies"] and not m["fidelity"]["passed"]]
    for p, f in missed:
        err_console.print(f"[yellow]warning:[/] {esc(p)} is the capture's own policy and its replay misses the fidelity gate: CPU time {f['cpu_time_err_pct']:.1f}%, throughput {f['throughput_err_pct']:.1f}% against the recording (gate {f['tolerance_pct']:g}%)", highlight=False, soft_wrap=True)
    if missed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("replay", rich_help_panel="Pipeline")(replay_cmd)
