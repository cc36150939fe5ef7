"""The trace.dat writer, judged by `trace-cmd report` (issue #8, #2).

Every variant (v6, v7 × none/zlib/zstd, 32/64-bit kernels, little/big
endian, page sizes) must be read by trace-cmd with exit 0, no stderr, and
give back exactly the events, timestamps and field values the test wrote.
zlib: this machine's trace-cmd is built with zstd only (`trace-cmd list
-c`), so zlib files are checked by decompressing them here and comparing
the ring-buffer pages with the uncompressed file's.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from cratrace.synth.tracedat_writer import Event, WriterError, write_tracedat
from tests.synth.conftest import trace_cmd_has_compression, trace_cmd_report

T0 = 5_000_000_000


def sample_events() -> list[Event]:
    evs = []
    t = T0
    for i in range(700):  # several pages per CPU
        # every 100th gap exceeds 2^27 ns, forcing a time-extend record
        t += 1_234 if i % 100 else (1 << 27) + 12_345
        evs.append(Event(ts=t, cpu=i % 2, name="sched_switch", pid=100 + i % 7, fields=dict(
            prev_comm=f"t{100 + i % 7}", prev_pid=100 + i % 7, prev_prio=120, prev_state=1,
            next_comm="CPU 0/KVM", next_pid=1201, next_prio=110)))
    evs += [
        Event(ts=t + 10, cpu=0, name="print", pid=1201, fields={"ip": 0xFFFFFFFF81000000, "buf": "txn_end vm=a vcpu=0\n"}),
        Event(ts=t + 20, cpu=1, name="print", pid=1201, fields={"ip": 0xFFFFFFFF81000000, "buf": "L" * 200 + "\n"}),
        Event(ts=t + 30, cpu=1, name="bprint", pid=7, fields={"ip": 0xFFFFFFFF81000000, "fmt": "lock %d by %s n=%llu\n", "args": [-3, "holder", 1 << 40]}),
        Event(ts=t + 40, cpu=0, name="net_dev_xmit", pid=7, fields={"skbaddr": 0xFFFF1234, "len": 1514, "rc": 0, "name": "tap3"}),
        Event(ts=t + 50, cpu=1, name="kvm_exit", pid=1201, fields={"exit_reason": 40, "guest_rip": 0x81234567, "isa": 1, "vcpu_id": 3}),
        Event(ts=t + 60, cpu=0, name="kvm_hypercall", pid=1201, fields={"nr": 5, "a0": 0, "a1": 2, "a2": 0, "a3": 0}),
        Event(ts=t + 70, cpu=1, name="cpu_frequency", pid=0, fields={"state": 2_800_000, "cpu_id": 1}),
    ]
    return evs


COMMS = {1201: "CPU 0/KVM", 7: "vhost-1200"}
VARIANTS = [
    (6, "none", 8, "little"), (6, "none", 4, "little"), (6, "none", 8, "big"), (6, "none", 4, "big"),
    (7, "none", 8, "little"), (7, "none", 4, "big"), (7, "zstd", 8, "little"), (7, "zstd", 4, "little"),
    (7, "zstd", 8, "big"), (7, "zstd", 4, "big"), (7, "none", 4, "little"), (7, "none", 8, "big"),
]


def _check_report(path: Path, evs: list[Event], long_size: int) -> None:
    rep = trace_cmd_report(path)
    assert rep.rc == 0, rep.stderr
    assert rep.stderr == ""
    assert len(rep.lines) == len(evs)
    got = sorted((ln.ts, ln.cpu, ln.name) for ln in rep.lines)
    want = sorted((e.ts, e.cpu, e.name) for e in evs)
    assert got == want
    by_name = {ln.name: ln for ln in rep.lines}
    assert "prev_comm=t100" in [ln for ln in rep.lines if ln.name == "sched_switch"][0].rest or \
        "t100:100" in [ln for ln in rep.lines if ln.name == "sched_switch"][0].rest
    prints = [ln.rest for ln in rep.lines if ln.name == "print"]
    assert any(p.endswith("txn_end vm=a vcpu=0") for p in prints)
    assert any(p.endswith("L" * 200) for p in prints)
    assert by_name["bprint"].rest.endswith("lock -3 by holder n=1099511627776")
    assert by_name["bprint"].comm == "vhost-1200" and by_name["bprint"].pid == 7
    assert "dev=tap3" in by_name["net_dev_xmit"].rest and "len=1514" in by_name["net_dev_xmit"].rest
    assert "PAUSE_INSTRUCTION" in by_name["kvm_exit"].rest and "rip 0x81234567" in by_name["kvm_exit"].rest
    assert "nr 0x5 a0 0x0 a1 0x2" in by_name["kvm_hypercall"].rest
    assert "state=2800000 cpu_id=1" in by_name["cpu_frequency"].rest


@pytest.mark.parametrize("version,compression,long_size,endian", VARIANTS)
def test_variants_read_back_exactly(tmp_path, version, compression, long_size, endian):
    evs = sample_events()
    p = write_tracedat(tmp_path / "t.dat", evs, version=version, compression=compression,
                       long_size=long_size, endian=endian, comms=COMMS)
    _check_report(p, evs, long_size)


@pytest.mark.parametrize("page_size", [4096, 8192, 16384])
def test_page_sizes(tmp_path, page_size):
    evs = sample_events()
    p = write_tracedat(tmp_path / "t.dat", evs, version=7, compression="zstd", page_size=page_size, comms=COMMS)
    _check_report(p, evs, 8)


def test_kernel_long_size_is_in_header_page(tmp_path):
    for ls in (4, 8):
        p = write_tracedat(tmp_path / f"t{ls}.dat", sample_events()[:3], version=6, long_size=ls)
        data = p.read_bytes()
        assert f"field: local_t commit;\toffset:8;\tsize:{ls};".encode() in data
        assert f"field: char data;\toffset:{8 + ls};".encode() in data


def test_instances_v6_and_v7(tmp_path):
    evs = sample_events()[:50]
    evs.append(Event(ts=T0 + 10**9, cpu=1, name="sched_wakeup", pid=1201, instance="guestbuf",
                     fields=dict(comm="CPU 0/KVM", pid=1201, prio=120, target_cpu=1)))
    for version, comp in ((6, "none"), (7, "zstd"), (7, "none")):
        p = write_tracedat(tmp_path / f"i{version}{comp}.dat", evs, version=version, compression=comp, comms=COMMS)
        rep = trace_cmd_report(p)
        assert rep.rc == 0 and rep.stderr == ""
        inst = [ln for ln in rep.lines if ln.instance]
        assert [(ln.instance, ln.name, ln.ts, ln.cpu) for ln in inst] == [("guestbuf", "sched_wakeup", T0 + 10**9, 1)]
        assert len(rep.lines) == 51


def test_lost_events_flag(tmp_path):
    evs = [Event(ts=T0 + i * 1000, cpu=0, name="sched_wakeup", pid=5, fields=dict(comm="a", pid=7, prio=120, target_cpu=0))
           for i in range(400)]
    p = write_tracedat(tmp_path / "lost.dat", evs, lost_events={("", 0): {2: 17}})
    rep = trace_cmd_report(p)
    assert rep.rc == 0
    assert "CPU:0 [17 EVENTS DROPPED]" in rep.other
    assert len(rep.lines) == 400


def test_tsc2nsec_and_offset_options(tmp_path):
    evs = sample_events()[:20]
    p = write_tracedat(tmp_path / "o.dat", evs, offset=1_000_000)
    rep = trace_cmd_report(p)
    assert rep.rc == 0 and rep.stderr == ""
    assert sorted(ln.ts for ln in rep.lines) == sorted(e.ts + 1_000_000 for e in evs)
    # TSC2NSEC: mult/shift convert cycles to ns (ns = cycles * mult >> shift); mult=1<<shift halves nothing
    p = write_tracedat(tmp_path / "tsc.dat", evs, tsc2nsec=(1 << 23, 24, 0), trace_clock="x86-tsc")
    rep = trace_cmd_report(p)
    assert rep.rc == 0 and rep.stderr == ""
    assert sorted(ln.ts for ln in rep.lines) == sorted(e.ts // 2 for e in evs)


def test_same_input_same_bytes(tmp_path):
    a = write_tracedat(tmp_path / "a.dat", sample_events(), compression="zstd").read_bytes()
    b = write_tracedat(tmp_path / "b.dat", sample_events(), compression="zstd").read_bytes()
    assert a == b


def _v7_cpu_data(path: Path) -> dict[int, bytes]:
    """Minimal independent v7 walk: header -> options -> BUFFER -> per-CPU pages (decompressed)."""
    d = path.read_bytes()
    assert d[:10] == b"\x17\x08\x44tracing"
    i = 10 + d[10:].index(b"\0") + 1
    e = "<" if d[i] == 0 else ">"
    i += 2 + 4
    algo_end = d.index(b"\0", i)
    algo = d[i:algo_end].decode()
    i = d.index(b"\0", algo_end + 1) + 1
    (opts_at,) = struct.unpack_from(e + "Q", d, i)
    sec_id, flags, _, size = struct.unpack_from(e + "HHIQ", d, opts_at)
    body = d[opts_at + 16 : opts_at + 16 + size]
    if flags & 1:
        clen, ulen = struct.unpack_from(e + "II", body, 0)
        body = zlib.decompress(body[8 : 8 + clen]) if algo == "zlib" else _zstd(body[8 : 8 + clen])
        assert len(body) == ulen
    out = {}
    j = 0
    while j < len(body):
        oid, osz = struct.unpack_from(e + "HI", body, j)
        data = body[j + 6 : j + 6 + osz]
        j += 6 + osz
        if oid == 3:  # BUFFER
            k = 8
            k = data.index(b"\0", k) + 1
            k = data.index(b"\0", k) + 1
            _, ncpu = struct.unpack_from(e + "II", data, k)
            k += 8
            for _ in range(ncpu):
                cpu, off, sz = struct.unpack_from(e + "IQQ", data, k)
                k += 20
                blob = d[off : off + sz]
                if algo == "none":
                    out[cpu] = blob
                else:
                    (nch,) = struct.unpack_from(e + "I", blob, 0)
                    q, pages = 4, b""
                    for _ in range(nch):
                        c, u = struct.unpack_from(e + "II", blob, q)
                        chunk = zlib.decompress(blob[q + 8 : q + 8 + c]) if algo == "zlib" else _zstd(blob[q + 8 : q + 8 + c])
                        assert len(chunk) == u
                        pages += chunk
                        q += 8 + c
                    out[cpu] = pages
        if oid == 0:
            break
    return out


def _zstd(b: bytes) -> bytes:
    import zstandard

    return zstandard.ZstdDecompressor().decompress(b)


@pytest.mark.parametrize("endian", ["little", "big"])
def test_zlib_pages_equal_uncompressed(tmp_path, endian):
    evs = sample_events()
    plain = write_tracedat(tmp_path / "n.dat", evs, compression="none", endian=endian, comms=COMMS)
    z = write_tracedat(tmp_path / "z.dat", evs, compression="zlib", endian=endian, comms=COMMS, chunk_pages=2)
    zs = write_tracedat(tmp_path / "s.dat", evs, compression="zstd", endian=endian, comms=COMMS, chunk_pages=3)
    want = _v7_cpu_data(plain)
    assert set(want) == {0, 1} and all(len(v) % 4096 == 0 and v for v in want.values())
    assert _v7_cpu_data(z) == want
    assert _v7_cpu_data(zs) == want
    if trace_cmd_has_compression("zlib"):
        _check_report(z, evs, 8)


def test_bad_input_is_refused(tmp_path):
    with pytest.raises(WriterError, match="unknown event 'nosuch'"):
        write_tracedat(tmp_path / "x.dat", [Event(ts=1, cpu=0, name="nosuch")])
    with pytest.raises(WriterError, match="version 6 has no compression"):
        write_tracedat(tmp_path / "x.dat", [], version=6, compression="zstd")
    with pytest.raises(WriterError, match="long_size"):
        write_tracedat(tmp_path / "x.dat", [], long_size=2)
    with pytest.raises(WriterError, match="cpus=1"):
        write_tracedat(tmp_path / "x.dat", [Event(ts=1, cpu=3, name="cpu_idle")], cpus=1)
    p = write_tracedat(tmp_path / "keep.dat", [])
    before = p.read_bytes()
    with pytest.raises(WriterError, match="exists"):
        write_tracedat(p, [Event(ts=1, cpu=0, name="cpu_idle")])
    assert p.read_bytes() == before
    assert not [q for q in tmp_path.iterdir() if q.name.startswith(".")]  # no temp files left behind


def test_empty_trace_is_readable(tmp_path):
    p = write_tracedat(tmp_path / "e.dat", [], cpus=2, compression="zstd")
    rep = trace_cmd_report(p)
    assert rep.rc == 0 and rep.stderr == "" and rep.lines == []


@pytest.mark.parametrize("endian", ["little", "big"])
def test_absolute_timestamp_records(tmp_path, endian):
    """Type-31 records carry the time; the data record after them has delta 0.
    If a reader ignored them, every event after one would be off (deltas are 1.23 ms)."""
    evs = [Event(ts=T0 + i * 1_234_567, cpu=0, name="cpu_idle", pid=0, fields=dict(state=i, cpu_id=0)) for i in range(300)]
    p = write_tracedat(tmp_path / "abs.dat", evs, abs_ts_every=7, endian=endian)
    data = p.read_bytes()
    plain = write_tracedat(tmp_path / "plain.dat", evs, endian=endian).read_bytes()
    assert data != plain
    rep = trace_cmd_report(p)
    assert rep.rc == 0 and rep.stderr == ""
    assert [ln.ts for ln in rep.lines] == [e.ts for e in evs]
    assert [ln.rest for ln in rep.lines] == [f"state={i} cpu_id=0" for i in range(300)]


KINDS_FORMAT = """system: cratrace_test
name: synth_kinds
ID: 9001
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:s8 small;\toffset:8;\tsize:1;\tsigned:1;
\tfield:u16 arr[3];\toffset:10;\tsize:6;\tsigned:0;
\tfield:__rel_loc char[] msg;\toffset:16;\tsize:4;\tsigned:0;
\tfield:unsigned long mask[2];\toffset:24;\tsize:16;\tsigned:0;
\tfield:s64 big;\toffset:40;\tsize:8;\tsigned:1;
\tfield:__data_loc char[] name;\toffset:48;\tsize:4;\tsigned:0;

print fmt: "arr=%s msg=%s mask=%s big=%lld name=%s", __print_array(REC->arr, 3, 2), __get_rel_str(msg), __print_array(REC->mask, 2, 8), REC->big, __get_str(name)
"""


@pytest.mark.parametrize("version", [6, 7])
def test_extra_format_with_rel_loc_data_loc_and_arrays(tmp_path, version):
    """A custom format (given as text) with __rel_loc, __data_loc, fixed arrays and a negative s64;
    events may also be plain dicts."""
    ev = dict(ts=T0, cpu=0, name="cratrace_test:synth_kinds", pid=1,
              fields=dict(small=-5, arr=[1, 2, 65535], msg="hello rel", mask=[0xF0, 1 << 63], big=-(1 << 40), name="dl"))
    p = write_tracedat(tmp_path / "k.dat", [ev], formats=[KINDS_FORMAT], version=version)
    rep = trace_cmd_report(p)
    assert rep.rc == 0 and rep.stderr == ""
    (ln,) = rep.lines
    assert ln.name == "synth_kinds"
    assert ln.rest == "arr=1 2 65535 msg=hello rel mask=240 9223372036854775808 big=-1099511627776 name=dl"
    # the raw bytes hold the s8 as two's complement right after the common fields
    raw = p.read_bytes()
    assert b"hello rel\0" in raw and b"dl\0" in raw


@pytest.mark.parametrize("version,compression,split", [(6, "none", False), (7, "none", True), (7, "zstd", True), (7, "zstd", False)])
def test_cpustat_options_and_chained_options_section(tmp_path, version, compression, split):
    evs = [Event(ts=T0 + i * 1000, cpu=i % 2, name="cpu_idle", pid=0, fields=dict(state=1, cpu_id=i % 2)) for i in range(50)]
    p = write_tracedat(tmp_path / "o.dat", evs, version=version, compression=compression, split_options=split,
                       lost_events={("", 1): {0: 4}})
    rep = trace_cmd_report(p, "--stat")
    assert rep.rc == 0 and rep.stderr == ""
    text = "\n".join(rep.other)
    # the CPUSTAT text lives in the chained section when split: trace-cmd followed the DONE offset
    assert "CPU: 0\nentries: 25\n" in text and "CPU: 1\nentries: 25\n" in text
    assert "dropped events: 4" in text
    assert len(trace_cmd_report(p).lines) == 50


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_event = st.tuples(
    st.integers(0, 3),  # cpu
    st.sampled_from([0, 1, 999, 1 << 26, (1 << 27) - 1, 1 << 27, (1 << 27) + 1, 1 << 33]),  # gap to previous
    st.text(alphabet="abcxyz =", min_size=0, max_size=300),  # print payload: small and > 112 bytes
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(evs=st.lists(_event, min_size=1, max_size=120), version=st.sampled_from([6, 7]),
       long_size=st.sampled_from([4, 8]), endian=st.sampled_from(["little", "big"]),
       page_size=st.sampled_from([4096, 8192]))
def test_random_traces_read_back_exactly(tmp_path_factory, evs, version, long_size, endian, page_size):
    """Random CPUs, delta sizes around the 27-bit boundary and payload sizes around
    the 112-byte small-record limit: trace-cmd returns every event with its ts and text."""
    t = T0
    events = []
    for i, (cpu, gap, text) in enumerate(evs):
        t += gap
        events.append(Event(ts=t, cpu=cpu, name="print", pid=1000 + i, fields={"ip": 0xFFFFFFFF81000000, "buf": f"#{i} {text}\n"}))
    p = write_tracedat(tmp_path_factory.mktemp("h") / "r.dat", events, version=version, compression="none" if version == 6 else "zstd",
                       long_size=long_size, endian=endian, page_size=page_size, cpus=4)
    rep = trace_cmd_report(p)
    assert rep.rc == 0 and rep.stderr == ""
    got = sorted((ln.ts, ln.cpu, ln.pid, ln.rest.split(": ", 1)[1].rstrip()) for ln in rep.lines)
    want = sorted((e.ts, e.cpu, e.pid, e.fields["buf"].rstrip()) for e in events)
    assert got == want


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_per_instance_page_size(tmp_path, compression):
    evs = [Event(ts=T0 + i * 1000, cpu=0, name="cpu_idle", pid=0, fields=dict(state=i, cpu_id=0)) for i in range(500)]
    evs += [Event(ts=T0 + i * 1000 + 1, cpu=1, name="cpu_idle", pid=0, instance="big", fields=dict(state=i, cpu_id=1))
            for i in range(500)]
    p = write_tracedat(tmp_path / "ps.dat", evs, compression=compression, instance_page_sizes={"big": 16384})
    rep = trace_cmd_report(p)
    assert rep.rc == 0 and rep.stderr == ""
    inst = [ln for ln in rep.lines if ln.instance == "big"]
    top = [ln for ln in rep.lines if ln.instance == ""]
    assert [ln.rest for ln in inst] == [f"state={i} cpu_id=1" for i in range(500)]
    assert [ln.ts for ln in top] == [T0 + i * 1000 for i in range(500)]
    with pytest.raises(WriterError, match="version 7"):
        write_tracedat(tmp_path / "v6.dat", evs, version=6, instance_page_sizes={"big": 16384})
