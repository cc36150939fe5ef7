"""Preloaded into each worker process of a local cluster (Dask's
``preload``): the worker leaves the driver's process group and ignores
SIGINT. A terminal's Ctrl-C reaches the whole foreground process group;
the driver stops the workers itself, and a worker that took the signal
died printing a traceback while it did. Ignoring the signal alone was not
enough (the preload may run off the main thread, and asyncio's runner in
the worker installs its own handler), so the worker moves to a session of
its own, where a terminal's Ctrl-C never reaches it. If the driver dies
outright, the worker still stops: it loses its nanny and scheduler."""

from __future__ import annotations

import contextlib
import os
import signal
import threading


def dask_setup(worker) -> None:  # noqa: ANN001 - Dask's preload hook
    with contextlib.suppress(OSError):  # already a group leader: nothing to leave
        os.setsid()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
