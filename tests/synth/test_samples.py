"""The committed sample traces are what their README provenance lines say:
re-running each command gives byte-identical files, and trace-cmd (or, for
xentrace files, xenalyze) reads them.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from cratrace.synth.generate import synthesize
from tests.synth.conftest import trace_cmd_report

SAMPLES = Path(__file__).resolve().parents[2] / "sample-traces"


def _commands() -> list[tuple[str, list[str]]]:
    text = (SAMPLES / "README.md").read_text()
    return [(m[1], shlex.split(m[2])) for m in re.finditer(r"^- `([^`]+)`: `(cratrace synth [^`]+)`", text, re.M)]


def test_readme_lists_every_generated_sample():
    listed = {name for name, _ in _commands()}
    on_disk = {p.name for p in [*SAMPLES.glob("*.dat"), *SAMPLES.glob("*.bin")] if (SAMPLES / (p.name + ".truth.json")).exists()}
    assert listed and listed == on_disk


@pytest.mark.parametrize("name,argv", _commands())
def test_sample_regenerates_byte_identical(tmp_path, name, argv):
    assert argv[:2] == ["cratrace", "synth"]
    scenario = argv[2]
    seed = int(argv[argv.index("--seed") + 1])
    sets = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--set")
    out = tmp_path / name
    synthesize(scenario, out, seed=seed, overrides=sets)
    committed = SAMPLES / name
    assert committed.stat().st_size < 1_000_000
    assert out.read_bytes() == committed.read_bytes()
    assert (tmp_path / (name + ".truth.json")).read_bytes() == (SAMPLES / (name + ".truth.json")).read_bytes()
    if name.endswith(".bin"):
        import json
        import shutil
        import subprocess

        if shutil.which("xenalyze") is None:
            pytest.skip("xenalyze is not installed (Debian: xen-utils-common)")
        hz = json.loads((SAMPLES / (name + ".truth.json")).read_text())["cpu_hz"]
        assert subprocess.run(["xenalyze", "--summary", f"--cpu-hz={hz / 1e9}G", str(committed)], capture_output=True).returncode == 0
        return
    rep = trace_cmd_report(committed)
    assert rep.rc == 0 and rep.stderr == ""
