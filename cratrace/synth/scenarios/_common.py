"""Shared pieces of the scenarios: parameters, and a builder that emits
consistent host events (switches, wakeups, markers) while keeping the truth.

A scenario is a module with ``NAME``, ``SUMMARY``, ``VERSION``, ``PARAMS``
(name -> :class:`Param`) and ``generate(params, seed) -> Result``. The
builder keeps per-CPU timestamps strictly increasing (several things that
"happen in the same microsecond" get successive nanoseconds), so ordering
inside the file is the order the scenario emitted.
"""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Iterator

from cratrace.synth.tracedat_writer import Event, TraceDatStream

# trace_marker writes appear as ftrace:print with this ip (tracing_mark_write)
MARKER_IP = 0xFFFFFFFF81A2B3C0
KERNEL_RIP = 0xFFFFFFFF81100000  # guest kernel text (spinlock slow path)
USER_RIP = 0x00007F3A12340000

# Intel VMX exit reasons (kvm_exit.exit_reason with isa == 1)
EXIT_EXTERNAL_INTERRUPT = 1
EXIT_HLT = 12
EXIT_VMCALL = 18
EXIT_IO_INSTRUCTION = 30
EXIT_MSR_WRITE = 32
EXIT_PAUSE = 40
EXIT_EPT_VIOLATION = 48
EXIT_EPT_MISCONFIG = 49
KVM_HC_KICK_CPU = 5

TASK_RUNNING, TASK_INTERRUPTIBLE, TASK_UNINTERRUPTIBLE = 0, 1, 2


@dataclass(frozen=True)
class Param:
    default: Any
    help: str

    def parse(self, name: str, text: str) -> Any:
        from cratrace.errors import UsageError

        kind = type(self.default)
        try:
            if kind is bool:
                if text.lower() in ("1", "true", "yes", "on"):
                    return True
                if text.lower() in ("0", "false", "no", "off"):
                    return False
                raise ValueError(text)
            return kind(text)
        except ValueError:
            raise UsageError(f"--set {name}={text}: expected {kind.__name__} (default {self.default!r})") from None


#: where a Builder made now sends its events (None: a list of Event)
_SINK: ContextVar[TraceDatStream | None] = ContextVar("cratrace_synth_sink", default=None)


@contextmanager
def streaming_to(stream: TraceDatStream) -> Iterator[TraceDatStream]:
    """Builders made inside this block write their events to ``stream`` as
    they are emitted instead of keeping them (issue #47: a trace of any
    length in flat memory); their ``events`` is then the stream, which
    has ``len()`` and ``counts()`` but cannot be iterated."""
    token = _SINK.set(stream)
    try:
        yield stream
    finally:
        _SINK.reset(token)


@dataclass
class Result:
    events: list[Event] | TraceDatStream
    truth: dict[str, Any]
    writer: dict[str, Any] = field(default_factory=dict)  # extra write_tracedat kwargs (comms, cpus...)


class Builder:
    """Collects events with per-CPU monotonic timestamps and thread metadata.

    Made inside :func:`streaming_to`, it writes each event to the stream
    as it is emitted (each CPU's events come in time order, as the stream
    needs); otherwise it keeps them in ``events``, a list of Event."""

    def __init__(self, ncpus: int, t0_ns: int = 1_000_000_000):
        self.ncpus = ncpus
        self.t0 = t0_ns
        sink = _SINK.get()
        self.events: list[Event] | TraceDatStream = sink if sink is not None else []
        self._put = sink.put if sink is not None else None
        self.last_ts = [0] * ncpus
        self.threads: dict[int, dict[str, Any]] = {}
        self.current = [0] * ncpus  # tid running on each CPU (0 = idle)
        self.since = [self.t0] * ncpus  # when the current thread was switched in (absolute ns)
        self.oncpu: dict[int, int] = {}  # tid -> ns on CPU between sched_switch events
        self.irq_ns: dict[int, int] = {}  # tid -> ns of irq/softirq nested in its slices (common work)

    def thread(self, tid: int, comm: str, pid: int, role: str, vm: str | None = None, vcpu: int | None = None) -> int:
        self.threads[tid] = dict(tid=tid, pid=pid, comm=comm, vm=vm, vcpu=vcpu, role=role)
        return tid

    def forks(self) -> None:
        """``sched_process_fork`` for every thread of a VM process at the start
        (as if the trace began while QEMU created its threads), so a model
        without a host.json inventory can group threads by their creator."""
        for t in self.thread_table():
            if t["vm"] and t["tid"] != t["pid"]:
                self.emit(0, 0, "sched_process_fork", 0, parent_comm=self.comm(t["pid"]), parent_pid=t["pid"],
                          child_comm=t["comm"], child_pid=t["tid"])

    def comm(self, tid: int) -> str:
        if tid == 0:
            return "swapper"
        return self.threads[tid]["comm"]

    def ts(self, cpu: int, t_ns: int) -> int:
        """A timestamp on ``cpu`` at or after ``t_ns`` (relative), strictly after the previous one."""
        ts = max(self.t0 + t_ns, self.last_ts[cpu] + 1)
        self.last_ts[cpu] = ts
        return ts

    def emit(self, t_ns: int, cpu: int, name: str, pid: int, /, **fields: Any) -> int:
        ts = self.ts(cpu, t_ns)
        if self._put is not None:
            self._put(ts, cpu, name, pid, fields)
        else:
            self.events.append(Event(ts=ts, cpu=cpu, name=name, pid=pid, fields=fields))  # type: ignore[union-attr]
        return ts

    def switch(self, t_ns: int, cpu: int, next_tid: int, prev_state: int = TASK_RUNNING) -> int:
        prev = self.current[cpu]
        if prev == next_tid:
            return self.last_ts[cpu]
        self.current[cpu] = next_tid
        prev_comm = f"swapper/{cpu}" if prev == 0 else self.comm(prev)
        next_comm = f"swapper/{cpu}" if next_tid == 0 else self.comm(next_tid)
        ts = self.ts(cpu, t_ns)
        self.last_ts[cpu] = ts - 1  # emit() below takes exactly this ts
        if prev:
            self.oncpu[prev] = self.oncpu.get(prev, 0) + ts - self.since[cpu]
        self.since[cpu] = ts
        return self.emit(
            t_ns, cpu, "sched_switch", prev,
            prev_comm=prev_comm, prev_pid=prev, prev_prio=120 if prev else 120,
            prev_state=prev_state if prev else TASK_RUNNING,
            next_comm=next_comm, next_pid=next_tid, next_prio=120,
        )

    def wakeup(self, t_ns: int, cpu: int, tid: int, target_cpu: int) -> int:
        return self.emit(t_ns, cpu, "sched_wakeup", self.current[cpu],
                         comm=self.comm(tid), pid=tid, prio=120, target_cpu=target_cpu)

    def marker(self, t_ns: int, cpu: int, tid: int, text: str) -> int:
        return self.emit(t_ns, cpu, "print", tid, ip=MARKER_IP, buf=text + "\n")

    def kvm_exit(self, t_ns: int, cpu: int, tid: int, vcpu: int, reason: int, rip: int = KERNEL_RIP, info1: int = 0) -> int:
        return self.emit(t_ns, cpu, "kvm_exit", tid, exit_reason=reason, guest_rip=rip, isa=1,
                         info1=info1, info2=0, intr_info=0, error_code=0, vcpu_id=vcpu, requests=0)

    def kvm_entry(self, t_ns: int, cpu: int, tid: int, vcpu: int, rip: int = KERNEL_RIP) -> int:
        return self.emit(t_ns, cpu, "kvm_entry", tid, vcpu_id=vcpu, rip=rip, immediate_exit=0, intr_info=0, error_code=0)

    def counts(self) -> dict[str, int]:
        if isinstance(self.events, TraceDatStream):
            return dict(sorted(self.events.counts().items()))
        return dict(sorted(Counter(e.name for e in self.events).items()))

    def comms(self) -> dict[int, str]:
        return {tid: t["comm"] for tid, t in self.threads.items()}

    def end(self, declared_abs_ns: int) -> int:
        """The trace's exclusive end: its last event + 1 ns (the captured span
        as a capture's model sees it), or the declared end if nothing was emitted."""
        return max(self.last_ts) + 1 if self.events else declared_abs_ns

    def inventory(self) -> list[dict[str, Any]]:
        """The VMs as a collector's host.json lists them (name, pid, vcpus, vhost_tids)."""
        vms: dict[str, dict[str, Any]] = {}
        for t in self.thread_table():
            if not t["vm"]:
                continue
            vm = vms.setdefault(t["vm"], dict(name=t["vm"], uuid=None, pid=t["pid"], source="synth", vcpus=[],
                                              vhost_tids=[], iothread_tids=[], cgroup=None))
            if t["role"] == "vcpu":
                vm["vcpus"].append(dict(index=t["vcpu"], tid=t["tid"]))
            elif t["role"] == "io-worker":
                vm["vhost_tids"].append(t["tid"])
        return list(vms.values())

    def nested_irq(self, cpu: int, dur_ns: int) -> None:
        """Record irq/softirq time spent on top of the thread current on ``cpu``."""
        tid = self.current[cpu]
        self.irq_ns[tid] = self.irq_ns.get(tid, 0) + dur_ns

    def thread_table(self, end_ns: int | None = None) -> list[dict[str, Any]]:
        """Threads with ``oncpu_ns``: time between the sched_switch events that
        put them on and took them off a CPU (slices still open are closed at
        ``end_ns``, absolute), and ``irq_ns``: irq/softirq time nested in those
        slices (so the thread's own work is ``oncpu_ns - irq_ns``)."""
        oncpu = dict(self.oncpu)
        for cpu, tid in enumerate(self.current):
            if tid:
                end = end_ns if end_ns is not None else self.last_ts[cpu]
                oncpu[tid] = oncpu.get(tid, 0) + end - self.since[cpu]
        return [dict(self.threads[t], oncpu_ns=oncpu.get(t, 0), irq_ns=self.irq_ns.get(t, 0)) for t in sorted(self.threads)]


def host_declaration(policy: str, affinity: dict[int, list[int]], **params: float) -> dict[str, Any]:
    """The host a scenario simulates, as `synth --raw` writes it to
    host.json (`scheduler`, `affinity`): the replay's policy for the
    capture and its settings (a scenario's switches cost nothing), and
    each pinned thread's CPUs. Kept in the truth as `host`."""
    return dict(scheduler=dict(policy=policy, params=dict(context_switch_ns=0, migration_ns=0, **params)),
                affinity={str(t): list(c) for t, c in sorted(affinity.items())})
