"""The documentation site builds with `mkdocs build --strict` (issue 44):
every page the nav names exists, every generated page renders, every API
object the reference names resolves."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mkdocs", reason="mkdocs is not installed (the `docs` or `test` extra)")
pytest.importorskip("material", reason="mkdocs-material is not installed (the `docs` or `test` extra)")
pytest.importorskip("mkdocstrings", reason="mkdocstrings is not installed (the `docs` or `test` extra)")

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"), "-d", str(out)], cwd=REPO, capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    return out


def text(page: Path) -> str:
    return re.sub(r"<[^>]+>", " ", page.read_text())


def test_every_command_has_a_page_generated_from_the_app(site):
    from tests.helpers import cratrace

    listed = set(re.findall(r"^│ (\w[\w-]*) ", cratrace("--help", check=True).stdout, re.M))
    assert {"dump", "export", "import", "model", "replay", "report"} <= listed
    for name in listed:
        page = site / "commands" / name / "index.html"
        assert page.is_file(), name
    dump = text(site / "commands" / "dump" / "index.html")
    assert "cratrace dump [OPTIONS] CAPTURE" in dump and "--from" in dump and "trace-cmd report -R" in dump
    assert "OUT/&lt;policy&gt;/" in (site / "commands" / "export" / "index.html").read_text()


def test_tables_page_is_rendered_from_the_declaration(site):
    from cratrace.tables import MODEL_TABLES

    page = text(site / "tables" / "index.html")
    for table in MODEL_TABLES.values():
        assert table.name in page
        for col in table.columns:
            assert col.name in page


def test_recipes_list_every_collector_preset(site):
    page = text(site / "recipes" / "index.html")
    for preset in (REPO / "cratrace_collect" / "presets").glob("*.json"):
        assert preset.stem in page


def test_api_reference_renders_the_docstrings(site):
    page = text(site / "api" / "index.html")
    for name in ("import_capture", "build_model", "replay_capture", "build_report", "dump_lines", "export_perfetto", "Capture"):
        assert name in page
    assert "Open a capture directory written by" in page
