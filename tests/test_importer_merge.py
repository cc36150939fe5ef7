"""How `cratrace import` places each source's tables in ``events/``: a
single source is read in place, and a table whose rows came out of order
is sorted there; tables of one name from several sources are merged."""

from __future__ import annotations

import polars as pl

from cratrace import _native
from cratrace.importer import _merge_tables


def _table(path, ts):
    pl.DataFrame({"ts": ts, "cpu": list(range(len(ts)))}, schema={"ts": pl.Int64, "cpu": pl.UInt32}).write_parquet(path)


def test_a_single_source_out_of_order_is_sorted_in_place(tmp_path):
    events = tmp_path / "events"
    events.mkdir()
    _table(events / "sched_switch.parquet", [30, 10, 20])
    _table(events / "sched_wakeup.parquet", [5, 6])
    rows = _merge_tables([(events, {"stats": {_native.tracedat_stats.TS_OUT_OF_ORDER: 1}})], events, "lz4")
    assert rows == {"sched_switch": 3, "sched_wakeup": 2}
    assert sorted(p.name for p in events.iterdir()) == ["sched_switch.parquet", "sched_wakeup.parquet"]
    got = pl.read_parquet(events / "sched_switch.parquet")
    assert got["ts"].to_list() == [10, 20, 30]
    assert got["cpu"].to_list() == [1, 2, 0]  # rows moved whole


def test_a_single_sorted_source_is_left_where_it_was_read(tmp_path):
    events = tmp_path / "events"
    events.mkdir()
    _table(events / "xen_wake.parquet", [1, 2, 3])
    before = (events / "xen_wake.parquet").stat().st_ino
    assert _merge_tables([(events, {"stats": {}})], events, "lz4") == {"xen_wake": 3}
    assert (events / "xen_wake.parquet").stat().st_ino == before


def test_tables_of_one_name_from_two_sources_are_merged_in_ts_order(tmp_path):
    events, a, b = tmp_path / "events", tmp_path / "a", tmp_path / "b"
    for d in (events, a, b):
        d.mkdir()
    _table(a / "sched_switch.parquet", [1, 4, 9])
    _table(b / "sched_switch.parquet", [2, 3, 10])
    _table(b / "only_b.parquet", [7])
    rows = _merge_tables([(a, {}), (b, {})], events, "lz4")
    assert rows == {"only_b": 1, "sched_switch": 6}
    assert pl.read_parquet(events / "sched_switch.parquet")["ts"].to_list() == [1, 2, 3, 4, 9, 10]
    assert not (b / "only_b.parquet").exists()
