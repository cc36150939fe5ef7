"""Shared helpers: typed empty frames, casting to the declared schema,
event lookup, and interval overlay."""

from __future__ import annotations

import polars as pl

from cratrace.tables import MODEL_TABLES


#: the Arrow type names the declarations use, as polars types
_POLARS = {"int64": pl.Int64, "int32": pl.Int32, "double": pl.Float64, "string": pl.String, "bool": pl.Boolean}


def schema(name: str) -> dict[str, pl.DataType]:
    return {c.name: _POLARS[c.type] for c in MODEL_TABLES[name].columns}


def empty(name: str) -> pl.DataFrame:
    return pl.DataFrame(schema=schema(name))


def conform(df: pl.DataFrame, name: str) -> pl.DataFrame:
    """Select and cast `df` to the declared columns (missing ones null)."""
    sch = schema(name)
    cols = [(pl.col(c) if c in df.columns else pl.lit(None)).cast(t).alias(c) for c, t in sch.items()]
    return df.select(cols) if df.height else empty(name)


def top_buffer(lf: pl.LazyFrame) -> pl.LazyFrame:
    """Rows of the top-level buffer only (instances duplicate events)."""
    return lf.filter(pl.col("instance") == "")


def col_or(lf_cols: list[str], *names: str) -> str:
    """The first of `names` present (fields shadowing common columns are `field_<name>`)."""
    for n in names:
        if n in lf_cols:
            return n
    raise KeyError(names)


def overlay(base: pl.DataFrame, over: pl.DataFrame, keys: list[str], state: str) -> pl.DataFrame:
    """Replace `base` segments' state by `state` wherever an `over`
    interval (same keys) covers them, splitting segments at the boundaries.
    Both frames have keys + start + end; base also has `state`, `pcpu`."""
    if over.height == 0 or base.height == 0:
        return base
    over = over.select(*keys, "start", "end").unique()
    cuts = pl.concat([over.select(*keys, pl.col("start").alias("t")), over.select(*keys, pl.col("end").alias("t"))])
    # split base segments at every overlay boundary strictly inside them
    b = base.with_row_index("_seg")
    inner = (
        b.select("_seg", *keys, "start", "end")
        .join(cuts, on=keys)
        .filter((pl.col("t") > pl.col("start")) & (pl.col("t") < pl.col("end")))
        .select("_seg", "t")
    )
    bounds = pl.concat([b.select("_seg", pl.col("start").alias("t")), inner, b.select("_seg", pl.col("end").alias("t"))]).unique().sort("_seg", "t")
    pieces = (
        bounds.with_columns(pl.col("t").shift(-1).over("_seg").alias("end"))
        .drop_nulls("end")
        .rename({"t": "start"})
        .join(b.drop("start", "end"), on="_seg")
    )
    # a piece is covered if some overlay interval contains its start
    covered = (
        pieces.select("_seg", "start", "end", *keys)
        .join(over.rename({"start": "o_start", "end": "o_end"}), on=keys)
        .filter((pl.col("o_start") <= pl.col("start")) & (pl.col("o_end") >= pl.col("end")))
        .select("_seg", "start")
        .unique()
        .with_columns(pl.lit(True).alias("_cov"))
    )
    out = pieces.join(covered, on=["_seg", "start"], how="left")
    out = out.with_columns(pl.when(pl.col("_cov")).then(pl.lit(state)).otherwise(pl.col("state")).alias("state")).drop("_seg", "_cov")
    return out.with_columns((pl.col("end") - pl.col("start")).alias("dur")).select(base.columns)
