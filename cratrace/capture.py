"""A capture directory as a Python object: metadata, lazy tables and SQL.

The layout (see ``docs/capture-format.md``)::

    CAPTURE/capture.json          metadata
    CAPTURE/events/<name>.parquet one table per event type, sorted by ts
    CAPTURE/model/<name>.parquet  canonical model tables (cratrace model)

Nothing here reads a whole table eagerly: tables are polars LazyFrames and
DuckDB views over the Parquet files.
"""

from __future__ import annotations

import json
import re
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cratrace.errors import CaptureError
from cratrace.importer import SCHEMA_VERSION

if TYPE_CHECKING:
    import polars as pl


def _scan(path: Path) -> pl.LazyFrame:
    # polars is imported when a table is first asked for: a quarter of a
    # second that `cratrace info`, which reads capture.json only, need not pay
    import polars as pl

    return pl.scan_parquet(path)


@lru_cache(maxsize=256)
def _columns(path: Path, mtime_ns: int) -> list[str]:
    """A Parquet file's column names (its footer, read once per version)."""
    import polars as pl

    return list(pl.scan_parquet(path).collect_schema().names())


def _scan_model(name: str, path: Path) -> pl.LazyFrame:
    """A model table, with any column declared since it was built
    (`cratrace.tables`) added as nulls: a model built by an older cratrace
    reads with today's columns, null where they were not computed."""
    import polars as pl

    from cratrace.tables import MODEL_TABLES

    lf = pl.scan_parquet(path)
    if name not in MODEL_TABLES:
        return lf
    from cratrace.model.frames import schema

    try:
        have = _columns(path, path.stat().st_mtime_ns)
    except (OSError, pl.exceptions.PolarsError):
        return lf  # damaged: `require_model` names it, a read fails on it
    declared = schema(name)
    missing = [pl.lit(None, t).alias(c) for c, t in declared.items() if c not in have]
    if not missing:
        return lf
    # in the declared order, as a model built today has them
    return lf.with_columns(missing).select(*declared, *(c for c in have if c not in declared))


#: what a table (and so a view) may be named
TABLE_NAME = re.compile(r"[A-Za-z0-9_]+")


def _tables_in(folder: Path) -> dict[str, Path]:
    if not folder.is_dir():
        return {}
    return {p.stem: p for p in sorted(folder.glob("*.parquet"))}


class Capture:
    """An imported capture. Open one with :func:`cratrace.open`."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        meta = self.path / "capture.json"
        if not meta.is_file():
            raise CaptureError(f"{self.path}: not a capture (no capture.json); create one with `cratrace import`")
        try:
            self.meta: dict[str, Any] = json.loads(meta.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CaptureError(f"{meta}: unreadable capture.json ({e})") from None
        version = self.meta.get("schema_version")
        if version != SCHEMA_VERSION:
            raise CaptureError(f"{meta}: schema_version {version!r}, this cratrace reads {SCHEMA_VERSION}")
        # every table capture.json counts rows for is there (a model built
        # from a capture whose event files went missing is a model of nothing)
        present = self.event_paths
        for name, rows in (self.meta.get("events") or {}).items():
            if rows and name not in present:
                raise CaptureError(f"{self.path / 'events' / (name + '.parquet')}: missing (capture.json counts {rows} rows); import the capture again")

    def __repr__(self) -> str:
        return f"Capture({str(self.path)!r}, events={len(self.event_paths)}, model={len(self.model_paths)})"

    @property
    def event_paths(self) -> dict[str, Path]:
        return _tables_in(self.path / "events")

    @property
    def model_paths(self) -> dict[str, Path]:
        return _tables_in(self.path / "model")

    @property
    def events(self) -> dict[str, pl.LazyFrame]:
        """One LazyFrame per event table, keyed by event name."""
        return {k: _scan(p) for k, p in self.event_paths.items()}

    @property
    def model(self) -> dict[str, pl.LazyFrame]:
        """One LazyFrame per model table present (run `cratrace model` to build them)."""
        return {k: _scan_model(k, p) for k, p in self.model_paths.items()}

    def require_model(self, names: list[str]) -> dict[str, pl.LazyFrame]:
        """The model tables `names`, each checked to be there and to have an
        intact Parquet footer, so a missing or damaged one is a one-line
        error naming it rather than a failure deep in an analysis."""
        from cratrace import _native

        paths = self.model_paths
        missing = [n for n in names if n not in paths]
        if missing:
            raise CaptureError(f"{self.path}: model tables missing ({', '.join(missing)}); run `cratrace model {self.path}` first")
        for n in names:
            _native.parquet_rows(paths[n])  # raises "damaged table: FILE: ..."
        return {n: _scan_model(n, paths[n]) for n in names}

    def table(self, name: str) -> pl.LazyFrame:
        """A model table if there is one of that name, else an event table."""
        paths = {**self.event_paths, **self.model_paths}
        if name not in paths:
            raise CaptureError(f"{self.path}: no table {name!r} (have: {', '.join(sorted(paths)) or 'none'})")
        return _scan_model(name, paths[name]) if name in self.model_paths else _scan(paths[name])

    def has(self, name: str) -> bool:
        return name in self.event_paths or name in self.model_paths

    @cached_property
    def duckdb(self):  # -> duckdb.DuckDBPyConnection
        """An in-memory DuckDB connection with one view per event and model table."""
        import duckdb

        tables = {**self.event_paths, **self.model_paths}
        # Table names come from file names, which a capture from elsewhere
        # can choose: they were put into SQL text unquoted, and a crafted
        # name ran SQL on open (issue 42). Only the names cratrace writes
        # are accepted, and the views are made through the API (the name
        # and the path are values, never SQL).
        bad = [p for name, p in tables.items() if not TABLE_NAME.fullmatch(name)]
        if bad:
            raise CaptureError(f"{bad[0]}: not a table name cratrace writes (letters, digits and _ only); the capture was not opened for SQL")
        con = duckdb.connect()
        for name, p in tables.items():
            con.read_parquet(str(p)).create_view(name, replace=True)
        return con

    def sql(self, query: str) -> pl.DataFrame:
        """Run SQL over the capture's tables and return a polars DataFrame."""
        return self.duckdb.sql(query).pl()


def open(path: str | Path) -> Capture:  # noqa: A001 - mirrors builtins.open on purpose
    """Open a capture directory written by ``cratrace import``."""
    return Capture(path)

