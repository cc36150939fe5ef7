"""energy-balance end to end on a generated capture with ground truth:
`cratrace synth thermal` (one 12 W vCPU and three 4 W ones, two per core,
pinned and time-sliced round robin; no throttling, so the truth's energy is
each vCPU's power times its run time) → import → model → replay.

The recorded placement replayed (`rr`, the host.json's declaration) must
give the truth's per-core energy and peak temperatures: the replay charges
each slice its thread's power (`threads.power_w`, from the host's
declaration) and integrates the RC model the host declared. energy-balance
on the same demand must then even out per-core energy, lower the hotter
core's peak and its time above a threshold, do the same work with the same
energy, and pay for its swaps only with what the swaps do (here nothing:
the scenario's host declares no migration cost; with one, the run is
longer).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import cratrace


@pytest.fixture(scope="module")
def thermal(tmp_path_factory) -> tuple[dict, Path]:
    tmp = tmp_path_factory.mktemp("thermal")
    raw, cap = tmp / "raw", tmp / "cap"
    sets = ["duration_ms=2000", "hot_vcpus=1", "trip_c=200", "start_c=45"]
    cratrace("synth", "thermal", "-o", raw, "--raw", "--seed", "3", *[a for s in sets for a in ("--set", s)], check=True)
    cratrace("import", raw, "-o", cap, "-q", check=True)
    cratrace("model", cap, "-q", check=True)
    truth = json.loads((raw / "trace.dat.truth.json").read_text())
    return truth, cap


def _replay(cap: Path, out: Path, *sets: str) -> dict:
    args = [a for s in sets for a in ("--set", s)]
    p = cratrace("replay", cap, "-p", "rr", "-p", "fair+energy-balance", "-o", out, "--json", *args)
    assert p.returncode in (0, 1) and "Traceback" not in p.stderr, p.stderr
    return json.loads(p.stdout)


def test_recorded_placement_replays_to_the_truths_energy_and_temperatures(thermal, tmp_path):
    truth, cap = thermal
    rr = _replay(cap, tmp_path / "rep")["rr"]["energy"]
    want = [c["energy_j"] for c in truth["cores"]]
    assert rr["core_energy_j"] == pytest.approx(want, rel=0.01)
    # the hot vCPU's core is the hotter one, by what its power says
    assert want[0] > 1.5 * want[1]
    peaks = [max(s["temp_mc"] for s in truth["temperature_samples"] if s["cpu"] == c) / 1000 for c in range(len(want))]
    assert rr["core_peak_c"] == pytest.approx(peaks, abs=0.5)


def test_energy_balance_evens_out_energy_and_temperature_at_no_cost_but_its_moves(thermal, tmp_path):
    _, cap = thermal
    res = _replay(cap, tmp_path / "rep", "throttle_c=58")
    rr, eb = res["rr"], res["fair+energy-balance"]
    assert rr["energy"]["core_energy_spread_pct"] > 25
    assert eb["energy"]["core_energy_spread_pct"] < 0.1 * rr["energy"]["core_energy_spread_pct"]
    assert max(eb["energy"]["core_peak_c"]) < max(rr["energy"]["core_peak_c"]) - 2
    # the hot core spends most of the run above 58 °C recorded; balanced, neither does
    assert rr["energy"]["core_hot_s"][0] > 1.0
    assert sum(eb["energy"]["core_hot_s"]) < 0.1 * rr["energy"]["core_hot_s"][0]
    # the same work at the same power: the same energy
    assert eb["energy"]["total_energy_j"] == pytest.approx(rr["energy"]["total_energy_j"], rel=0.005)
    b = eb["energy_balance"]
    assert b["swaps_decided"] >= b["swaps_realised"] > 10
    assert eb["duration_s"] == pytest.approx(rr["duration_s"], rel=0.01)
    # each swap moves two vCPUs: at 200 µs a move the run gets longer by
    # about what the moves cost, spread over the two cores
    costly = _replay(cap, tmp_path / "cost", "migration_ns=200000")["fair+energy-balance"]
    moves_s = 2 * costly["energy_balance"]["swaps_realised"] * 200e-6
    extra = costly["duration_s"] - eb["duration_s"]
    assert 0.25 * moves_s / 2 < extra < 2 * moves_s
