"""The report's energy per VM against a generated capture's truth, end to
end through the CLI: `cratrace synth thermal` (vCPUs of 12 W and 4 W,
cores throttling from 2.8 to 1.6 GHz above their trip point, P ∝ f) →
import → model → report --json. Each VM's recorded energy is its vCPU's
own power at the frequency each slice ran at (threads.power_w from the
host's declaration), so it matches the truth's per-vCPU energy; a slice
takes its frequency at its start, and the truth changes frequency at
1 ms steps inside slices, hence 1%."""

from __future__ import annotations

import json

import pytest

from tests.helpers import cratrace


def test_recorded_energy_per_vm_is_each_vcpus_own_power_at_its_frequency(tmp_path):
    raw, cap = tmp_path / "raw", tmp_path / "cap"
    cratrace("synth", "thermal", "-o", raw, "--raw", "--seed", "2", "--set", "duration_ms=1000", "--set", "hot_vcpus=1", check=True)
    cratrace("import", raw, "-o", cap, "-q", check=True)
    cratrace("model", cap, "-q", check=True)
    p = cratrace("report", cap, "-o", tmp_path / "r.html", "--json")
    assert p.returncode in (0, 1), p.stderr
    got = {r["owner"]: r["joules"] for r in json.loads(p.stdout)["energy"] if r["run"] == "recorded"}
    truth = json.loads((raw / "trace.dat.truth.json").read_text())
    want: dict[str, float] = {}
    for v in truth["per_vcpu"]:
        want[v["vm"]] = want.get(v["vm"], 0.0) + v["energy_j"]
    # the hot core throttled: its vCPUs' energy is below power x time
    assert truth["frequency_changes"]
    for vm, j in want.items():
        assert got[vm] == pytest.approx(j, rel=0.01), vm
    # never idle, and said so: a row of 0 J
    assert got["idle"] == 0.0
