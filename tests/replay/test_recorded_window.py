"""Each VM's recorded throughput window opens at its first vCPU's start,
the capture's own start included (0 is a start, not "unset": a VM whose
first vCPU ran from the capture's first event had its window opened at
its second vCPU's start instead)."""

from __future__ import annotations

from cratrace.capture import Capture
from cratrace.replay.workload import extract_workload
from tests.helpers import cratrace


def test_the_window_opens_at_the_first_vcpus_start_even_at_zero(tmp_path):
    raw, cap = tmp_path / "raw", tmp_path / "cap"
    cratrace("synth", "kvm-heavy-spin", "-o", raw, "--raw", "--seed", "3", "--set", "duration_ms=100", check=True)
    cratrace("import", raw, "-o", cap, "-q", check=True)
    cratrace("model", cap, "-q", check=True)
    w = extract_workload(Capture(cap))
    starts: dict[str, list[int]] = {}
    for v, s in zip(w.vm_of, w.start):
        if v >= 0:
            starts.setdefault(w.vm_names[v], []).append(s)
    assert any(min(s) == 0 for s in starts.values()), "some VM's vCPU runs from the capture's start"
    assert any(max(s) > 0 for s in starts.values()), "and some vCPU starts later"
    for vm, s in starts.items():
        assert w.recorded_window[vm][0] == min(s), vm
