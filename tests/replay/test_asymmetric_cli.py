"""The asymmetric policy (issue 41 item 2, ../shared/papers/asym.md)
through the CLI on generated captures with ground truth: synth --raw →
import → model → replay (→ report).

- Energy per unit of work: every run's metrics.json gives its energy per
  transaction (or per second of vCPU work), delay and energy-delay
  product; the asymmetric block's saving is per unit of work, the
  equal-time (mean power) figure beside it, and a run that lost
  throughput says so. The report shows the same, one row per run.
- No starvation: kvm-heavy-spin (8 CPU-bound vCPUs of 2 VMs pinned round
  robin over 2 CPUs) put 1 vCPU fast and 7 slow, and the 3 pinned to the
  fast CPU but pooled slow never ran (the replay ran to its 3600 s limit).
- Gang scenario: a shorter slow-core slice helps a gang-synchronised job
  whose waiters spin (LU-OMP, +70% in the paper), much less one whose
  waiters sleep, and not at all when the gang is not on the slow cores.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from tests.helpers import cratrace


def _capture(tmp: Path, scenario: str, *sets: str) -> tuple[dict, Path]:
    raw, cap = tmp / "raw", tmp / "cap"
    cratrace("synth", scenario, "-o", raw, "--raw", "--seed", "1", *[a for s in sets for a in ("--set", s)], check=True)
    cratrace("import", raw, "-o", cap, "-q", check=True)
    cratrace("model", cap, "-q", check=True)
    return json.loads((raw / "trace.dat.truth.json").read_text()), cap


def _replay(cap: Path, out: Path, policies: list[str], *sets: str) -> dict:
    args = [a for p in policies for a in ("-p", p)] + [a for s in sets for a in ("--set", s)]
    p = cratrace("replay", cap, "-o", out, "--json", "--force", *args)
    assert p.returncode in (0, 1) and "Traceback" not in p.stderr, p.stderr
    return json.loads(p.stdout)


@pytest.fixture(scope="module")
def heavy_spin(tmp_path_factory) -> tuple[dict, Path, Path, dict]:
    tmp = tmp_path_factory.mktemp("heavy-spin")
    truth, cap = _capture(tmp, "kvm-heavy-spin", "duration_ms=200")
    res = _replay(cap, tmp / "rep", ["asymmetric+yield", "credit+yield"])
    return truth, cap, tmp / "rep", res


def test_spin_heavy_capture_keeps_every_vm_running_on_the_pools(heavy_spin):
    truth, _, _, res = heavy_spin
    m = res["asymmetric+yield"]
    a = m["asymmetric"]
    # the pools replace the recorded round-robin pins (which left 3 vCPUs
    # with no CPU at all) and the crowded fast core spills by progress:
    # 6 of 8 CPU-bound vCPUs fast, 2 slow (was 1 and 7)
    assert a["affinity_replaced"] == 8
    assert (len(a["pools"]["fast"]["vcpus"]), len(a["pools"]["slow"]["vcpus"])) == (6, 2)
    # every transaction of every VM is replayed, in about the recorded span
    for vm, v in truth["per_vm"].items():
        assert m["vms"][vm]["marks"] == v["txns"], vm
    assert m["duration_s"] < 3 * m["recorded_duration_s"]
    # no VM falls below half its all-fast throughput: a host of 2.79 +
    # 1.33 GHz has 74% of an all-fast host's cycles; -37% with the spins
    assert a["throughput_change_pct"] > -50
    assert not [n for n in a["notes"] if "against all-fast" in n]


def test_a_policy_that_loses_throughput_shows_its_saving_per_unit_of_work(heavy_spin):
    _, _, _, res = heavy_spin
    a = res["asymmetric+yield"]["asymmetric"]
    assert a["saving_unit"] == "txn" and a["throughput_change_pct"] < 0
    # equal time: the slow core draws much less (mean power, ~43%); per
    # transaction far less of that is saved, and the energy-delay product
    # per transaction is worse
    assert a["power_saving_equal_time_pct"] > 30
    assert a["energy_saving_per_work_pct"] < a["power_saving_equal_time_pct"] - 15
    assert a["edp_change_per_work_pct"] > 0
    note = next(n for n in a["notes"] if n.startswith("throughput"))
    assert "no energy saving for the work" in note and "per txn" in note
    # every run gives energy per transaction and per second of vCPU work,
    # delay and their product
    for m in res.values():
        pw = m["energy"]["per_work"]
        assert pw["unit"] == "txn" and pw["energy_delay_j_s"] > 0
        for u in (pw["txn"], pw["work_s"]):
            assert u["work"] > 0
            assert u["j_per_unit"] == pytest.approx(m["energy"]["total_energy_j"] / u["work"], rel=1e-6)
            assert u["s_per_unit"] == pytest.approx(m["duration_s"] / u["work"], rel=1e-5)
            assert u["edp_per_unit"] == pytest.approx(u["j_per_unit"] * u["s_per_unit"], rel=1e-5)
        # every recorded transaction completes: both runs did the same work
        assert pw["txn"]["work"] == sum(v["marks"] for v in m["vms"].values())


def test_the_report_shows_energy_per_unit_of_work_one_row_per_run(heavy_spin, tmp_path):
    _, cap, rep, res = heavy_spin
    p = cratrace("report", cap, "--replays", rep, "-o", tmp_path / "r.html", "--json", "--tables", tmp_path / "t")
    assert p.returncode in (0, 1) and "Traceback" not in p.stderr, p.stderr
    doc = json.loads(p.stdout)
    rows = {r["run"]: r for r in doc["energy_per_work"]}
    assert set(rows) == {"recorded", "asymmetric+yield", "credit+yield"}
    summary = {r["run"]: r["energy J"] for r in doc["summary"]}
    for run, r in rows.items():
        assert r["unit"] == "txn"
        # the summary's energy, over the work
        assert r["energy J"] == pytest.approx(summary[run], abs=1e-3)
        assert r["J per unit"] == pytest.approx(r["energy J"] / r["work"], rel=1e-3)
    # a replay's energy in the report is the engine's: its cores'
    # frequencies and (for the pools) voltages
    for run in ("asymmetric+yield", "credit+yield"):
        assert rows[run]["energy J"] == pytest.approx(res[run]["energy"]["total_energy_j"], abs=1e-3)
    asym = rows["asymmetric+yield"]
    assert asym["vs all-fast: energy per work %"] == pytest.approx(-res["asymmetric+yield"]["asymmetric"]["energy_saving_per_work_pct"])
    assert rows["credit+yield"]["vs all-fast: energy per work %"] is None
    # the same table in --tables and the Markdown
    csv = pl.read_csv(tmp_path / "t" / "energy_per_work.csv")
    assert csv["run"].to_list() == [r["run"] for r in doc["energy_per_work"]]
    md = cratrace("report", cap, "--replays", rep, "-o", tmp_path / "r.md", "--format", "md")
    assert md.returncode in (0, 1), md.stderr
    assert "### Per unit of work" in (tmp_path / "r.md").read_text()


@pytest.fixture(scope="module")
def gang(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("gang")
    return {b: _capture(tmp / b, "gang", f"barrier={b}")[1] for b in ("spin", "block")}


def _phases_per_s(cap: Path, out: Path, slow_slice_ns: float, *sets: str) -> float:
    m = _replay(cap, out, ["asymmetric"], f"slow_slice_ns={slow_slice_ns}", *sets)["asymmetric"]
    assert m["vms"]["gang"]["marks"] > 50
    return m["vms"]["gang"]["throughput_per_s"]


def _gain(cap: Path, tmp: Path, *sets: str) -> float:
    short = _phases_per_s(cap, tmp / "10", 10e6, *sets)
    long = _phases_per_s(cap, tmp / "30", 30e6, *sets)
    return 100 * (short / long - 1)


def test_a_shorter_slow_slice_helps_a_spinning_gang_on_the_slow_cores(gang, tmp_path):
    # the gang's vCPUs on the slow cores, as LU-OMP's shared them in the
    # paper's 5.2: a spinning waiter holds its core for the rest of its
    # slice while a sibling that has not arrived waits behind it
    spinning = _gain(gang["spin"], tmp_path / "spin", "class.gang=io")
    sleeping = _gain(gang["block"], tmp_path / "block", "class.gang=io")
    assert spinning > 30, spinning
    assert abs(sleeping) < spinning / 2, (spinning, sleeping)
    # by the pools' own rule the gang mostly shares the fast cores: the
    # slow cores' slice then barely matters
    assert abs(_gain(gang["spin"], tmp_path / "own")) < 5
