"""Repeat a real xentrace file end to end, later in time, to make a large
file with the real file's record mix.

The generated benchmark file (`cratrace synth xen-io-billing`) holds three
record kinds; a real host's trace holds dozens (the shared credit2 fixture
fills 31 tables), and a reader's cost per record depends on that mix. This
writes the input file `copies` times, each copy's TSCs moved on by the
input's TSC span (so every pCPU's TSCs keep rising), lost-records records'
first-lost TSC too. Windows, record sizes and payloads are kept byte for
byte.

Each seam is a gap in the trace: the vCPUs end one copy in other states,
and on other pCPUs, than they start the next, which xenalyze's state
machine refuses (FATAL: "continue on p5, but d14v2 p2"). Xen says "records
were lost here" with a lost-records record, after which xenalyze takes the
pCPU's vCPU as lost and picks up the new state; so every copy after the
first starts with one window per pCPU holding a lost-records record (one
record lost, from the previous copy's last TSC). cratrace reads those as
lost-record intervals, as it would on a real trace.

    python -m benchmarks.xentrace_tile IN OUT --copies 25
    python -m benchmarks.xentrace_tile --quick   # tiles a generated file 3 times, reads it with cratrace and xenalyze
"""

from __future__ import annotations

import argparse
import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

CPU_CHANGE = 0x0001F003
LOST_RECORDS = 0x0001F001
IDLE_DOMAIN = 0x7FFF


def scan(data: bytes) -> tuple[list[int], int, int, list[int]]:
    """Byte offsets of every 64-bit TSC in `data` (record TSCs and
    lost-records' first-lost TSC), the smallest and largest record TSC,
    and the pCPUs that have windows."""
    offsets, lo, hi, cpus, at, window_end = [], None, 0, set(), 0, 0
    while at + 4 <= len(data):
        (head,) = struct.unpack_from("<I", data, at)
        event, n, has_tsc = head & 0x0FFF_FFFF, (head >> 28) & 7, head >> 31
        size = 4 + 8 * has_tsc + 4 * n
        if at + size > len(data):
            break  # a truncated last record: copied as it is
        if at >= window_end and event == CPU_CHANGE and n >= 2:
            cpu, length = struct.unpack_from("<II", data, at + 4)
            cpus.add(cpu)
            window_end = at + size + length
        if has_tsc:
            offsets.append(at + 4)
            tsc = struct.unpack_from("<Q", data, at + 4)[0]
            lo, hi = tsc if lo is None else min(lo, tsc), max(hi, tsc)
        if event == LOST_RECORDS and n >= 4:
            offsets.append(at + 4 + 8 * has_tsc + 8)
        at += size
    if lo is None:
        raise SystemExit("error: no TSC in the input: nothing to move in time")
    return offsets, lo, hi, sorted(cpus)


def seam(cpus: list[int], first_lost: int, at: int) -> bytes:
    """Per pCPU, a window with one lost-records record: [count 1, the idle
    vCPU of that pCPU, first lost TSC], stamped `at`."""
    out = bytearray()
    for cpu in cpus:
        words = (1, IDLE_DOMAIN | cpu << 16, first_lost & 0xFFFF_FFFF, first_lost >> 32)
        rec = struct.pack("<IQ4I", LOST_RECORDS | 4 << 28 | 1 << 31, at, *words)
        out += struct.pack("<3I", CPU_CHANGE | 2 << 28, cpu, len(rec)) + rec
    return bytes(out)


def tile(data: bytes, copies: int) -> bytes:
    offsets, lo, hi, cpus = scan(data)
    step = hi - lo + 1  # copy k's TSCs start right after copy k-1's last
    out = bytearray(data)
    for k in range(1, copies):
        out += seam(cpus, hi + (k - 1) * step, lo + k * step)
        part = bytearray(data)
        for off in offsets:
            (v,) = struct.unpack_from("<Q", part, off)
            struct.pack_into("<Q", part, off, v + k * step)
        out += part
    return bytes(out)


def write_tiled(src: Path, out: Path, copies: int) -> None:
    """`src` tiled `copies` times into `out`, written whole or not at all."""
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(tile(src.read_bytes(), copies))
    tmp.replace(out)


def span_s(path: Path, cap: Path) -> float:
    """Seconds from the first record to the last, as `cratrace import` reads `path`."""
    subprocess.run([sys.executable, "-m", "cratrace", "import", str(path), "-o", str(cap), "--cpu-hz", "2.4e9", "-q"], check=True)
    lo, hi = json.loads((cap / "capture.json").read_text())["sources"][0]["summary"]["time_range"]
    return (hi - lo) / 1e9


def xenalyze_s(path: Path) -> float:
    """The "Total time" of `xenalyze --summary`, which stops with FATAL at a
    seam it cannot follow."""
    r = subprocess.run(["xenalyze", "--summary", "--cpu-hz=2.4G", str(path)], capture_output=True, text=True)
    if r.returncode or "FATAL" in r.stdout + r.stderr:
        raise SystemExit(f"xenalyze did not read {path.name} to its end (exit {r.returncode}): {(r.stdout + r.stderr).strip()[-300:]}")
    return float(r.stdout.split("Total time: ")[1].split()[0])


def quick(copies: int = 3) -> None:
    """Tile a generated file (`cratrace synth xen-io-billing`, 200
    simulated ms) and read it and its tiling with cratrace and xenalyze:
    each should find the tiled file `copies` times as long."""
    from benchmarks.quick import peer_installed, scratch, synth

    tmp = scratch("xentrace-tile")
    try:
        one = synth("xen-io-billing", tmp / "one.bin", duration_ms=200)
        tiled = tmp / f"x{copies}.bin"
        write_tiled(one, tiled, copies)
        ours = [span_s(p, tmp / f"{p.stem}.capture") for p in (one, tiled)]
        line = f"{one.stat().st_size:,} bytes tiled x{copies}: cratrace reads {ours[1]:.3f} s, {ours[1] / ours[0]:.2f}x one copy's"
        if peer_installed("xenalyze", "the tiled file's length"):
            theirs = [xenalyze_s(p) for p in (one, tiled)]
            line += f"; xenalyze --summary {theirs[1]:.2f} s, {theirs[1] / theirs[0]:.2f}x"
        print(line)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path, nargs="?")
    ap.add_argument("out", type=Path, nargs="?")
    ap.add_argument("--copies", type=int, default=25)
    ap.add_argument("--quick", action="store_true", help="tile a generated file 3 times and read it back with cratrace and xenalyze (no IN, OUT)")
    a = ap.parse_args()
    if a.quick:
        quick()
        return
    if a.src is None or a.out is None:
        ap.error("give IN and OUT, or --quick")
    write_tiled(a.src, a.out, a.copies)


if __name__ == "__main__":
    main()
