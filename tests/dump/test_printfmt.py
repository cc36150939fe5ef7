"""The kernel's print formats, evaluated as libtraceevent evaluates them
(`cratrace.dump.printfmt`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cratrace.dump.printfmt import PrintFmtError, compile_print_fmt, pointer_fields, raw_fields

FORMATS = Path(__file__).resolve().parents[2] / "cratrace" / "synth" / "formats"


def print_fmt(system: str, event: str) -> str:
    text = (FORMATS / system / f"{event}.format").read_text()
    return next(line for line in text.splitlines() if line.startswith("print fmt:"))[len("print fmt:"):].strip()


@pytest.mark.parametrize("path", sorted(FORMATS.glob("*/*.format")), ids=lambda p: p.stem)
def test_every_bundled_kernel_format_compiles(path):
    compile_print_fmt(print_fmt(path.parent.name, path.stem))


def test_kvm_exit_names_the_reason_and_its_flags():
    render = compile_print_fmt(print_fmt("kvm", "kvm_exit"))
    row = dict(vcpu_id=1, isa=1, exit_reason=40, guest_rip=0xFFFF1234, info1=0, info2=0, intr_info=0, error_code=0, requests=0)
    assert render(row).startswith("vcpu 1 reason PAUSE_INSTRUCTION rip 0xffff1234 info1 0x0000000000000000")
    assert "reason INVALID_STATE FAILED_VMENTRY rip" in render(row | {"exit_reason": 0x80000021})
    # no name for the value: libtraceevent prints it in hex
    assert "reason 0x3e7 rip" in render(row | {"exit_reason": 999})
    # AMD's table when isa is not VMX
    assert "reason npf rip" in render(row | {"isa": 2, "exit_reason": 0x400})


def test_sched_switch_state_letters_and_preemption_mark():
    render = compile_print_fmt(print_fmt("sched", "sched_switch"))
    row = dict(prev_comm="a", prev_pid=1, prev_prio=120, prev_state=0, next_comm="b", next_pid=2, next_prio=100)
    assert render(row) == "prev_comm=a prev_pid=1 prev_prio=120 prev_state=R ==> next_comm=b next_pid=2 next_prio=100"
    assert "prev_state=S|D ==>" in render(row | {"prev_state": 3})
    assert "prev_state=R+ ==>" in render(row | {"prev_state": 0x100})


@pytest.mark.parametrize(
    "fmt, row, text",
    [
        ('"%u %d %x", REC->a, REC->a, REC->a', {"a": -1}, "4294967295 -1 ffffffff"),
        ('"%lu %lld %lx", REC->a, REC->a, REC->a', {"a": -1}, "18446744073709551615 -1 ffffffffffffffff"),
        ('"%hhu %hd", REC->a, REC->a', {"a": 0x1FF}, "255 511"),
        ('"%03d|%-4s|%5.2s|%c", REC->a, REC->s, REC->s, REC->c', {"a": 7, "s": "xyz", "c": 65}, "007|xyz |   xy|A"),
        ('"%s", __get_str(name)', {"name": "eth0"}, "eth0"),
        ('"%d", (int)REC->a >> 1', {"a": 0xFFFFFFFE}, "-1"),
        ('"%d,%d", ((unsigned int) ((REC->dev) >> 20)), ((unsigned int) ((REC->dev) & ((1U << 20) - 1)))', {"dev": (8 << 20) | 3}, "8,3"),
        ('"%s", __print_flags(REC->f, "|", { 1, "A" }, { 4, "C" })', {"f": 1 | 4 | 8}, "A|C|0x8"),
        ('"%s", REC->ok ? "yes" : "no"', {"ok": 0}, "no"),
        ('"%s", __print_hex(REC->b, 3)', {"b": [1, 0xAB, 255, 9]}, "01 ab ff"),
        ('"%s", __print_array(__get_dynamic_array(v), 2, 4)', {"v": [5, 6, 7]}, "{0x5,0x6}"),
        ('"%%d %d", REC->a', {"a": 3}, "%d 3"),
        ('"%pK", REC->p', {"p": 0}, "(nil)"),
    ],
)
def test_c_semantics(fmt, row, text):
    assert compile_print_fmt(fmt)(row) == text


def test_symbols_print_by_name_and_offset():
    symbols = {0xFFFF0010: "tracing_mark_write", 0xFFFF0020: "do_work+0x10"}
    render = compile_print_fmt('"%ps %pS %ps", REC->a, REC->b, REC->c', symbols=symbols)
    assert render({"a": 0xFFFF0010, "b": 0xFFFF0020, "c": 0xFFFF0020}) == "tracing_mark_write do_work+0x10 do_work"
    assert compile_print_fmt('"%ps", REC->a')({"a": 0x1234}) == "0x1234"
    assert pointer_fields(print_fmt("ftrace", "print")) == ["ip"]
    assert pointer_fields(print_fmt("sched", "sched_switch")) == []


def test_what_cannot_be_evaluated_is_refused_at_compile_time():
    for fmt in ('"%d", ({ int x = 1; x; })', '"%d", sizeof(int)', '"%d", some_kernel_helper(REC->a)', "REC->a"):
        with pytest.raises(PrintFmtError):
            compile_print_fmt(fmt)


def test_raw_fields_are_trace_cmd_report_R_pairs():
    assert raw_fields({"a": 1, "b": b"\x01\xff", "c": [1, 2]}, ["a", "b", "c"]) == "a=1 b=01ff c=[1,2]"


def test_distinct_pointer_values_are_read_as_64_bit_patterns(tmp_path):
    # what formats.json resolves to symbols: each pointer field's distinct
    # values, a signed column's sign-extended (a `long` address), nulls
    # left out; the column by its name or as field_<name>
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cratrace import _native

    signed = [-1, 5, None, 5, -(2**63), 2**63 - 1] * 5000
    unsigned = [2**64 - 1, 0, 2**63, 0]
    pq.write_table(pa.table({"field_ip": pa.array(signed, pa.int64())}), tmp_path / "a.parquet", row_group_size=4096)
    pq.write_table(pa.table({"ip": pa.array(unsigned, pa.uint64()), "small": pa.array([-2, 3, 3, -2], pa.int32())}), tmp_path / "b.parquet")
    assert _native.parquet_distinct_u64(str(tmp_path / "a.parquet"), ["ip", "field_ip"]) == sorted({2**64 - 1, 5, 2**63, 2**63 - 1})
    assert _native.parquet_distinct_u64(str(tmp_path / "b.parquet"), ["ip", "field_ip"]) == [0, 2**63, 2**64 - 1]
    assert _native.parquet_distinct_u64(str(tmp_path / "b.parquet"), ["small"]) == [3, 2**64 - 2]
    assert _native.parquet_distinct_u64(str(tmp_path / "b.parquet"), ["nothing"]) is None
