"""`--set` sorted and typed once: every engine parameter the engine
declares can be set (the Python side no longer keeps its own list, which
had fallen behind: lpar_slice_ns and lpar_epoch_ns were refused), the
run's settings arrive as typed values, and a bad one is a usage error."""

from __future__ import annotations

import pytest

from cratrace import _native
from cratrace.errors import UsageError
from cratrace.replay.settings import RunSettings, split_settings


def test_every_engine_parameter_is_a_setting():
    names = _native.replay_param_defaults()
    s = split_settings({k: "2" for k in names})
    assert s.engine == {k: 2.0 for k in names}
    assert {"lpar_slice_ns", "lpar_epoch_ns"} <= set(s.engine)


def test_run_settings_are_typed_with_their_defaults():
    assert split_settings({}).run == RunSettings()
    run = split_settings({"limit_s": "2.5", "fidelity_tolerance_pct": "10", "throughput_marker": "req_done", "sched_groups": "per-vm"}).run
    assert (run.limit_s, run.fidelity_tolerance_pct, run.throughput_marker, run.sched_groups) == (2.5, 10.0, "req_done", "per-vm")
    assert isinstance(run.limit_s, float) and run.given == {"limit_s", "fidelity_tolerance_pct", "throughput_marker", "sched_groups"}
    assert run.cpu_speed == "off" and run.affinity == "recorded"


@pytest.mark.parametrize("kv", ["limit_s=0", "fidelity_tolerance_pct=-1", "sched_groups=some", "cpu_speed=fast", "nope=1", "lpar_slice_ns=nan"])
def test_bad_settings_are_usage_errors_naming_them(kv):
    k, v = kv.split("=")
    with pytest.raises(UsageError, match=k):
        split_settings({k: v})
