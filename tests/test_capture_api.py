"""cratrace.open on directories that are not (valid) captures, and the
commands on captures whose tables went missing or were damaged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import cratrace
from cratrace.errors import CaptureError


def test_open_rejects_a_directory_without_capture_json(tmp_path):
    with pytest.raises(CaptureError, match="no capture.json"):
        cratrace.open(tmp_path)


def test_open_rejects_unknown_schema_version(tmp_path):
    (tmp_path / "capture.json").write_text(json.dumps({"schema_version": 999}))
    with pytest.raises(CaptureError, match="schema_version 999"):
        cratrace.open(tmp_path)


def test_open_rejects_garbage_metadata(tmp_path):
    (tmp_path / "capture.json").write_text("{not json")
    with pytest.raises(CaptureError, match="unreadable capture.json"):
        cratrace.open(tmp_path)


def test_unknown_table_names_what_exists(tmp_path):
    (tmp_path / "capture.json").write_text(json.dumps({"schema_version": 1}))
    cap = cratrace.open(tmp_path)
    with pytest.raises(CaptureError, match="no table 'sched_switch'"):
        cap.table("sched_switch")


RAW = Path(__file__).resolve().parents[1] / "sample-traces" / "lab-kvm-sched"


@pytest.fixture(scope="module")
def modelled(tmp_path_factory):
    """The shipped raw lab capture, imported and modelled."""
    from cratrace.importer import import_capture
    from cratrace.model import build_model

    cap = import_capture([RAW], tmp_path_factory.mktemp("cap") / "cap")
    build_model(cap)
    return cap.path


def _copy(src, dest):
    shutil.copytree(src, dest)
    return dest


def test_a_capture_whose_event_file_went_missing_is_refused_naming_it(modelled, tmp_path):
    cap = _copy(modelled, tmp_path / "cap")
    (cap / "events" / "sched_switch.parquet").unlink()
    with pytest.raises(CaptureError, match=r"events/sched_switch.parquet: missing \(capture.json counts \d+ rows\)"):
        cratrace.open(cap)


def test_replay_and_report_name_a_damaged_or_missing_model_table(modelled, tmp_path):
    from tests.helpers import cratrace as run_cli

    damaged = _copy(modelled, tmp_path / "damaged")
    path = damaged / "model" / "vcpu_states.parquet"
    path.write_bytes(path.read_bytes()[:100])
    missing = _copy(modelled, tmp_path / "missing")
    (missing / "model" / "threads.parquet").unlink()
    for cap, says in ((damaged, "damaged table: " + str(path)), (missing, "model tables missing (threads)")):
        for args in (("replay", cap, "-o", tmp_path / "out"), ("report", cap, "-o", tmp_path / "r.html")):
            p = run_cli(*args)
            assert p.returncode == 2 and says in p.stderr and "internal error" not in p.stderr, (args, p.stderr)


def test_a_model_built_before_a_column_was_declared_reads_with_it_as_nulls(tmp_path):
    """threads.vm_evidence came on 2026-11-27: a model built before it
    reads (and replays) with the column null, in the declared order."""
    import polars as pl

    from cratrace.tables import MODEL_TABLES
    from tests.helpers import cratrace as run_cli

    cap = tmp_path / "cap"
    run_cli("import", RAW, "-o", cap, "-q", check=True)
    run_cli("model", cap, "-q", check=True)
    th = cap / "model" / "threads.parquet"
    pl.read_parquet(th).drop("vm_evidence").write_parquet(th)
    got = cratrace.open(cap).model["threads"].collect()
    assert got.columns == MODEL_TABLES["threads"].column_names and got["vm_evidence"].null_count() == got.height
    r = run_cli("replay", cap, "-o", tmp_path / "rep", "-p", "fair")
    assert r.returncode in (0, 1) and "internal error" not in r.stderr, r.stderr
