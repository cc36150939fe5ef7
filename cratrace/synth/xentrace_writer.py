"""A small xentrace file writer, for tests and scenarios with known content.

    w = XentraceWriter()
    w.record(cpu=0, event=0x0002800A, words=[0, 1, 0x7FFF, 0], tsc=1000)
    w.record(cpu=0, event=0x00081001)                # no TSC: inherits the pCPU's last
    w.write("x.bin", window_records=64)              # per-pCPU windows of at most 64 records

Records are written per pCPU in the order given, in windows introduced by
a TRC_TRACE_CPU_CHANGE record (cpu, byte count), windows of different
pCPUs interleaved as xentrace's reader thread would.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from pathlib import Path

CPU_CHANGE = 0x0001F003
LOST_RECORDS = 0x0001F001


class XentraceWriter:
    def __init__(self) -> None:
        self.per_cpu: dict[int, list[bytes]] = defaultdict(list)

    def record(self, cpu: int, event: int, words: list[int] | tuple = (), tsc: int | None = None) -> None:
        if len(words) > 7 or event >> 28:
            raise ValueError("at most 7 words and a 28-bit event id")
        head = event | (len(words) << 28) | ((1 << 31) if tsc is not None else 0)
        rec = struct.pack("<I", head) + (struct.pack("<Q", tsc) if tsc is not None else b"") + struct.pack(f"<{len(words)}I", *words)
        self.per_cpu[cpu].append(rec)

    def write(self, path: str | Path, window_records: int = 64) -> None:
        chunks = {c: [recs[i : i + window_records] for i in range(0, len(recs), window_records)] for c, recs in self.per_cpu.items()}
        out = bytearray()
        i = 0
        while any(i < len(v) for v in chunks.values()):
            for cpu in sorted(chunks):
                if i < len(chunks[cpu]):
                    body = b"".join(chunks[cpu][i])
                    out += struct.pack("<IIII", CPU_CHANGE | (2 << 28), cpu, len(body), 0)[:12] + body
            i += 1
        Path(path).write_bytes(bytes(out))
