"""The CLI habits users bring from other tools (issue #44): --version,
shell completion, --json wherever a command prints results, --quiet and
-v/--verbose, a repeatable -e EVENT, and CRATRACE_* environment variables
for the options set every time."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import cratrace

REPO = Path(__file__).resolve().parents[2]


def _env_run(env: dict[str, str], *args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cratrace", *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **env})


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    """A small generated trace with markers (txn_end, spin_begin/spin_end)."""
    out = tmp_path_factory.mktemp("habits") / "heavy.dat"
    cratrace("synth", "kvm-heavy-spin", "-o", out, "--set", "duration_ms=20", "-q", check=True)
    return out


@pytest.fixture(scope="module")
def cap(trace, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("habits") / "cap"
    cratrace("import", trace, "-o", out, "-q", check=True)
    cratrace("model", out, "-q", check=True)
    return out


# ------------------------------------------------------------ --version


def test_version_names_the_package_and_the_native_build():
    import cratrace as pkg
    from cratrace import _native

    p = cratrace("--version")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == f"cratrace {pkg.__version__}"
    info = _native.build_info()
    assert set(info) >= {"version", "profile", "opt_level", "target", "rustc"}
    assert info["version"] == pkg.__version__ and info["rustc"].startswith("rustc ")
    assert lines[1].startswith(f"native core {info['version']} ({info['profile']} profile, opt-level {info['opt_level']}")
    assert info["target"] in lines[1] and info["rustc"] in lines[1]
    assert lines[2].startswith("Python ")


# ------------------------------------------------------------ completion


def test_shell_completion_is_offered_and_completes_commands():
    help_text = cratrace("--help", check=True).stdout
    assert "--install-completion" in help_text and "--show-completion" in help_text
    script = _env_run({"SHELL": "/bin/bash"}, "--show-completion", "bash")
    assert script.returncode == 0, script.stderr
    assert "_CRATRACE_COMPLETE" in script.stdout
    # what bash asks when the user types `cratrace im<TAB>`
    p = _env_run({"_CRATRACE_COMPLETE": "complete_bash", "COMP_WORDS": "cratrace im", "COMP_CWORD": "1"})
    assert p.returncode == 0, p.stderr
    assert "import" in p.stdout.split()
    # and a command's options
    p = _env_run({"_CRATRACE_COMPLETE": "complete_bash", "COMP_WORDS": "cratrace import --comp", "COMP_CWORD": "2"})
    assert "--compression" in p.stdout.split()


# ------------------------------------------------------------ --json


def _commands() -> dict[str, object]:
    """Every command (`lab run`, `export perfetto`: group and command)."""
    import typer.main

    from cratrace.cli.main import _register, app

    _register([])
    group = typer.main.get_command(app)
    out = {}
    for name, cmd in group.commands.items():
        sub = getattr(cmd, "commands", None)
        if sub:
            out.update({f"{name} {n}": c for n, c in sub.items()})
        else:
            out[name] = cmd
    return out


def _options(cmd) -> set[str]:
    return {o for p in cmd.params for o in getattr(p, "opts", [])}


#: commands with nothing to print but their results' own format
NO_JSON: set[str] = set()


def test_every_command_that_prints_results_has_json_quiet_and_verbose():
    commands = _commands()
    assert {"import", "info", "sql", "record", "lab run", "lab capture", "export perfetto"} <= set(commands)
    missing = {name: sorted({"--json", "--verbose", "-v"} - _options(cmd)) for name, cmd in commands.items()}
    assert not {k: v for k, v in missing.items() if v}, missing
    # --quiet wherever a command prints something besides its results
    # (sql and dump print only their results)
    no_quiet = {n for n, c in commands.items() if "--quiet" not in _options(c)}
    assert no_quiet <= {"sql", "dump"}, no_quiet


def test_sql_json_is_f_json(cap):
    q = "SELECT count(*) AS n FROM sched_switch"
    a = cratrace("sql", cap, q, "--json", check=True).stdout
    b = cratrace("sql", cap, q, "-f", "json", check=True).stdout
    assert a == b and json.loads(a)[0]["n"] > 0
    clash = cratrace("sql", cap, q, "--json", "-f", "csv")
    assert clash.returncode == 2 and "give one output format" in clash.stderr


def test_lab_run_json():
    p = cratrace("lab", "run", "--vms", "1", "--vcpus", "1", "--duration", "0.2", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == {"vms": 1, "vcpus": "1", "duration_s": 0.2, "returncode": 0}
    q = cratrace("lab", "run", "--vms", "1", "--vcpus", "1", "--duration", "0.2", "-q")
    assert q.returncode == 0 and q.stdout == ""


# ------------------------------------------------------------ --quiet / -v


def test_info_quiet_prints_nothing_for_a_complete_capture(cap):
    p = cratrace("info", cap, "--quiet")
    assert p.returncode == 0 and p.stdout == "" and p.stderr == ""


def test_info_quiet_says_only_what_makes_a_capture_incomplete(cap, tmp_path):
    damaged = tmp_path / "damaged"
    subprocess.run(["cp", "-r", str(cap), str(damaged)], check=True)
    meta = json.loads((damaged / "capture.json").read_text())
    meta["lost_events"]["total"] = 7
    (damaged / "capture.json").write_text(json.dumps(meta))
    p = cratrace("info", damaged, "-q")
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.strip() == "lost events: 7"


def test_verbose_says_time_and_memory_and_lists_the_tables(trace, tmp_path):
    p = cratrace("import", trace, "-o", tmp_path / "c", "-v")
    assert p.returncode == 0, p.stderr
    assert re.search(r"^cratrace: exit 0 after \d+\.\d\d s, peak memory [\d,]+ MiB$", p.stderr, re.M), p.stderr
    assert re.search(r"^  sched_switch [\d,]+$", p.stdout, re.M), p.stdout
    plain = cratrace("import", trace, "-o", tmp_path / "d")
    assert "peak memory" not in plain.stderr and "  sched_switch" not in plain.stdout


def test_verbose_shows_an_errors_traceback(tmp_path):
    p = cratrace("info", tmp_path / "nothing-here", "-v")
    assert p.returncode == 2
    assert "Traceback (most recent call last)" in p.stderr
    assert p.stderr.rstrip().splitlines()[-2].startswith("error: ")
    q = cratrace("info", tmp_path / "nothing-here")
    assert "Traceback" not in q.stderr and q.stderr.count("\n") == 1


def test_model_verbose_names_the_tables_off_a_terminal(trace, tmp_path):
    cratrace("import", trace, "-o", tmp_path / "c", "-q", check=True)
    p = cratrace("model", tmp_path / "c", "-v")
    assert p.returncode == 0, p.stderr
    assert "model: cpu_slices" in p.stderr or "model: threads" in p.stderr, p.stderr


# ------------------------------------------------------------ -e EVENT


def test_record_takes_repeated_e_and_comma_lists(monkeypatch):
    """`cratrace record -e A -e B,C`: three events reach the collector (the
    capture itself is stubbed: no root or tracing needed)."""
    import cratrace_collect
    from typer.testing import CliRunner

    from cratrace.cli.main import _register, app

    seen = {}

    def fake_collect(out, preset, events, *args, **kw):
        seen["events"] = events
        return {"files": [], "duration_s": 0, "stop_reason": "duration", "events": {"missing": []},
                "lost_events": {"trace_cmd_overruns": 0, "dropped": 0}, "collector_overhead": {"pct_of_one_cpu": 0},
                "tracing_state_restored": True, "not_captured": []}

    monkeypatch.setattr(cratrace_collect, "collect", fake_collect)
    _register(["record"])
    r = CliRunner().invoke(app, ["record", "-o", "/nonexistent/raw", "-e", "sched:sched_switch", "-e", "kvm:kvm_exit,kvm:kvm_entry", "--json"])
    assert r.exit_code == 0, r.output
    assert seen["events"] == ["sched:sched_switch", "kvm:kvm_exit", "kvm:kvm_entry"]
    r = CliRunner().invoke(app, ["record", "-o", "/nonexistent/raw", "--events", "sched:sched_switch,sched:sched_wakeup", "--json"])
    assert r.exit_code == 0 and seen["events"] == ["sched:sched_switch", "sched:sched_wakeup"]


def test_record_refuses_a_bad_event_before_needing_root(tmp_path):
    p = cratrace("record", "-o", tmp_path / "raw", "-e", "sched:sched_switch", "-e", "bad name")
    assert p.returncode == 2 and "invalid event name(s): 'bad name'" in p.stderr
    assert not (tmp_path / "raw").exists()


# ------------------------------------------------------------ CRATRACE_*


def test_environment_variables_stand_for_the_options(trace, tmp_path):
    env = {"CRATRACE_COMPRESSION": "zstd"}
    p = _env_run(env, "import", trace, "-o", tmp_path / "z", "-q")
    assert p.returncode == 0, p.stderr
    from cratrace import _native

    assert _native.parquet_codec(tmp_path / "z" / "events" / "sched_switch.parquet") == "zstd"
    # the option given wins over the variable
    p = _env_run(env, "import", trace, "-o", tmp_path / "l", "-q", "--compression", "lz4")
    assert _native.parquet_codec(tmp_path / "l" / "events" / "sched_switch.parquet") == "lz4"
    bad = _env_run({"CRATRACE_COMPRESSION": "brotli"}, "import", trace, "-o", tmp_path / "b", "-q")
    assert bad.returncode == 2 and "--compression brotli" in bad.stderr


def test_throughput_marker_variable_reaches_replay(cap, tmp_path):
    # a marker the capture lacks is refused: proof the variable was read
    p = _env_run({"CRATRACE_THROUGHPUT_MARKER": "no_such_marker"}, "replay", cap, "-p", "fair", "-o", tmp_path / "r", "-q")
    assert p.returncode == 2 and "throughput_marker=no_such_marker" in p.stderr, p.stderr
    # --set wins over it
    p = _env_run({"CRATRACE_THROUGHPUT_MARKER": "no_such_marker"}, "replay", cap, "-p", "fair", "-o", tmp_path / "r", "-q", "--set", "throughput_marker=txn_end")
    assert p.returncode in (0, 1), p.stderr


def test_environment_variables_are_shown_in_help():
    import typer.main  # noqa: F401

    commands = _commands()
    for name, var in (("import", "CRATRACE_COMPRESSION"), ("import", "CRATRACE_CPU_HZ"), ("replay", "CRATRACE_THROUGHPUT_MARKER"),
                      ("sweep", "CRATRACE_THROUGHPUT_MARKER"), ("export perfetto", "CRATRACE_THROUGHPUT_MARKER")):
        envvars = {getattr(p, "envvar", None) for p in commands[name].params}
        assert var in envvars, (name, var)
    text = _env_run({"COLUMNS": "200"}, "import", "--help").stdout
    assert "CRATRACE_COMPRESSION" in text and "CRATRACE_CPU_HZ" in text


# ------------------------------------------------------------ lab capture's source


def test_lab_capture_does_not_name_its_deleted_raw_trace_as_a_source(tracing_lock, tmp_path):
    out = tmp_path / "lab"
    p = cratrace("lab", "capture", "-o", out, "--vms", "1", "--vcpus", "1", "--duration", "0.5", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["capture"] == str(out)
    info = json.loads(cratrace("info", out, "--json").stdout)
    sources = info["sources"]
    assert any(Path(s["path"]).name == "trace.dat" for s in sources), sources
    for s in sources:  # trace.dat, perf-stat.csv: the raw capture is gone
        assert s["removed"] == "cratrace lab capture" and not Path(s["path"]).exists(), s
    human = cratrace("info", out).stdout
    lines = [x for x in human.splitlines() if x.startswith("source ")]
    assert len(lines) == len(sources)
    for s, line in zip(sources, lines):
        assert s["path"] not in line and f"{Path(s['path']).name} (deleted after import by cratrace lab capture)" in line, line
