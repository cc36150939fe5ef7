"""Writing a replay policy in Python.

The built-in policies live in the Rust engine. For experiments, a policy
can be written in Python against this small interface and replayed by a
plain-Python event loop that follows the engine's rules (same workload
phases, same lock semantics, same outputs, same metrics), slower but
easy to change::

    from cratrace.replay.policy import PythonPolicy, RoundRobin
    replay_capture(cap, ["my-rr"], out, python_policies={"my-rr": RoundRobin(slice_ns=2_000_000)})

A policy decides only *which ready thread runs next*, *for how long*, and
*what a thread does when its lock is held*; the loop owns the clock, the
threads and the bookkeeping (docs/replay-policies.md).
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Literal, Protocol

from cratrace.replay.workload import ACQUIRE, BARRIER, BLOCK, MARK, RELEASE, WAIT_FOR, WORK, Workload


class PythonPolicy(Protocol):
    """The hooks a Python policy implements."""

    def enqueue(self, thread: int, woken: bool) -> None:
        """`thread` became ready (woken after blocking, or preempted)."""

    def pick(self, cpu: int) -> int | None:
        """The ready thread to run on `cpu` next (removed from the ready set), or None."""

    def slice_ns(self, thread: int) -> int:
        """How long `thread` may run before it is preempted (if others wait)."""

    def on_lock_busy(self, thread: int, holder: int) -> Literal["spin", "yield"]:
        """`thread` found its VM's lock held by `holder`: keep spinning on
        the CPU until the lock is free or the slice ends, or give the CPU up."""


class RoundRobin:
    """Example policy: FIFO ready queue, fixed slice, yield on a busy lock."""

    def __init__(self, slice_ns: int = 3_000_000, yield_on_spin: bool = True):
        self.q: deque[int] = deque()
        self.slice = slice_ns
        self.yield_on_spin = yield_on_spin

    def enqueue(self, thread: int, woken: bool) -> None:
        self.q.append(thread)

    def pick(self, cpu: int) -> int | None:
        return self.q.popleft() if self.q else None

    def slice_ns(self, thread: int) -> int:
        return self.slice

    def on_lock_busy(self, thread: int, holder: int) -> Literal["spin", "yield"]:
        return "yield" if self.yield_on_spin else "spin"


def run_python_policy(w: Workload, policy: PythonPolicy, pcpus: int, context_switch_ns: int = 2_000, limit_ns: int = 3600 * 10**9) -> dict:
    """Replay `w` under `policy`; returns the same result columns as the
    native engine (so metrics and tables are built the same way)."""
    # the phases in memory: this engine is Python, for small captures
    phase_thread, phase_kind, phase_a, phase_b = w.phase_columns()
    if BARRIER in phase_kind:
        from cratrace.errors import UsageError

        # its engine has no barrier: the gang's waits would be skipped
        raise UsageError("Python policies do not replay gang barriers (barrier_wait/barrier_done markers in the capture): use a built-in policy")
    n = len(w.tids)
    phases: list[list[tuple[int, int, int]]] = [[] for _ in range(n)]
    for t, k, a, b in zip(phase_thread, phase_kind, phase_a, phase_b):
        phases[t].append((k, a, b))
    pos, rem, gen = [0] * n, [0] * n, [0] * n
    # dispatched: when the switch to it began (its slice, as a trace shows
    # it, includes the switch); run_start: when its work resumes
    dispatched, run_start, prog_at = [0] * n, [0] * n, [0] * n
    spin_since: list[int | None] = [None] * n
    until: list[int | None] = [None] * n  # running a work phase until then
    st = ["blocked"] * n
    cur: list[int | None] = [None] * pcpus
    holder: dict[int, int | None] = {}
    spinners: dict[int, list[int]] = {}
    waiters: dict[int, list[tuple[int, int]]] = {}
    res = {k: [] for k in ("state_thread", "state_code", "state_start", "state_end", "state_pcpu", "slice_cpu", "slice_thread", "slice_start", "slice_end", "mark_thread", "mark_ts", "ep_thread", "ep_start", "ep_end", "ep_holder", "ep_calls", "ep_retries")}
    cpu_ns, spin_ns = [0] * n, [0] * n
    calls, exc = [0] * n, [0] * n
    seg = [(3, 0, -1)] * n  # (code, start, pcpu)
    ev: list = []
    seq = 0
    events = overhead = 0
    now = 0
    done = 0

    def at(t, kind, a, b=0):
        nonlocal seq
        seq += 1
        heapq.heappush(ev, (t, seq, kind, a, b))

    def state(t, code, pcpu=-1):
        c0, s0, p0 = seg[t]
        if (c0, p0) == (code, pcpu):
            return
        if now > s0:
            for k, v in zip(("state_thread", "state_code", "state_start", "state_end", "state_pcpu"), (t, c0, s0, now, p0)):
                res[k].append(v)
        seg[t] = (code, max(now, s0), pcpu)

    def load(t):
        rem[t] = phases[t][pos[t]][1] if pos[t] < len(phases[t]) and phases[t][pos[t]][0] == WORK else 0
        prog_at[t] = now

    def off_cpu(c):
        t = cur[c]
        cur[c] = None
        if t is None:
            return None
        if until[t] is not None:
            rem[t] = max(1, until[t] - max(now, run_start[t]))
            until[t] = None
        if spin_since[t] is not None:
            spin_ns[t] += max(0, now - max(spin_since[t], run_start[t]))
        if now > dispatched[t]:
            for k, v in zip(("slice_cpu", "slice_thread", "slice_start", "slice_end"), (c, t, dispatched[t], now)):
                res[k].append(v)
            cpu_ns[t] += now - dispatched[t]
        gen[t] += 1
        return t

    def make_ready(t, woken):
        st[t] = "ready"
        policy.enqueue(t, woken)
        state(t, 2)
        for c in range(pcpus):
            if cur[c] is None:
                at(now, "dispatch", c)
                break

    def complete(t):
        pos[t] += 1
        load(t)
        for (wt, ph) in list(waiters.get(t, [])):
            if pos[t] > ph and st[wt] == "blocked":
                waiters[t].remove((wt, ph))
                gen[wt] += 1
                at(now, "unblock", wt, gen[wt])

    for t in range(n):
        load(t)
        gen[t] += 1
        at(w.start[t], "unblock", t, gen[t])
    while ev and done < n:
        now, _, kind, a, b = heapq.heappop(ev)
        if now > limit_ns:
            break
        events += 1
        if kind == "unblock":
            if gen[a] == b and st[a] == "blocked":
                make_ready(a, True)
        elif kind == "dispatch":
            c = a
            if cur[c] is not None:
                continue
            t = policy.pick(c)
            if t is None:
                continue
            cur[c] = t
            st[t] = "running"
            overhead += context_switch_ns
            dispatched[t] = now
            run_start[t] = prog_at[t] = now + context_switch_ns
            gen[t] += 1
            at(now + context_switch_ns, "step", t, gen[t])
            at(now + context_switch_ns + policy.slice_ns(t), "slice", c, gen[t])
        elif kind == "slice":
            c = a
            t = cur[c]
            if t is None or gen[t] != b:
                continue
            off_cpu(c)
            make_ready(t, False)
            at(now, "dispatch", c)
        elif kind == "step":
            t = a
            if gen[t] != b or st[t] != "running":
                continue
            c = cur.index(t)
            while True:
                if spin_since[t] is not None:
                    lk = phases[t][pos[t]][1]
                    if holder.get(lk) is None:
                        spin_ns[t] += now - max(spin_since[t], run_start[t])
                        res["ep_end"][-1 if res["ep_thread"] and res["ep_thread"][-1] == t else res["ep_thread"].index(t)] = now
                        spin_since[t] = None
                        holder[lk] = t
                        complete(t)
                        continue
                    break
                if pos[t] >= len(phases[t]):
                    off_cpu(c)
                    st[t] = "done"
                    state(t, 4)
                    done += 1
                    at(now, "dispatch", c)
                    break
                k, x, y = phases[t][pos[t]]
                if k == WORK:
                    if until[t] is not None and now >= until[t]:
                        until[t] = None
                        rem[t] = 0
                    if rem[t] > 0 and until[t] is None:
                        state(t, 0, c)
                        until[t] = max(now, run_start[t]) + rem[t]
                        at(until[t], "step", t, gen[t])
                        break
                    if until[t] is not None:
                        break
                    complete(t)
                elif k == BLOCK:
                    complete(t)
                    off_cpu(c)
                    st[t] = "blocked"
                    state(t, 3)
                    at(now + x, "unblock", t, gen[t])
                    at(now, "dispatch", c)
                    break
                elif k == MARK:
                    res["mark_thread"].append(t)
                    res["mark_ts"].append(now)
                    complete(t)
                elif k == ACQUIRE:
                    h = holder.get(x)
                    if h is None or h == t:
                        holder[x] = t
                        complete(t)
                        continue
                    if policy.on_lock_busy(t, h) == "yield":
                        calls[t] += 1
                        off_cpu(c)
                        make_ready(t, False)
                        at(now, "dispatch", c)
                        break
                    spin_since[t] = now
                    spinners.setdefault(x, []).append(t)
                    for kk, v in zip(("ep_thread", "ep_start", "ep_end", "ep_holder", "ep_calls", "ep_retries"), (t, now, now, h, 0, 0)):
                        res[kk].append(v)
                    state(t, 1, c)
                    break
                elif k == RELEASE:
                    holder[x] = None
                    for s in spinners.pop(x, []):
                        if st[s] == "running":
                            at(now, "step", s, gen[s])
                    complete(t)
                elif k == WAIT_FOR:
                    if pos[x] > y:
                        complete(t)
                    else:
                        waiters.setdefault(x, []).append((t, y))
                        off_cpu(c)
                        st[t] = "blocked"
                        state(t, 3)
                        at(now, "dispatch", c)
                        break
    for t in range(n):
        state(t, 4 if st[t] == "done" else 3)
        c0, s0, p0 = seg[t]
        if now > s0:
            for k, v in zip(("state_thread", "state_code", "state_start", "state_end", "state_pcpu"), (t, c0, s0, now, p0)):
                res[k].append(v)
    for c in range(pcpus):
        off_cpu(c)
    return res | {"cpu_ns": cpu_ns, "spin_ns": spin_ns, "calls": calls, "excessive": exc, "uncleared": [0] * len(calls), "overhead_ns": overhead, "end_ns": now, "events": events, "wall_s": 0.0}
