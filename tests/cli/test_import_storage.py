"""What `cratrace import` writes (codecs, encodings), the manifest
checksum it enforces, and what it loads at start-up: on the raw lab
capture the project ships, so these run without ../shared."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.helpers import cratrace

RAW = Path(__file__).resolve().parents[2] / "sample-traces" / "lab-kvm-sched"


def _codecs_and_encodings(path: Path) -> dict[str, tuple[set[str], set[str]]]:
    md = pq.ParquetFile(path).metadata
    out: dict[str, tuple[set[str], set[str]]] = {}
    for rg in range(md.num_row_groups):
        for c in range(md.num_columns):
            col = md.row_group(rg).column(c)
            codecs, encs = out.setdefault(col.path_in_schema, (set(), set()))
            codecs.add(col.compression)
            encs.update(col.encodings)
    return out


# pyarrow names Parquet's LZ4_RAW codec "LZ4" (the framed Hadoop one is "LZ4_HADOOP")
@pytest.mark.parametrize("codec, expected", [(None, "LZ4"), ("zstd", "ZSTD"), ("none", "UNCOMPRESSED")])
def test_compression_option_sets_every_column_chunk_and_ts_is_delta_encoded(tmp_path, codec, expected):
    out = tmp_path / "cap"
    cratrace("import", RAW, "-o", out, "-q", *(["--compression", codec] if codec else []), check=True)
    sw = _codecs_and_encodings(out / "events" / "sched_switch.parquet")
    assert {c for codecs, _ in sw.values() for c in codecs} == {expected}
    assert "DELTA_BINARY_PACKED" in sw["ts"][1] and "DELTA_BINARY_PACKED" in sw["cpu"][1]
    # so do the perf stat counters and the model tables
    pc = _codecs_and_encodings(out / "events" / "perf_counter.parquet")
    assert {c for codecs, _ in pc.values() for c in codecs} == {expected}
    cratrace("model", out, "-q", check=True)
    vs = _codecs_and_encodings(out / "model" / "vcpu_states.parquet")
    assert {c for codecs, _ in vs.values() for c in codecs} == {expected}
    # the markers table is written by the Rust writer, with the same codec
    mk = _codecs_and_encodings(out / "model" / "markers.parquet")
    assert {c for codecs, _ in mk.values() for c in codecs} == {expected}
    assert "DELTA_BINARY_PACKED" in mk["ts"][1] and not ({"RLE_DICTIONARY", "PLAIN_DICTIONARY"} & mk["text"][1])
    assert "RLE_DICTIONARY" in sw["next_comm"][1] or "PLAIN_DICTIONARY" in sw["next_comm"][1]


def test_a_damaged_event_table_fails_the_model_build_in_one_line(tmp_path):
    out = tmp_path / "cap"
    cratrace("import", RAW, "-o", out, "-q", check=True)
    prints = out / "events" / "print.parquet"
    prints.write_bytes(prints.read_bytes()[:300])
    p = cratrace("model", out)
    assert p.returncode == 2
    assert "damaged table" in p.stderr and "print.parquet" in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_model_options_out_of_range_are_usage_errors_and_build_nothing(tmp_path):
    out = tmp_path / "cap"
    cratrace("import", RAW, "-o", out, "-q", check=True)
    for option, value in (("--window-ms", "nan"), ("--window-ms", "0"), ("--spin-gap-us", "-5")):
        p = cratrace("model", out, option, value)
        assert p.returncode == 2 and f"{option} " in p.stderr and "internal error" not in p.stderr, p.stderr
    assert not (out / "model").exists()


def test_unknown_compression_is_a_one_line_usage_error(tmp_path):
    p = cratrace("import", RAW, "-o", tmp_path / "cap", "--compression", "brotli")
    assert p.returncode == 2
    assert "--compression brotli" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "cap").exists()


def test_a_trace_given_twice_is_refused_rather_than_doubled(tmp_path):
    dat = RAW.parent / "kvm-io-billing.dat"
    p = cratrace("import", dat, RAW.parent / ".." / RAW.parent.name / dat.name, "-o", tmp_path / "cap")
    assert p.returncode == 2 and "given twice" in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and not (tmp_path / "cap").exists()


def test_an_output_the_file_system_refuses_is_one_line_naming_the_path(tmp_path):
    (tmp_path / "a-file").write_text("not a directory")
    p = cratrace("import", RAW.parent / "kvm-io-billing.dat", "-o", tmp_path / "a-file" / "cap")
    assert p.returncode == 2 and "internal error" not in p.stderr and "Traceback" not in p.stderr
    assert str(tmp_path / "a-file") in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_a_file_that_differs_from_its_manifest_fails_the_import_and_leaves_nothing(tmp_path):
    raw = tmp_path / "raw"
    shutil.copytree(RAW, raw)
    manifest = json.loads((raw / "manifest.json").read_text())
    trace = next(f for f in manifest["files"] if f["path"].endswith(".dat"))
    assert trace.get("sha256"), "the shipped raw capture records its checksums"
    data = bytearray((raw / trace["path"]).read_bytes())
    data[-1] ^= 0xFF  # the last page's last byte: still readable, no longer the recorded file
    (raw / trace["path"]).write_bytes(bytes(data))
    p = cratrace("import", raw, "-o", tmp_path / "cap")
    assert p.returncode == 2
    assert "checksum differs from the manifest" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "cap").exists() and not list(tmp_path.glob(".cap.importing-*"))


@pytest.mark.parametrize("name, text, says", [
    ("manifest.json", "[]", "not a cratrace raw-capture manifest"),
    ("manifest.json", '{"format": "cratrace-raw", "files": "trace.dat"}', "'files' is not a list of objects"),
    ("host.json", '{"vms": "vm0"}', "vms is str, not a list"),
    ("host.json", '{"vms": [{"name": "vm0", "vcpus": 2}]}', "vms[0] (vm0): vcpus is not a list"),
    ("host.json", '{"tsc_hz": "fast"}', "tsc_hz is 'fast', not a positive number"),
    ("host.json", '{"xen": "dom0"}', "xen is str, not an object"),
    ("host.json", '{"xen": {"cpu_hz": -1}}', "xen.cpu_hz is -1, not a positive number"),
])
def test_a_raw_capture_with_a_misshapen_manifest_or_host_snapshot_is_one_line(tmp_path, name, text, says):
    raw = tmp_path / "raw"
    shutil.copytree(RAW, raw)
    if name == "host.json":
        # the manifest vouches for host.json's bytes: damage both, as an edit would
        manifest = json.loads((raw / "manifest.json").read_text())
        manifest["files"] = [{k: v for k, v in f.items() if k != "sha256"} for f in manifest["files"]]
        (raw / "manifest.json").write_text(json.dumps(manifest))
    (raw / name).write_text(text)
    p = cratrace("import", raw, "-o", tmp_path / "cap")
    assert p.returncode == 2 and says in p.stderr and "internal error" not in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and not (tmp_path / "cap").exists()


def test_importing_a_raw_capture_loads_neither_polars_nor_rich(tmp_path):
    # polars costs a quarter of a second of start-up and Rich a twentieth:
    # reading trace.dat and the perf stat CSV (native readers both) with
    # --quiet needs neither
    code = (
        "import sys\n"
        "from cratrace.cli.main import main\n"
        "try:\n"
        f"    main(['import', {str(RAW)!r}, '-o', {str(tmp_path / 'cap')!r}, '-q'])\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "print('polars' in sys.modules, 'rich' in sys.modules)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert p.stdout.strip() == "False False"
    assert (tmp_path / "cap" / "events" / "sched_switch.parquet").exists()
    assert (tmp_path / "cap" / "events" / "perf_counter.parquet").exists()


def test_info_reads_capture_json_without_loading_polars(tmp_path):
    # `cratrace info` answers from capture.json: polars (a quarter of a
    # second) loads only when a table is asked for
    assert cratrace("import", RAW, "-o", tmp_path / "cap", "-q").returncode == 0
    code = (
        "import sys, json, io, contextlib\n"
        "from cratrace.cli.main import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    try:\n"
        f"        main(['info', {str(tmp_path / 'cap')!r}, '--json'])\n"
        "    except SystemExit as e:\n"
        "        assert not e.code, e.code\n"
        "info = json.loads(out.getvalue())\n"
        "before = 'polars' in sys.modules\n"
        "import cratrace\n"
        "n = cratrace.open(info['capture']).events['sched_switch'].collect().height\n"
        "print(before, info['events']['sched_switch'] == n)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert p.stdout.strip() == "False True"


def test_a_damaged_perf_stat_line_is_a_one_line_error_naming_file_and_line(tmp_path):
    lines = (RAW / "perf-stat.csv").read_text().splitlines(keepends=True)
    data = [i for i, line in enumerate(lines) if ",CPU" in line]
    lines[data[3]] = lines[data[3]].replace(",CPU", ",XPU", 1)
    bad = tmp_path / "perf-stat.csv"
    bad.write_text("".join(lines))
    p = cratrace("import", bad, "-o", tmp_path / "cap")
    assert p.returncode == 2
    err = p.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert str(bad) in err and f"line {data[3] + 1}:" in err and "perf stat -A" in err and "Traceback" not in err
    assert not (tmp_path / "cap").exists()


def test_the_entry_point_sets_up_without_collection_and_runs_the_command_with_it(tmp_path):
    # cratrace.cli.entry keeps the cyclic collector off while typer and the
    # command's modules load, freezes them, and turns it back on: a command
    # that allocates cycles must still have them collected
    code = (
        "import gc, sys\n"
        "import cratrace.cli.main as m\n"
        "from cratrace.cli import entry\n"
        "register = m._register\n"
        "def spy(argv):\n"
        "    print('setup', gc.isenabled())\n"
        "    register(argv)\n"
        "m._register = spy\n"
        "@m.app.command('probe')\n"
        "def probe():\n"
        "    print('run', gc.isenabled(), gc.get_freeze_count() > 1000)\n"
        "sys.argv = ['cratrace', 'probe']\n"
        "entry.main()\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["setup", "False", "run", "True", "True"]
    # and importing the CLI as a library leaves the collector alone
    p = subprocess.run([sys.executable, "-c", "import gc, cratrace.cli.main; print(gc.isenabled())"], capture_output=True, text=True, check=True)
    assert p.stdout.strip() == "True"
