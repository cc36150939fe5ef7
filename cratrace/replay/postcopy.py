"""Postcopy migration what-if (issue #6, ``cratrace replay --scenario
postcopy``): the VM resumes at the destination with its pages absent;
its tasks fault them in over the migration link, with and without
guest-cooperative async page faults (``replay/src/postcopy``).

Page touches come from the capture's fault records (EPT faults per vCPU,
in order) when it has them, otherwise from a working-set model: ``tasks``
sequential readers of ``task_mb`` each, on ``vcpus`` vCPUs of a
``vm_mb`` VM, computing ``compute_ns`` of guest time per touched page.
Both runs are written to ``OUT/postcopy/metrics.json``.

Fetches share the migration link and the source's page server (issue
#41): the defaults are the paper's setup (10 GbE, 30 µs RTT, ≈ 100 µs
idle fetch) and ``compute_ns``'s default is the one input taken from the
paper's results: the compute at which its sequential read spends 38% of
its vCPU in the guest without async page faults
(``replay/src/postcopy/params.rs``; docs/replay-policies.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from cratrace import _native, atomic
from cratrace.capture import Capture
from cratrace.errors import UsageError
from cratrace.replay.settings import Range, setting_in_range, setting_number

#: the engine's defaults (``replay/src/postcopy/params.rs``), with the
#: compute per touched page they imply for the paper's 38%
DEFAULTS = _native.postcopy_defaults()
MODEL = {"tasks": 4, "task_mb": 200, "vm_mb": 1024, "vcpus": 1, "compute_ns": int(DEFAULTS["compute_ns"])}

INF = float("inf")
#: each setting's range, whether it counts things, and what it is (others:
#: ns >= 0); values outside made the scenario divide by zero, never end (a
#: 0 ns guest slice) or mean nothing (a fault fraction of 2)
NS: Range = (0, INF, False, "ns >= 0")
RANGES: dict[str, Range] = {
    "tasks": (1, 1e6, True, "a count of tasks >= 1"),
    "task_mb": (1, 1e7, True, "a whole number of MB >= 1"),
    "vm_mb": (1, 1e8, True, "a whole number of MB >= 1"),
    "vcpus": (1, 1024, True, "a count of vCPUs from 1 to 1024"),
    "compute_ns": NS,
    "page_bytes": (512, 1 << 30, True, "a page size in bytes, at least 512"),
    "link_bytes_per_s": (1, INF, False, "a bandwidth in bytes/s above 0"),
    "max_inflight": (1, 1e6, True, "a count >= 1"),
    "source_workers": (1, 1e6, True, "a count of pages the source serves at once, >= 1"),
    "mtu_bytes": (68, 1 << 20, True, "an MTU in bytes from 68 to 1048576"),
    "msg_header_bytes": (0, 1 << 20, True, "a whole number of bytes >= 0"),
    "frame_bytes": (0, 1 << 20, True, "a whole number of bytes >= 0"),
    "apf_per_vcpu": (0, 1e6, True, "a count >= 0"),
    "background_depth": (0, 1e6, True, "a count >= 0"),
    "guest_slice_ns": (1000, INF, False, "a slice of at least 1000 ns"),
    "kernel_fault_fraction": (0, 1, False, "a fraction from 0 to 1"),
    "background_start_ns": (-INF, INF, False, "ns (negative: no background stream)"),
}
ENGINE = {"page_bytes", "link_bytes_per_s", "rtt_ns", "msg_header_bytes", "mtu_bytes", "frame_bytes", "fetch_overhead_ns", "source_service_ns", "source_workers", "max_inflight", "apf_per_vcpu", "exit_entry_ns", "not_present_ns", "guest_switch_ns", "guest_wake_ns", "guest_slice_ns", "ready_delay_ns", "kernel_fault_fraction", "background_start_ns", "background_depth", "seed"}


def _touches(cap: Capture | None, m: dict) -> tuple[list, list, int, int]:
    page = 4096
    if cap is not None and "faults" in cap.model:
        f = cap.model["faults"].collect().filter((pl.col("kind") == "ept") & pl.col("address").is_not_null() & pl.col("vcpu").is_not_null())
        if f.height:
            pages = (f["address"] // page).cast(pl.Int64)
            first = int(pages.min())
            f = f.with_columns(((pl.col("address") // page) - first).alias("pg"))
            lists = [(int(v), int(m["compute_ns"]), g.sort("ts")["pg"].to_list()) for (v,), g in f.group_by(["vcpu"], maintain_order=True)]
            vcpus = max(int(f["vcpu"].max()) + 1, 1)
            return [], lists, int(f["pg"].max()) + 1, vcpus
    per = int(m["task_mb"]) * 1_000_000 // page
    tasks = [(i % int(m["vcpus"]), i * per, per, int(m["compute_ns"])) for i in range(int(m["tasks"]))]
    vm_pages = max(int(m["vm_mb"]) * (1 << 20) // page, per * int(m["tasks"]))
    return tasks, [], vm_pages, int(m["vcpus"])


def run_postcopy(cap: Capture | None, out: Path, settings: dict[str, str], force: bool = False) -> dict:
    m = dict(MODEL)
    engine = {}
    for k, v in settings.items():
        if k in MODEL:
            m[k] = setting_in_range(k, v, RANGES, NS)
        elif k == "seed":
            seed = setting_number(k, v)
            if not (seed == int(seed) and 0 <= seed < 2**53):
                raise UsageError(f"seed {v} (--seed or --set seed=): expected a whole number from 0 to 2^53 - 1")
            engine[k] = seed
        elif k in ENGINE:
            engine[k] = setting_in_range(k, v, RANGES, NS)
        else:
            raise UsageError(f"--set {k}: not a postcopy setting (allowed: {', '.join(sorted(set(MODEL) | ENGINE))})")
    tasks, lists, vm_pages, vcpus = _touches(cap, m)
    runs = {}
    for name, apf in (("async_pf", 1.0), ("no_async_pf", 0.0)):
        r = dict(_native.postcopy(params=engine | {"async_pf": apf}, vm_pages=vm_pages, vcpus=vcpus, tasks=tasks, touch_lists=lists))
        done = r["task_done_ns"]
        # the link and the source work until the last task ends or, with a background stream, the last page arrives
        span = max([*done, r["migration_done_ns"] or 0])
        n = r["demand_fetches"]
        workers = int(engine.get("source_workers", DEFAULTS["source_workers"]))
        runs[name] = {
            "task_done_s": [round(t / 1e9, 6) for t in done],
            "mean_task_s": round(sum(done) / max(len(done), 1) / 1e9, 6),
            # guest, host and halted time add up to each vCPU's elapsed time
            "vcpu_guest_fraction": [round(x, 4) for x in r["vcpu_guest_fraction"]],
            "vcpu_halted_fraction": [round(h / e, 4) if e else 0.0 for h, e in zip(r["vcpu_halted_ns"], r["vcpu_elapsed_ns"])],
            "fetch": {
                "demand": n,
                "idle_us": round(r["idle_fetch_ns"] / 1e3, 3),
                "mean_us": round(r["demand_fetch_ns"] / n / 1e3, 3) if n else None,
                "mean_wait_us": round(r["demand_wait_ns"] / n / 1e3, 3) if n else None,
                # busy share of the source -> destination direction and of the source's workers, until the last task ended
                "link_utilisation": round(r["link_busy_ns"] / span, 4) if span else 0.0,
                "source_utilisation": round(r["source_busy_ns"] / (workers * span), 4) if span else 0.0,
            },
            "faults": {k: r[k] for k in ("sync_faults", "apf_not_present", "apf_ready", "blocked_kernel", "blocked_double", "blocked_limit", "halts", "present_touches")},
            "migration_done_s": None if r["migration_done_ns"] is None else round(r["migration_done_ns"] / 1e9, 6),
            "bytes": {"demand": r["demand_bytes"], "background": r["background_bytes"], "wire": r["wire_bytes"]},
            "events": r["events"],
        }
    a, b = runs["async_pf"]["mean_task_s"], runs["no_async_pf"]["mean_task_s"]
    res = {"scenario": "postcopy", "touches_from": "capture faults" if lists else "working-set model", "model": m, "params": {k: int(v) if k == "seed" else v for k, v in engine.items()}, "runs": runs, "async_pf_speedup_pct": round(100 * (1 - a / b), 2) if b else None}
    with atomic.Destination(Path(out) / "postcopy", force=force, ours=_is_postcopy, what="postcopy output") as d:
        tmp = d.temp()
        (tmp / "metrics.json").write_text(json.dumps(res, indent=2, sort_keys=True))
        d.commit(tmp)
    return res


def _is_postcopy(p: Path) -> bool:
    """An earlier `replay --scenario postcopy` output (its metrics.json
    says so), which --force may replace."""
    try:
        return json.loads((Path(p) / "metrics.json").read_text()).get("scenario") == "postcopy"
    except (OSError, ValueError, AttributeError):
        return False
