"""How many policies' engines `replay --jobs 0` runs at once: one per CPU,
at most one per policy, and no more than the memory available holds.

Each concurrent replay holds its own copy of the demand (the engine's
phases) and then its own result tables, so two at once need twice the
memory of one: on a small machine a long capture's concurrent replays
would swap or be killed where one at a time fits.
"""

from __future__ import annotations

import os

#: the memory one policy's replay adds at its peak, per phase of demand:
#: its engine's phases (20 B each), then its result tables, metrics and
#: diagnostics. Measured: 2.8 GiB over the plan's for the 105 M phases of
#: a 100 M-event capture (27 B a phase), rounded up.
REPLAY_BYTES_PER_PHASE = 32


def available_memory() -> int | None:
    """The memory the kernel can give without swapping (MemAvailable, B);
    None where /proc/meminfo does not say."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def engines_at_once(policies: int, phases: int, cpus: int | None = None, memory: int | None = None) -> int:
    """Engines to run at once for `policies` replays of `phases` phases:
    one per CPU (`cpus`; default: those this process may use), at most
    one per policy, and as many as `memory` (default: available now) holds
    at `REPLAY_BYTES_PER_PHASE` each; at least one."""
    cpus = len(os.sched_getaffinity(0)) if cpus is None else cpus
    memory = available_memory() if memory is None else memory
    fit = cpus if memory is None else memory // max(1, phases * REPLAY_BYTES_PER_PHASE)
    return max(1, min(cpus, policies, fit))
