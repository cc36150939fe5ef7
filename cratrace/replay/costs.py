"""The replay's per-event costs, and where each came from.

A cost is, in order: what `--set` gives; what the capture's host.json
declares (a generated capture's host); what the capture itself measured;
else the engine's default. What the capture measures:

- `hypercall_ns`: a spin response's hypervisor call is a PAUSE exit
  (Intel VMX reason 40, AMD SVM 0x77) and the re-entry after it. Its cost
  on the recorded host is the median time from `kvm_exit` to the same
  thread's next `kvm_entry` on the same CPU (papers/spin.md §6 G11: from
  kvm_exit→kvm_entry deltas), with at least `MIN_SAMPLES` of them.

The defaults (`cratrace._native.replay_default_costs`) are assumptions,
named as such in docs/replay-policies.md; a host that measures its own
gives them with `--set`.
"""

from __future__ import annotations

import polars as pl

from cratrace.capture import Capture

#: PAUSE exits: (isa, exit_reason); kvm_exit's isa is 1 on VMX, 2 on SVM
PAUSE_EXITS = ((1, 40), (2, 0x77))
#: fewer PAUSE exits than this measure nothing
MIN_SAMPLES = 20
#: a gap longer than this is no call's cost: the thread left the CPU
MAX_GAP_NS = 1_000_000


def measured_hypercall_ns(cap: Capture) -> tuple[int, int] | None:
    """(median PAUSE exit to re-entry in ns, samples), or None when the
    capture has too few PAUSE exits to say."""
    exits, entries = cap.events.get("kvm_exit"), cap.events.get("kvm_entry")
    if exits is None or entries is None:
        return None
    names = set(exits.collect_schema().names())
    if not {"ts", "pid", "cpu", "exit_reason"} <= names:
        return None
    isa = pl.col("isa") if "isa" in names else pl.lit(1)
    pause = pl.lit(False)
    for i, reason in PAUSE_EXITS:
        pause = pause | ((isa == i) & (pl.col("exit_reason") == reason))
    x = exits.filter(pause).select("ts", "pid", "cpu").sort("ts").collect()
    if x.height < MIN_SAMPLES:
        return None
    e = entries.select(pl.col("ts").alias("entry"), "pid", pl.col("cpu").alias("entry_cpu")).sort("entry").collect()
    j = x.join_asof(e, left_on="ts", right_on="entry", by="pid", strategy="forward", check_sortedness=False)
    gap = j.filter((pl.col("entry_cpu") == pl.col("cpu")) & (pl.col("entry") - pl.col("ts")).is_between(0, MAX_GAP_NS)).select(pl.col("entry") - pl.col("ts"))
    if gap.height < MIN_SAMPLES:
        return None
    return int(gap.to_series().median()), gap.height


def resolve_costs(cap: Capture, given: dict, declared: dict, defaults: dict) -> tuple[dict, dict[str, str]]:
    """The costs to replay with, and each one's source."""
    costs = dict(defaults)
    source = {k: "default" for k in defaults}
    measured = measured_hypercall_ns(cap) if "hypercall_ns" not in given and "hypercall_ns" not in declared else None
    if measured:
        costs["hypercall_ns"] = measured[0]
        source["hypercall_ns"] = f"capture: median of {measured[1]:,} PAUSE exits to re-entry"
    for k, v in declared.items():
        costs[k], source[k] = v, "host.json"
    for k, v in given.items():
        costs[k], source[k] = v, "--set"
    return costs, source
