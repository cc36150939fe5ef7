"""benchmarks/whatif_validation.py in its quick mode: every what-if pair
recorded once and predicted, each row with its figures."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchmarks.whatif_validation import PAIRS, pair_spread
from tests.conftest import REPO, can_trace


def test_pair_spread_is_the_median_over_ordered_pairs():
    # 100 vs 110: 10% and 9.09%; 100 vs 90: 10% and 11.1%; 110 vs 90: 18.2% and 22.2%
    assert pair_spread([100.0, 110.0, 90.0]) == pytest.approx((10.0 + 11.111) / 2, rel=1e-3)
    assert pair_spread([100.0]) is None


@pytest.mark.tracing
@pytest.mark.slow
def test_quick_mode_predicts_every_pair():
    why = can_trace()
    if why:
        pytest.skip(why)
    p = subprocess.run([sys.executable, "benchmarks/whatif_validation.py", "--quick", "--json"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    assert [r["what_if"] for r in rows] == [name for name, *_ in PAIRS]
    for r in rows:
        assert r["source_throughput"] > 0 and r["target_throughput"] > 0 and r["predicted_throughput"] > 0, r
        # one recording per setting: no noise floor to compare with
        assert r["target_noise_pct"] is None
        # the predicted change is against the source replayed as recorded,
        # whose own error is given beside it
        assert isinstance(r["self_replay_error_pct"], float), r
    by = {r["what_if"]: r for r in rows}
    # two CPUs to one: the lab, CPU bound on two CPUs, loses about half,
    # on a host it has to itself. Beside a busy neighbour (a quarter of the
    # host's CPU time or more in threads of no VM, as the recordings show
    # it) "2 CPUs" was recorded on about one, and the change measures the
    # host, not the model: the magnitude is then not asserted.
    cpus = by["2 CPUs -> 1 CPU"]
    assert 0 <= cpus["source_others_pct"] <= 100 and 0 <= cpus["target_others_pct"] <= 100, cpus
    if max(cpus["source_others_pct"], cpus["target_others_pct"]) < 25:
        assert -60 < cpus["recorded_change_pct"] < -25 and -60 < cpus["predicted_change_pct"] < -25, cpus
    # the added VM's copy is named after its source
    assert "vm0+1" in by["2 VMs -> 3 VMs"]["per_vm"]["predicted"]
