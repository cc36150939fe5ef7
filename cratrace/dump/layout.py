"""`trace-cmd report`'s line layout, and the few events it prints its own way.

A line is ``COMM-PID [CPU] SECONDS.USECS: EVENT: INFO``, laid out as
trace-cmd 3.x lays it out (``%16s-%-5d [%03d] %5llu.%06llu: NAME: ``,
names shorter than 20 padded to 20; times rounded to the microsecond),
each line led by its buffer instance's name when the trace has instances. COMM is the name of the thread that was running: the trace's
saved cmdlines, then the names sched_switch and sched_wakeup lines reveal
(never overriding one already known, as libtraceevent's
``tep_register_comm``), ``<idle>`` for pid 0 and ``<...>`` when unknown.

INFO is the kernel's print format (`cratrace.dump.printfmt`), except
where trace-cmd's own plugins print differently: sched_switch
(``prev:pid [prio] S ==> next:pid [prio]``) and sched_wakeup/_new
(``comm:pid [prio] CPU:NNN``), as libtraceevent's plugin_sched_switch, and
bprint, whose text the import rendered from the trace's printk formats.
Other plugins (kvm's, for one) are not imitated: those events print with
their kernel format.
"""

from __future__ import annotations

from typing import Any, Callable

from cratrace.dump.merge import Row


class Comms:
    """Thread names by pid, as `trace-cmd report` knows them."""

    def __init__(self, cmdlines: dict[int, str] | None = None):
        self.names: dict[int, str] = dict(cmdlines or {})

    def __call__(self, pid: int | None) -> str:
        if pid == 0:
            return "<idle>"
        return self.names.get(pid, "<...>") if pid is not None else "<...>"

    def register(self, pid: int | None, comm: Any) -> None:
        """A name seen in an event: kept for `pid` unless it has one."""
        if pid and isinstance(comm, str) and pid not in self.names:
            self.names[pid] = comm


def timestamp(ts: int, ns: bool = False) -> str:
    """`ts` (ns) as trace-cmd prints it: seconds and microseconds, rounded
    to the nearest (``ns``: seconds and nanoseconds, `trace-cmd report -t`)."""
    if ns:
        return f"{ts // 1_000_000_000:5d}.{ts % 1_000_000_000:09d}"
    us = (ts + 500) // 1000
    return f"{us // 1_000_000:5d}.{us % 1_000_000:06d}"


def header(comm: str, pid: int | None, cpu: int | None, ts: int, name: str, ns: bool = False) -> str:
    """Everything before the event's text: trace-cmd's ``%16s-%-5d [%03d]``,
    the time, and `` NAME: `` with names shorter than 20 padded to 20."""
    pad = " " * (20 - len(name)) if len(name) < 20 else ""
    return f"{comm:>16}-{-1 if pid is None else pid:<5} [{-1 if cpu is None else cpu:03d}] {timestamp(ts, ns)}: {name}: {pad}"


_STATES = "SDTtZXxW"


def task_state(value: Any) -> str:
    """prev_state as plugin_sched_switch writes it: the letters of the
    state bits set, ``|``-joined, or R."""
    if isinstance(value, str):
        return value  # a kernel whose format gives it as text
    v = int(value or 0)
    letters = [c for i, c in enumerate(_STATES) if v & (1 << i)]
    return "|".join(letters) if letters else "R"


def sched_switch(row: Row, comms: Comms) -> str:
    prev, nxt = row.get("prev_pid"), row.get("next_pid")
    comms.register(prev, row.get("prev_comm"))
    comms.register(nxt, row.get("next_comm"))
    out = f"{row.get('prev_comm')}:{prev} "
    if row.get("prev_prio") is not None:
        out += f"[{row.get('prev_prio')}] "
    out += task_state(row.get("prev_state")) + " ==> "
    out += f"{row.get('next_comm')}:{nxt}"
    if row.get("next_prio") is not None:
        out += f" [{row.get('next_prio')}]"
    return out


def sched_wakeup(row: Row, comms: Comms) -> str:
    pid = row.get("pid")
    comms.register(pid, row.get("comm"))
    out = f"{row.get('comm')}:{pid}"
    if row.get("prio") is not None:
        out += f" [{row.get('prio')}]"
    if row.get("success") is not None:
        out += f" success={row.get('success')}"
    if row.get("target_cpu") is not None:
        out += f" CPU:{row.get('target_cpu'):03d}"
    return out


def make_bprint(symbol: Callable[[Any], str]) -> Callable[[Row, Comms], str]:
    def bprint(row: Row, comms: Comms) -> str:
        return f"{symbol(row.get('ip'))}: {row.get('text') or ''}"

    return bprint


#: events trace-cmd prints through a plugin of its own
PLUGINS: dict[str, Callable[[Row, Comms], str]] = {
    "sched_switch": sched_switch,
    "sched_wakeup": sched_wakeup,
    "sched_wakeup_new": sched_wakeup,
}
