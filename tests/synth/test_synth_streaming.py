"""`cratrace synth` streams its trace (issue #47): each scenario's Builder
hands its events to the native page writer a batch at a time, and the
file is assembled around the spooled pages. These tests pin that the
output did not change: the same bytes as the list-based Python writer
gave before streaming (sha256 of files it wrote at d15d960, uncompressed
so that no zstd version enters the hash), and the same events as the
scenario emits when it keeps them in a list, read back by `trace-cmd
report`.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections import Counter

import pytest

from cratrace.synth.episodes import SpilledEpisodes
from cratrace.synth.generate import resolve_params, synthesize
from cratrace.synth.scenarios import SCENARIOS
from cratrace.synth.scenarios._common import Builder, streaming_to
from cratrace.synth.tracedat_writer import BATCH, Event, TraceDatStream, write_tracedat
from tests.synth.conftest import trace_cmd_report

# sha256 of `synthesize(name, f, seed=1, version=V, compression="none")` at
# d15d960, whose writer encoded payloads and pages in Python from a list
BEFORE = {
    ("kvm-heavy-spin", 6): "c4082a742de7d3ab7f87780bd044f0ab6b53ccb66dce4d1acbd4cf605c4e0b99",
    ("kvm-heavy-spin", 7): "48cb67fb62ed5ff2d0e5f87d2c98195b7e68905341c8d74b8a6939e6b6db59ca",
    ("kvm-io-billing", 6): "5e8a693283d291c9a489e98bba5d8cde996a15fa2c5c168fd28f71326d7322ed",
    ("kvm-io-billing", 7): "22008fc200664a7bc1d47bd8f22c156b0e3348369b16bac9fd0498814261ec58",
    ("kvm-postcopy", 6): "eac05eecf9339d22f1786d40cda8a376005f27a018ec39cfb3647ac1b54ebe97",
    ("kvm-postcopy", 7): "dbfc2fa5e4ef064e03f3ffb1176fbe2078d3b7d706c868dad2a07702a2cbb14c",
    ("hetero", 6): "ab0b152d9bf964670c0ee78663e2335b16e03f12271fceeced2dcc58538e9555",
    ("hetero", 7): "b8a44df2cdf5739e3888bc6b3d2e7c883875c349f767169e220f20cec59a1ea2",
    ("thermal", 6): "374a53987fee440d2bd979325a285d861a294246931e6b8acb427e772f9f06b1",
    ("thermal", 7): "a44ca3501d5420cb3da0b2555ba92514f6d241bb7eecf877eeac0935ef9c36ba",
}

# the same writer, kvm-heavy-spin's events plus a bprint, on a 32-bit
# kernel, with absolute time stamps every 7 records and 5 events lost
# before CPU 1's third page
BEFORE_ODD = "04eb239a0652ad9ef65e342553c0f2ea1b544603d43d0fb4786e39c1e53cffa5"


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _listed(name: str, seed: int, overrides: dict[str, str] | None = None):
    """The scenario run outside `streaming_to`: its events as a list."""
    res = SCENARIOS[name].generate(resolve_params(name, overrides or {}), seed)
    assert isinstance(res.events, list)
    return res


@pytest.mark.parametrize("name,version", sorted(BEFORE))
def test_streamed_synth_gives_the_bytes_the_list_writer_gave(tmp_path, name, version):
    out = tmp_path / "t.dat"
    truth = synthesize(name, out, seed=1, version=version, compression="none")
    assert _sha(out) == BEFORE[(name, version)]
    res = _listed(name, 1)
    assert truth["total_events"] == len(res.events)
    assert truth["event_counts"] == dict(sorted(Counter(e.name for e in res.events).items()))
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".spool")]  # the scratch pages are gone


def test_writer_layouts_give_the_bytes_they_gave(tmp_path):
    res = _listed("kvm-heavy-spin", 1)
    evs = list(res.events)
    evs.append(Event(ts=evs[-1].ts + 5, cpu=1, name="bprint", pid=7, fields={"fmt": "lock %d held %s\n", "args": [3, "x"]}))
    out = write_tracedat(tmp_path / "odd.dat", evs, version=7, compression="none", long_size=4, endian="little",
                         page_size=4096, abs_ts_every=7, lost_events={("", 1): {2: 5}}, **res.writer)
    assert _sha(out) == BEFORE_ODD


def test_streamed_zstd_file_holds_the_events_the_scenario_emitted(tmp_path):
    over = {"duration_ms": "200", "hold_us": "20"}
    out = tmp_path / "spin.dat"
    truth = synthesize("kvm-heavy-spin", out, seed=5, overrides=over)  # v7, zstd
    rep = trace_cmd_report(out)
    assert rep.rc == 0 and not rep.stderr.strip()
    res = _listed("kvm-heavy-spin", 5, over)
    assert len(rep.lines) == truth["total_events"] == len(res.events) > 3 * BATCH  # several batches
    got = sorted((ln.ts, ln.cpu, ln.name, ln.pid) for ln in rep.lines)
    want = sorted((e.ts, e.cpu, e.name, e.pid) for e in res.events)
    assert got == want
    # the markers' text too (spin_begin/spin_end/txn_end carry the truth)
    texts = sorted((ln.ts, ln.rest.split(": ", 1)[-1].strip()) for ln in rep.lines if ln.name == "print")
    assert texts == sorted((e.ts, e.fields["buf"].strip()) for e in res.events if e.name == "print")


def test_a_builder_in_streaming_to_keeps_no_events(tmp_path):
    with TraceDatStream(tmp_path / "b.dat") as stream:
        with streaming_to(stream):
            b = Builder(2)
        assert Builder(2).events == []  # outside the block: a list, as before
        b.thread(10, "a", 10, "host")
        for i in range(BATCH + 10):
            b.emit(i * 100, i % 2, "sched_wakeup", 0, comm="a", pid=10, prio=120, target_cpu=0)
        assert b.events is stream and len(stream) == BATCH + 10
        assert len(stream._batch) == 10  # a full batch went to the native writer
        assert b.counts() == {"sched_wakeup": BATCH + 10}
        stream.finish(cpus=2, comms=b.comms())
    rep = trace_cmd_report(tmp_path / "b.dat")
    assert rep.rc == 0 and rep.count("sched_wakeup") == BATCH + 10


def _peak_rss(tmp_path, duration_ms: int) -> tuple[int, int]:
    """Peak RSS (bytes) of a fresh process synthesizing ``duration_ms`` of
    kvm-heavy-spin, and the events it wrote."""
    code = (
        "import json, resource, sys\n"
        "from cratrace.synth.generate import synthesize\n"
        f"t = synthesize('kvm-heavy-spin', sys.argv[1], seed=3, overrides={{'duration_ms': '{duration_ms}'}})\n"
        "print(json.dumps([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, t['total_events']]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / f"p{duration_ms}.dat")],
                          capture_output=True, text=True, timeout=300, check=True)
    rss, n = json.loads(proc.stdout.strip().splitlines()[-1])
    return rss, n


def test_synth_memory_does_not_hold_the_events(tmp_path):
    """Peak RSS stays flat in the trace's length: neither the events nor
    the truth's spin episodes (~3% of kvm-heavy-spin's events, which
    the native loop writes to disk) are held: under 5 bytes per event
    more for 4x the trace (the list writer took ~700 a event: 348 MB for
    437k events; the episodes kept as dicts ~30: 333 MB for 10 M)."""
    small, n_small = _peak_rss(tmp_path, 300)
    big, n_big = _peak_rss(tmp_path, 1200)
    assert n_big > 3.5 * n_small > 100_000
    assert (big - small) / (n_big - n_small) < 5


# kvm-heavy-spin's tick loop runs in Rust when its events stream into a
# trace; these settings reach every branch (PAUSE exits, halts, kicks,
# several locks, preemption by the slice, idle CPUs after a halt)
NATIVE_CASES = [
    (1, {}),
    (2, {"duration_ms": "60", "locks": "2", "pv_spin_us": "20", "ple_us": "3", "slice_us": "150"}),
    (3, {"duration_ms": "60", "vms": "3", "vcpus": "3", "pcpus": "4", "hold_us": "80", "work_us": "20"}),
    (4, {"duration_ms": "50", "vms": "1", "vcpus": "2", "pcpus": "2", "exit_every_us": "3", "pv_spin_us": "5"}),
]


@pytest.mark.parametrize("seed,over", NATIVE_CASES)
def test_native_spin_loop_gives_the_python_loops_trace_and_truth(tmp_path, monkeypatch, seed, over):
    from cratrace.synth.scenarios import kvm_heavy_spin

    took = []
    real = kvm_heavy_spin._native_loop
    monkeypatch.setattr(kvm_heavy_spin, "_native_loop", lambda *a: took.append(real(*a)) or took[-1])
    truth = synthesize("kvm-heavy-spin", tmp_path / "n.dat", seed=seed, overrides=over, compression="none")
    assert [t is not None for t in took] == [True]
    # the native loop's episodes stay on disk; equal to the Python loop's
    # list, in its order (its flushes every 1024 ticks reorder nothing)
    assert isinstance(truth["spin_episodes"], SpilledEpisodes)
    res = _listed("kvm-heavy-spin", seed, over)  # the Python loop
    listed = write_tracedat(tmp_path / "p.dat", res.events, version=7, compression="none", **res.writer)
    assert _sha(tmp_path / "n.dat") == _sha(listed)
    for key, want in res.truth.items():
        assert truth[key] == want, key
    assert truth["totals"]["spin_episodes"] > 0


def test_truth_file_is_json_dumps_text(tmp_path):
    """The truth is written with its episodes formatted by hand (speed):
    the text must be json.dumps(truth, indent=1) exactly."""
    from cratrace.synth.generate import _dump_json, is_xentrace

    objs = [
        {"a": [{"x": 1, "y": None, "z": True, "w": "é\n\"q\"", "v": False}, {"x": -2}], "b": [], "c": [[1, 2], {"d": 1.5}],
         "e": {"f": [{"g": 1}]}, "h": [{"i": 1}, 2], "j": [{}], "k": "s", "l": 3.25, "m": None},
        [], {}, [1, {"a": 2}], 7,
    ]
    for name, mod in SCENARIOS.items():
        path = tmp_path / (f"{name}.bin" if is_xentrace(mod) else f"{name}.dat")
        objs.append(synthesize(name, path, seed=2))
    for i, obj in enumerate(objs):
        _dump_json(tmp_path / f"{i}.json", obj)
        assert (tmp_path / f"{i}.json").read_text() == json.dumps(obj, indent=1, default=list) + "\n", i


def test_spilled_episodes_read_back_as_the_dicts_written():
    from cratrace.synth.episodes import FIELDS, RECORD

    eps = SpilledEpisodes(["b", "a"])
    rows = [(i % 2, i, 100 + i, 0, 10 * i, 10 * i + 5, 1, i % 3 == 0, i, 0, 1, -1 if i % 4 else 2, 5) for i in range(9000)]
    eps.write(b"".join(RECORD.pack(*r) for r in rows[:5000]))
    eps.write(b"".join(RECORD.pack(*r) for r in rows[5000:]))
    want = [dict(zip(FIELDS, (["b", "a"][r[0]], *r[1:7], bool(r[7]), *r[8:11], None if r[11] < 0 else r[11], r[12]))) for r in rows]
    assert len(eps) == 9000 and list(eps) == want and eps == want and want == eps
    assert eps[0] == want[0] and eps[-1] == want[-1] and eps[4095:4098] == want[4095:4098]
    assert list(want[3]) == list(FIELDS) and type(eps[3]["holder_preempted"]) is bool
    with pytest.raises(IndexError):
        eps[9000]
    with pytest.raises(ValueError, match="whole number"):
        eps.write(b"x" * (RECORD.size + 1))
    assert len(eps) == 9000


@pytest.mark.parametrize("name", sorted(n for n, m in SCENARIOS.items() if getattr(m, "FORMAT", "tracedat") == "tracedat"))
def test_every_scenario_streams_the_bytes_its_list_gives(tmp_path, name):
    """Scenarios added since the hashes above: the streamed file is the one
    write_tracedat makes from the same scenario's list of events."""
    truth = synthesize(name, tmp_path / "s.dat", seed=4, compression="none")
    res = _listed(name, 4)
    listed = write_tracedat(tmp_path / "l.dat", res.events, version=7, compression="none", **res.writer)
    assert _sha(tmp_path / "s.dat") == _sha(listed)
    assert truth["total_events"] == len(res.events)


@pytest.mark.parametrize("seed", range(6))
def test_native_pages_are_the_python_page_builders(tmp_path, seed):
    """The Rust page packer against the Python one it replaced
    (`_build_pages`, kept as the reference): random payload sizes (small,
    and over 112 bytes with a length word), deltas around 2^27 (time
    extends), absolute time stamps, lost events, both byte orders and long
    sizes, padding on or off."""
    import random

    from cratrace.synth.tracedat_writer import _build_pages, _Ctx

    rng = random.Random(seed)
    endian, long_size = rng.choice(["little", "big"]), rng.choice([4, 8])
    page_size, tail_padding, abs_every = rng.choice([256, 512, 4096]), rng.random() < 0.7, rng.choice([0, 0, 5])
    lost = {rng.randrange(4): rng.randrange(1, 50)}
    ts, records = 1_000, []
    for _ in range(rng.randrange(50, 800)):
        ts += rng.choice([0, 1, 40, 1000, (1 << 27) - 1, 1 << 27, 1 << 30])
        records.append((ts, bytes(rng.randrange(256) for _ in range(4 * rng.choice([1, 2, 5, 28, 29, 40])))))
    stream = TraceDatStream(tmp_path / "x.dat", endian=endian, long_size=long_size, page_size=page_size,
                            tail_padding=tail_padding, abs_ts_every=abs_every, lost_events={("", 0): lost})
    with stream:
        for t, payload in records:
            stream.put(t, 0, "print", 0, payload)
        stream.flush()
        [(inst, cpu, path, size, n, *_)] = stream._spool.finish()
        got = open(path, "rb").read()
    ctx = _Ctx("<" if endian == "little" else ">", long_size, {}, {})
    want = _build_pages(ctx, records, page_size, tail_padding, lost, abs_every)
    assert (inst, cpu, n, size) == ("", 0, len(records), len(want))
    assert got == want
