"""The state codes crossing the native boundary come from the engine, one
source: every name the replay writes and every name the phase builder
reads is a vcpu_states state, and the codes are distinct."""

from __future__ import annotations

from cratrace import _native
from cratrace.model.vcpu_states import STATE
from cratrace.replay.run import STATE_NAMES
from cratrace.replay.workload import _STATE_CODES


def test_replayed_states_are_vcpu_states_names():
    names = _native.replay_state_names()
    assert set(STATE_NAMES) == set(names) and len(names) == 6
    assert set(STATE_NAMES.values()) <= set(STATE.categories)
    # the engine's own names, but for a finished thread (off CPU for good)
    assert {n for n in names.values()} - set(STATE.categories) == {"done"}


def test_phase_builder_codes_name_model_states():
    assert len(set(_STATE_CODES.values())) == len(_STATE_CODES)
    # "lost" marks a timeline gap from lost events; the rest are model states
    assert set(_STATE_CODES) - set(STATE.categories) == {"lost"}
    # preempted is not demand: the replayed scheduler makes it anew
    assert "preempted" not in _STATE_CODES
