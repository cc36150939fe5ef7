"""Every output of the pipeline gets the mode a plain open() or mkdir()
would give it under the user's umask: outputs are written under
temporary names (private, as tempfile makes them) and renamed into place,
and a report or capture that only its writer could read would be a
surprise to the team it was made for."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest


def _run(umask: int, *args: str | Path) -> None:
    p = subprocess.run([sys.executable, "-m", "cratrace", *map(str, args)], capture_output=True, text=True,
                       preexec_fn=lambda: os.umask(umask))
    assert p.returncode == 0, f"cratrace {args}: {p.stderr}"


def _modes(root: Path) -> dict[str, int]:
    """Permission bits of every path under `root` (and of root)."""
    paths = [root, *root.rglob("*")]
    return {str(p.relative_to(root.parent)): stat.S_IMODE(p.stat().st_mode) for p in paths}


@pytest.mark.parametrize("umask", [0o022, 0o027], ids=["umask022", "umask027"])
def test_outputs_have_the_umask_mode(tmp_path, umask):
    trace, xen, raw = tmp_path / "heavy.dat", tmp_path / "xen.bin", tmp_path / "raw"
    cap, replays, report = tmp_path / "heavy.cap", tmp_path / "heavy.replay", tmp_path / "report.html"
    _run(umask, "synth", "kvm-heavy-spin", "-o", trace, "--set", "duration_ms=10", "-q")
    _run(umask, "synth", "xen-io-billing", "-o", xen, "--set", "duration_ms=10", "-q")
    _run(umask, "synth", "kvm-heavy-spin", "--raw", "-o", raw, "--set", "duration_ms=10", "-q")
    _run(umask, "import", trace, "-o", cap, "-q")
    _run(umask, "model", cap, "-q")
    _run(umask, "replay", cap, "--policy", "wapd", "-o", replays, "-q")
    _run(umask, "report", cap, "--replays", replays, "-o", report, "-q")
    modes = {}
    for out in (trace, Path(f"{trace}.truth.json"), xen, Path(f"{xen}.truth.json"), raw, cap, replays, report):
        modes.update(_modes(out))
    want_file, want_dir = 0o666 & ~umask, 0o777 & ~umask
    wrong = {p: oct(m) for p, m in modes.items()
             if m != (want_dir if (tmp_path / p).is_dir() else want_file)}
    assert not wrong, f"umask {umask:o}: expected files {want_file:o}, directories {want_dir:o}; got {wrong}"
    # every kind of output was looked at
    assert any(p.startswith("heavy.cap/events/") for p in modes) and any(p.startswith("heavy.replay/wapd/model/") for p in modes)
