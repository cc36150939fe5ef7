"""A capture's event tables, read back as one stream in time order.

Each ``events/<name>.parquet`` is sorted by ``ts``; the stream is a k-way
merge of them (`heapq.merge`) fed by record batches, so memory holds one
batch per table whatever the capture's length. Ties are broken as
`trace-cmd report` breaks them between CPUs: the lower CPU first (it reads
the CPU whose next record is earliest, scanning from CPU 0); two tables'
events on one CPU at one nanosecond come in table-name order, the import
having kept no order between tables.

Time and CPU filters go to pyarrow's scanner, which skips the row groups
whose statistics rule them out.
"""

from __future__ import annotations

import heapq
from pathlib import Path
from typing import Any, Iterator

#: rows per batch read from each table: small enough that a capture with a
#: hundred event types holds little, large enough that Arrow's per-batch
#: cost vanishes
BATCH_ROWS = 8192


class Row:
    """One event: its table's columns at one index (no dict per row)."""

    __slots__ = ("table", "cols", "i", "names")

    def __init__(self, table: str, cols: dict[str, list], i: int, names: dict[str, str]):
        self.table, self.cols, self.i, self.names = table, cols, i, names

    def __getitem__(self, column: str) -> Any:
        return self.cols[column][self.i]

    def get(self, field: str, default: Any = None) -> Any:
        """The event's field `field` by its format name (sched_wakeup's
        ``pid`` is stored as column ``field_pid``)."""
        col = self.names.get(field, field)
        values = self.cols.get(col)
        return default if values is None else values[self.i]

    @property
    def fields(self) -> list[str]:
        """The event's own fields, by their format names, in column order."""
        return list(self.names)


COMMON = ("ts", "cpu", "pid", "instance")


def _field_names(columns: list[str]) -> dict[str, str]:
    """Format name → column for the event's own fields."""
    out = {}
    for c in columns:
        if c in COMMON:
            continue
        out[c[len("field_"):] if c.startswith("field_") and c[len("field_"):] in COMMON else c] = c
    return out


def _table_rows(name: str, path: Path, flt: Any, batch_rows: int) -> Iterator[tuple[int, int, int, Row]]:
    import pyarrow.dataset as ds

    dataset = ds.dataset(path, format="parquet")
    names = _field_names(dataset.schema.names)
    has_cpu = "cpu" in dataset.schema.names
    seq = 0
    for batch in dataset.to_batches(filter=flt, batch_size=batch_rows):
        if batch.num_rows == 0:
            continue
        cols = batch.to_pydict()
        ts, cpus = cols["ts"], cols["cpu"] if has_cpu else [None] * batch.num_rows
        for i in range(batch.num_rows):
            cpu = cpus[i]
            yield ts[i], -1 if cpu is None else cpu, seq, Row(name, cols, i, names)
            seq += 1


def merged(tables: dict[str, Path], *, cpus: list[int] | None = None, start: int | None = None, end: int | None = None, batch_rows: int = BATCH_ROWS) -> Iterator[Row]:
    """The rows of `tables` (name → Parquet path) in (ts, cpu) order,
    limited to `cpus` and to ``start <= ts < end`` when given."""
    import pyarrow.dataset as ds

    flt = None
    if start is not None:
        flt = ds.field("ts") >= start
    if end is not None:
        e = ds.field("ts") < end
        flt = e if flt is None else flt & e
    streams = []
    for k, (name, path) in enumerate(sorted(tables.items())):
        f = flt
        if cpus is not None:
            import pyarrow.parquet as pq

            if "cpu" not in pq.read_schema(path).names:
                continue
            c = ds.field("cpu").isin(cpus)
            f = c if f is None else f & c
        # (ts, cpu, table, seq) orders every row uniquely: Row is never compared
        streams.append(((ts, cpu, k, seq, row) for ts, cpu, seq, row in _table_rows(name, path, f, batch_rows)))
    for *_, row in heapq.merge(*streams):
        yield row
