"""Tenants of a capture with no VMs: its processes.

A host without VMs (or one whose VMM the model does not know) is still a
shared machine: the report bills and charges energy to processes instead.
A thread's tenant is its process's name and id where the trace says which
process it belongs to (`threads.pid`), else its own name (a trace.dat
without creation events has no thread-group ids); kernel threads (names
with a `/` such as `kworker/0:1`, `ksoftirqd/1`, and the kernel's own
daemons) are one tenant, `kernel`.
"""

from __future__ import annotations

import polars as pl

#: kernel daemons whose names carry no `/`
KERNEL_THREADS = r"^(kthreadd|rcu_\w+|khungtaskd|kswapd\d*|kcompactd\d*|oom_reaper|kauditd|khugepaged|kblockd|watchdogd|jbd2/.*|irq/.*|swapper)$"


def process_tenants(threads: pl.DataFrame) -> pl.DataFrame:
    """`threads` with `vm` set to each thread's tenant when no thread has a
    VM; unchanged otherwise."""
    if threads.height == 0 or threads["vm"].is_not_null().any():
        return threads
    leader = threads.select(pl.col("tid").alias("pid"), pl.col("comm").alias("_leader"))
    comm = pl.col("comm").fill_null("?")
    kernel = comm.str.contains("/") | comm.str.contains(KERNEL_THREADS)
    tenant = (
        pl.when(pl.col("tid") == 0)
        .then(pl.lit(None, pl.String))
        .when(kernel)
        .then(pl.lit("kernel"))
        .when(pl.col("pid").is_not_null())
        .then(pl.format("{}-{}", pl.col("_leader").fill_null(comm), pl.col("pid")))
        .otherwise(comm)
    )
    return threads.join(leader, on="pid", how="left").with_columns(tenant.alias("vm")).drop("_leader")
