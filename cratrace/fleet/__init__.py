"""Fleet scale (issue #43): many captures, policy sweeps, and the report
that rolls them up across hosts, on Dask distributed.

Each module has one job:

* :mod:`.cluster` gets a Dask client: a `LocalCluster` sized to the
  machine, or an existing scheduler (``--scheduler``,
  ``DASK_SCHEDULER_ADDRESS``);
* :mod:`.source` turns a capture reference (a path, ``file://`` or any
  URL fsspec reads) into a local directory on a worker;
* :mod:`.plan` expands captures × policies × grid × what-ifs into runs,
  each with an id that says what it ran (so finished runs are skipped);
* :mod:`.tasks` is what runs on a worker: scan a capture, replay one run,
  import or model one capture;
* :mod:`.dataset` declares the sweep's metrics table and writes it as one
  hive-partitioned Parquet dataset;
* :mod:`.sweep` drives a sweep: submits, retries, records failures,
  shows progress, survives Ctrl-C;
* :mod:`.many` runs import and model over many inputs;
* :mod:`.report` and :mod:`.render` make the fleet report.

Dask is imported only by the modules that talk to a cluster, so a
single-capture command never pays for it.
"""

from typing import Any

__all__ = ["SweepResult", "run_sweep"]


def __getattr__(name: str) -> Any:
    # the package itself imports nothing: `python -m cratrace.fleet.dataset`
    # and the CLI's small commands load only the module they use
    if name in __all__:
        from cratrace.fleet import sweep

        return getattr(sweep, name)
    raise AttributeError(name)
