"""Build every model table of a capture, in dependency order, and write
them atomically to ``CAPTURE/model/<table>.parquet``."""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Callable, Iterable, Iterator

import polars as pl

from cratrace import atomic, jsonfile
from cratrace.capture import Capture
from cratrace.model.cpu_slices import cpu_slices
from cratrace.model.faults import faults
from cratrace.model.frames import conform, empty
from cratrace.model.io_work import io_work
from cratrace.model import markers as marker_lines
from cratrace.model.marker_parse import MarkerParse, events_codec
from cratrace.model.power import power
from cratrace.model.spin_episodes import holder_column, spin_episodes, with_holder
from cratrace.model.threads import name_observations, thread_names, threads, with_inferred_affinity
from cratrace.model.vcpu_states import vcpu_state_batches
from cratrace.model.vms import summary as vm_summary
from cratrace.tables import MODEL_TABLES

TABLE_ORDER = ("thread_names", "threads", "cpu_slices", "markers", "spin_episodes", "vcpu_states", "io_work", "power", "faults")


def _write(df: pl.DataFrame, path: Path, codec: str) -> int:
    def write(tmp: Path) -> int:
        df.write_parquet(tmp, compression=codec)
        return df.height

    return atomic.write_with(path, write)


#: rows per row group of a table written a batch at a time: about what
#: polars writes (its row groups of vcpu_states at 10 M events are 124 k
#: rows), so that later readers hold as much at once (the report's peak
#: was 280 MiB with those, 630 MiB with pyarrow's default of 1 Mi rows)
ROW_GROUP_ROWS = 128 * 1024


#: columns of a table written a batch at a time that are dictionary-encoded
DICTIONARY_COLUMNS = ["vm", "vcpu", "tid", "state", "pcpu"]


def write_batches(batches: Iterable[pl.DataFrame], path: Path, codec: str) -> int:
    """Write a table given a batch at a time (row groups of one file:
    pyarrow's writer appends, polars' cannot). Each batch is encoded on a
    thread of its own while the next is built, and let go once written:
    two batches are held at most."""
    import pyarrow.parquet as pq

    def write(tmp: Path) -> int:
        rows, out = 0, None
        with ThreadPoolExecutor(1, thread_name_prefix="cratrace-model-stream") as encoder:
            pending: Future | None = None
            try:
                for df in batches:
                    t = df.to_arrow()
                    # dictionaries for the columns of few values, as polars
                    # chooses them: trying them on timestamps cost pyarrow
                    # half its time
                    out = out or pq.ParquetWriter(tmp, t.schema, compression="none" if codec == "uncompressed" else codec, use_dictionary=DICTIONARY_COLUMNS)
                    if pending is not None:
                        pending.result()
                    pending = encoder.submit(out.write_table, t, row_group_size=ROW_GROUP_ROWS)
                    rows += df.height
                    del df, t
                if pending is not None:
                    pending.result()
            finally:
                if out is not None:
                    encoder.shutdown(wait=True)
                    out.close()
        return rows

    return atomic.write_with(path, write)


#: rows of a parked table read back at a time
PARKED_BATCH_ROWS = 1024 * 1024


class Parked:
    """A frame kept on disk (Arrow IPC, LZ4) in record batches of
    `PARKED_BATCH_ROWS`, read back a few columns whole or a batch at a
    time: the 7.7 M spin episodes of a 100 M-event build, read back whole
    to add their holders and write them, were 0.9 GB of its peak."""

    def __init__(self, path: Path, df: pl.DataFrame) -> None:
        import pyarrow as pa
        import pyarrow.ipc as ipc

        self.path = path
        # pyarrow's writer, as polars writes one record batch however the
        # frame is chunked
        schema = df.head(0).to_arrow().schema
        with ipc.new_file(path, schema, options=ipc.IpcWriteOptions(compression="lz4")) as out:
            for at in range(0, df.height, PARKED_BATCH_ROWS):
                out.write_table(pa.Table.from_batches(df.slice(at, PARKED_BATCH_ROWS).to_arrow().to_batches(), schema))

    def _batches(self, columns: list[str] | None = None) -> Iterator[pl.DataFrame]:
        import pyarrow.ipc as ipc

        with ipc.open_file(self.path) as f:
            if f.num_record_batches == 0:
                yield pl.from_arrow(f.schema.empty_table().select(columns or f.schema.names))
            for i in range(f.num_record_batches):
                b = f.get_batch(i)
                yield pl.from_arrow(b.select(columns) if columns else b)

    def columns(self, *names: str) -> pl.DataFrame:
        """Columns `names` of every row."""
        return pl.concat(list(self._batches(list(names))))

    def batches(self) -> Iterator[pl.DataFrame]:
        """The frame a batch at a time; the file is removed after the last."""
        try:
            yield from self._batches()
        finally:
            self.path.unlink(missing_ok=True)


def build_model(
    capture: Capture | str | Path,
    *,
    spin_gap_ns: int = 50_000,
    window_ns: int = 100_000_000,
    progress: Callable[[str], None] | None = None,
    marker_parse: MarkerParse | None = None,
    vm_pattern: str | None = None,
) -> dict[str, int]:
    """Compute all canonical tables of `capture`; returns rows per table.
    `marker_parse`, started earlier on the same capture, saves its parse
    time (build_model closes it). `vm_pattern`: a regular expression
    naming vCPU threads the built-in VMM names do not cover
    (`cratrace.model.vms.vcpu_names`). What the VM attribution guessed or
    re-attributed is in capture.json's `model.guessed`, what it remarks in
    `model.remarks` (`model_notes`)."""
    if spin_gap_ns < 0 or window_ns < 1000:
        raise ValueError(f"spin_gap_ns {spin_gap_ns} must be >= 0 and window_ns {window_ns} >= 1000")
    cap = capture if isinstance(capture, Capture) else Capture(capture)
    # the capture is locked while its model is rewritten (issue 42): a
    # second model build, or an import replacing the capture, is refused
    with atomic.locked(cap.path):
        atomic.remove_stale_in(cap.path)
        atomic.remove_stale_in(cap.path / "model")
        return _build_model(cap, spin_gap_ns, window_ns, say=progress or (lambda _name: None), marker_parse=marker_parse, vm_pattern=vm_pattern)


def _build_model(cap: Capture, spin_gap_ns: int, window_ns: int, *, say: Callable[[str], None], marker_parse: MarkerParse | None, vm_pattern: str | None) -> dict[str, int]:
    ev = cap.events
    tr = cap.meta.get("time_range_ns") or [0, 0]
    span = (int(tr[0] or 0), int(tr[1] or 0) + 1)
    cmdlines = [tuple(c) for s in cap.meta.get("sources", []) for c in s.get("summary", {}).get("cmdlines", [])]
    t0 = time.perf_counter()
    model_dir = cap.path / "model"
    model_dir.mkdir(exist_ok=True)
    codec = marker_parse.codec if marker_parse else events_codec(cap.path / "events")
    with ThreadPoolExecutor(1, thread_name_prefix="cratrace-model-write") as writer, (marker_parse or MarkerParse(cap.path, codec)) as side:
        # The markers table (Rust, without the GIL) needs only the print
        # events to parse and the threads table to attribute: it is parsed
        # while the thread and CPU tables are built (or from before polars
        # was imported, when the caller started `marker_parse`); once the
        # CPU slices are done it is written, then its spin marker pairs are
        # taken and the lines let go, all before the spin step.
        def markers(threads: pl.DataFrame) -> tuple[pl.DataFrame, Future[int]]:
            lines = side.lines.result()
            written = side.submit(atomic.write_with, model_dir / "markers.parquet", lambda tmp: marker_lines.write(lines, threads, tmp, codec))
            # the pairs are taken once the table is written, so that the
            # write's frames and theirs are not held at once (with the lines,
            # 2.1 GB at 100 M events)
            wait([written])
            spin_pairs = marker_lines.pairs(lines, threads)
            # the parsed lines (a quarter of a GB for 2 M markers) are let
            # go then, not held to the end of the build
            side.release()
            return spin_pairs, written

        def stream(name: str, batches: Iterable[pl.DataFrame]) -> tuple[pl.LazyFrame, Future[int]]:
            # written here, a batch at a time, then read back lazily by
            # the later steps
            done: Future[int] = Future()
            done.set_result(write_batches(batches, model_dir / f"{name}.parquet", codec))
            return pl.scan_parquet(model_dir / f"{name}.parquet"), done

        def park(name: str, df: pl.DataFrame) -> Parked:
            # a table held for a later step, on disk meanwhile (a temporary
            # file beside it, removed once read back, or as stale by the
            # next build if this one dies first)
            return Parked(atomic.temp_file(model_dir / f"{name}.parquet"), df)

        rows, vms, notes = _build(ev, cap.meta, span, cmdlines, spin_gap_ns, window_ns, vm_pattern, say, lambda name, df: writer.submit(_write, df, model_dir / f"{name}.parquet", codec), markers, stream, park)
    meta = dict(cap.meta)
    params = {"spin_gap_ns": spin_gap_ns, "window_ns": window_ns} | ({"vm_pattern": vm_pattern} if vm_pattern else {})
    guessed, remarks = notes
    meta["model"] = {"tables": rows, "params": params, "vms": vms, "guessed": guessed, "remarks": remarks, "build_s": round(time.perf_counter() - t0, 3)}
    atomic.write_text(cap.path / "capture.json", jsonfile.dumps(meta))
    return rows


def model_notes(meta: dict) -> tuple[list[str], list[str]]:
    """(what a capture's model build guessed or re-attributed, what it
    remarks), one line each."""
    m = meta.get("model") or {}
    return list(m.get("guessed") or []), list(m.get("remarks") or [])


def _with_holders(batches: Iterable[pl.DataFrame], holders: pl.Series) -> Iterator[pl.DataFrame]:
    """Spin episodes given a batch at a time, each with its rows' slice of
    `holders` (`holder_column`) as holder_vcpu."""
    at = 0
    for b in batches:
        yield conform(b.with_columns(holders.slice(at, b.height)), "spin_episodes")
        at += b.height


def _build(ev, meta, span, cmdlines, spin_gap_ns, window_ns, vm_pattern, say, save, markers, stream, park) -> tuple[dict[str, int], list[dict], tuple[list[str], list[str]]]:
    """The tables in dependency order; returns rows per table, the VMs
    found and the attribution's notes. `save(name,
    df)` is called as soon as a table is final, so Parquet encoding (polars
    releases the GIL) overlaps the tables still being computed;
    `markers(threads)` writes the markers table and gives its spin marker
    pairs; `stream(name, batches)` writes a table built a batch at a
    time and gives it back as a lazy scan (a long capture's vCPU timelines
    are never held whole); `park(name, df)` keeps a frame on disk
    (`Parked`) until it is read back."""
    out: dict[str, pl.DataFrame | pl.LazyFrame] = {}
    futures: dict[str, Future[int]] = {}

    def done(name: str, df: pl.DataFrame) -> None:
        assert name in MODEL_TABLES
        out[name] = df
        futures[name] = save(name, df)

    # The CPU slices need nothing but events: they are computed beside
    # the thread tables (polars releases the GIL; many of its steps are too
    # small to use both cores on their own).
    with ThreadPoolExecutor(1, thread_name_prefix="cratrace-model-slices") as beside:
        slices = beside.submit(cpu_slices, ev, span)
        say("thread_names")
        done("thread_names", thread_names(name_observations(ev), span[1]))
        say("threads")
        # written once the vCPU timelines have said which CPUs they kept to
        out["threads"], notes = threads(ev, meta.get("vms", []), cmdlines, out["thread_names"], meta.get("sched_groups"), vm_pattern, meta.get("affinity"), int(meta.get("cpus") or 0), meta.get("power_w"))
        # the CPU slices are finished before the markers table is written:
        # the write's frames and the slices' were 2.1 GB at once at 100 M
        # events
        say("cpu_slices")
        done("cpu_slices", slices.result())
    # the markers table is written (on the parse's thread) and its lines
    # let go before the spin step, so that they and the spin step's frames
    # are not held at once (a GB and 0.7 GB at 100 M events); a write
    # error surfaces here
    say("markers")
    spin_pairs, futures["markers"] = markers(out["threads"])
    futures["markers"].result()
    say("spin_episodes")
    spins = spin_episodes(ev, out["threads"], spin_pairs, spin_gap_ns)
    del spin_pairs
    # many episodes wait on disk for their holders while the vCPU timelines
    # are built from four of their columns, then are written a batch at a
    # time beside the holders: 7.7 M of them were 600 MB of a 100 M-event
    # build's peak, held through the timelines' set-up (a few are kept:
    # parking imports pyarrow, which a small build does without)
    parked = park("spin_episodes", spins) if spins.height > PARKED_BATCH_ROWS else None
    if parked is not None:
        spins = parked.columns("vm", "vcpu", "start", "end")
    say("vcpu_states")
    batches = vcpu_state_batches(ev, out["threads"], out["cpu_slices"], spins, span)
    if len(batches) > 1:
        out["vcpu_states"], futures["vcpu_states"] = stream("vcpu_states", batches)
    else:
        done("vcpu_states", next(iter(batches)) if len(batches) else empty("vcpu_states"))
    done("threads", with_inferred_affinity(out["threads"], out["vcpu_states"], out["cpu_slices"], int(meta.get("cpus") or 0)))
    if parked is not None:
        del spins
        holders = holder_column(parked.columns("vm", "vcpu", "start"), out["vcpu_states"])
        _, futures["spin_episodes"] = stream("spin_episodes", _with_holders(parked.batches(), holders))
        del holders
    else:
        done("spin_episodes", conform(with_holder(spins, out["vcpu_states"]), "spin_episodes"))
        # no later step reads the episodes: held only until written
        del out["spin_episodes"], spins
    say("io_work")
    done("io_work", io_work(ev, out["threads"], out["cpu_slices"], span, window_ns, out["vcpu_states"]))
    say("power")
    done("power", power(ev, span))
    say("faults")
    done("faults", faults(ev, out["threads"]))
    # a write error surfaces here, before capture.json says the model exists
    rows = {name: futures[name].result() for name in TABLE_ORDER}
    return rows, vm_summary(out["threads"], out["vcpu_states"]), notes
