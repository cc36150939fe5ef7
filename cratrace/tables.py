"""The canonical model tables, declared once as data.

Everything downstream of ``cratrace model`` (the replay engine, reports,
notebooks, other tools reading the Parquet) depends on these names, types and
units, so they are declared here, in one place, and both the Arrow schemas and
``docs/tables.md`` are generated from this declaration
(``python -m cratrace.tables > docs/tables.md``).

Vocabulary (frozen): times are int64 nanoseconds on the capture's clock;
``start``/``end`` bound an interval (end exclusive) and ``dur = end - start``;
``ts`` is an instant. ``tid`` is a thread id, ``pid`` a process (thread group)
id, ``cpu`` a host CPU. ``vm`` is the VM's name (string), ``vcpu`` its vCPU
index within that VM. Nulls mean "not known", never zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class Column:
    name: str
    #: Arrow type by its name (``int64``, ``int32``, ``double``, ``string``,
    #: ``bool``): the model build needs the types but not pyarrow, whose
    #: import alone took ~50 ms of it
    type: str
    doc: str
    unit: str = ""
    nullable: bool = True


@dataclass(frozen=True)
class Table:
    name: str
    doc: str
    columns: tuple[Column, ...]
    sorted_by: tuple[str, ...] = ()
    extra: dict = field(default_factory=dict)

    def schema(self) -> pa.Schema:
        import pyarrow as pa

        return pa.schema(
            [pa.field(c.name, pa.type_for_alias(c.type), nullable=c.nullable) for c in self.columns]
        )

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


def _c(name: str, type_: str, doc: str, unit: str = "", nullable: bool = True) -> Column:
    return Column(name, type_, doc, unit, nullable)


I64, I32, F64, STR, BOOL = "int64", "int32", "double", "string", "bool"

_START = _c("start", I64, "interval start", "ns", False)
_END = _c("end", I64, "interval end (exclusive)", "ns", False)
_DUR = _c("dur", I64, "end - start", "ns", False)

MODEL_TABLES: dict[str, Table] = {
    t.name: t
    for t in [
        Table(
            "threads",
            "Every thread seen in the capture, with the VM it belongs to and its role.",
            (
                _c("tid", I64, "thread id", nullable=False),
                _c("pid", I64, "process (thread group) id; null when never observed"),
                _c("comm", STR, "last name the thread had (see thread_names for renames)"),
                _c("vm", STR, "VM this thread works for; null for host threads"),
                _c("vcpu", I32, "vCPU index within the VM (from the thread's name, e.g. QEMU's `CPU n/KVM` n, `kvm_entry`'s vcpu_id or the Xen vcpu id); null if not a vCPU"),
                _c("role", STR, "vcpu | io-worker | vmm | host | idle", nullable=False),
                _c("vm_evidence", STR, "what put the thread in its VM: inventory (host.json), pattern (the `vm` group of `--set vm_pattern`), fork (the thread that created it), single (one VM's vCPU threads), creation-order (a guess: several VMs' vCPU threads created before the trace, grouped by thread id), with `, split` when a repeated vCPU index moved it to a VM of its own; a VMM's other threads: its process's evidence, fork (created by the VMM's process), vhost-name (`vhost-<pid>`); Xen back-ends: backend-name; null for threads of no VM"),
                _c("allowed_cpus", STR, "the CPUs its affinity allowed, as a Linux CPU list (`0-3,8`); null: any (or not known)"),
                _c("power_w", F64, "its power while it runs at the recorded frequency, W, when known (host.json `power_w`: a generated capture's truth; a per-VM class given with `cratrace replay --set power.VM=W` is the replay's own); null: the host's power model's", "W"),
                _c("affinity_evidence", STR, "where allowed_cpus comes from: host.json (the collector read the thread's Cpus_allowed_list) or trace (never ran elsewhere, and waited while a CPU outside its set was idle, which the kernel's balancing would not have allowed); null with allowed_cpus"),
                _c("sched_group", STR, "its CFS scheduling group when the collector recorded one: `autogroup-N` (its session's, with autogroups on) or `cgroup:<path>` (its CPU cgroup); null: the root group"),
                _c("first_ts", I64, "first time the thread was seen", "ns"),
                _c("last_ts", I64, "last time the thread was seen", "ns"),
            ),
            sorted_by=("tid",),
        ),
        Table(
            "thread_names",
            "Thread names over time (comm changes through exec or prctl).",
            (
                _c("tid", I64, "thread id", nullable=False),
                _c("comm", STR, "name in force", nullable=False),
                _START,
                _END,
            ),
            sorted_by=("tid", "start"),
        ),
        Table(
            "cpu_slices",
            "What ran on each host CPU from when to when; idle is tid 0. Slices on one CPU never overlap and cover the captured span.",
            (
                _c("cpu", I32, "host CPU", nullable=False),
                _c("tid", I64, "thread that ran (0 = idle)", nullable=False),
                _START,
                _END,
                _DUR,
                _c("freq_khz", I64, "CPU frequency in force at start; null when not captured", "kHz"),
            ),
            sorted_by=("cpu", "start"),
        ),
        Table(
            "vcpu_states",
            "Per vCPU, a gap-free timeline of what it was doing.",
            (
                _c("vm", STR, "VM name", nullable=False),
                _c("vcpu", I32, "vCPU index", nullable=False),
                _c("tid", I64, "vCPU thread id (KVM) or null (Xen)"),
                _c("state", STR, "guest | vmm | preempted | blocked | halted | spinning | lost", nullable=False),
                _START,
                _END,
                _DUR,
                _c("pcpu", I32, "host CPU while running (guest, vmm, spinning); null otherwise"),
            ),
            sorted_by=("vm", "vcpu", "start"),
        ),
        Table(
            "spin_episodes",
            "Periods in which a vCPU spun waiting for a sibling (lock-holder or IPI wait).",
            (
                _c("vm", STR, "VM name", nullable=False),
                _c("vcpu", I32, "spinning vCPU", nullable=False),
                _c("tid", I64, "spinning thread (KVM) or null"),
                _START,
                _END,
                _DUR,
                _c("source", STR, "pause-exit | pv-kick | marker", nullable=False),
                _c("exits", I64, "PAUSE exits (pause-exit) or kicks (pv-kick) inside the episode"),
                _c("holder_vcpu", I32, "lock-holder candidate: a sibling vCPU preempted when the episode began"),
                _c("clearer_vcpu", I32, "vCPU whose action ended the episode (kicker), when known"),
            ),
            sorted_by=("vm", "vcpu", "start"),
        ),
        Table(
            "io_work",
            "Host work done on behalf of VMs, per window and worker; vm null = common pool that cannot be attributed (network interrupts; on Xen, dom0 time that does not grow with packets).",
            (
                _c("window_start", I64, "window start", "ns", False),
                _c("window_end", I64, "window end (exclusive)", "ns", False),
                _c("vm", STR, "VM the work was for; null = common pool"),
                _c("worker_tid", I64, "host thread (vhost, iothread, netback...); on a common row (network irq/softirq time) the thread it ran on top of (0: idle), whose own time it is not; null for Xen's dom0"),
                _c("worker", STR, "worker name (comm), softirq (NET_RX, NET_TX) or irq name, or dom0"),
                _c("kind", STR, "vhost | iothread | netback | blkback | softirq | napi | irq | other", nullable=False),
                _c("direction", STR, "the guest's: rx (host to guest: net_dev_xmit on its device, grant transfer) | tx (netif_receive_skb/netif_rx, grant map) | read | write | null (no packets in the window; common work)"),
                _c("cpu_ns", I64, "host CPU time (a worker's own: its slices less the interrupts on top of them, split between rx and tx by per-packet costs fitted over its slices)", "ns", False),
                _c("packets", I64, "packets", "count", False),
                _c("bytes", I64, "bytes", "B", False),
                _c("requests", I64, "block requests", "count", False),
            ),
            sorted_by=("window_start", "vm", "worker_tid"),
        ),
        Table(
            "power",
            "Per-CPU power-related segments and samples in long form: frequency and idle-state segments, energy and counter samples.",
            (
                _c("cpu", I32, "host CPU; null for package/domain-wide samples"),
                _c("kind", STR, "freq | idle | energy | counter", nullable=False),
                _c("name", STR, "idle state index, energy domain (e.g. energy-pkg) or counter name"),
                _START,
                _END,
                _c("value", F64, "kHz for freq, state index for idle, joules for energy, delta for counters", nullable=False),
                _c("unit", STR, "kHz | state | J | count", nullable=False),
            ),
            sorted_by=("kind", "cpu", "start"),
        ),
        Table(
            "faults",
            "Guest page faults seen by the hypervisor and async-page-fault pairs (postcopy studies).",
            (
                _c("vm", STR, "VM name"),
                _c("vcpu", I32, "vCPU index"),
                _c("tid", I64, "vCPU thread"),
                _c("ts", I64, "when the fault (or not-present notification) happened", "ns", False),
                _c("kind", STR, "ept | npt | apf-not-present | apf-ready | apf-completed | async-get-page", nullable=False),
                _c("address", I64, "guest physical (EPT/NPT) or guest virtual address"),
                _c("token", I64, "async page fault token (pairs not-present with ready)"),
                _c("latency_ns", I64, "not-present to ready for paired async faults", "ns"),
            ),
            sorted_by=("ts",),
        ),
        Table(
            "markers",
            "trace_marker text (and xentrace/perf annotations) parsed into a name and key=value fields.",
            (
                _c("ts", I64, "when the marker was written", "ns", False),
                _c("cpu", I32, "host CPU"),
                _c("tid", I64, "writer thread"),
                _c("vm", STR, "the VM the line names (vm=) if the threads table knows it, else its writer thread's"),
                _c("vcpu", I32, "the line's vcpu= (with a VM it names), else its writer thread's"),
                _c("name", STR, "first word of the text (e.g. txn_end, spin_begin)", nullable=False),
                _c("fields", STR, "key=value pairs as a JSON object"),
                _c("text", STR, "the raw text", nullable=False),
            ),
            sorted_by=("ts",),
        ),
    ]
}


def model_schema(name: str) -> pa.Schema:
    """Arrow schema of the canonical table ``name``."""
    return MODEL_TABLES[name].schema()


def empty_table(name: str) -> pa.Table:
    return model_schema(name).empty_table()


def render_markdown() -> str:
    out = [
        "# Canonical model tables",
        "",
        "Generated from `cratrace/tables.py` by `python -m cratrace.tables`; do not edit by hand.",
        "Captures write them under `CAPTURE/model/`, replays under `OUT/<policy>/model/`.",
        "",
    ]
    for t in MODEL_TABLES.values():
        out += [f"## `{t.name}`", "", t.doc, ""]
        if t.sorted_by:
            out += [f"Sorted by: {', '.join(f'`{s}`' for s in t.sorted_by)}.", ""]
        out += ["| column | type | unit | nullable | meaning |", "|---|---|---|---|---|"]
        for c in t.columns:
            out.append(f"| `{c.name}` | {c.type} | {c.unit} | {'yes' if c.nullable else 'no'} | {c.doc} |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(render_markdown())
