"""What the benchmarks' quick modes share.

`--quick` runs a benchmark's code path end to end on the smallest inputs
that still exercise it (generated traces, one run, short recordings) and
prints the same figures, so that tests/benchmarks/test_quick.py can run
every benchmark and none rots. Quick runs write to a scratch directory of
their own: benchmarks/out/ keeps the traces the full runs reuse, and
quick runs in parallel must not share files.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def scratch(name: str) -> Path:
    """A new directory for one quick run's files (the caller removes it)."""
    return Path(tempfile.mkdtemp(prefix=f"cratrace-quick-{name}-"))


def tracing_unavailable() -> str | None:
    """Why trace-cmd cannot record here (not root, no trace-cmd, no
    tracefs), or None: the test suite's own check, so that a quick run
    skips exactly where the suite's tracing tests do."""
    from tests.conftest import can_trace

    return can_trace()


def peer_installed(tool: str, what: str) -> bool:
    """Whether the peer `tool` is installed; if not, says so in one line
    (the quick run goes on with our side: `what`)."""
    if shutil.which(tool):
        return True
    print(f"{tool} is not installed: {what} measured without its peer")
    return False


def synth(scenario: str, out: Path, **params: object) -> Path:
    """`cratrace synth SCENARIO -o OUT --seed 1 --set K=V ...`; its
    one-line report is kept back unless it fails."""
    sets = [a for k, v in params.items() for a in ("--set", f"{k}={v}")]
    p = subprocess.run([sys.executable, "-m", "cratrace", "synth", scenario, "-o", str(out), "--seed", "1", *sets, "--force"], capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"cratrace synth {scenario} exited with {p.returncode}: {p.stderr.strip()[-400:]}")
    return out


def kept_captures(root: Path, policy: str | None = None, duration_ms: int = 200) -> Path:
    """A capture laid out as `replay_fidelity.py --keep-over` keeps one
    (`setting.json`; `cap/`, imported and modelled; `rep/<policy>/`,
    replayed under `policy` if one is given), made from a generated kvm-heavy-spin trace (2 VMs of 4
    vCPUs on 2 CPUs, a spinlock each, txn_end marks) instead of a lab
    recording, which needs root. Returns `root`, the directory that the
    readers of kept captures take."""
    from cratrace.importer import import_capture
    from cratrace.model import build_model
    from cratrace.replay import replay_capture

    d = root / "kvm-heavy-spin"
    d.mkdir(parents=True)
    vcpus = 4
    trace = synth("kvm-heavy-spin", d / "trace.dat", vms=2, vcpus=vcpus, duration_ms=duration_ms)
    build_model(import_capture([trace], d / "cap"))
    if policy:
        replay_capture(d / "cap", [policy], d / "rep")
    # what the lab would have been asked for (its vCPUs compute a counted
    # loop, as the scenario's do)
    (d / "setting.json").write_text(json.dumps({"clock": "count", "lock": "spin", "vcpus": [vcpus], "vm_sessions": "shared"}))
    return root
