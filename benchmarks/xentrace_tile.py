"""Repeat a real xentrace file end to end, later in time, to make a large
file with the real file's record mix.

The generated benchmark file (`cratrace synth xen-io-billing`) holds three
record kinds; a real host's trace holds dozens (the shared credit2 fixture
fills 31 tables), and a reader's cost per record depends on that mix. This
writes the input file `copies` times, each copy's TSCs moved past the
previous copy's last TSC (so every pCPU's TSCs keep rising), the lost-records
records' first-lost TSC too. Windows, record sizes and payloads are kept
byte for byte.

    python -m benchmarks.xentrace_tile IN OUT --copies 25
"""

from __future__ import annotations

import argparse
import struct
from pathlib import Path

CPU_CHANGE = 0x0001F003
LOST_RECORDS = 0x0001F001


def tsc_fields(data: bytes) -> tuple[list[int], int]:
    """Byte offsets of every 64-bit TSC in `data` (record TSCs and
    lost-records' first-lost TSC), and the largest TSC seen."""
    offsets, top, at = [], 0, 0
    while at + 4 <= len(data):
        (head,) = struct.unpack_from("<I", data, at)
        event, n, has_tsc = head & 0x0FFF_FFFF, (head >> 28) & 7, head >> 31
        size = 4 + 8 * has_tsc + 4 * n
        if at + size > len(data):
            break  # a truncated last record: copied as it is
        if has_tsc:
            offsets.append(at + 4)
            top = max(top, struct.unpack_from("<Q", data, at + 4)[0])
        if event == LOST_RECORDS and n >= 4:
            offsets.append(at + 4 + 8 * has_tsc + 8)
        at += size
    return offsets, top


def tile(data: bytes, copies: int) -> bytes:
    offsets, top = tsc_fields(data)
    if not offsets:
        raise SystemExit("error: no TSC in the input: nothing to move in time")
    step = top + 1  # each copy starts after the last TSC of the one before
    out = bytearray()
    for k in range(copies):
        part = bytearray(data)
        for off in offsets:
            (v,) = struct.unpack_from("<Q", part, off)
            struct.pack_into("<Q", part, off, v + k * step)
        out += part
    return bytes(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--copies", type=int, default=25)
    a = ap.parse_args()
    tmp = a.out.with_name(a.out.name + ".tmp")
    tmp.write_bytes(tile(a.src.read_bytes(), a.copies))
    tmp.replace(a.out)


if __name__ == "__main__":
    main()
