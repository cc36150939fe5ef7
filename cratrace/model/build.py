"""Build every model table of a capture, in dependency order, and write
them atomically to ``CAPTURE/model/<table>.parquet``."""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import polars as pl

from cratrace.capture import Capture
from cratrace.model.cpu_slices import cpu_slices
from cratrace.model.faults import faults
from cratrace.model.frames import conform
from cratrace.model.io_work import io_work
from cratrace.model import markers as marker_lines
from cratrace.model.power import power
from cratrace.model.spin_episodes import spin_episodes, with_holder
from cratrace.model.threads import name_observations, thread_names, threads
from cratrace.model.vcpu_states import vcpu_states
from cratrace.tables import MODEL_TABLES

TABLE_ORDER = ("thread_names", "threads", "cpu_slices", "markers", "spin_episodes", "vcpu_states", "io_work", "power", "faults")


#: codecs polars can write; a capture in another codec gets zstd tables
_POLARS_CODECS = {"lz4", "zstd", "uncompressed", "snappy", "gzip", "brotli"}


def events_codec(events_dir: Path) -> str:
    """The codec the capture's event tables were written with (`cratrace
    import --compression`), for the model tables to match: LZ4 when the
    import was for speed, zstd when it was for size. Read from the files'
    footers natively (pyarrow's import alone took ~50 ms of the build)."""
    from collections import Counter

    from cratrace import _native

    seen: Counter[str] = Counter()
    for f in sorted(events_dir.glob("*.parquet")):
        codec = _native.parquet_codec(f)
        if codec is not None:
            seen[codec if codec in _POLARS_CODECS else "zstd"] += 1
    return seen.most_common(1)[0][0] if seen else "lz4"


def _write(df: pl.DataFrame, path: Path, codec: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    df.write_parquet(tmp, compression=codec)
    os.replace(tmp, path)


def build_model(capture: Capture | str | Path, *, spin_gap_ns: int = 50_000, window_ns: int = 100_000_000, progress: Callable[[str], None] | None = None) -> dict[str, int]:
    """Compute all canonical tables of `capture`; returns rows per table."""
    cap = capture if isinstance(capture, Capture) else Capture(capture)
    ev = cap.events
    tr = cap.meta.get("time_range_ns") or [0, 0]
    span = (int(tr[0] or 0), int(tr[1] or 0) + 1)
    cmdlines = [tuple(c) for s in cap.meta.get("sources", []) for c in s.get("summary", {}).get("cmdlines", [])]
    say = progress or (lambda _name: None)
    t0 = time.perf_counter()
    model_dir = cap.path / "model"
    model_dir.mkdir(exist_ok=True)
    codec = events_codec(cap.path / "events")
    with ThreadPoolExecutor(1, thread_name_prefix="cratrace-model-write") as writer, ThreadPoolExecutor(1, thread_name_prefix="cratrace-model-markers") as side:
        # marker text parsing (Rust, without the GIL) needs only the print
        # events: it runs while the thread and CPU tables are built
        parsed = side.submit(marker_lines.parse, ev.get("print"))
        out = _build(ev, cap.meta, span, cmdlines, spin_gap_ns, window_ns, say, lambda name, df: writer.submit(_write, df, model_dir / f"{name}.parquet", codec), parsed.result)
    rows = {name: out[name].height for name in TABLE_ORDER}
    meta = dict(cap.meta)
    meta["model"] = {"tables": rows, "params": {"spin_gap_ns": spin_gap_ns, "window_ns": window_ns}, "build_s": round(time.perf_counter() - t0, 3)}
    tmp = cap.path / f".capture.json.tmp-{os.getpid()}"
    tmp.write_text(json.dumps(meta, indent=2))
    os.replace(tmp, cap.path / "capture.json")
    return rows


def _build(ev, meta, span, cmdlines, spin_gap_ns, window_ns, say, save, parsed_markers) -> dict[str, pl.DataFrame]:
    """The tables in dependency order. `save(name, df)` is called as soon
    as a table is final, so Parquet encoding (polars releases the GIL)
    overlaps the tables still being computed; `parsed_markers()` gives the
    parsed marker lines (computed beside the first tables)."""
    out: dict[str, pl.DataFrame] = {}
    futures = []

    def done(name: str, df: pl.DataFrame) -> None:
        assert name in MODEL_TABLES
        out[name] = df
        futures.append(save(name, df))

    say("thread_names")
    done("thread_names", thread_names(name_observations(ev), span[1]))
    say("threads")
    done("threads", threads(ev, meta.get("vms", []), cmdlines, out["thread_names"]))
    say("cpu_slices")
    done("cpu_slices", cpu_slices(ev, span))
    say("markers")
    done("markers", marker_lines.attribute(parsed_markers(), out["threads"]))
    say("spin_episodes")
    spins = spin_episodes(ev, out["threads"], out["markers"], spin_gap_ns)
    say("vcpu_states")
    done("vcpu_states", vcpu_states(ev, out["threads"], out["cpu_slices"], spins, span))
    done("spin_episodes", conform(with_holder(spins, out["vcpu_states"]), "spin_episodes"))
    say("io_work")
    done("io_work", io_work(ev, out["threads"], out["cpu_slices"], span, window_ns, out["vcpu_states"]))
    say("power")
    done("power", power(ev, span))
    say("faults")
    done("faults", faults(ev, out["threads"]))
    for f in futures:
        f.result()  # a write error surfaces here, before capture.json says the model exists
    assert set(out) == set(TABLE_ORDER)
    return out
