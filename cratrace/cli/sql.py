"""`cratrace sql`: DuckDB over a capture's tables, or a sweep's dataset."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated

import typer

from cratrace.cli.options import Verbose
from cratrace.errors import UsageError


class OutputFormat(str, enum.Enum):
    table = "table"
    csv = "csv"
    json = "json"


def sql_cmd(
    capture: Annotated[Path, typer.Argument(help="Capture directory, or a sweep directory (`cratrace sweep -o SWEEP`).")],
    query: Annotated[str, typer.Argument(help="SQL; every event and model table is a view, e.g. `SELECT count(*) FROM sched_switch`; a sweep's views are metrics, hosts, vms, failures and timings.")],
    fmt: Annotated[OutputFormat, typer.Option("--format", "-f", help="Output format.")] = OutputFormat.table,
    as_json: Annotated[bool, typer.Option("--json", help="The rows as JSON, as every command's --json (the same as -f json).")] = False,
    verbose: Verbose = False,
) -> None:
    """Run SQL (DuckDB) over the capture: one view per event and model
    table. Over a sweep: `metrics` (the hive-partitioned dataset, capture
    and policy as columns), `hosts` and `vms` (its host and VM rows),
    `failures` and `timings`."""
    import duckdb

    import cratrace
    from cratrace.fleet.dataset import is_sweep, sweep_duckdb

    if as_json:
        if fmt not in (OutputFormat.table, OutputFormat.json):
            raise UsageError(f"--json and -f {fmt.value}: give one output format")
        fmt = OutputFormat.json
    if not query.strip():
        raise UsageError("empty query: give SQL, e.g. \"SELECT count(*) FROM sched_switch\"")
    con = sweep_duckdb(capture) if is_sweep(capture) else cratrace.open(capture).duckdb
    try:
        rel = con.sql(query)
        if rel is None:
            return  # a statement without rows (CREATE VIEW, COPY ... TO ...)
        df = rel.pl()
    except duckdb.Error as e:
        first = str(e).strip().splitlines()[0]
        raise UsageError(f"query failed: {first}") from None
    if fmt is OutputFormat.csv:
        print(_flat(df).write_csv(), end="")
    elif fmt is OutputFormat.json:
        print(df.write_json())
    else:
        import polars as pl

        with pl.Config(tbl_rows=50, tbl_cols=30, fmt_str_lengths=60, tbl_hide_dataframe_shape=False):
            print(df)


def _flat(df):  # polars.DataFrame -> polars.DataFrame
    """CSV holds no lists or structs: those cells as their JSON text."""
    import json

    import polars as pl

    nested = [c for c, t in df.schema.items() if t.is_nested()]

    def as_json(v):
        return None if v is None else json.dumps(v.to_list() if isinstance(v, pl.Series) else v, default=str)

    return df.with_columns(pl.col(c).map_elements(as_json, return_dtype=pl.String) for c in nested) if nested else df


def register(app: typer.Typer) -> None:
    app.command("sql", rich_help_panel="Explore")(sql_cmd)
