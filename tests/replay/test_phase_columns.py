"""The replay's demand crosses into the engine as packed columns (the
workload's array.array columns, read in place, or their bytes) or as
lists, with one result."""

from __future__ import annotations

from array import array

import polars as pl
import pytest

from cratrace import _native
from cratrace.replay.workload import ACQUIRE, BLOCK, MARK, PHASE_TYPECODES, RELEASE, WORK, Workload


def _workload() -> Workload:
    w = Workload(t0=0, duration_ns=10**9)
    w.vm_names = ["a", "b"]
    for t in range(4):
        w.add_thread(100 + t, t % 2, t // 2, 0, 0)
        for k in range(30):
            for kind, a in ((WORK, 150_000 + 7_000 * ((t + k) % 5)), (ACQUIRE, 0), (WORK, 40_000), (RELEASE, 0), (MARK, 0), (BLOCK, 90_000 + k)):
                w.phase(t, kind, a, 0)
    return w


def _run(w: Workload, cols, policy: str = "fair+wapd", **phase_files) -> dict:
    """`w` replayed from the phase columns `cols` (None: none given) and
    `phase_files` (the spill's files, when given)."""
    args = dict(zip(("phase_thread", "phase_kind", "phase_a", "phase_b"), cols or ()))
    return dict(
        _native.replay(
            thread_tid=w.tids, thread_vm=w.vm_of, thread_vcpu=w.vcpu_of, thread_start=w.start, **args, **phase_files,
            vm_names=w.vm_names, vm_weights=[512, 512], vm_cpu_intensive=[None, None], vm_elasticity=[None, None],
            freq_khz=[2_000_000] * 2, recorded_khz=2_000_000, elasticity=-1.0, policy=policy, params={}, costs={}, limit_ns=10**12,
        )
    )


def test_arrays_packed_bytes_and_lists_replay_alike():
    w = _workload()
    assert [c.typecode for c in w.phase_columns()] == list(PHASE_TYPECODES)
    packed = _run(w, [c.tobytes() for c in w.phase_columns()])
    listed = _run(w, [c.tolist() for c in w.phase_columns()])
    arrays = _run(w, w.phase_columns())
    assert packed["events"] == listed["events"] == arrays["events"] > 0
    for k in ("cpu_ns", "spin_ns", "calls", "excessive", "overhead_ns", "end_ns"):
        assert packed[k] == listed[k] == arrays[k], k
    assert pl.DataFrame(packed["marks"]).equals(pl.DataFrame(arrays["marks"]))
    assert len(packed["marks"]) == 4 * 30
    # the arrays were read, not consumed or changed (the spill neither)
    assert len(w.phase_kind) == 4 * 30 * 6 and w.phase_kind[:6].tolist() == [WORK, ACQUIRE, WORK, RELEASE, MARK, BLOCK]


def test_an_array_of_another_type_is_refused_by_name():
    w = _workload()
    cols = list(w.phase_columns())
    cols[1] = array("H", cols[1])  # 2-byte kinds
    with pytest.raises(ValueError, match='replay: phase_kind: an array of typecode "H" \\(2 bytes\\); expected one of "B" of 1 bytes'):
        _run(w, cols)
    cols = list(w.phase_columns())
    cols[2] = array("d", map(float, cols[2]))  # 8 bytes, but not integers
    with pytest.raises(ValueError, match='replay: phase_a: an array of typecode "d"'):
        _run(w, cols)


def test_extend_phases_takes_packed_bytes_or_iterables():
    w = _workload()
    n = len(w.phase_thread)
    w.extend_phases(array("I", [1, 2]).tobytes(), bytes([WORK, MARK]), array("q", [5, 0]).tobytes(), [0, 0])
    assert len(w.phase_thread) == len(w.phase_b) == n + 2
    assert (w.phase_thread[-2:].tolist(), w.phase_kind[-2:].tolist(), w.phase_a[-2:].tolist()) == ([1, 2], [WORK, MARK], [5, 0])


def test_a_packed_column_of_a_broken_width_is_refused_by_name():
    w = _workload()
    cols = [c.tobytes() for c in w.phase_columns()]
    cols[2] = cols[2][:-3]
    with pytest.raises(ValueError, match="replay: phase_a: .* bytes is not a whole number of 8-byte values"):
        _run(w, cols)
