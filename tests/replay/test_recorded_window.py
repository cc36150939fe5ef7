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


def test_a_cpu_that_recorded_nothing_is_still_the_hosts(tmp_path):
    """A host's CPU that stayed idle through a capture has no slice: the
    replayed host still has it (the trace's CPU count), so a what-if that
    adds VMs can use it."""
    import json

    raw, cap = tmp_path / "raw", tmp_path / "cap"
    cratrace("synth", "kvm-heavy-spin", "-o", raw, "--raw", "--seed", "3", "--set", "duration_ms=50", "--set", "pcpus=2", check=True)
    cratrace("import", raw, "-o", cap, "-q", check=True)
    cratrace("model", cap, "-q", check=True)
    # the same trace from a 4-CPU host whose CPUs 2 and 3 recorded nothing
    meta = json.loads((cap / "capture.json").read_text())
    assert meta["cpus"] == 2
    meta["cpus"] = 4
    (cap / "capture.json").write_text(json.dumps(meta))
    assert extract_workload(Capture(cap)).pcpus == 4
