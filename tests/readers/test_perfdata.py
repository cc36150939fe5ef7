"""The native perf.data reader against `perf script`, on files recorded
here, and the promise that a perf tracepoint lands in the same table (same
columns, same types) as the trace-cmd one."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess

import polars as pl
import pytest

from tests.conftest import RECORD_BUFFER_KB
from tests.helpers import cratrace as run_cli

pytestmark = pytest.mark.skipif(shutil.which("perf") is None or os.geteuid() != 0, reason="needs perf and root")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    d = tmp_path_factory.mktemp("perf")
    f = d / "perf.data"
    r = subprocess.run(
        ["perf", "record", "-q", "-e", "sched:sched_switch", "-e", "sched:sched_wakeup", "-e", "cpu-clock", "-a", "-o", str(f), "--", "sh", "-c", "for i in $(seq 50); do sleep 0.002; done"],
        capture_output=True,
        text=True,
    )
    # perf and root were checked before (pytestmark): a failure here is one
    assert r.returncode == 0 and f.exists(), f"perf record failed: {r.stderr.strip()[-200:]}"
    cap = d / "cap"
    run_cli("import", f, "-o", cap, "-q", check=True)
    return f, cap


def _script(f, event):
    out = subprocess.run(["perf", "script", "-i", str(f), "-F", "tid,cpu,time,event,trace", "--ns"], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        # perf script shows tid -1 for a thread that has exited by then
        m = re.match(r"\s*(-?\d+)\s+\[(\d+)\]\s+(\d+)\.(\d+):\s+(\S+):\s*(.*)$", line)
        if m and m.group(5) == event:
            rows.append((int(m.group(1)), int(m.group(2)), int(m.group(3)) * 10**9 + int(m.group(4)), m.group(6)))
    return rows


def test_counts_and_fields_equal_perf_script(recorded):
    f, cap = recorded
    for event, table in (("sched:sched_switch", "sched_switch"), ("sched:sched_wakeup", "sched_wakeup")):
        theirs = _script(f, event)
        ours = pl.read_parquet(cap / "events" / f"{table}.parquet")
        assert ours.height == len(theirs) > 0, event
        # the sample's own tid where perf script knows it, (cpu, time) for all
        assert sorted(zip(ours["cpu"], ours["ts"])) == sorted((c, ts) for _, c, ts, _ in theirs), event
        known = {(c, ts): t for t, c, ts, _ in theirs if t != -1}
        assert all(known.get((c, ts), p) == p for p, c, ts in zip(ours["pid"], ours["cpu"], ours["ts"])), event
    sw = pl.read_parquet(cap / "events" / "sched_switch.parquet").sort("ts", "cpu")
    theirs = sorted(_script(f, "sched:sched_switch"), key=lambda r: (r[2], r[1]))
    for row, (_, _, _, text) in zip(sw.iter_rows(named=True), theirs):
        assert f"prev_comm={row['prev_comm']} prev_pid={row['prev_pid']}" in text
        assert f"next_comm={row['next_comm']} next_pid={row['next_pid']}" in text


def test_rows_are_time_ordered_and_hardware_samples_have_their_table(recorded):
    f, cap = recorded
    for p in (cap / "events").glob("*.parquet"):
        assert pl.read_parquet(p)["ts"].is_sorted(), p.name
    hw = pl.read_parquet(cap / "events" / "perf_sample.parquet")
    assert hw.height > 0 and set(hw["event"]) == {"cpu-clock"}


def test_perf_and_trace_cmd_tables_share_a_schema(recorded, tracing_lock, tmp_path):
    _, cap = recorded
    dat = tmp_path / "t.dat"
    r = subprocess.run(["trace-cmd", "record", "-q", "-b", RECORD_BUFFER_KB, "-e", "sched:sched_switch", "-o", str(dat), "--", "sleep", "0.1"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, f"trace-cmd record failed: {r.stderr.strip()[-200:]}"
    run_cli("import", dat, "-o", tmp_path / "tc", "-q", check=True)
    a = pl.read_parquet(cap / "events" / "sched_switch.parquet").schema
    b = pl.read_parquet(tmp_path / "tc" / "events" / "sched_switch.parquet").schema
    assert a == b


def test_not_perf_data_and_cut_files(tmp_path, recorded):
    f, _ = recorded
    data = f.read_bytes()
    bad = tmp_path / "cut.data"
    bad.write_bytes(data[:60])
    p = run_cli("import", bad, "-o", tmp_path / "c1")
    assert p.returncode == 2 and "cut.data" in p.stderr and "Traceback" not in p.stderr


def test_a_file_cut_inside_its_data_keeps_whole_records_and_exits_1(tmp_path, recorded):
    # perf record killed, or a copy cut short: the header still promises
    # the whole data section. Cut once between two records and once inside
    # one: both import what is whole and say where the file ends.
    f, cap = recorded
    data = f.read_bytes()
    data_off, data_size = struct.unpack_from("<QQ", data, 40)
    ends, pos = [], data_off
    while pos < data_off + data_size:
        pos += struct.unpack_from("<H", data, pos + 6)[0]
        ends.append(pos)
    boundary = ends[len(ends) // 2]
    full = sum(json.loads((cap / "capture.json").read_text())["events"].values())
    for name, cut in (("between.data", boundary), ("inside.data", boundary + 5)):
        (tmp_path / name).write_bytes(data[:cut])
        p = run_cli("import", tmp_path / name, "-o", tmp_path / name.replace(".data", ""), "-q")
        assert p.returncode == 1, p.stderr
        # the cut, then what it took: the tracing data's event formats are
        # after the data, so the tracepoint samples kept are untyped
        line, untyped = [x for x in p.stderr.splitlines() if x.strip()]
        assert name in line and f"at byte {boundary}" in line and "truncated" in line
        assert "tracepoint samples stored untyped in perf_sample" in untyped and "cut before its tracing data" in untyped
        meta = json.loads((tmp_path / name.replace(".data", "") / "capture.json").read_text())
        assert meta["sources"][0]["summary"]["truncated_bytes"] == data_off + data_size - boundary
        assert 0 < sum(meta["events"].values()) < full


def _stderr_lines(p) -> list[str]:
    assert "Traceback" not in p.stderr and "panicked" not in p.stderr, p.stderr
    return [x for x in p.stderr.splitlines() if x.strip()]


def test_samples_whose_attribute_id_is_damaged_are_counted_lost_and_exit_1(tmp_path, recorded):
    # issue 42: zeroing an attribute's ids imported the other events with
    # exit 0 and nothing said; perf script rejects such a file
    f, cap = recorded
    data = bytearray(f.read_bytes())
    attr_size, attrs_off = struct.unpack_from("<QQ", data, 16)
    kind, _, config = struct.unpack_from("<IIQ", data, attrs_off)
    assert kind == 2  # the first -e: sched:sched_switch, a tracepoint
    ids_off, ids_len = struct.unpack_from("<QQ", data, attrs_off + attr_size - 16)
    assert ids_len >= 8
    data[ids_off : ids_off + ids_len] = bytes(ids_len)
    bad = tmp_path / "ids.data"
    bad.write_bytes(bytes(data))
    p = run_cli("import", bad, "-o", tmp_path / "cap", "-q")
    assert p.returncode == 1, p.stderr
    (line,) = _stderr_lines(p)
    assert "ids.data: at byte" in line and "samples whose id no event attribute has skipped" in line, line
    clean = json.loads((cap / "capture.json").read_text())
    meta = json.loads((tmp_path / "cap" / "capture.json").read_text())
    # exactly the sched_switch samples are lost, and counted as lost
    assert "sched_switch" not in meta["events"]
    assert meta["lost_events"]["skipped_by_reader"] == clean["events"]["sched_switch"]
    assert int(re.search(r"at byte \d+: (\d+) ", line).group(1)) == clean["events"]["sched_switch"], line
    assert meta["events"] == {k: v for k, v in clean["events"].items() if k != "sched_switch"}
    assert run_cli("info", tmp_path / "cap").returncode == 1
    assert run_cli("info", cap).returncode == 0


def test_a_file_cut_inside_its_tracing_data_says_its_samples_are_untyped(tmp_path, recorded):
    # issue 42: every tracepoint sample went to perf_sample with exit 0
    f, cap = recorded
    data = f.read_bytes()
    data_off, data_len = struct.unpack_from("<QQ", data, 40)
    features = int.from_bytes(data[72:104], "little")
    bits = [b for b in range(256) if features >> b & 1]
    assert bits[0] == 1  # HEADER_TRACING_DATA, the first section after the table
    sec_off, sec_len = struct.unpack_from("<QQ", data, data_off + data_len)
    bad = tmp_path / "tracing.data"
    bad.write_bytes(data[: sec_off + sec_len // 2])
    p = run_cli("import", bad, "-o", tmp_path / "cap", "-q")
    assert p.returncode == 1, p.stderr
    lines = _stderr_lines(p)
    assert len(lines) == 2, lines
    past, untyped = lines
    assert f"tracing.data: at byte {sec_off + sec_len // 2}" in past and "feature sections 1," in past and "event formats" in past, past
    assert "tracepoint samples stored untyped in perf_sample" in untyped and "no event formats" in untyped, untyped
    clean = json.loads((cap / "capture.json").read_text())["events"]
    n = int(re.search(r"at byte \d+: (\d+) ", untyped).group(1))
    assert n == clean["sched_switch"] + clean["sched_wakeup"]
    meta = json.loads((tmp_path / "cap" / "capture.json").read_text())
    assert meta["events"] == {"perf_sample": n + clean["perf_sample"]}
    assert run_cli("info", tmp_path / "cap").returncode == 1
