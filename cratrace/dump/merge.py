"""A capture's event tables, read back as one stream in time order.

Each ``events/<name>.parquet`` is sorted by ``ts``; the stream is a k-way
merge of them (`heapq.merge`) fed by record batches, so memory holds one
batch per table whatever the capture's length. Ties are broken as
`trace-cmd report` breaks them between CPUs: the lower CPU first (it reads
the CPU whose next record is earliest, scanning from CPU 0); two tables'
events on one CPU at one nanosecond come in table-name order, the import
having kept no order between tables.

Time and CPU filters skip the row groups whose statistics rule them out,
then filter each batch read.
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

    __slots__ = ("table", "cols", "i", "by_field")

    def __init__(self, table: str, cols: dict[str, list], i: int, by_field: dict[str, list]):
        self.table, self.cols, self.i, self.by_field = table, cols, i, by_field

    def __getitem__(self, column: str) -> Any:
        return self.cols[column][self.i]

    def get(self, field: str, default: Any = None) -> Any:
        """The event's field `field` by its format name (sched_wakeup's
        ``pid`` is stored as column ``field_pid``)."""
        values = self.by_field.get(field)
        return default if values is None else values[self.i]

    @property
    def fields(self) -> list[str]:
        """The event's own fields, by their format names, in column order."""
        return list(self.by_field)


COMMON = ("ts", "cpu", "pid", "instance")


def _field_names(columns: list[str]) -> dict[str, str]:
    """Format name → column for the event's own fields."""
    out = {}
    for c in columns:
        if c in COMMON:
            continue
        out[c[len("field_"):] if c.startswith("field_") and c[len("field_"):] in COMMON else c] = c
    return out


def _row_groups(pf: Any, start: int | None, end: int | None, cpus: list[int] | None) -> list[int]:
    """The row groups whose statistics allow rows in the window and CPUs."""
    names = pf.schema_arrow.names
    ts_i, cpu_i = names.index("ts"), (names.index("cpu") if "cpu" in names else None)
    keep = []
    for g in range(pf.metadata.num_row_groups):
        rg = pf.metadata.row_group(g)
        st = rg.column(ts_i).statistics
        if st is not None and st.has_min_max and ((start is not None and st.max < start) or (end is not None and st.min >= end)):
            continue
        if cpus is not None and cpu_i is not None:
            cs = rg.column(cpu_i).statistics
            if cs is not None and cs.has_min_max and not any(cs.min <= c <= cs.max for c in cpus):
                continue
        keep.append(g)
    return keep


def _table_rows(name: str, path: Path, start: int | None, end: int | None, cpus: list[int] | None, batch_rows: int) -> Iterator[tuple[int, int, int, Row]]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    # ParquetFile reads a row group at a time and nothing ahead: the
    # dataset scanner's read-ahead held 90 MB of Arrow buffers on 1.5 M events
    pf = pq.ParquetFile(path)
    names = _field_names(pf.schema_arrow.names)
    has_cpu = "cpu" in pf.schema_arrow.names
    groups = _row_groups(pf, start, end, cpus)
    if not groups:
        return
    cpu_set = pa.array(cpus, pa.int32()) if cpus is not None else None
    seq = 0
    for batch in pf.iter_batches(batch_size=batch_rows, row_groups=groups):
        mask = None
        if start is not None:
            mask = pc.greater_equal(batch.column("ts"), start)
        if end is not None:
            m = pc.less(batch.column("ts"), end)
            mask = m if mask is None else pc.and_(mask, m)
        if cpu_set is not None:
            m = pc.is_in(batch.column("cpu"), value_set=cpu_set)
            mask = m if mask is None else pc.and_(mask, m)
        if mask is not None:
            batch = batch.filter(mask)
        if batch.num_rows == 0:
            continue
        cols = batch.to_pydict()
        # each field's values, by its format name: shared by the batch's rows
        by_field = {f: cols[c] for f, c in names.items()}
        ts, cpus_ = cols["ts"], cols["cpu"] if has_cpu else [None] * batch.num_rows
        for i in range(batch.num_rows):
            cpu = cpus_[i]
            yield ts[i], -1 if cpu is None else cpu, seq, Row(name, cols, i, by_field)
            seq += 1


def merged(tables: dict[str, Path], *, cpus: list[int] | None = None, start: int | None = None, end: int | None = None, batch_rows: int = BATCH_ROWS) -> Iterator[Row]:
    """The rows of `tables` (name → Parquet path) in (ts, cpu) order,
    limited to `cpus` and to ``start <= ts < end`` when given."""
    import pyarrow.parquet as pq

    streams = []
    for k, (name, path) in enumerate(sorted(tables.items())):
        if cpus is not None and "cpu" not in pq.read_schema(path).names:
            continue
        # (ts, cpu, table, seq) orders every row uniquely: Row is never compared
        streams.append(((ts, cpu, k, seq, row) for ts, cpu, seq, row in _table_rows(name, path, start, end, cpus, batch_rows)))
    for *_, row in heapq.merge(*streams):
        yield row
