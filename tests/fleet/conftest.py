"""A small fleet for the fleet tests: three generated hosts (two
kvm-heavy-spin of different sizes and seeds, one kvm-io-billing), raw
captures as `cratrace record` leaves them, imported and modelled through
the CLI on a 2-worker local cluster (which tests the fleet import and
model themselves)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import cratrace

#: host name → (scenario, seed, settings): ~100-150 ms each. h1 is
#: saturated (4 vCPUs on 2 CPUs: no room for another VM), h2 runs a
#: vCPU per busy CPU, h3 does network I/O (bills with host work) and
#: leaves its CPUs idle most of the time (room for more VMs).
HOSTS = {
    "h1": ("kvm-heavy-spin", 1, {"vms": 2, "vcpus": 2, "pcpus": 2, "duration_ms": 120}),
    "h2": ("kvm-heavy-spin", 2, {"vms": 2, "vcpus": 1, "pcpus": 4, "duration_ms": 150}),
    "h3": ("kvm-io-billing", 3, {"workload": "cpu-net", "duration_ms": 100}),
}


def synth_raw(root: Path, name: str, scenario: str, seed: int, params: dict) -> Path:
    sets = [a for k, v in params.items() for a in ("--set", f"{k}={v}")]
    cratrace("synth", scenario, "--raw", "-o", root / name, "--seed", str(seed), *sets, "-q", check=True)
    return root / name


@pytest.fixture(scope="session")
def fleet(tmp_path_factory) -> dict:
    """{"raw": DIR, "caps": DIR, "import": CompletedProcess, "model": ...}"""
    d = tmp_path_factory.mktemp("fleet")
    raw = d / "raw"
    for name, (scenario, seed, params) in HOSTS.items():
        synth_raw(raw, name, scenario, seed, params)
    caps = d / "caps"
    imp = cratrace("import", "--fleet", *sorted(raw.iterdir()), "-o", caps, "--workers", "2", "--json")
    assert imp.returncode == 0, imp.stderr
    mod = cratrace("model", *sorted(caps.iterdir()), "--workers", "2", "--json")
    assert mod.returncode == 0, mod.stderr
    return {"dir": d, "raw": raw, "caps": caps, "import": imp, "model": mod}


@pytest.fixture(scope="session")
def swept(fleet) -> dict:
    """The tests' sweep on a 2-worker local cluster: every capture under
    its own policy and one other, a two-value grid, a drop-vm what-if and
    a headroom of 2."""
    out = fleet["dir"] / "sweep"
    p = cratrace(*SWEEP_ARGS, fleet["caps"], "-o", out, "--workers", "2", "--json")
    assert p.returncode == 0, p.stderr
    return {"out": out, "proc": p, "summary": json.loads(p.stdout)}


#: affinity=off: the generated hosts pin each vCPU, and a copy of a VM
#: would share its CPUs (no host would have room for one)
SWEEP_ARGS = ("sweep", "-p", "own", "-p", "fair+wapd", "--set", "affinity=off", "--grid", "ple_window_ns=4000,16000", "--what-if", "drop-vm=vm1;pcpus=2", "--headroom", "2")


def metrics_bytes(sweep: Path) -> dict[str, bytes]:
    return {str(p.relative_to(sweep)): p.read_bytes() for p in sorted((sweep / "metrics").rglob("*.parquet"))}


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def copy_capture(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def run_cli(*args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cratrace", *map(str, args)], capture_output=True, text=True, **kw)
