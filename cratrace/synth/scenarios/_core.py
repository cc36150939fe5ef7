"""A per-core host scheduler for scenarios whose vCPU threads are pinned:
round-robin with a time slice, CPU-bound threads always runnable, I/O-bound
threads running bursts then blocking (HLT exit) for an I/O wait.

Cores are independent (pinned threads), so each :class:`CoreSim` advances
on its own; :meth:`CoreSim.advance` stops at a given time so a scenario can
interleave its own per-tick events (frequency, temperature).
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

from cratrace.synth.scenarios._common import (
    EXIT_EXTERNAL_INTERRUPT,
    EXIT_HLT,
    EXIT_IO_INSTRUCTION,
    TASK_INTERRUPTIBLE,
    TASK_RUNNING,
    USER_RIP,
    Builder,
)

IDLE_EXIT = 4294967295  # cpu_idle state for "leaving idle" (PWR_EVENT_EXIT)


@dataclass
class VThread:
    tid: int
    vcpu: int
    kind: str  # "cpu" | "io"
    burst_ns: int = 0
    wait_ns: int = 0
    run_ns: int = 0
    khz_ns: int = 0  # sum of run ns x kHz; cycles = khz_ns // 1e6 (exact, no per-slice rounding)
    bursts: int = 0
    left: int = 0  # remaining burst (io)
    wake_at: int = 0

    @property
    def cycles(self) -> int:
        return self.khz_ns // 1_000_000


class CoreSim:
    def __init__(self, b: Builder, cpu: int, threads: list[VThread], slice_ns: int, rng: random.Random):
        self.b, self.cpu, self.slice_ns, self.rng = b, cpu, slice_ns, rng
        self.threads = threads
        self.runq: deque[VThread] = deque(threads)
        self.blocked: list[VThread] = []
        self.cur: VThread | None = None
        self.t = 0
        self.freq_khz = 0
        self.idle_ns = 0
        for th in threads:
            th.left = self._burst(th)

    def _burst(self, th: VThread) -> int:
        return int(th.burst_ns * self.rng.uniform(0.5, 1.5)) if th.kind == "io" else 0

    def _dispatch(self, t: int, prev_state: int) -> None:
        b, cpu = self.b, self.cpu
        if self.runq:
            nxt = self.runq.popleft()
            if b.current[cpu] == 0 and self.t > 0:
                b.emit(t, cpu, "cpu_idle", 0, state=IDLE_EXIT, cpu_id=cpu)
            b.switch(t, cpu, nxt.tid, prev_state)
            b.kvm_entry(t + 100, cpu, nxt.tid, nxt.vcpu, rip=USER_RIP)
            self.cur = nxt
            self.slice_end = t + self.slice_ns
        else:
            b.switch(t, cpu, 0, prev_state)
            b.emit(t + 100, cpu, "cpu_idle", 0, state=1, cpu_id=cpu)
            self.cur = None

    def advance(self, until: int) -> None:
        b, cpu = self.b, self.cpu
        if self.t == 0 and b.current[cpu] == 0 and self.cur is None:
            self._dispatch(0, TASK_RUNNING)
        while self.t < until:
            # wake blocked threads whose I/O completed
            self.blocked.sort(key=lambda th: th.wake_at)
            while self.blocked and self.blocked[0].wake_at <= self.t:
                th = self.blocked.pop(0)
                th.left = self._burst(th)
                b.wakeup(self.t, cpu, th.tid, cpu)
                self.runq.append(th)
                if self.cur is None:
                    self._dispatch(self.t + 200, TASK_RUNNING)
            nxt_wake = self.blocked[0].wake_at if self.blocked else until
            if self.cur is None:
                step_to = min(until, nxt_wake)
                self.idle_ns += step_to - self.t
                self.t = step_to
                continue
            th = self.cur
            stop = min(until, nxt_wake, self.slice_end)
            if th.kind == "io":
                stop = min(stop, self.t + th.left)
            run = max(stop - self.t, 0)
            th.run_ns += run
            th.khz_ns += run * self.freq_khz
            if th.kind == "io":
                th.left -= run
            self.t = stop if run else self.t + 1
            if th.kind == "io" and th.left <= 0:
                th.bursts += 1
                reason = EXIT_IO_INSTRUCTION if self.rng.random() < 0.5 else EXIT_HLT
                b.kvm_exit(self.t, cpu, th.tid, th.vcpu, reason, rip=USER_RIP)
                th.wake_at = self.t + int(th.wait_ns * self.rng.uniform(0.5, 1.5))
                self.blocked.append(th)
                self._dispatch(self.t + 300, TASK_INTERRUPTIBLE)
            elif self.t >= self.slice_end:
                if self.runq:
                    b.kvm_exit(self.t, cpu, th.tid, th.vcpu, EXIT_EXTERNAL_INTERRUPT, rip=USER_RIP)
                    self.runq.append(th)
                    self._dispatch(self.t + 300, TASK_RUNNING)
                else:
                    self.slice_end = self.t + self.slice_ns
