"""Preloaded into each worker process of a local cluster (Dask's
``preload``): the worker ignores SIGINT. A terminal's Ctrl-C reaches the
whole process group; the driver stops the workers itself, and a worker
that took the signal died printing a traceback while it did. (Ignoring
it before the workers are spawned, `cluster._workers_ignore_ctrl_c`, is
not enough: Python's asyncio runner in the worker installs its own
handler.)"""

from __future__ import annotations

import signal
import threading


def dask_setup(worker) -> None:  # noqa: ANN001 - Dask's preload hook
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
