"""The replay's phases kept on disk while the command runs.

A 100 M-event capture has about 100 M phases, 21 bytes each as four typed
columns: 2.2 GB that the Python process held from the extraction to the
last policy's replay, beside the engine's own copy. Here each column is
appended to a file of its own instead (thread u32, kind u8, a i64, b i64,
native-endian, as `array.array` writes them), and the engine reads the
files sequentially to build a run's phases (`_native.replay`'s
``phase_files``).

Where: a directory made by `tempfile.mkdtemp`, so under ``$TMPDIR`` (else
/tmp): about 21 bytes a phase must fit there, and a tmpfs /tmp would put
them back in memory (set ``TMPDIR`` to a disk then). The directory is
removed by `PhaseSpill.close`, which the replay calls when the command
ends, on errors and on SIGINT/SIGTERM/SIGHUP too (`cratrace.cli.signals`
turns them into an exception, so the same clean-up runs); a spill
forgotten by its caller is removed when it is garbage-collected or at
the interpreter's exit.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import weakref
from array import array
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress

#: typecodes of the phase columns: thread (u32), kind (u8), a and b (i64),
#: the widths the native builders pack them in
PHASE_TYPECODES = ("I", "B", "q", "q")
assert [array(c).itemsize for c in PHASE_TYPECODES] == [4, 1, 8, 8]

#: the column files' names, in `PHASE_TYPECODES` order
COLUMN_FILES = ("thread.u32", "kind.u8", "a.i64", "b.i64")

#: bytes buffered per column file before a write (few, large writes)
WRITE_BUFFER = 1 << 20


class PhaseSpill:
    """Phases appended as four column files in a temporary directory of
    their own, made at the first append (an empty spill has none)."""

    def __init__(self) -> None:
        self.count = 0
        self.dir: str | None = None
        self._files: list = []
        self._finalizer: weakref.finalize | None = None

    def __len__(self) -> int:
        return self.count

    def __eq__(self, other: object) -> bool:
        """The same phases (as the in-memory columns compared)."""
        if not isinstance(other, PhaseSpill):
            return NotImplemented
        return self is other or (self.count == other.count and self.columns() == other.columns())

    __hash__ = None  # type: ignore[assignment]  # equal by content, which changes

    def _open(self) -> None:
        self.dir = tempfile.mkdtemp(prefix=f"cratrace-phases-{os.getpid()}-")
        self._files = [open(os.path.join(self.dir, name), "wb", buffering=WRITE_BUFFER) for name in COLUMN_FILES]
        # a spill its owner never closed still goes, at the latest at exit
        self._finalizer = weakref.finalize(self, _remove, self.dir, self._files)
        scopes = getattr(_scopes, "stack", None)
        if scopes:
            scopes[-1].append(self._finalizer)

    def extend(self, columns: Iterable[Iterable[int] | bytes]) -> None:
        """Append phases given as four columns (thread, kind, a, b): each
        an iterable of ints or packed bytes as the native builders return
        them; all of one length."""
        packed = [x if isinstance(x, (bytes, bytearray)) else array(code, x).tobytes() for code, x in zip(PHASE_TYPECODES, columns, strict=True)]
        sizes = [divmod(len(p), array(code).itemsize) for code, p in zip(PHASE_TYPECODES, packed)]
        lengths = {n for n, _ in sizes}
        if len(lengths) != 1 or any(rest for _, rest in sizes):
            raise ValueError(f"phase columns of {[len(p) for p in packed]} bytes: not one number of phases of (4, 1, 8, 8) bytes")
        (n,) = lengths
        if n == 0:
            return
        if self.dir is None:
            self._open()
        for f, p in zip(self._files, packed):
            f.write(p)
        self.count += n

    def paths(self) -> list[str]:
        """The four column files, whole on disk (written out first)."""
        assert self.dir is not None, "an empty spill has no files"
        for f in self._files:
            f.flush()
        return [os.path.join(self.dir, name) for name in COLUMN_FILES]

    def columns(self) -> tuple[array, array, array, array]:
        """The phases loaded into memory as typed columns (thread, kind,
        a, b): for what needs them all at once (what-ifs, Python
        policies); the replay itself reads the files."""
        thread, kind, a, b = (self.column(i) for i in range(len(PHASE_TYPECODES)))
        return thread, kind, a, b

    def column(self, i: int) -> array:
        """Column `i` (0 thread, 1 kind, 2 a, 3 b) loaded into memory."""
        col = array(PHASE_TYPECODES[i])
        if self.dir is not None:
            with open(self.paths()[i], "rb") as f:
                col.fromfile(f, self.count)
        return col

    def native_args(self) -> dict:
        """How `_native.replay` reads these phases: the files' paths, or
        empty columns when there are none."""
        if self.dir is None:
            return dict(zip(("phase_thread", "phase_kind", "phase_a", "phase_b"), self.columns()))
        return {"phase_files": self.paths()}

    def close(self) -> None:
        """Remove the files and their directory (again: nothing)."""
        if self._finalizer is not None:
            self._finalizer()

    @property
    def closed(self) -> bool:
        return self._finalizer is not None and not self._finalizer.alive


#: per thread, the `removing_spills` scopes open in it (innermost last),
#: each a list of the removers of the spills made in it: a scope removes
#: its own thread's spills, not those of a replay running beside it (the
#: fleet may run several in one process)
_scopes = threading.local()


@contextmanager
def removing_spills() -> Iterator[None]:
    """Every spill this thread makes inside is removed on leaving, however
    left (an error, a signal's `cratrace.cli.signals.Stopped`): a
    command's phases go with it, whichever workloads (a what-if's too)
    held them."""
    made: list[weakref.finalize] = []
    stack = _scopes.__dict__.setdefault("stack", [])
    stack.append(made)
    try:
        yield
    finally:
        stack.pop()
        for remove in made:
            remove()


def _remove(path: str, files: list) -> None:
    for f in files:
        # closing writes out what is buffered: on a full disk that fails,
        # and the files go anyway
        with suppress(OSError):
            f.close()
    shutil.rmtree(path, ignore_errors=True)
