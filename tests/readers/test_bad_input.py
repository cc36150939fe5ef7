"""Damaged and foreign inputs: one-line errors with byte offsets, exit
codes, salvage of what can be read, and never a traceback or a partial
capture. Damage is made here from a real fixture, byte by byte."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from tests.helpers import cratrace


@pytest.fixture
def v6(fixtures_dir) -> bytes:
    return (fixtures_dir / "lisa_sched_load.dat").read_bytes()


def _cpu_table(data: bytes) -> tuple[int, list[tuple[int, int]]]:
    """(position of the table, [(offset, size)] per CPU) of a v6 file."""
    at = data.index(b"flyrecord\0") + 10
    return at, [struct.unpack_from("<QQ", data, at + 16 * i) for i in range(6)]


def _one_line_error(p, exit_code=2):
    assert p.returncode == exit_code, p.stderr
    assert "Traceback" not in p.stderr and "panicked" not in p.stderr
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    return lines


def _events(cap: Path) -> int:
    return sum(json.loads((cap / "capture.json").read_text())["events"].values())


def test_zero_length_file(tmp_path):
    f = tmp_path / "empty.dat"
    f.write_bytes(b"")
    p = cratrace("import", f, "-o", tmp_path / "cap")
    (line,) = _one_line_error(p)
    assert "empty.dat" in line and "at byte 0" in line and "empty" in line
    assert not (tmp_path / "cap").exists()


def test_not_a_trace(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("just some text\n")
    (line,) = _one_line_error(cratrace("import", f, "-o", tmp_path / "cap"))
    assert "notes.txt" in line and "not a trace format" in line


def test_garbage_after_the_header(v6, tmp_path):
    f = tmp_path / "garbage.dat"
    f.write_bytes(v6[:16] + bytes(range(256)) * 8)
    (line,) = _one_line_error(cratrace("import", f, "-o", tmp_path / "cap"))
    assert "garbage.dat" in line and "at byte" in line and "ERR:" in line
    assert not list(tmp_path.glob(".cap*")), "temporary output must be cleaned up"


def test_truncated_file_salvages_complete_pages(v6, fixtures_dir, tmp_path):
    full = tmp_path / "full"
    cratrace("import", fixtures_dir / "lisa_sched_load.dat", "-o", full, check=True)
    f = tmp_path / "trunc.dat"
    f.write_bytes(v6[:-10_000])
    p = cratrace("import", f, "-o", tmp_path / "cap")
    (line,) = _one_line_error(p, exit_code=1)
    assert "truncated" in line and "at byte" in line
    meta = json.loads((tmp_path / "cap" / "capture.json").read_text())
    lost = meta["sources"][0]["summary"]["truncated_bytes"]
    assert lost >= 10_000 and lost % 4096 == 0  # whole pages are lost, partial ones dropped
    assert 0 < _events(tmp_path / "cap") < _events(full)
    # and `info` says the capture is incomplete, as it does for lost events
    shown = cratrace("info", tmp_path / "cap", "--json")
    assert shown.returncode == 1 and json.loads(shown.stdout)["damaged"] == [line.split("warning: ", 1)[1]]
    assert cratrace("info", full).returncode == 0


def test_a_damaged_cpu_size_is_said_not_counted_as_a_cut(v6, fixtures_dir, tmp_path):
    # a high bit flipped in a CPU's data size made `truncated_bytes` about
    # 2^62: the claim, running into the next CPU's data, is a damaged size
    at, cpus = _cpu_table(v6)
    i = next(i for i, (o, s) in enumerate(cpus[:-1]) if s > 0)
    off, size = cpus[i]
    data = bytearray(v6)
    struct.pack_into("<Q", data, at + 16 * i + 8, size | 1 << 62)
    f = tmp_path / "bigsize.dat"
    f.write_bytes(bytes(data))
    p = cratrace("import", f, "-o", tmp_path / "cap", "-q")
    (line,) = _one_line_error(p, exit_code=1)
    assert "bigsize.dat" in line and f"at byte {off}" in line and f"CPU {i} claims {size | 1 << 62} bytes" in line and "damaged size" in line, line
    meta = json.loads((tmp_path / "cap" / "capture.json").read_text())
    assert meta["sources"][0]["summary"]["truncated_bytes"] == 0
    full = tmp_path / "full"
    cratrace("import", fixtures_dir / "lisa_sched_load.dat", "-o", full, check=True)
    assert _events(tmp_path / "cap") == _events(full)  # read as the size the layout allows
    assert cratrace("info", tmp_path / "cap").returncode == 1


def test_corrupted_page_header_skips_only_that_page(v6, fixtures_dir, tmp_path):
    full = tmp_path / "full"
    cratrace("import", fixtures_dir / "lisa_sched_load.dat", "-o", full, check=True)
    _, cpus = _cpu_table(v6)
    off, size = next((o, s) for o, s in cpus if s > 0)
    data = bytearray(v6)
    data[off + 8 : off + 16] = struct.pack("<Q", 0x0FFFFFF)  # commit far beyond the page
    f = tmp_path / "badpage.dat"
    f.write_bytes(bytes(data))
    p = cratrace("import", f, "-o", tmp_path / "cap")
    lines = _one_line_error(p, exit_code=1)
    assert any(f"at byte {off}" in line and "corrupt page header" in line for line in lines), lines
    assert 0 < _events(tmp_path / "cap") < _events(full)


def test_cpu_section_pointing_past_eof(v6, tmp_path):
    at, cpus = _cpu_table(v6)
    data = bytearray(v6)
    i = next(i for i, (_, s) in enumerate(cpus) if s > 0)
    struct.pack_into("<Q", data, at + 16 * i, len(v6) + 123_456)
    f = tmp_path / "pasteof.dat"
    f.write_bytes(bytes(data))
    p = cratrace("import", f, "-o", tmp_path / "cap")
    (line,) = _one_line_error(p, exit_code=1)
    assert "pasteof.dat" in line and "missing" in line
    assert _events(tmp_path / "cap") > 0  # the other CPUs are still read


def test_untypeable_field_is_kept_as_its_bytes(fixtures_dir, tmp_path):
    """A field the reader has no column type for (here a u32 whose format
    says 3 bytes) is stored as its raw bytes; the import is complete, so it
    exits 0, and `info --verbose` names the field."""
    data = (fixtures_dir / "trappy_idle.dat").read_bytes()
    fmt_at = data.index(b"name: cpu_idle")
    field_at = data.index(b"field:u32 state;", fmt_at)
    size_at = data.index(b"size:4;", field_at)
    f = tmp_path / "oddfield.dat"
    f.write_bytes(data[:size_at] + b"size:3;" + data[size_at + 7 :])
    p = cratrace("import", f, "-o", tmp_path / "cap")
    assert p.returncode == 0 and p.stderr == "", p.stderr
    meta = json.loads((tmp_path / "cap" / "capture.json").read_text())
    assert [(d["event"], d["field"]) for d in meta["raw_fields"]] == [("cpu_idle", "state")]
    import polars as pl

    odd = pl.read_parquet(tmp_path / "cap" / "events" / "cpu_idle.parquet")
    whole = cratrace("import", fixtures_dir / "trappy_idle.dat", "-o", tmp_path / "whole")
    assert whole.returncode == 0
    full = pl.read_parquet(tmp_path / "whole" / "events" / "cpu_idle.parquet")
    assert odd.schema["state"] == pl.Binary and odd.height == full.height > 0
    # the first three bytes of each record's little-endian u32
    assert odd["state"].to_list() == [int(v).to_bytes(4, "little")[:3] for v in full["state"]]
    info = cratrace("info", tmp_path / "cap", "--verbose")
    assert info.returncode == 0 and "cpu_idle.state" in info.stdout


def test_existing_capture_is_kept_without_force_and_replaced_with_it(fixtures_dir, tmp_path):
    out = tmp_path / "cap"
    cratrace("import", fixtures_dir / "trappy_idle.dat", "-o", out, check=True)
    before = (out / "capture.json").read_text()
    (line,) = _one_line_error(cratrace("import", fixtures_dir / "trappy_raw.dat", "-o", out))
    assert "already exists" in line and "--force" in line
    assert (out / "capture.json").read_text() == before
    cratrace("import", fixtures_dir / "trappy_raw.dat", "-o", out, "--force", check=True)
    assert "bprint" in json.loads((out / "capture.json").read_text())["events"]
    # a failed forced import leaves the old capture in place
    bad = tmp_path / "bad.dat"
    bad.write_bytes(b"\x17\x08\x44tracing6\0\0\x08")
    _one_line_error(cratrace("import", bad, "-o", out, "--force"))
    assert "bprint" in json.loads((out / "capture.json").read_text())["events"]


@pytest.mark.parametrize("name", ["trappy_raw.v7.dat", "lisa_sched_load.v7zstd.dat"])
def test_v7_file_cut_in_its_data_says_what_is_missing(name, fixtures_dir, tmp_path):
    # trace-cmd writes the options section that says where each CPU's data
    # lies (BUFFER) after the data, so a cut there leaves nothing to place
    # events by (trace-cmd report prints nothing for such a file)
    f = tmp_path / "cut.dat"
    f.write_bytes((fixtures_dir / name).read_bytes()[:-3000])  # the sections after the data are < 1 kB
    (line,) = _one_line_error(cratrace("import", f, "-o", tmp_path / "cap"))
    assert "cut.dat: at byte" in line and "file is truncated" in line and "ring-buffer data" in line and "ERR:truncated" in line
    assert not (tmp_path / "cap").exists()


def test_v7_file_cut_before_its_data_is_refused(fixtures_dir, tmp_path):
    # cut inside the metadata: nothing says where the data is
    f = tmp_path / "cut.dat"
    f.write_bytes((fixtures_dir / "trappy_raw.v7.dat").read_bytes()[:400_000])
    (line,) = _one_line_error(cratrace("import", f, "-o", tmp_path / "cap"))
    assert "cut.dat: at byte" in line and "past the end of the file" in line
    assert not (tmp_path / "cap").exists()


def _first_record_payload(v6: bytes) -> tuple[int, int]:
    """Byte offsets of the first page of the first CPU with data of the
    64-bit v6 fixture, and of its first record's payload (common_type)."""
    _, cpus = _cpu_table(v6)
    page = next(o for o, s in cpus if s > 0)
    at = page + 16  # the page header: timestamp, commit (8 bytes each)
    while True:
        (head,) = struct.unpack_from("<I", v6, at)
        kind = head & 0x1F
        if 1 <= kind <= 28:  # a data record, its length in the header
            return page, at + 4
        if kind == 0:  # a data record, its length in the next word
            return page, at + 8
        at += 8  # 30/31: a time extend or stamp (8 bytes); padding does not open a page


def test_records_of_an_unknown_event_id_are_lost_events_and_exit_1(v6, fixtures_dir, tmp_path):
    # issue 42: they were a warning in capture.json and the import exited 0
    full = tmp_path / "full"
    cratrace("import", fixtures_dir / "lisa_sched_load.dat", "-o", full, check=True)
    page, at = _first_record_payload(v6)
    data = bytearray(v6)
    struct.pack_into("<H", data, at, 0xFFFE)  # an event id no format in the file has
    f = tmp_path / "unknown.dat"
    f.write_bytes(bytes(data))
    p = cratrace("import", f, "-o", tmp_path / "cap")
    (line,) = _one_line_error(p, exit_code=1)
    assert "unknown.dat" in line and "unknown event id 65534" in line and f"at byte {page}" in line, line
    meta = json.loads((tmp_path / "cap" / "capture.json").read_text())
    assert meta["lost_events"]["skipped_by_reader"] == 1 and meta["lost_events"]["total"] == 1
    assert _events(tmp_path / "cap") == _events(full) - 1
    shown = cratrace("info", tmp_path / "cap", "--json")
    assert shown.returncode == 1, shown.stdout
    assert json.loads(shown.stdout)["damaged"] == [line.split("warning: ", 1)[1]]
    text = cratrace("info", tmp_path / "cap")
    assert text.returncode == 1 and "1 of them skipped by the reader" in text.stdout


def test_truncated_file_estimates_the_events_lost(v6, fixtures_dir, tmp_path):
    full = tmp_path / "full"
    cratrace("import", fixtures_dir / "lisa_sched_load.dat", "-o", full, check=True)
    f = tmp_path / "trunc.dat"
    f.write_bytes(v6[:-60_000])
    p = cratrace("import", f, "-o", tmp_path / "cap")
    (line,) = _one_line_error(p, exit_code=1)
    meta = json.loads((tmp_path / "cap" / "capture.json").read_text())
    estimate = meta["lost_events"]["estimated_in_missing_data"]
    really = _events(full) - _events(tmp_path / "cap")
    assert really / 2 <= estimate <= really * 2, (estimate, really)
    assert f"about {estimate} events lost" in line and "an estimate" in line and "pages missing" in line


def test_a_decompression_budget_refuses_with_one_line(fixtures_dir, tmp_path):
    # issue 42: a tiny v7 file's chunks declaring 1 GiB each took an import
    # to 6.3 GB; past the budget the import stops with exit 2, no abort
    src = fixtures_dir / "lisa_sched_load.v7zstd.dat"
    (line,) = _one_line_error(cratrace("import", src, "-o", tmp_path / "cap", "--max-memory", "4K"))
    assert "lisa_sched_load.v7zstd.dat: at byte" in line and "ERR:over-budget" in line and "--max-memory" in line
    assert not (tmp_path / "cap").exists() and not list(tmp_path.glob(".cap*"))
    (line,) = _one_line_error(cratrace("import", src, "-o", tmp_path / "cap", "--max-memory", "lots"))
    assert "--max-memory lots" in line
    cratrace("import", src, "-o", tmp_path / "cap", "--max-memory", "64M", check=True)
