"""Consolidation what-ifs through the CLI, with answers known from the
demand: two CPU-bound VMs of one vCPU pinned to one CPU (`cratrace synth
thermal` with one core), each with 0.1 s of work in a 0.2 s capture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import cratrace


def _replay(cap: Path, out: Path, *args: str) -> dict:
    p = cratrace("replay", cap, "-o", out, "--json", *args)
    assert p.returncode == 0, p.stderr
    (m,) = json.loads(p.stdout).values()
    return m


def _rate(m: dict, vm: str) -> float:
    return m["vms"][vm]["throughput_per_s"]


@pytest.mark.parametrize("policy", ["fair", "eevdf", "credit", "rr", "eevdf+wapd", "fair+pv"])
def test_dropping_one_of_two_cpu_bound_vms_on_one_cpu_doubles_the_others_rate(two_hogs, tmp_path, policy):
    # slices short beside the 0.1 s jobs (credit's 30 ms would end one VM
    # a slice before the other: 0.19 against 0.2 s)
    fine = ["--set", "credit_slice_ns=1000000"] if policy == "credit" else []
    both = _replay(two_hogs, tmp_path / "both", "-p", policy, *fine)
    alone = _replay(two_hogs, tmp_path / "alone", "-p", policy, "--drop-vm", "vm1", *fine)
    assert set(alone["vms"]) == {"vm0"} and alone["whatif"] == {"drop_vm": ["vm1"]}
    assert _rate(alone, "vm0") == pytest.approx(2 * _rate(both, "vm0"), rel=0.03)
    assert alone["vms"]["vm0"]["cpu_s"] == pytest.approx(both["vms"]["vm0"]["cpu_s"], rel=0.01)
    # a what-if is no replay of the recording: no fidelity gate
    assert both["fidelity"]["gate_applies"] == (policy == "rr") and not alone["fidelity"]["gate_applies"]
    if policy == "credit":
        assert both["whatif"] == {} and both["params"] == {"credit_slice_ns": "1000000"}


def test_a_copy_of_a_vm_takes_its_share_and_is_seeded(two_hogs, tmp_path):
    m = _replay(two_hogs, tmp_path / "a", "--add-vm", "vm0:2")
    assert sorted(m["vms"]) == ["vm0", "vm0+1", "vm0+2", "vm1"]
    # four hogs of 0.1 s on one CPU: 0.4 s, each with its 0.1 s of work
    assert m["duration_s"] == pytest.approx(0.4, rel=0.02)
    assert all(v["cpu_s"] == pytest.approx(0.1, rel=0.01) for v in m["vms"].values())
    again = _replay(two_hogs, tmp_path / "b", "--add-vm", "vm0:2")
    other = _replay(two_hogs, tmp_path / "c", "--add-vm", "vm0:2", "--seed", "7")
    assert (tmp_path / "a" / "rr" / "metrics.json").read_bytes() == (tmp_path / "b" / "rr" / "metrics.json").read_bytes()
    import polars as pl

    def copy_starts(out: Path) -> list[int]:
        st = pl.read_parquet(out / "rr" / "model" / "vcpu_states.parquet")
        # a copy's timeline starts blocked until its offset
        return [st.filter((pl.col("vm") == f"vm0+{k}") & (pl.col("state") != "blocked"))["start"].min() for k in (1, 2)]

    # each copy starts later by its own seeded offset (under 100 ms),
    # another seed, other offsets
    base = pl.read_parquet(tmp_path / "a" / "rr" / "model" / "vcpu_states.parquet")["start"].min()
    starts, other_starts = copy_starts(tmp_path / "a"), copy_starts(tmp_path / "c")
    assert all(0 < s - base < 100_000_000 for s in starts + other_starts) and starts != other_starts and other["seed"] == 7
    # a copy's name cannot be taken
    p = cratrace("replay", two_hogs, "-o", tmp_path / "d", "--add-vm", "nosuch")
    assert p.returncode == 2 and "no VM of that name" in p.stderr


@pytest.mark.parametrize("policy", ["fair", "eevdf"])
def test_a_cap_and_a_weight_split_the_cpu_as_cgroups_would(two_hogs, tmp_path, policy):
    capped = _replay(two_hogs, tmp_path / "cap", "-p", policy, "--set", "cap.vm0=30")
    # capped at 30% of a CPU per 100 ms period, the VM's 0.1 s of work is
    # three periods' quota and 10 ms of the fourth's: done at 0.31 s
    assert capped["vms"]["vm0"]["cpu_s"] == pytest.approx(0.1, rel=0.01)
    assert _rate(capped, "vm0") == pytest.approx(0.1 / 0.31, rel=0.03)
    assert capped["duration_s"] == pytest.approx(0.31, rel=0.03)
    weighted = _replay(two_hogs, tmp_path / "w", "-p", policy, "--set", "weight.vm0=300")
    # 3:1 while both run: vm0 gets three quarters of the CPU until done
    assert _rate(weighted, "vm0") == pytest.approx(0.75, rel=0.04)
    assert weighted["whatif"] == {"weight.vm0": "300"}


def test_fewer_cpus_are_reported_and_more_keep_pinned_vcpus_where_they_were(tmp_path):
    d = tmp_path
    cratrace("synth", "thermal", "-o", d / "raw", "--raw", "--set", "cores=2", "--set", "vcpus_per_core=1", "--set", "duration_ms=100", check=True)
    cratrace("import", d / "raw", "-o", d / "cap", "-q", check=True)
    cratrace("model", d / "cap", "-q", check=True)
    two = _replay(d / "cap", d / "two")
    one = _replay(d / "cap", d / "one", "--set", "pcpus=1")
    assert two["host"]["pcpus"] == 2 and one["host"]["pcpus"] == 1
    # each VM pinned to a CPU the one-CPU host lacks falls back to the one
    # there is: the two hogs share it and each runs at half speed
    for vm in ("vm0", "vm1"):
        assert _rate(one, vm) == pytest.approx(_rate(two, vm) / 2, rel=0.05)
