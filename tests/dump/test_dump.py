"""`cratrace dump` against `trace-cmd report`: the same lines for the same
trace, read from the capture alone (issue 44)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cratrace.dump import dump_lines
from cratrace.dump.merge import merged
from cratrace.importer import import_capture
from tests.helpers import cratrace

needs_trace_cmd = pytest.mark.skipif(shutil.which("trace-cmd") is None, reason="trace-cmd is not installed")

#: events trace-cmd prints through its kvm plugin, which the dump does not
#: imitate (it prints their kernel format)
KVM_PLUGIN = re.compile(r"^kvm_(exit|entry|nested_\w+|emulate_insn|mmu_\w+)$")
_EVENT = re.compile(r"^.{16}-\S+\s+\[\d+\]\s+\d+\.\d+: (\S+):")


def report(trace: Path) -> list[str]:
    """`trace-cmd report`'s event lines (its `cpus=N` line dropped)."""
    out = subprocess.run(["trace-cmd", "report", str(trace)], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines and lines[0].startswith("cpus="), lines[:1]
    return lines[1:]


def comparable(lines: list[str]) -> list[str]:
    """Lines of events the dump prints as trace-cmd does (and the lines
    that continue a multi-line event)."""
    out, keep = [], True
    for line in lines:
        m = _EVENT.match(line)
        if m:
            keep = not KVM_PLUGIN.match(m.group(1))
        if keep:
            out.append(line)
    return out


def of_events(lines: list[str], names: set[str]) -> list[str]:
    return [line for line in lines if (m := _EVENT.match(line)) and m.group(1) in names]


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> tuple[Path, Path]:
    """A generated KVM host's trace.dat and its capture."""
    d = tmp_path_factory.mktemp("dump")
    cratrace("synth", "kvm-heavy-spin", "--raw", "-o", d / "raw", "--set", "duration_ms=100", "-q", check=True)
    cratrace("import", d / "raw", "-o", d / "cap", "-q", check=True)
    return d / "raw" / "trace.dat", d / "cap"


@needs_trace_cmd
@pytest.mark.parametrize("name", ["lisa_sched_load.dat", "lisa_sched_load.v7zstd.dat", "trappy_raw.dat", "trappy_raw.v7.dat", "trappy_idle.dat"])
def test_fixture_dump_is_trace_cmd_report(fixtures_dir, tmp_path, name):
    """Every line of the real traces: sched_switch through the plugin's
    layout, print with tracing_mark_write named from the trace's kallsyms,
    bprint rendered (across lines), the rest through their print formats;
    the v7 copies (zstd-compressed kallsyms section) as their v6 originals."""
    trace = fixtures_dir / name
    import_capture([trace], tmp_path / "cap")
    ours = "\n".join(dump_lines(tmp_path / "cap")).splitlines()
    theirs = report(trace)
    for event in ("sched_switch", "sched_wakeup", "print"):
        assert of_events(ours, {event}) == of_events(theirs, {event}), event
    assert comparable(ours) == comparable(theirs)


@needs_trace_cmd
def test_fixture_print_lines_name_their_function(fixtures_dir, tmp_path):
    import_capture([fixtures_dir / "lisa_sched_load.dat"], tmp_path / "cap")
    prints = list(dump_lines(tmp_path / "cap", ["print"]))
    assert len(prints) == 6 and all("print:                tracing_mark_write: cpu_frequency_devlib:" in line for line in prints)
    formats = json.loads((tmp_path / "cap" / "formats.json").read_text())
    assert [name.split("+")[0] for name in formats["symbols"].values()] == ["tracing_mark_write"]
    assert formats["events"]["sched_switch"]["system"] == "sched"


@needs_trace_cmd
def test_generated_trace_dump_is_trace_cmd_report(generated):
    trace, cap = generated
    ours = cratrace("dump", cap, check=True).stdout.splitlines()
    theirs = report(trace)
    assert len(ours) == len(theirs)
    for event in ("sched_switch", "sched_wakeup", "print"):
        got = of_events(ours, {event})
        assert got and got == of_events(theirs, {event}), event
    assert comparable(ours) == comparable(theirs)


@needs_trace_cmd
def test_edges_trace_cmd_report_lays_out(tmp_path):
    """Times before the first second, names longer than the padding, a
    wakeup that names a thread for later lines, sched_wakeup_new, a
    trailing newline dropped, one kept inside the text."""
    from cratrace.synth.tracedat_writer import Event, write_tracedat

    events = [
        Event(ts=500_000, cpu=0, name="sched_wakeup", pid=5, fields=dict(comm="foo", pid=7, prio=120, target_cpu=1)),
        Event(ts=999_999_400, cpu=0, name="sched_switch", pid=5, fields=dict(prev_comm="foo", prev_pid=5, prev_prio=120, prev_state=2, next_comm="bar", next_pid=7, next_prio=100)),
        Event(ts=999_999_600, cpu=1, name="kvm_async_pf_not_present", pid=7, fields=dict(token=1, gva=0x1000)),
        Event(ts=1_000_000_000, cpu=1, name="print", pid=7, fields=dict(ip=0xFFFFFFFF81A2B3C0, buf="two\nlines\n")),
        Event(ts=1_000_000_700, cpu=1, name="sched_wakeup_new", pid=7, fields=dict(comm="baz", pid=9, prio=120, target_cpu=0)),
        Event(ts=12_345_678_901, cpu=0, name="sched_switch", pid=9, fields=dict(prev_comm="baz", prev_pid=9, prev_prio=120, prev_state=64, next_comm="swapper/0", next_pid=0, next_prio=120)),
    ]
    write_tracedat(tmp_path / "t.dat", events, comms={5: "foo"})
    import_capture([tmp_path / "t.dat"], tmp_path / "cap")
    assert "\n".join(dump_lines(tmp_path / "cap")).splitlines() == report(tmp_path / "t.dat")


@needs_trace_cmd
def test_buffer_instances_lead_their_lines(tmp_path):
    from cratrace.synth.tracedat_writer import Event, write_tracedat

    events = [
        Event(ts=1_500_000_000, cpu=0, name="sched_wakeup", pid=5, fields=dict(comm="foo", pid=7, prio=120, target_cpu=1)),
        Event(ts=1_600_000_000, cpu=1, name="sched_wakeup", pid=5, instance="vmbuf", fields=dict(comm="bar", pid=8, prio=120, target_cpu=1)),
        Event(ts=1_700_000_000, cpu=0, name="print", pid=7, fields=dict(ip=0xFFFFFFFF81A2B3C0, buf="hello\n")),
    ]
    write_tracedat(tmp_path / "t.dat", events, comms={5: "foo"})
    import_capture([tmp_path / "t.dat"], tmp_path / "cap")
    assert list(dump_lines(tmp_path / "cap")) == report(tmp_path / "t.dat")


def test_filters_select_the_lines_of_the_whole_dump(generated):
    _, cap = generated
    everything = list(dump_lines(cap))

    def keep(line, events=None, cpu=None, lo=None, hi=None):
        m = re.match(r"^.{16}-\S+\s+\[(\d+)\]\s+(\d+\.\d+): (\S+):", line)
        t = float(m.group(2))
        return (events is None or m.group(3) in events) and (cpu is None or int(m.group(1)) == cpu) and (lo is None or t >= lo) and (hi is None or t < hi)

    got = cratrace("dump", cap, "-e", "sched_switch,print", "-e", "kvm_hypercall", "--cpu", "1", "--from", "1.02", "--to", "1060ms", check=True).stdout.splitlines()
    want = [line for line in everything if keep(line, {"sched_switch", "print", "kvm_hypercall"}, 1, 1.02, 1.06)]
    assert got and got == want
    # a system name and a glob, as trace-cmd record -e takes them
    assert cratrace("dump", cap, "-e", "sched", check=True).stdout == cratrace("dump", cap, "-e", "sched_*", check=True).stdout


def test_merge_is_the_same_in_small_batches(generated):
    """The stream holds a batch per table: tiny batches give the same order."""
    _, cap = generated
    tables = {p.stem: p for p in (cap / "events").glob("*.parquet")}
    big = [(r.table, r["ts"], r["cpu"]) for r in merged(tables)]
    small = [(r.table, r["ts"], r["cpu"]) for r in merged(tables, batch_rows=7)]
    assert big == small and len(big) == sum(1 for _ in merged(tables))


def test_json_lines_carry_the_printed_text_and_the_fields(generated):
    _, cap = generated
    out = cratrace("dump", cap, "-e", "sched_wakeup", "--json", check=True).stdout.splitlines()
    first = json.loads(out[0])
    assert set(first) == {"ts", "cpu", "pid", "comm", "event", "info", "fields"}
    assert first["event"] == "sched_wakeup" and first["info"].endswith(f"CPU:{first['fields']['target_cpu']:03d}")
    assert "pid" in first["fields"]  # the event's own pid, not common_pid


def test_raw_prints_name_value_pairs(generated):
    _, cap = generated
    line = cratrace("dump", cap, "-e", "sched_wakeup", "--raw", check=True).stdout.splitlines()[0]
    assert re.search(r"sched_wakeup: +comm=\S.* pid=\d+ prio=\d+ target_cpu=\d+$", line), line


def test_a_terminal_gets_the_pager_and_a_pipe_plain_text(generated, tmp_path, monkeypatch):
    _, cap = generated
    from cratrace.cli import dump as cli_dump

    paged = tmp_path / "paged.txt"
    monkeypatch.setenv("CRATRACE_PAGER", f"cat > {paged}")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    cli_dump.write_paged(iter(["a", "b"]))
    assert paged.read_text() == "a\nb\n"


def test_a_reader_that_stops_early_ends_it_quietly(generated):
    _, cap = generated
    p = subprocess.run(f"{sys.executable} -m cratrace dump {cap} | head -n 3", shell=True, capture_output=True, text=True)
    assert len(p.stdout.splitlines()) == 3 and p.stderr == ""


@pytest.mark.parametrize(
    "args, message",
    [
        (["-e", "no_such_event"], "-e no_such_event: no such event"),
        (["--from", "soon"], "--from 'soon': expected a time"),
        (["--from", "2", "--to", "1"], "--to 1 is not after --from 2"),
        (["--cpu", "x"], "--cpu x: expected CPU numbers"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(generated, args, message):
    _, cap = generated
    p = cratrace("dump", cap, *args)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and message in p.stderr, p.stderr


def test_not_a_capture(tmp_path):
    p = cratrace("dump", tmp_path)
    assert p.returncode == 2 and "not a capture" in p.stderr and "Traceback" not in p.stderr


def test_a_capture_without_formats_prints_raw_fields(generated, tmp_path):
    """A capture imported before formats were kept: fields as name=value."""
    _, cap = generated
    old = tmp_path / "old"
    shutil.copytree(cap, old)
    (old / "formats.json").unlink()
    line = next(dump_lines(old, ["kvm_hypercall"]))
    assert re.search(r"kvm_hypercall: +nr=", line), line


def test_a_pager_that_is_not_installed_prints_plainly(monkeypatch, capsys):
    from cratrace.cli import dump as cli_dump

    monkeypatch.setenv("CRATRACE_PAGER", "no-such-pager-here")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    cli_dump.write_paged(iter(["a", "b"]))
    assert capsys.readouterr().out == "a\nb\n"
