"""NaN and infinity are refused wherever the CLI takes a number (issue
42: `--duration nan` captured 0.64 s and exited 0): one line naming the
option and the value, exit 2, nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import cratrace


@pytest.fixture(scope="module")
def cap(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("non_finite")
    cratrace("synth", "kvm-heavy-spin", "-o", d / "t.dat", "--set", "duration_ms=20", "-q", check=True)
    cratrace("import", d / "t.dat", "-o", d / "cap", "-q", check=True)
    cratrace("model", d / "cap", "-q", check=True)
    return d / "cap"


#: every option typed as a float, by (command, option): its command line
#: given the capture, an output path and the value
FLOAT_OPTIONS = {
    ("import", "--cpu-hz"): lambda cap, out, v: ["import", cap.parent / "t.dat", "-o", out, "--cpu-hz", v],
    ("model", "--spin-gap-us"): lambda cap, out, v: ["model", cap, "--spin-gap-us", v],
    ("model", "--window-ms"): lambda cap, out, v: ["model", cap, "--window-ms", v],
    ("export perfetto", "--bin-ms"): lambda cap, out, v: ["export", "perfetto", cap, "-o", out, "--bin-ms", v],
    ("record", "--duration"): lambda cap, out, v: ["record", "-o", out, "--duration", v],
    ("lab run", "--duration"): lambda cap, out, v: ["lab", "run", "--duration", v],
    ("lab capture", "--duration"): lambda cap, out, v: ["lab", "capture", "-o", out, "--duration", v],
}

#: numbers given inside text: times, percentages, settings
TEXT_NUMBERS = [
    (["dump", "{cap}", "--from", "nan", "--no-pager"], "--from 'nan'"),
    (["dump", "{cap}", "--to", "inf", "--no-pager"], "--to 'inf'"),
    (["replay", "{cap}", "-o", "{out}", "-p", "fair", "--set", "balance_k=nan"], "--set balance_k=nan"),
    (["replay", "{cap}", "-o", "{out}", "-p", "fair", "--set", "pcpus=inf"], "--set pcpus=inf"),
    (["synth", "thermal", "-o", "{out}", "--set", "hot_w=inf"], "--set hot_w=inf"),
    (["sweep", "{cap}", "-o", "{out}", "-p", "fair", "--grid", "balance_k=1,nan", "--workers", "1"], "balance_k=nan"),
    (["fleet-report", "{cap}", "-o", "{out}", "--slo-drop", "nan"], "--slo-drop nan"),
]


def _refused(p: subprocess.CompletedProcess, *words: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    (line,) = [x for x in p.stderr.splitlines() if x.strip()]
    assert line.startswith("error: ") and all(w in line for w in words), line


def test_the_table_names_every_float_option():
    import typer

    from cratrace.cli.main import _register, app

    _register([])
    found = set()

    def walk(cmd, path):
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, name])
        for p in getattr(cmd, "params", []):
            if getattr(p.type, "name", "") == "float":
                found.add((" ".join(path), p.opts[0]))

    walk(typer.main.get_command(app), [])
    assert found == set(FLOAT_OPTIONS)


@pytest.mark.parametrize("value", ["nan", "inf"])
@pytest.mark.parametrize("where", sorted(FLOAT_OPTIONS), ids=" ".join)
def test_a_float_option_refuses_what_is_not_finite(cap, tmp_path, where, value):
    out = tmp_path / "out"
    p = cratrace(*FLOAT_OPTIONS[where](cap, out, value))
    _refused(p, where[1], value)
    assert not out.exists()


@pytest.mark.parametrize("args, words", TEXT_NUMBERS, ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_numbers_in_text_refuse_what_is_not_finite(cap, tmp_path, args, words):
    out = tmp_path / "out"
    p = cratrace(*(a.format(cap=cap, out=out) for a in args))
    _refused(p, words)
    assert not out.exists()


def test_the_cpu_hz_variable_refuses_what_is_not_finite(cap, tmp_path):
    # a trace.dat does not use the frequency: it was taken without a word
    p = subprocess.run([sys.executable, "-m", "cratrace", "import", cap.parent / "t.dat", "-o", tmp_path / "c"],
                       capture_output=True, text=True, env={**os.environ, "CRATRACE_CPU_HZ": "nan"})
    _refused(p, "--cpu-hz nan", "CRATRACE_CPU_HZ")
    assert not (tmp_path / "c").exists()
