"""`cratrace import`: trace files or raw capture directories → a capture.

Each source is read by its importer into a staging directory (a single
source straight into ``events/``); tables of the same name from several
sources (a trace-cmd and a perf ``sched_switch``) are merged in timestamp
order; ``capture.json`` records what was read.
Everything is written into a temporary directory beside the output and
renamed into place at the end (`cratrace.atomic.Destination`: the output
locked for the whole import, never replacing what appeared meanwhile), so
an interrupted or failed import leaves no half-written capture, and an
existing capture is only replaced with ``force=True``, after the new one
is complete; a directory that is not a capture never is.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import threading
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from cratrace import _native, atomic, formats, importers, jsonfile
from cratrace.errors import CaptureError, OutputExistsError, UnsupportedFormatError, UsageError
from cratrace.importers import hostjson

# (name, total) -> a context manager yielding a progress callback (done, total)
ProgressFactory = Callable[[str, int], Any]

if TYPE_CHECKING:
    from cratrace.capture import Capture

COMPRESSIONS = ("lz4", "zstd", "none")

# Version of the capture layout this importer writes; Capture refuses others.
SCHEMA_VERSION = 1


class Source:
    """A file to import: its path, its kind (tracedat, xentrace, ...) and
    the SHA-256 a raw capture's manifest gives for it."""

    __slots__ = ("path", "kind", "expected_sha256")

    def __init__(self, path: Path, kind: str, expected_sha256: str | None = None) -> None:
        self.path, self.kind, self.expected_sha256 = path, kind, expected_sha256


def sha256_of(path: Path) -> str:
    import hashlib  # only manifest sources need it (OpenSSL loads in 3 ms)

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class _Fingerprinting(threading.Thread):
    """`fingerprint(src)` on a thread of its own (the import reads the file
    meanwhile; a thread pool's imports cost the command 3 ms of start-up)."""

    def __init__(self, src: Source) -> None:
        super().__init__(name="cratrace-checksum", daemon=True)
        self.src = src
        self.value: tuple[str, str] | None = None
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.value = fingerprint(self.src)
        except BaseException as e:  # handed to the caller of result()
            self.error = e

    def result(self) -> tuple[str, str]:
        self.join()
        if self.error is not None:
            raise self.error
        assert self.value is not None
        return self.value


def fingerprint(src: Source) -> tuple[str, str]:
    """(algorithm, hex digest) of a source's bytes for capture.json: SHA-256
    when its manifest gives one to check against (the collector has only the
    standard library), else BLAKE3: 0.05 s of CPU against SHA-256's 0.12 s on
    the 182 MB perf.data of benchmarks/import_xen_perf.py, where SHA-256 was
    a quarter of the import's CPU time."""
    if src.expected_sha256:
        return "sha256", sha256_of(src.path)
    return "blake3", _native.file_blake3(src.path)


def _expand(src: Path) -> tuple[list[Source], Path | None, dict[str, Any] | None]:
    """A file → itself; a raw capture directory → its manifest's files."""
    if not src.exists():
        raise CaptureError(f"{src}: no such file or directory")
    if src.is_dir():
        manifest_path = src / "manifest.json"
        if not manifest_path.is_file():
            raise CaptureError(f"{src}: a directory but not a raw capture (no manifest.json); pass trace files or a `cratrace record` output")
        try:
            manifest = json.loads(manifest_path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CaptureError(f"{manifest_path}: unreadable manifest ({e})") from None
        if not isinstance(manifest, dict) or manifest.get("format") != "cratrace-raw":
            raise CaptureError(f"{manifest_path}: not a cratrace raw-capture manifest")
        files = manifest.get("files", [])
        if not isinstance(files, list) or not all(isinstance(f, dict) for f in files):
            raise CaptureError(f"{manifest_path}: 'files' is not a list of objects")
        out, host = [], None
        for f in files:
            rel = Path(str(f.get("path", "")))
            if rel.is_absolute() or ".." in rel.parts:
                raise CaptureError(f"{manifest_path}: file path {str(rel)!r} escapes the capture directory")
            p = src / rel
            if not p.is_file():
                raise CaptureError(f"{manifest_path}: lists {rel} but it is missing")
            if f.get("kind") == "host":
                host = p
            else:
                out.append(Source(p, str(f.get("kind")), f.get("sha256")))
        return out, host, manifest
    kind = importers.sniff(src)
    if kind is None:
        size = src.stat().st_size
        what = "an empty file" if size == 0 else "not a trace format cratrace reads (trace.dat, xentrace, perf.data)"
        raise UnsupportedFormatError(f"{src}: at byte 0: {what} (ERR:not-this-format)")
    return [Source(src, kind)], None, None


def _merge_tables(staged: list[tuple[Path, dict]], events_dir: Path, compression: str) -> dict[str, int]:
    by_name: dict[str, list[Path]] = {}
    needs_sort: set[str] = set()
    for stage, summary in staged:
        unsorted = summary.get("stats", {}).get(_native.tracedat_stats.TS_OUT_OF_ORDER, 0) > 0
        for p in sorted(stage.glob("*.parquet")):
            by_name.setdefault(p.stem, []).append(p)
            if unsorted:
                needs_sort.add(p.stem)
    rows: dict[str, int] = {}
    for name, paths in sorted(by_name.items()):
        dest = events_dir / f"{name}.parquet"
        if len(paths) == 1 and name not in needs_sort:
            if paths[0] != dest:
                os.rename(paths[0], dest)  # staging and events share the temporary directory
        else:
            import polars as pl

            frames = [pl.scan_parquet(p) for p in paths]
            merged = pl.concat(frames, how="diagonal_relaxed") if len(frames) > 1 else frames[0]
            # a single source is read in place: sort beside it, then replace it
            sorted_to = dest.with_name(f".{name}.sorted")
            merged.sort("ts", maintain_order=True).sink_parquet(sorted_to, compression=importers.polars_compression(compression))
            os.replace(sorted_to, dest)
        rows[name] = _native.parquet_rows(dest)
    return rows


def import_capture(sources: list[Path], out: Path, **options: Any) -> Capture:
    """Import `sources` into the capture directory `out` and open it;
    `options` are `write_capture`'s (force, cpu_hz, progress, batch_rows,
    compression, removed_after)."""
    from cratrace.capture import Capture

    write_capture(sources, out, **options)
    return Capture(out)


def write_capture(
    sources: list[Path],
    out: Path,
    *,
    force: bool = False,
    cpu_hz: float | None = None,
    progress: ProgressFactory | None = None,
    batch_rows: int = 4096,
    compression: str = "lz4",
    max_memory: int | None = None,
    removed_after: str | None = None,
) -> dict:
    """Import `sources` into the capture directory `out`; return its
    capture.json (without opening the capture, so without polars).

    `compression` is the event tables' Parquet codec: ``lz4`` (fast, the
    default), ``zstd`` (about half the size) or ``none``. `max_memory`
    bounds the decompressed trace.dat data a read holds at once, in bytes
    (None: the reader's default, proportional to the file's size).
    `removed_after`, when the caller deletes the sources once imported
    (`cratrace lab capture` records into a temporary directory), says who:
    each source is then marked ``"removed"`` with it, so no one looks for
    its path."""
    if compression not in COMPRESSIONS:
        raise UsageError(f"--compression {compression}: expected one of {', '.join(COMPRESSIONS)}")
    if not sources:
        raise CaptureError("nothing to import: give at least one trace file or raw capture directory")
    out = Path(out)
    expanded: list[Source] = []
    host_path: Path | None = None
    manifests: list[dict] = []
    for s in sources:
        files, host, manifest = _expand(Path(s))
        expanded += files
        host_path = host or host_path
        if manifest:
            manifests.append(manifest)
    if not expanded:
        raise CaptureError("the raw capture lists no trace files to import")
    given: dict[Path, Path] = {}
    for src in expanded:
        # the same trace twice would double every event it holds
        first = given.setdefault(src.path.resolve(), src.path)
        if first is not src.path:
            raise UsageError(f"{src.path}: given twice (also as {first}); each trace is imported once")
    host = hostjson.to_capture(hostjson.load(host_path)) if host_path else {}
    if cpu_hz is None:
        cpu_hz = host.get("cpu_hz") or next((m.get("cpu_hz") for m in manifests if m.get("cpu_hz")), None)
    _allow_open_files()
    with atomic.Destination(out, force=force, ours=atomic.is_capture, what="capture") as dest:
        tmp = dest.temp("importing-")
        events_dir = tmp / "events"
        events_dir.mkdir()
        available = importers.available()
        staged: list[tuple[Path, dict]] = []
        source_meta = []
        for i, src in enumerate(expanded):
            if src.kind not in available:
                raise UnsupportedFormatError(f"{src.path}: no importer for kind {src.kind!r} in this build")
            # The checksum is computed while the file is read (hashing and
            # the native reader both release the GIL): a fifth of a large
            # perf.data import when done first. A mismatch still fails the
            # import before anything is renamed into place.
            hashing = _Fingerprinting(src)
            # One source (the usual import) is read straight into events/:
            # moving 31 tables out of a staging directory cost 1-2 ms of a
            # 4 MB xentrace import's 33 (0.95-0.97 of the time in turns).
            stage = events_dir if len(expanded) == 1 else tmp / "staging" / str(i)
            stage.mkdir(parents=True, exist_ok=True)
            bar = progress(src.path.name, src.path.stat().st_size) if progress else nullcontext(None)
            try:
                with bar as cb:
                    summary = available[src.kind].read(src.path, stage, options={"cpu_hz": cpu_hz, "cpu_model": (host.get("host") or {}).get("cpu_model"), "batch_rows": batch_rows, "compression": compression, "max_memory": max_memory}, progress=cb)
            finally:
                # A file that differs from its manifest is reported as such,
                # even when the difference also made the reader fail.
                algorithm, digest = hashing.result()
                if src.expected_sha256 and src.expected_sha256 != digest:
                    raise CaptureError(f"{src.path}: checksum differs from the manifest (file changed or damaged)")
            summary.pop("files", None)
            staged.append((stage, summary))
            source_meta.append({"path": str(src.path.resolve()), "kind": src.kind, algorithm: digest, "bytes": src.path.stat().st_size, "summary": summary})
            if removed_after:
                source_meta[-1]["removed"] = removed_after
        rows = _merge_tables(staged, events_dir, compression)
        if (tmp / "staging").exists():  # several sources were staged
            shutil.rmtree(tmp / "staging")
        # the print formats (and the symbols they print) for `cratrace dump`;
        # taken out of the summaries, so capture.json stays small
        printing = formats.collect([(s.kind, s.path, m["summary"]) for s, m in zip(expanded, source_meta)], events_dir)
        if printing is not None:
            (tmp / formats.FILE).write_text(jsonfile.dumps(printing))
        meta = _capture_json(source_meta, rows, host, manifests, cpu_hz)
        (tmp / "capture.json").write_text(jsonfile.dumps(meta))
        dest.commit(tmp)
    return meta


def _allow_open_files() -> None:
    """Raise this process's soft limit on open files to its hard limit.

    Every event table's file stays open while a trace is read, so a trace
    with more event types than the soft limit (often 1,024; `trace-cmd
    record -e all` can come near) failed with "Too many open files". Go
    programs do the same at start; only the soft limit moves."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        except (ValueError, OSError):
            pass  # the import may still fit; if not, it says so


#: damage a trace.dat read counts in its stats, by the reader's own key
#: names (`_native.tracedat_stats`, declared once in Rust: issue 46); every
#: reader's summary says how many bytes a cut file lacked in `truncated_bytes`
DATA_PROBLEM_STATS = (
    _native.tracedat_stats.CORRUPT_PAGES,
    _native.tracedat_stats.CORRUPT_RECORDS,
    _native.tracedat_stats.UNPARSEABLE_FORMATS,
)


def data_problems(meta: dict) -> list[str]:
    """One-line descriptions of what an import could not read in full
    (truncation, corrupt pages, untypeable fields); empty when clean."""
    out = []
    for s in meta.get("sources", []):
        summ = s["summary"]
        stats = summ.get("stats", {})
        if "problems" in summ:
            # readers that list what they skipped, guessed or re-attributed
            # (issue 42: trace.dat's unknown event ids, perf.data's samples
            # of no attribute, were only warnings with exit 0)
            out += summ["problems"]
        elif summ.get("truncated_bytes") or any(stats.get(k, 0) for k in DATA_PROBLEM_STATS):
            out += [w for w in summ.get("warnings", []) if "at byte" in w]
        # captures imported before untyped fields were kept as bytes
        for d in summ.get("dropped_fields", []):
            out.append(f"{s['path']}: field {d['event']}.{d['field']} ({d['type']}) cannot be typed ({d['reason']}); column left out")
    return out


def _capture_json(sources: list[dict], rows: dict[str, int], host: dict, manifests: list[dict], cpu_hz: float | None) -> dict:
    from cratrace import __version__

    ranges = [s["summary"].get("time_range") for s in sources if s["summary"].get("time_range")]
    first = min((r[0] for r in ranges), default=None)
    last = max((r[1] for r in ranges), default=None)
    cpus = max((int(s["summary"].get("cpus") or 0) for s in sources), default=0)
    lost = {s["path"]: s["summary"].get("lost_events", {}) for s in sources}
    lost_total = sum(c.get("count", 0) for per in lost.values() for inst in per.values() for c in inst.values())
    # events the readers skipped (records no format describes, samples no
    # attribute owns) are lost too, though the kernel did not count them;
    # a cut file's missing data held about `estimated_in_missing_data` more
    skipped = sum(int(s["summary"].get("skipped_records", 0)) + int(s["summary"].get("skipped_samples", 0)) for s in sources)
    estimated = sum(int(s["summary"].get("lost_estimate", 0)) for s in sources)
    clock = next((s["summary"].get("clock") for s in sources if s["summary"].get("clock")), None)
    return {
        "schema_version": SCHEMA_VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "cratrace_version": __version__,
        "time_range_ns": [first, last] if first is not None else None,
        "cpus": cpus,
        "clock": clock,
        "tsc_hz": host.get("tsc_hz"),
        "cpu_hz": cpu_hz,
        "host": host.get("host", {}),
        "vms": host.get("vms", []),
        "sched_groups": host.get("sched_groups"),
        # each VM thread's allowed CPUs ({tid: CPU list}) when the collector
        # read them, and the host's scheduler when host.json declares it
        # (a generated capture's: `cratrace synth --raw`)
        "affinity": host.get("affinity"),
        "scheduler": host.get("scheduler"),
        # each thread's power while it runs, W ({tid: W}), when host.json
        # says (a generated capture's truth)
        "power_w": host.get("power_w"),
        "events": rows,
        "lost_events": {"total": lost_total + skipped, "by_source": lost, "skipped_by_reader": skipped, "estimated_in_missing_data": estimated},
        # fields with no column type of their own, stored as their bytes
        "raw_fields": [d | {"source": s["path"]} for s in sources for d in s["summary"].get("raw_fields", [])],
        "warnings": [w for s in sources for w in s["summary"].get("warnings", [])],
        "sources": sources,
        "raw_captures": [{k: m.get(k) for k in ("preset", "started", "duration_s", "tools", "events", "collector_overhead")} for m in manifests],
    }
