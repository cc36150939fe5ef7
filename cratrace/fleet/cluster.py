"""Where fleet tasks run: a Dask client for an existing scheduler
(``--scheduler tcp://HOST:8786`` or ``DASK_SCHEDULER_ADDRESS``), or a
`LocalCluster` sized to this machine.

A local cluster has one worker process per core (``--workers`` to
change), one thread each: a replay is one core's work and the GIL would
serialise threads. Worker processes are spawned, never forked (a fork
inside polars' thread pool can deadlock), and each is told to keep its
polars and BLAS pools to its one thread, so that two workers use two
cores, not four threads fighting for them.
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from typing import Any, Iterator

from cratrace.errors import UsageError

#: environment of a local cluster's worker processes: pools the size of
#: their one thread (the nanny sets these before it spawns a worker)
WORKER_ENV = {"POLARS_MAX_THREADS": "1", "RAYON_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def machine_cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def scheduler_address(option: str | None) -> str | None:
    """The scheduler to use: `--scheduler`, else DASK_SCHEDULER_ADDRESS,
    else None (a local cluster)."""
    return option or os.environ.get("DASK_SCHEDULER_ADDRESS") or None


def _dask():
    try:
        import distributed
    except ImportError:
        raise UsageError("fleet commands need Dask distributed: pip install 'cratrace[fleet]' (dask, distributed, fsspec, bokeh)") from None
    return distributed


@contextmanager
def dask_client(scheduler: str | None = None, workers: int | None = None, memory_per_worker: str | None = None) -> Iterator[Any]:
    """A `distributed.Client`, closed (and its local cluster with it) on exit."""
    distributed = _dask()
    address = scheduler_address(scheduler)
    if workers is not None and workers < 1:
        raise UsageError(f"--workers {workers}: expected 1 or more")
    # the cluster's own chatter (ports, dashboards, workers coming and
    # going, and each failed task's traceback) is not the user's business:
    # a failed task is recorded in one line by whoever submitted it
    for name in ("distributed", "bokeh", "tornado"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    cluster = None
    if address:
        try:
            client = distributed.Client(address, timeout="15s")
        except (OSError, TimeoutError, ValueError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise UsageError(f"--scheduler {address}: cannot connect ({first})") from None
    else:
        n = workers or machine_cores()
        import dask

        with dask.config.set({"distributed.worker.multiprocessing-method": "spawn", "distributed.nanny.pre-spawn-environ": {**dask.config.get("distributed.nanny.pre-spawn-environ", {}), **WORKER_ENV}}), _workers_ignore_ctrl_c():
            cluster = distributed.LocalCluster(
                n_workers=n,
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",
                memory_limit=memory_per_worker or "auto",
                silence_logs=logging.CRITICAL,
                preload=["cratrace.fleet.worker_setup"],
            )
            client = distributed.Client(cluster)
    try:
        yield client
    finally:
        try:
            client.close()
        finally:
            if cluster is not None:
                cluster.close()


@contextmanager
def _workers_ignore_ctrl_c() -> Iterator[None]:
    """Worker processes started in here ignore SIGINT (an ignored signal
    stays ignored across exec, and Python then installs no handler): a
    terminal's Ctrl-C reaches the whole process group, and workers that
    took it died printing a traceback each while the driver was already
    stopping them."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def dashboard_link(client: Any) -> str | None:
    """The Dask dashboard's address, or None when the scheduler has none
    (bokeh not installed there)."""
    try:
        services = client.scheduler_info().get("services", {})
    except Exception:  # noqa: BLE001 - a link is a nicety
        return None
    return client.dashboard_link if "dashboard" in services else None


def worker_count(client: Any) -> int:
    return len(client.scheduler_info().get("workers", {}))
