"""A truth's spin episodes kept on disk while a long scenario runs.

kvm-heavy-spin's native loop writes its closed episodes, already in the
truth's order, as fixed-width records (``EPISODE_FIELDS`` native-endian
i64s each, bindings/src/synth_spin.rs) into an unnamed temporary file: 100 M events close about
7.7 M episodes, 3 GB as the dicts the Python loop keeps (issue #47).
:class:`SpilledEpisodes` reads them back as those dicts, a block at a
time, for the truth file and for callers of ``synthesize``.
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

#: the fields of a record, in the truth's key order; -1 stands for null
#: in ``clearer_vcpu`` (a vCPU index is never negative)
FIELDS = ("vm", "vcpu", "tid", "lock", "start", "end", "holder_vcpu", "holder_preempted", "pause_exits", "halts",
          "kicks", "clearer_vcpu", "dur")
RECORD = struct.Struct(f"={len(FIELDS)}q")
#: records read at a time
BLOCK = 4096


class SpilledEpisodes(Sequence):
    """Closed spin episodes on disk, read as the truth's dicts (a
    sequence: len, iteration, indexing; equal to a list of the same
    dicts). Its file, in `directory` (beside the trace, as the trace's
    own spooled pages: the system's temporary directory may be a small
    tmpfs), has no name and goes with the object."""

    def __init__(self, vm_names: list[str], directory: str | os.PathLike | None = None):
        self._file = tempfile.TemporaryFile(prefix="cratrace-episodes-", dir=directory)
        self._vm_names = list(vm_names)
        self._count = 0

    def write(self, records: bytes) -> None:
        """Append packed records (the native loop calls this)."""
        if len(records) % RECORD.size:
            raise ValueError(f"episode records: {len(records)} bytes is not a whole number of {RECORD.size}-byte records")
        self._file.seek(0, 2)
        self._file.write(records)
        self._count += len(records) // RECORD.size

    def __len__(self) -> int:
        return self._count

    def _dict(self, rec: tuple[int, ...]) -> dict[str, Any]:
        ep = dict(zip(FIELDS, rec))
        ep["vm"] = self._vm_names[rec[0]]
        ep["holder_preempted"] = bool(rec[7])
        if rec[11] < 0:
            ep["clearer_vcpu"] = None
        return ep

    def _read(self, first: int, count: int) -> Iterator[dict[str, Any]]:
        self._file.seek(first * RECORD.size)
        data = self._file.read(count * RECORD.size)
        return (self._dict(r) for r in RECORD.iter_unpack(data))

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for first in range(0, self._count, BLOCK):
            yield from self._read(first, min(BLOCK, self._count - first))

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._count))]
        if i < 0:
            i += self._count
        if not 0 <= i < self._count:
            raise IndexError("episode index out of range")
        return next(self._read(i, 1))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (list, SpilledEpisodes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SpilledEpisodes({self._count} episodes)"
