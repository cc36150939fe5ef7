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


def shift_within(expr: pl.Expr | str, keys: str | list[str], n: int) -> pl.Expr:
    """`expr` of the row `n` places back (1: the previous row, -1: the
    next) when that row has the same `keys`, else null: `shift(n).over(keys)`
    for rows already grouped by `keys`, without the window's group-by."""
    e = pl.col(expr) if isinstance(expr, str) else expr
    same = pl.all_horizontal([pl.col(k) == pl.col(k).shift(n) for k in ([keys] if isinstance(keys, str) else keys)])
    return pl.when(same).then(e.shift(n))


def total_order(df: pl.DataFrame, *cols: str) -> pl.DataFrame:
    """`df` sorted by `cols`, then by every other column: rows equal in
    `cols` (two events at one ns, two kicks ending one halt) otherwise come
    out in whatever order a join or group-by left them, which polars does
    not fix from one run to the next, and a table must be byte-identical.
    The order of `cols` alone is found on a narrow frame of them; only the
    rows tied in them (rare) are sorted by every column (a sort keyed on
    every column of 7.7 M spin episodes took 1.2 GB over the table's 475 MB)."""
    if df.height < 2:
        return df
    by = df.select(*cols).with_row_index("_row").sort(*cols, maintain_order=True)
    order = by["_row"]
    same = [pl.col(c).eq_missing(pl.col(c).shift(k)) for k in (1, -1) for c in cols]
    tied = by.select(pl.all_horizontal(same[: len(cols)]) | pl.all_horizontal(same[len(cols):])).to_series()
    del by
    if tied.any():
        # the tied rows, each block in place, ordered by every column
        rest = [c for c in df.columns if c not in cols]
        rows = order.filter(tied)
        inner = df.with_row_index("_row")[rows].sort(*cols, *rest)["_row"]
        order = order.scatter(tied.arg_true(), inner)
    return df[order]


def in_order(df: pl.DataFrame, *cols: str) -> pl.DataFrame:
    """`df` sorted by `cols`, sorted only if it is not already: model
    tables are written in their documented order, and sorting 1.3 M
    vcpu_states rows that were already in order took 0.1 s and 190 MB
    (checking takes a pass over the columns and no copy). Columns with
    nulls are always sorted (nulls first, as `sort` puts them)."""
    if df.height < 2 or any(df[c].null_count() for c in cols):
        return df.sort(*cols)
    # row i is >= row i-1 in (cols...) order, built from the last column out
    ok: pl.Expr | None = None
    for c in reversed(cols):
        cur, prev = pl.col(c), pl.col(c).shift(1)
        ok = cur >= prev if ok is None else (cur > prev) | ((cur == prev) & ok)
    return df if df.select(ok.fill_null(True).all()).item() else df.sort(*cols)


def aligned(s: pl.Series, like: pl.Series) -> pl.Series:
    """`s` cut into the chunks of `like` (as long), without a copy: a
    column made whole (a native result) set beside a frame read in row
    groups makes every later filter of the frame take polars' slow path
    for misaligned chunks (1.6 s instead of 0.4 for 8.7 M rows)."""
    lengths = like.chunk_lengths()
    if len(lengths) < 2:
        return s
    parts, at = [], 0
    for n in lengths:
        parts.append(s.slice(at, n))
        at += n
    return pl.concat(parts, rechunk=False)


def grouped(df: pl.DataFrame, key: str, col: str) -> pl.DataFrame:
    """`df` with each `key`'s rows together and in `col` order within: as
    it is when it already is (a vCPU timeline sorted by vm, vcpu and start
    has each thread's rows together, and sorting 3.8 M of them by thread
    instead took 200 MB), else sorted by (`key`, `col`). A null key always
    sorts, as `in_order` does."""
    if df.height < 2 or df[key].null_count():
        return df.sort(key, col)
    k, c = pl.col(key), pl.col(col)
    same = (k == k.shift(1)).fill_null(False)
    blocks, keys, back = df.select((~same).sum().alias("blocks"), k.n_unique().alias("keys"), (same & (c < c.shift(1))).any().alias("back")).row(0)
    return df if blocks == keys and not back else df.sort(key, col)


def vm_batches(vcpus: pl.DataFrame, rows: float, limit: float) -> list[list[str]]:
    """The VMs of `vcpus` (a row per vCPU, sorted by vm) in consecutive
    batches of whole VMs, few enough vCPUs each that a batch's share of
    `rows` (taken as shared evenly by the vCPUs) is at most `limit`; a VM
    bigger than that is a batch of its own. A long capture's VMs are built
    a batch at a time this way, so that a step holds one batch's rows, not
    the host's."""
    per_vcpu = rows / max(vcpus.height, 1)
    batches: list[list[str]] = [[]]
    held = 0.0
    for vm, n in vcpus.group_by("vm", maintain_order=True).len().iter_rows():
        if batches[-1] and held + n * per_vcpu > limit:
            batches.append([])
            held = 0.0
        batches[-1].append(vm)
        held += n * per_vcpu
    return batches


def _union(iv: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Per key, the union of intervals (start, end) as disjoint intervals
    (o_start, o_end); touching intervals merge."""
    reach = pl.col("end").cum_max().shift(1).over(keys)
    return (
        iv.sort(*keys, "start")
        .with_columns(reach.alias("_reach"))
        .with_columns((pl.col("start") > pl.col("_reach")).fill_null(True).cum_sum().over(keys).alias("_run"))
        .group_by(*keys, "_run")
        .agg(pl.col("start").min().alias("o_start"), pl.col("end").max().alias("o_end"))
        .drop("_run")
    )
