"""Parsing a capture's marker lines on a thread of its own, from before
polars is imported.

The parse (Rust, without the GIL) needs nothing but the print event table,
and on marker-heavy captures it takes about as long as importing polars:
``cratrace model`` starts it first and hands it to ``build_model``, which
later writes the attributed table on the same thread. This module imports
no polars.
"""

from __future__ import annotations

from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from cratrace import _native


#: the marker names spin episodes are paired from (the lines the build keeps whole)
SPIN_NAMES = ("spin_begin", "spin_end")

#: what the model tables can be compressed with (polars and the Rust writer alike)
MODEL_CODECS = ("lz4", "zstd", "uncompressed")


def events_codec(events_dir: Path) -> str:
    """The codec the capture's event tables were written with (`cratrace
    import --compression`), for the model tables to match: LZ4 when the
    import was for speed, zstd when it was for size (and for any codec the
    model cannot write). Read from the files' footers natively."""
    seen: Counter[str] = Counter()
    for f in sorted(events_dir.glob("*.parquet")):
        codec = _native.parquet_codec(f)
        if codec is not None:
            seen[codec if codec in MODEL_CODECS else "zstd"] += 1
    return seen.most_common(1)[0][0] if seen else "lz4"


class MarkerParse:
    """The parse of ``CAPTURE/events/print.parquet`` (None when the
    capture has no print events), and the thread that runs it. The parse
    also encodes the columns that need no threads table as it goes, for
    model tables compressed with `codec` (by default the event tables'
    codec), and keeps only the spin marker lines whole."""

    def __init__(self, capture_dir: str | Path, codec: str | None = None) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="cratrace-model-markers")
        path = Path(capture_dir) / "events" / "print.parquet"
        self.codec = codec or events_codec(Path(capture_dir) / "events")
        self.lines: Future[_native.MarkerLines | None] = _done(None)
        if path.is_file():
            self.lines = self._pool.submit(_native.MarkerLines.read, path, self.codec, list(SPIN_NAMES))

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        """Run `fn(*args)` on the parse's thread, after the parse."""
        return self._pool.submit(fn, *args)

    def release(self) -> None:
        """Let the parsed lines go (after the markers table is written)."""
        self.lines = _done(None)

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def __enter__(self) -> MarkerParse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _done(value: Any) -> Future:
    f: Future = Future()
    f.set_result(value)
    return f
