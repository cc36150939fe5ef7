"""Build every model table of a capture, in dependency order, and write
them atomically to ``CAPTURE/model/<table>.parquet``."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable

import polars as pl

from cratrace.capture import Capture
from cratrace.model.cpu_slices import cpu_slices
from cratrace.model.faults import faults
from cratrace.model.frames import conform
from cratrace.model.io_work import io_work
from cratrace.model.markers import markers
from cratrace.model.power import power
from cratrace.model.spin_episodes import spin_episodes, with_holder
from cratrace.model.threads import name_observations, thread_names, threads
from cratrace.model.vcpu_states import vcpu_states
from cratrace.tables import MODEL_TABLES

TABLE_ORDER = ("thread_names", "threads", "cpu_slices", "markers", "spin_episodes", "vcpu_states", "io_work", "power", "faults")


def _write(df: pl.DataFrame, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    df.write_parquet(tmp, compression="zstd", compression_level=1)
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
    out: dict[str, pl.DataFrame] = {}
    say("thread_names")
    out["thread_names"] = thread_names(name_observations(ev), span[1])
    say("threads")
    out["threads"] = threads(ev, cap.meta.get("vms", []), cmdlines, out["thread_names"])
    say("cpu_slices")
    out["cpu_slices"] = cpu_slices(ev, span)
    say("markers")
    out["markers"] = markers(ev.get("print"), out["threads"])
    say("spin_episodes")
    spins = spin_episodes(ev, out["threads"], out["markers"], spin_gap_ns)
    say("vcpu_states")
    out["vcpu_states"] = vcpu_states(ev, out["threads"], out["cpu_slices"], spins, span)
    out["spin_episodes"] = conform(with_holder(spins, out["vcpu_states"]), "spin_episodes")
    say("io_work")
    out["io_work"] = io_work(ev, out["threads"], out["cpu_slices"], span, window_ns, out["vcpu_states"])
    say("power")
    out["power"] = power(ev, span)
    say("faults")
    out["faults"] = faults(ev, out["threads"])
    model_dir = cap.path / "model"
    model_dir.mkdir(exist_ok=True)
    for name in TABLE_ORDER:
        assert name in MODEL_TABLES
        _write(out[name], model_dir / f"{name}.parquet")
    rows = {name: out[name].height for name in TABLE_ORDER}
    meta = dict(cap.meta)
    meta["model"] = {"tables": rows, "params": {"spin_gap_ns": spin_gap_ns, "window_ns": window_ns}, "build_s": round(time.perf_counter() - t0, 3)}
    tmp = cap.path / f".capture.json.tmp-{os.getpid()}"
    tmp.write_text(json.dumps(meta, indent=2))
    os.replace(tmp, cap.path / "capture.json")
    return rows
