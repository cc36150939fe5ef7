"""Model: raw events → the canonical tables (issue #9).

One small module per table, each a pure function from polars frames to a
frame with the declared schema (``cratrace/tables.py``); :mod:`.build`
reads a capture, runs them in dependency order and writes
``CAPTURE/model/<table>.parquet``.
"""

from cratrace.model.build import build_model

__all__ = ["build_model"]
