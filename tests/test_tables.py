"""The table declarations are the contract: check they are well-formed and
that the generated docs are in sync with them."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa

from cratrace.tables import MODEL_TABLES, model_schema


def test_every_table_has_documented_columns_and_valid_sort_keys():
    for table in MODEL_TABLES.values():
        names = table.column_names
        assert len(names) == len(set(names)), f"{table.name}: duplicate column"
        assert table.doc.strip()
        for col in table.columns:
            assert col.doc.strip(), f"{table.name}.{col.name} has no doc"
        for key in table.sorted_by:
            assert key in names, f"{table.name}: sort key {key} is not a column"


def test_time_columns_are_int64_nanoseconds():
    for table in MODEL_TABLES.values():
        for col in table.columns:
            if col.name in ("start", "end", "dur", "ts") or col.name.endswith("_ts"):
                assert pa.type_for_alias(col.type) == pa.int64(), f"{table.name}.{col.name}"
                assert col.unit == "ns", f"{table.name}.{col.name} unit {col.unit!r}"


def test_schema_matches_declaration():
    schema = model_schema("vcpu_states")
    assert schema.names == MODEL_TABLES["vcpu_states"].column_names
    assert not schema.field("start").nullable


def test_the_model_frames_have_the_declared_arrow_types():
    import polars as pl

    from cratrace.model.frames import schema

    for table in MODEL_TABLES.values():
        arrow = model_schema(table.name)  # raises on a type name Arrow does not know
        assert schema(table.name) == dict(pl.from_arrow(arrow.empty_table()).schema), table.name


def test_generated_docs_are_current(repo_root):
    fresh = subprocess.run(
        [sys.executable, "-m", "cratrace.tables"], capture_output=True, text=True, check=True, cwd=repo_root
    ).stdout
    committed = (repo_root / "docs" / "tables.md").read_text()
    assert fresh == committed, "docs/tables.md is stale: run `python -m cratrace.tables > docs/tables.md`"
