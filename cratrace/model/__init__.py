"""Model: raw events → the canonical tables (issue #9).

One small module per table, each a pure function from polars frames to a
frame with the declared schema (``cratrace/tables.py``); :mod:`.build`
reads a capture, runs them in dependency order and writes
``CAPTURE/model/<table>.parquet``.

``build_model`` is loaded on first use: :mod:`.marker_parse` must be
importable without polars, so that ``cratrace model`` can start parsing
marker lines while polars is still being imported.
"""

from typing import Any

__all__ = ["build_model"]


def __getattr__(name: str) -> Any:
    if name == "build_model":
        from cratrace.model.build import build_model

        return build_model
    raise AttributeError(f"module 'cratrace.model' has no attribute {name!r}")
