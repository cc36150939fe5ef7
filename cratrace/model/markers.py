"""`markers`: trace_marker text parsed into a name and key=value fields.

``txn_end vm=a vcpu=1`` → name ``txn_end``, fields ``{"vm": "a", "vcpu": "1"}``.
Values stay strings in the JSON; ``vm`` and ``vcpu`` are lifted into
columns when present, else taken from the writer thread's VM.
"""

from __future__ import annotations

import polars as pl

from cratrace.model.frames import conform, empty, top_buffer


def markers(prints: pl.LazyFrame | None, threads: pl.DataFrame) -> pl.DataFrame:
    if prints is None:
        return empty("markers")
    df = top_buffer(prints).select("ts", "cpu", pl.col("pid").cast(pl.Int64).alias("tid"), pl.col("buf").str.strip_chars_end("\n").alias("text")).collect()
    if df.height == 0:
        return empty("markers")
    # Vectorised string work, no per-token list.eval: the text splits into
    # name and rest; tokens of the rest containing "=" are the fields, key
    # up to the first "=", value the rest of the token. Texts made only of
    # plain k=v tokens (the common case) take literal replacements; the
    # others a regex.
    parts = pl.col("text").str.splitn(" ", 2)
    df = df.with_row_index("_i").with_columns(parts.struct.field("field_0").alias("name"), parts.struct.field("field_1").fill_null("").alias("_rest"))
    plain = pl.col("_rest").str.contains(r'^[^ ="\\]+=[^ ="\\]*( [^ ="\\]+=[^ ="\\]*)*$')
    fast = df.filter(plain).with_columns(
        pl.concat_str([pl.lit('{"'), pl.col("_rest").str.replace_all(" ", '","', literal=True).str.replace_all("=", '":"', literal=True), pl.lit('"}')]).alias("fields")
    )
    sep = "\x1f"
    toks = pl.col("_rest").str.extract_all(r"[^ ]*=[^ ]*").list.join(sep)
    esc = toks.str.replace_all("\\", "\\\\", literal=True).str.replace_all('"', '\\"', literal=True)
    body = esc.str.replace_all(rf"([^{sep}=]*)=([^{sep}]*)", '"${1}":"${2}"').str.replace_all(sep, ",", literal=True)
    slow = df.filter(~plain).with_columns(pl.concat_str([pl.lit("{"), body, pl.lit("}")]).alias("fields"))
    df = pl.concat([fast, slow]).drop("_rest").with_columns(
        pl.col("text").str.extract(r" vm=([^ ]*)").alias("_vm"),
        pl.col("text").str.extract(r" vcpu=([^ ]*)").cast(pl.Int32, strict=False).alias("_vcpu"),
    )
    t = threads.select("tid", pl.col("vm").alias("_tvm"), pl.col("vcpu").alias("_tvcpu"))
    df = df.join(t, on="tid", how="left").with_columns(
        pl.coalesce("_vm", "_tvm").alias("vm"), pl.coalesce("_vcpu", "_tvcpu").alias("vcpu")
    )
    return conform(df.sort("ts", "_i").drop("_i"), "markers")
