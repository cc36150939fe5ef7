"""The host collector runs on Python 3.6 to 3.13 (issue #44): RHEL 8's
platform Python is 3.6, and a host has whatever Python it has. Each test
runs it under every pyenv interpreter of those versions on this machine
(skipped when pyenv or the version is absent), and vermin checks that
nothing newer than 3.6 creeps into its source."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "cratrace_collect"
MINORS = [f"3.{m}" for m in range(6, 14)]


def _pyenv_root() -> Path | None:
    root = os.environ.get("PYENV_ROOT")
    if root:
        return Path(root)
    if shutil.which("pyenv"):
        out = subprocess.run(["pyenv", "root"], capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip():
            return Path(out.stdout.strip())
    default = Path.home() / ".pyenv"
    return default if default.is_dir() else None


def _interpreter(minor: str) -> Path | None:
    """The newest pyenv CPython `minor`.x installed here, or None."""
    root = _pyenv_root()
    if root is None:
        return None
    found = []
    for d in (root / "versions").glob(f"{minor}.*"):
        parts = d.name.split(".")
        if len(parts) == 3 and all(p.isdigit() for p in parts) and (d / "bin" / "python").exists():
            found.append((int(parts[2]), d / "bin" / "python"))
    return max(found)[1] if found else None


@pytest.fixture(params=MINORS)
def python(request) -> Path:
    exe = _interpreter(request.param)
    if exe is None:
        pytest.skip(f"no pyenv Python {request.param} on this machine")
    return exe


def _run(python: Path, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    # -I: isolated (no user site, no PYTHON* variables); -m from the repo root
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"}
    return subprocess.run([str(python), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


def test_help_and_argument_checks(python):
    h = _run(python, "-m", "cratrace_collect", "--help")
    assert h.returncode == 0, h.stderr
    assert "usage: cratrace-collect" in h.stdout and "--event" in h.stdout and "--build-zipapp" in h.stdout
    # each bad option is refused in one line, exit 2, before root is needed
    for args, msg in ((["--duration", "5"], "-o/--output is required"),
                      (["-o", "/tmp/never-made", "--duration", "0"], "--duration 0.0: must be between 0 and 86400 seconds"),
                      (["-o", "/tmp/never-made", "--duration", "nan"], "--duration nan: must be between 0 and 86400 seconds"),
                      (["-o", "/tmp/never-made", "--duration=-inf"], "--duration -inf: must be between 0 and 86400 seconds"),
                      (["-o", "/tmp/never-made", "--preset", "nope"], "unknown preset 'nope' (known: "),
                      (["-o", "/tmp/never-made", "-e", "sched:sched_switch", "-e", "bad;name"], "invalid event name(s): 'bad;name'"),
                      (["-o", "/tmp/never-made", "--max-size", "lots"], "--max-size 'lots': expected a size like 500M or 2G"),
                      (["-o", "/tmp/never-made", "--buffer-kb", "0"], "--buffer-kb must be >= 1")):
        p = _run(python, "-m", "cratrace_collect", *args)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert p.stderr.startswith("cratrace-collect: error: ") and msg in p.stderr and p.stderr.count("\n") == 1, (args, p.stderr)
    assert not Path("/tmp/never-made").exists()


def test_the_zipapp_runs(python, tmp_path):
    """The one-file collector a host gets: built here, run under each
    interpreter, with its presets inside."""
    pyz = tmp_path / "collect.pyz"
    b = subprocess.run([sys.executable, "-m", "cratrace_collect", "--build-zipapp", str(pyz)], cwd=REPO, capture_output=True, text=True)
    assert b.returncode == 0, b.stderr
    h = _run(python, str(pyz), "--help", cwd=tmp_path)
    assert h.returncode == 0 and "usage:" in h.stdout, h.stderr
    p = _run(python, str(pyz), "-o", str(tmp_path / "raw"), "--preset", "nope", cwd=tmp_path)
    assert p.returncode == 2 and "known: energy, io-billing, kvm-sched, kvm-spin, postcopy, xen)" in p.stderr, p.stderr


def test_the_package_directory_runs_as_a_script(python, tmp_path):
    """`python3 cratrace_collect/` from a copy of the directory, as the
    docs offer for a host without cratrace."""
    copy = tmp_path / "cratrace_collect"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    h = _run(python, str(copy), "--help", cwd=tmp_path)
    assert h.returncode == 0 and "usage: cratrace-collect" in h.stdout, h.stderr


def test_vermin_finds_nothing_newer_than_python_3_6():
    vermin = shutil.which("vermin") or (shutil.which("vermin", path=str(Path(sys.executable).parent)))
    if vermin is None:
        pytest.skip("vermin is not installed (pip install vermin; it is in the `test` extra)")
    p = subprocess.run([vermin, "--target=3.6-", "--no-tips", "--violations", "--eval-annotations", str(PACKAGE)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def test_the_docstring_states_the_minimum_version():
    import cratrace_collect

    assert "Python 3.6 or later" in cratrace_collect.__doc__
