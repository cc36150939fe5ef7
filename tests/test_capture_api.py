"""cratrace.open on directories that are not (valid) captures."""

from __future__ import annotations

import json

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
