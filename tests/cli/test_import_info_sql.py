"""The import, info and sql commands as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import cratrace, report_counts


@pytest.fixture(scope="module")
def cap(fixtures_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "cap"
    cratrace("import", fixtures_dir / "trappy_idle.dat", "-o", out, "-q", check=True)
    return out


def test_info_json_lists_events_time_range_and_sources(cap, fixtures_dir):
    p = cratrace("info", cap, "--json")
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    assert info["events"] == report_counts(fixtures_dir / "trappy_idle.dat")
    assert info["cpus"] == 6 and info["clock"] == "local"
    assert info["duration_s"] > 0
    assert info["sources"][0]["kind"] == "tracedat"
    assert info["lost_events"]["total"] == 0


def test_info_human_output_names_tables(cap):
    p = cratrace("info", cap)
    assert p.returncode == 0
    assert "sched_switch" in p.stdout and "lost events" in p.stdout


def test_sql_formats(cap):
    q = "SELECT next_comm, count(*) AS n FROM sched_switch GROUP BY 1 ORDER BY n DESC, next_comm LIMIT 3"
    rows = json.loads(cratrace("sql", cap, q, "--format", "json", check=True).stdout)
    assert len(rows) == 3 and rows[0]["n"] >= rows[1]["n"]
    csv = cratrace("sql", cap, q, "--format", "csv", check=True).stdout.splitlines()
    assert csv[0] == "next_comm,n" and len(csv) == 4
    table = cratrace("sql", cap, q, check=True).stdout
    assert rows[0]["next_comm"] in table


def test_bad_query_is_one_line_exit_2(cap):
    p = cratrace("sql", cap, "SELECT nope FROM sched_switch")
    assert p.returncode == 2
    assert "query failed" in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) <= 2


def test_csv_writes_nested_cells_as_json_and_an_empty_query_is_refused(tmp_path):
    # on a sample the project ships, so this runs without ../shared
    out = tmp_path / "cap"
    sample = Path(__file__).resolve().parents[2] / "sample-traces" / "kvm-io-billing.dat"
    cratrace("import", sample, "-o", out, "-q", check=True)
    q = "SELECT [1, 2] AS l, {'a': 1, 'b': 'x'} AS s, count(*) AS n FROM sched_switch"
    lines = cratrace("sql", out, q, "--format", "csv", check=True).stdout.splitlines()
    assert lines[0] == "l,s,n" and lines[1].startswith('"[1, 2]","{""a"": 1, ""b"": ""x""}",')
    assert int(lines[1].rsplit(",", 1)[1]) > 0
    p = cratrace("sql", out, "  ")
    assert p.returncode == 2 and "empty query" in p.stderr and "internal error" not in p.stderr


def test_not_a_capture(tmp_path):
    p = cratrace("info", tmp_path)
    assert p.returncode == 2 and "not a capture" in p.stderr


def test_help_teaches_the_pipeline():
    p = cratrace("--help")
    assert p.returncode == 0
    for word in ("import", "info", "sql"):
        assert word in p.stdout


def test_info_keeps_each_source_on_one_line_when_piped(tmp_path):
    # piped output is 80 columns wide to Rich; a long path must not split
    # the source line (a script greps it for the path and the checksum)
    sample = Path(__file__).resolve().parents[2] / "sample-traces" / "kvm-io-billing.dat"
    deep = tmp_path / ("a-directory-name-long-enough-to-push-the-line-past-80-columns" * 2)
    deep.mkdir()
    src = deep / "trace.dat"
    src.write_bytes(sample.read_bytes())
    out = tmp_path / "cap"
    cratrace("import", src, "-o", out, "-q", check=True)
    lines = cratrace("info", out, check=True).stdout.splitlines()
    line = next(x for x in lines if x.startswith("source"))
    assert str(src) in line and "blake3" in line and line.rstrip().endswith("…)")


@pytest.mark.parametrize("name", [
    # closes the view's quoted name and runs a statement of its own
    'x" AS SELECT 1; COPY (SELECT 42 AS a) TO \'sql_injected.csv\' (HEADER); CREATE VIEW "y',
    "sched switch",
    "ünïcode",
])
def test_a_crafted_table_file_name_runs_no_sql_and_is_refused(tmp_path, name, monkeypatch):
    """r42: `cratrace sql` and `Capture.sql` made `CREATE VIEW "{name}"`
    from file names; a capture with a crafted file name wrote
    ./sql_injected.csv when opened."""
    import shutil

    out = tmp_path / "cap"
    sample = Path(__file__).resolve().parents[2] / "sample-traces" / "kvm-io-billing.dat"
    cratrace("import", sample, "-o", out, "-q", check=True)
    shutil.copy(out / "events" / "sched_switch.parquet", out / "events" / f"{name}.parquet")
    work = tmp_path / "cwd"
    work.mkdir()
    p = subprocess.run([sys.executable, "-m", "cratrace", "sql", str(out), "SELECT count(*) FROM sched_switch"], capture_output=True, text=True, cwd=work)
    assert p.returncode == 2 and "not a table name cratrace writes" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    assert not list(work.iterdir())
    # the Python API refuses it the same way, and runs nothing either
    import cratrace as ct
    from cratrace.errors import CaptureError

    monkeypatch.chdir(work)
    with pytest.raises(CaptureError, match="not a table name"):
        ct.open(out).sql("SELECT 1")
    assert not list(work.iterdir())
    # the tables cratrace names are views as before
    (out / "events" / f"{name}.parquet").unlink()
    assert ct.open(out).sql("SELECT count(*) AS n FROM sched_switch")["n"][0] > 0
