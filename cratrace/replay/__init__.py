"""Replay (issue #5): recorded demand → the Rust engine → canonical tables
and metrics, per policy.

* :mod:`.workload` extracts per-thread demand phases from a capture's
  model tables (pure polars/Python, no engine);
* :mod:`.run` runs the engine once per policy and writes
  ``OUT/<policy>/model/*.parquet`` and ``OUT/<policy>/metrics.json``;
* :mod:`.policy` is the interface for policies written in Python.
"""

from cratrace.replay.run import replay_capture
from cratrace.replay.workload import Workload, extract_workload

__all__ = ["Workload", "extract_workload", "replay_capture"]
