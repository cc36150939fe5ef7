"""`cratrace export perfetto`: the trace read back with the `perfetto`
package's protos holds what the model tables hold, per track (issue 44).

Perfetto's TraceProcessor needs its native shell, which the package
downloads on first use; the protos need nothing, so the file is checked
through them.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pytest

from tests.helpers import cratrace

pytest.importorskip("perfetto")

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb  # noqa: E402


@dataclass
class Parsed:
    """A .pftrace as tracks (by their path of names, run first) with their
    slices (name, start, end), instants (name, ts, args) and counter values."""

    slices: dict[tuple, list] = field(default_factory=lambda: defaultdict(list))
    instants: dict[tuple, list] = field(default_factory=lambda: defaultdict(list))
    counters: dict[tuple, list] = field(default_factory=lambda: defaultdict(list))
    units: dict[tuple, str] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)

    def runs(self) -> list[str]:
        return list(self.pids)


def read_pftrace(path: Path) -> Parsed:
    trace = pb.Trace()
    trace.ParseFromString(path.read_bytes())
    packets = list(trace.packet)
    assert packets[0].sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    names: dict[int, str] = {}
    tracks: dict[int, tuple[int | None, str]] = {}
    out = Parsed()
    open_slices: dict[int, tuple[str, int]] = {}

    def where(uuid: int) -> tuple:
        parts = []
        while uuid in tracks:
            parent, name = tracks[uuid]
            parts.append(name)
            uuid = parent
        return tuple(reversed(parts))

    for p in packets:
        assert p.trusted_packet_sequence_id == 1
        for n in p.interned_data.event_names:
            assert n.iid not in names, "an iid interned twice"
            names[n.iid] = n.name
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            if d.HasField("process"):
                tracks[d.uuid] = (None, d.process.process_name)
                out.pids[d.process.process_name] = d.process.pid
            else:
                assert d.parent_uuid in tracks, "a track before its parent"
                tracks[d.uuid] = (d.parent_uuid, d.name)
                if d.HasField("counter"):
                    out.units[where(d.uuid)] = d.counter.unit_name
            continue
        e = p.track_event
        assert e.track_uuid in tracks, "an event on a track not yet described"
        key = where(e.track_uuid)
        if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            assert e.track_uuid not in open_slices, f"nested slices on {key}"
            open_slices[e.track_uuid] = (names[e.name_iid], p.timestamp)
        elif e.type == pb.TrackEvent.TYPE_SLICE_END:
            name, start = open_slices.pop(e.track_uuid)
            out.slices[key].append((name, start, p.timestamp))
        elif e.type == pb.TrackEvent.TYPE_INSTANT:
            out.instants[key].append((names[e.name_iid], p.timestamp))
        elif e.type == pb.TrackEvent.TYPE_COUNTER:
            out.counters[key].append((p.timestamp, e.double_counter_value if e.HasField("double_counter_value") else e.counter_value))
    assert not open_slices
    return out


def make_runs(d: Path, scenario: str) -> tuple[Path, Path, Path]:
    cratrace("synth", scenario, "--raw", "-o", d / "raw", "--set", "duration_ms=100", "-q", check=True)
    cratrace("import", d / "raw", "-o", d / "cap", "-q", check=True)
    cratrace("model", d / "cap", "-q", check=True)
    cratrace("replay", d / "cap", "-p", "fair", "-o", d / "out", "-q", check=True)
    cratrace("export", "perfetto", d / "cap", "--replays", d / "out", "-o", d / "cap.pftrace", "-q", check=True)
    return d / "cap", d / "out", d / "cap.pftrace"


@pytest.fixture(scope="module")
def spin(tmp_path_factory):
    cap, out, trace = make_runs(tmp_path_factory.mktemp("pf-spin"), "kvm-heavy-spin")
    return cap, out, read_pftrace(trace)


@pytest.fixture(scope="module")
def thermal(tmp_path_factory):
    cap, out, trace = make_runs(tmp_path_factory.mktemp("pf-thermal"), "thermal")
    return cap, out, read_pftrace(trace)


def model_dirs(cap: Path, out: Path) -> dict[str, Path]:
    return {"recorded": cap / "model", **{f"replay: {d.name}": d / "model" for d in sorted(out.iterdir())}}


def test_each_run_is_a_process_group_of_its_own(spin):
    _, _, t = spin
    assert t.runs() == ["recorded", "replay: fair"]
    assert len(set(t.pids.values())) == 2


def test_cpu_tracks_hold_cpu_slices(spin):
    cap, out, t = spin
    for run, model in model_dirs(cap, out).items():
        sl = pl.read_parquet(model / "cpu_slices.parquet").filter((pl.col("tid") != 0) & (pl.col("end") > pl.col("start")))
        comm = dict(pl.read_parquet(model / "threads.parquet").select("tid", "comm").iter_rows())
        want = {cpu: (g.height, int(g["dur"].sum())) for (cpu,), g in sl.group_by("cpu")}
        got = {int(k[1].split()[1]): (len(v), sum(e - s for _, s, e in v)) for k, v in t.slices.items() if k[0] == run and len(k) == 2 and k[1].startswith("CPU ")}
        assert got == want, run
        # each slice is named by its thread
        named = sorted((int(k[1].split()[1]), s, e, n) for k, v in t.slices.items() if k[0] == run and len(k) == 2 for n, s, e in v)
        assert named == sorted((cpu, s, e, comm.get(tid) or f"tid {tid}") for cpu, tid, s, e in sl.select("cpu", "tid", "start", "end").iter_rows())


def test_vcpu_tracks_hold_vcpu_states(spin):
    cap, out, t = spin
    for run, model in model_dirs(cap, out).items():
        st = pl.read_parquet(model / "vcpu_states.parquet").filter(pl.col("end") > pl.col("start"))
        want = {(vm, vcpu, state): (g.height, int(g["dur"].sum())) for (vm, vcpu, state), g in st.group_by("vm", "vcpu", "state")}
        got: dict = {}
        for key, slices in t.slices.items():
            if key[0] != run or len(key) != 3 or not key[2].startswith("vCPU "):
                continue
            vm, vcpu = key[1].removeprefix("VM "), int(key[2].split()[1])
            for name, s, e in slices:
                n, total = got.get((vm, vcpu, name), (0, 0))
                got[(vm, vcpu, name)] = (n + 1, total + e - s)
        assert got == want, run
        assert {"guest", "spinning", "preempted"} <= {k[2] for k in got}


def test_markers_are_instants_and_throughput_counts_them(spin):
    cap, out, t = spin
    for run, model in model_dirs(cap, out).items():
        mk = pl.read_parquet(model / "markers.parquet")
        want = {(vm, name): n for vm, name, n in mk.group_by("vm", "name").len().iter_rows()}
        got: dict = defaultdict(int)
        for key, items in t.instants.items():
            if key[0] == run and key[-1] == "markers":
                vm = key[1].removeprefix("VM ") if len(key) == 3 else None
                for name, _ in items:
                    got[(vm, name)] += 1
        assert dict(got) == want, run
        txn = dict(mk.filter(pl.col("name") == "txn_end").group_by("vm").len().iter_rows())
        assert txn, "the scenario writes transaction markers"
        for vm, n in txn.items():
            values = t.counters[(run, f"VM {vm}", "throughput")]
            assert sum(v for _, v in values) == n
            # one value per 100 ms bin, on the bins' edges
            assert all(ts % 100_000_000 == 0 for ts, _ in values)
        assert sum(v for _, v in t.counters[(run, "throughput")]) == sum(txn.values())
        assert t.units[(run, "throughput")] == "txn_end/100 ms"


def test_frequency_and_temperature_counters(thermal):
    cap, out, t = thermal
    for run, model in model_dirs(cap, out).items():
        freq = pl.read_parquet(model / "power.parquet").filter(pl.col("kind") == "freq")
        assert freq.height
        for (cpu,), g in freq.group_by("cpu"):
            assert t.counters[(run, f"CPU {cpu} freq (kHz)")] == [(s, int(v)) for s, v in g.sort("start").select("start", "value").iter_rows()]
    temp = pl.read_parquet(cap / "events" / "thermal_temperature.parquet")
    for (zone,), g in temp.group_by("thermal_zone"):
        assert t.counters[("recorded", f"temp {zone} (°C)")] == [(ts, v / 1000) for ts, v in g.select("ts", "temp").iter_rows()]
    assert not any(k[0] != "recorded" and k[1].startswith("temp ") for k in t.counters)


def test_batches_concatenate_to_the_same_file(spin, tmp_path, monkeypatch):
    """Written a few packets at a time, the file is byte for byte the one
    written in large batches: memory does not grow with the trace."""
    from cratrace.export import perfetto

    cap, out, _ = spin
    perfetto.export_perfetto(cap, tmp_path / "big.pftrace", replays=out)
    monkeypatch.setattr(perfetto, "BATCH_PACKETS", 10)
    monkeypatch.setattr(perfetto, "BATCH_ROWS", 7)
    perfetto.export_perfetto(cap, tmp_path / "small.pftrace", replays=out)
    assert (tmp_path / "small.pftrace").read_bytes() == (tmp_path / "big.pftrace").read_bytes()


def test_json_summary_and_refusals(spin, tmp_path):
    cap, out, _ = spin
    p = cratrace("export", "perfetto", cap, "-o", tmp_path / "a.pftrace", "--json", check=True)
    s = json.loads(p.stdout)
    assert s["bytes"] == (tmp_path / "a.pftrace").stat().st_size and [r["name"] for r in s["runs"]] == ["recorded"]
    again = cratrace("export", "perfetto", cap, "-o", tmp_path / "a.pftrace")
    assert again.returncode == 2 and "already exists; pass --force" in again.stderr and again.stderr.count("\n") == 1
    (tmp_path / "nomodel").mkdir()
    bare = tmp_path / "bare"
    cratrace("import", cap.parent / "raw", "-o", bare, "-q", check=True)
    p = cratrace("export", "perfetto", bare, "-o", tmp_path / "b.pftrace")
    assert p.returncode == 2 and "run `cratrace model" in p.stderr and not (tmp_path / "b.pftrace").exists()
    p = cratrace("export", "perfetto", cap, "--replays", tmp_path / "nomodel", "-o", tmp_path / "c.pftrace")
    assert p.returncode == 2 and "holds no replay" in p.stderr
    p = cratrace("export", "perfetto", cap, "--bin-ms", "0", "-o", tmp_path / "d.pftrace")
    assert p.returncode == 2 and "--bin-ms 0" in p.stderr


def test_help_says_where_to_open_it():
    p = cratrace("export", "perfetto", "--help", check=True)
    assert "ui.perfetto.dev" in p.stdout
