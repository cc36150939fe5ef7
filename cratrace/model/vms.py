"""Which threads are vCPUs, and of which VM, when no inventory says so.

A vCPU thread is known by its name (the VMMs in the collector's `VMMS`
table, or the user's `vm_pattern`) or by the KVM tracepoints it ran
(`kvm_entry`'s `vcpu_id`). Its VM is decided by the best evidence the
trace holds, named in the threads table's `vm_evidence`:

============== ===================================================== =========
evidence       from                                                  certain
============== ===================================================== =========
inventory      host.json (the collector read /proc)                  yes
pattern        the `vm` group of the user's `vm_pattern`             yes
fork           the thread that created it (`sched_process_fork`,     yes
               `task_newtask`, followed up through CLONE_THREAD)
single         one VMM's vCPU threads, each index once: one VM       yes
creation-order consecutive thread ids, a new VM where an index would  a guess
               repeat (QEMU creates a VM's vCPUs in index order)
============== ===================================================== =========

A trace has no thread-group ids unless its creation was traced: trace-cmd
stores tgids only with `record-tgid`. Two threads with one vCPU index are
never merged into one VM; threads seen only in the trace's saved command
lines (no event of theirs: often threads of processes that ended before the
trace) are not made vCPUs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

from cratrace_collect import VMMS
from cratrace.errors import UsageError
from cratrace.model.frames import top_buffer

#: clone(2)'s CLONE_THREAD: the new task shares its creator's thread group
CLONE_THREAD = 0x00010000

#: evidence that is a guess: the model says so and exits 1
GUESSED = ("creation-order",)


@dataclass(frozen=True)
class VcpuName:
    """How one VMM names its vCPU threads."""

    vmm: str
    thread: re.Pattern
    #: the name carries the VM's name too (a user's pattern with a `vm` group)
    names_vm: bool = False


def vcpu_names(vm_pattern: str | None = None) -> list[VcpuName]:
    """The recognised vCPU thread names; a user's `vm_pattern` (a regular
    expression over the whole thread name whose group `vcpu`, or else its
    first group, is the vCPU index, and whose optional group `vm` names the
    VM) is tried first."""
    out = []
    if vm_pattern:
        try:
            rx = re.compile(vm_pattern)
        except re.error as e:
            raise UsageError(f"vm_pattern {vm_pattern!r}: not a regular expression ({e})") from None
        if rx.groups < 1:
            raise UsageError(f"vm_pattern {vm_pattern!r}: needs a group for the vCPU index, e.g. '^worker-(\\d+)$' or '(?P<vm>\\w+)-vcpu(?P<vcpu>\\d+)'")
        out.append(VcpuName("custom", rx, "vm" in rx.groupindex))
    out += [VcpuName(vmm, re.compile(thread)) for vmm, _process, thread, _flags in VMMS]
    return out


def recognise(names: pl.DataFrame, patterns: list[VcpuName], kvm_vcpu: dict[int, int]) -> pl.DataFrame:
    """(tid, vmm, vcpu, vm_named) of the threads in `names` (tid, comm) that
    are vCPUs: by name, else by the `kvm_vcpu` ids they entered the guest
    with (vmm "kvm")."""
    rows = []
    for tid, comm in names.select("tid", "comm").iter_rows():
        hit = None
        for p in patterns:
            m = p.thread.fullmatch(comm or "")
            if m:
                idx = m.group("vcpu") if "vcpu" in p.thread.groupindex else m.group(1)
                if idx is not None and idx.isdigit():
                    hit = (p.vmm, int(idx), m.group("vm") if p.names_vm else None)
                    break
        if hit is None and tid in kvm_vcpu:
            hit = ("kvm", kvm_vcpu[tid], None)
        if hit is not None:
            rows.append((tid, *hit))
    return pl.DataFrame(rows, schema={"tid": pl.Int64, "vmm": pl.String, "vcpu": pl.Int32, "vm_named": pl.String}, orient="row")


def kvm_vcpu_ids(ev: dict[str, pl.LazyFrame]) -> dict[int, int]:
    """Each thread that entered a guest: the vcpu_id it entered as."""
    if "kvm_entry" not in ev or "vcpu_id" not in ev["kvm_entry"].collect_schema().names():
        return {}
    df = top_buffer(ev["kvm_entry"]).group_by(pl.col("pid").cast(pl.Int64).alias("tid")).agg(pl.col("vcpu_id").first()).collect()
    return {int(t): int(v) for t, v in df.iter_rows() if t and v is not None}


def creators(ev: dict[str, pl.LazyFrame]) -> tuple[dict[int, int], set[int]]:
    """(child tid → the tid that created it, the children created as threads
    of their creator's process): from `task_newtask` (with clone flags) and
    `sched_process_fork`."""
    parent: dict[int, int] = {}
    as_thread: set[int] = set()
    if "sched_process_fork" in ev:
        df = top_buffer(ev["sched_process_fork"]).select(pl.col("child_pid").cast(pl.Int64), pl.col("parent_pid").cast(pl.Int64)).collect()
        parent.update((int(c), int(p)) for c, p in df.iter_rows() if c is not None and p is not None)
    if "task_newtask" in ev:
        lf = top_buffer(ev["task_newtask"])
        cols = lf.collect_schema().names()
        child = "field_pid" if "field_pid" in cols else "pid"
        if child != "pid" and "clone_flags" in cols:
            df = lf.select(pl.col(child).cast(pl.Int64), pl.col("pid").cast(pl.Int64).alias("creator"), pl.col("clone_flags").cast(pl.Int64)).collect()
            for c, p, flags in df.iter_rows():
                if c is None or p is None:
                    continue
                parent[int(c)] = int(p)
                if flags is not None and flags & CLONE_THREAD:
                    as_thread.add(int(c))
    return parent, as_thread


def process_of(tid: int, parent: dict[int, int], as_thread: set[int]) -> int:
    """The thread group leader `tid` belongs to as far as creation events
    tell: up from its creator while each was created as a thread."""
    p = parent[tid]
    seen = {tid}
    while p in as_thread and p in parent and p not in seen:
        seen.add(p)
        p = parent[p]
    return p


def group(vcpus: pl.DataFrame, parent: dict[int, int], as_thread: set[int]) -> pl.DataFrame:
    """Each vCPU thread of `vcpus` (tid, vmm, vcpu, vm_named) with its VM:
    (tid, vm, pid, vm_evidence); `pid` null where the trace does not tell."""
    out: list[tuple[int, str, int | None, str]] = []
    loose: dict[str, list[tuple[int, int]]] = {}
    for tid, vmm, idx, named in vcpus.sort("tid").iter_rows():
        if named is not None:
            out.append((tid, named, None, "pattern"))
        elif tid in parent:
            pid = process_of(tid, parent, as_thread)
            out.append((tid, f"{vmm}-{pid}", pid, "fork"))
        else:
            loose.setdefault(vmm, []).append((tid, idx))
    for vmm, threads in sorted(loose.items()):
        indices = [i for _, i in threads]
        if len(set(indices)) == len(indices):
            first = threads[0][0]
            out += [(tid, f"{vmm}-t{first}", None, "single") for tid, _ in threads]
            continue
        # Several VMs' vCPUs, created before the trace. A VMM creates one
        # VM's vCPUs in a burst, in index order, so thread ids rise with
        # the index within a VM: each thread joins the newest VM still
        # waiting for its index (whose highest index is the one before,
        # else any below it), else starts a VM.
        vms: list[dict[int, int]] = []
        for tid, idx in threads:
            fits = [v for v in reversed(vms) if idx not in v and max(v) < idx]
            home = next((v for v in fits if max(v) == idx - 1), fits[0] if fits else None)
            if home is None:
                home = {}
                vms.append(home)
            home[idx] = tid
        for v in vms:
            first = min(v.values())
            out += [(tid, f"{vmm}-t{first}", None, "creation-order") for tid in v.values()]
    return pl.DataFrame(out, schema={"tid": pl.Int64, "vm": pl.String, "pid": pl.Int64, "vm_evidence": pl.String}, orient="row")


def split_repeats(threads: pl.DataFrame) -> pl.DataFrame:
    """Two vCPU threads of one VM with one index (an inventory or a
    pattern that names two VMs alike, a reused thread id): each later
    thread goes to a VM of its own, `<vm>#2`, ..., and its evidence says
    so. A VM's vCPUs are then unique by index, as every later stage
    keys them."""
    vcpu = pl.col("role") == "vcpu"
    nth = pl.when(vcpu).then(pl.col("tid").rank("ordinal").over("vm", "vcpu", pl.col("role")) - 1)
    df = threads.with_columns(nth.alias("_nth"))
    if not (df["_nth"].fill_null(0) > 0).any():
        return threads
    again = pl.col("_nth").fill_null(0) > 0
    return df.with_columns(
        pl.when(again).then(pl.format("{}#{}", "vm", pl.col("_nth") + 1)).otherwise("vm").alias("vm"),
        pl.when(again).then(pl.format("{}, split", pl.col("vm_evidence").fill_null("inventory"))).otherwise("vm_evidence").alias("vm_evidence"),
    ).drop("_nth")


def notes(threads: pl.DataFrame, unseen: int, xen: bool = False) -> tuple[list[str], list[str]]:
    """(what the VM attribution guessed or re-attributed, what it remarks),
    one line each, from the threads table (with `vm_evidence`); `unseen`:
    vCPU-named threads known only from the saved command lines; `xen`:
    the capture is a xentrace one (its VMs are domains, not threads)."""
    vm = threads.filter(pl.col("role") == "vcpu").group_by("vm").agg(pl.col("vm_evidence").first()).sort("vm")
    out = []
    guessed = vm.filter(pl.col("vm_evidence").is_in(GUESSED))["vm"].to_list()
    if guessed:
        out.append(f"{len(guessed)} VMs ({', '.join(guessed[:4])}{', ...' if len(guessed) > 4 else ''}) grouped by thread creation order, a guess: the trace has no creation events or inventory for their vCPU threads (record with `cratrace record` for host.json, or trace sched_process_fork from before the VMs start)")
    split = vm.filter(pl.col("vm_evidence").str.ends_with("split"))["vm"].to_list()
    if split:
        out.append(f"{len(split)} VMs ({', '.join(split[:4])}) split off: their threads repeat a vCPU index of another thread of the same VM")
    remarks = []
    if unseen:
        remarks.append(f"{unseen} threads named like vCPUs appear only in the trace's saved command lines, in no event (threads that did not run here): not counted as vCPUs")
    if threads.filter(pl.col("role") == "vcpu").height == 0 and not xen:
        remarks.append("no VMs: no thread is named like a vCPU of a known VMM or entered a guest (kvm_entry); processes are the tenants (give `--set vm_pattern=REGEX` for other names)")
    return out, remarks


def summary(threads: pl.DataFrame, states: pl.DataFrame | pl.LazyFrame) -> list[dict]:
    """Per VM: its vCPU count, process id (when known) and evidence; Xen
    domains (vCPUs in `states` with no thread) by their xentrace records."""
    v = threads.filter(pl.col("role") == "vcpu").group_by("vm").agg(pl.len().alias("vcpus"), pl.col("pid").first(), pl.col("vm_evidence").first().alias("evidence"))
    dom = states.lazy().filter(pl.col("tid").is_null()).group_by("vm").agg(pl.col("vcpu").n_unique().cast(pl.UInt32).alias("vcpus")).collect()
    dom = dom.with_columns(pl.lit(None, pl.Int64).alias("pid"), pl.lit("xentrace").alias("evidence"))
    return pl.concat([v, dom.select(v.columns)]).sort("vm").to_dicts()
