"""Fields whose C type has no column type of its own (a struct by value,
as sunrpc's `svc_xprt_do_enqueue.ss`, `struct __kernel_sockaddr_storage`,
128 bytes) are kept as their bytes; a trace whose header merely declares
such a format imports as complete (exit 0, nothing on stderr)."""

from __future__ import annotations

import json
import shutil

import polars as pl
import pytest

from cratrace.synth.tracedat_writer import Event, write_tracedat
from tests.helpers import cratrace, report_counts

SVC_XPRT = """system: sunrpc
name: svc_xprt_do_enqueue
ID: 1501
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:const void * server;\toffset:8;\tsize:8;\tsigned:0;
\tfield:int pid;\toffset:16;\tsize:4;\tsigned:1;
\tfield:unsigned long flags;\toffset:24;\tsize:8;\tsigned:0;
\tfield:struct __kernel_sockaddr_storage ss;\toffset:32;\tsize:128;\tsigned:0;

print fmt: "server=%pISpc pid=%d", &REC->ss, REC->pid
"""


def _switch(ts: int, prev: int, nxt: int) -> Event:
    return Event(ts=ts, cpu=0, name="sched_switch", pid=prev, fields={"prev_comm": f"t{prev}", "prev_pid": prev, "prev_prio": 120, "prev_state": 1, "next_comm": f"t{nxt}", "next_pid": nxt, "next_prio": 120})


@pytest.mark.parametrize("version", [6, 7])
def test_a_declared_struct_format_without_records_is_no_problem(tmp_path, version):
    f = write_tracedat(tmp_path / "t.dat", [_switch(1000, 1, 2), _switch(2000, 2, 1)], version=version, formats=[SVC_XPRT])
    p = cratrace("import", f, "-o", tmp_path / "cap")
    assert p.returncode == 0 and p.stderr == "", p.stderr
    meta = json.loads((tmp_path / "cap" / "capture.json").read_text())
    assert meta["events"] == {"sched_switch": 2}
    assert [(d["event"], d["field"]) for d in meta["raw_fields"]] == [("svc_xprt_do_enqueue", "ss")]


def test_struct_field_values_are_stored_as_their_bytes(tmp_path):
    # the 128-byte struct's value as a little-endian integer: bytes 0..127
    ss = bytes(range(128))
    recs = [Event(ts=1000 * (i + 1), cpu=0, name="svc_xprt_do_enqueue", pid=7, fields={"server": 0xFFFF0000 + i, "pid": 40 + i, "flags": 1, "ss": int.from_bytes(ss, "little") + i}) for i in range(3)]
    f = write_tracedat(tmp_path / "t.dat", recs, version=7, compression="zstd", formats=[SVC_XPRT])
    p = cratrace("import", f, "-o", tmp_path / "cap")
    assert p.returncode == 0 and p.stderr == "", p.stderr
    df = pl.read_parquet(tmp_path / "cap" / "events" / "svc_xprt_do_enqueue.parquet")
    assert df.schema["ss"] == pl.Binary
    assert df["ss"].to_list() == [bytes([i]) + ss[1:] for i in range(3)]
    # a field named like a common column is `field_<name>` (the contract)
    assert df["field_pid"].to_list() == [40, 41, 42] and df["pid"].to_list() == [7, 7, 7]
    if shutil.which("trace-cmd"):
        assert report_counts(f) == {"svc_xprt_do_enqueue": 3}
