"""`cratrace replay --scenario postcopy`: the published check (4 sequential
readers in a 1 GB, 1-vCPU VM, ~100 µs per fetch; originally 9.8 s with
async page faults vs 17.6 s without) and its trend with the number of
tasks. Our numbers come from the documented defaults, not tuned here;
they are printed, and only the direction is asserted. The one input
taken from the paper's results is the compute per touched page, set by
its baseline's 38% guest share (issue #41), which is checked as such.

Issue #41 also: fetches share the link and the source (they queue, they
do not overlap perfectly), and a vCPU's guest fraction never exceeds 1
(it read 105% at 8 and 16 tasks), here over tasks 1-16, seeds and vCPU
counts, and through the CLI on generated kvm-postcopy captures against
their ground truth."""

from __future__ import annotations

import json

import pytest

from cratrace.replay.postcopy import DEFAULTS, run_postcopy
from tests.helpers import cratrace as run_cli


def _run(tmp_path, *sets, seed=None):
    args = ["replay", "--scenario", "postcopy", "-o", tmp_path, "--force", "--json"] + ([] if seed is None else ["--seed", str(seed)])
    for s in sets:
        args += ["--set", s]
    p = run_cli(*args)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_async_page_faults_help_four_readers_and_less_with_one(tmp_path):
    four = _run(tmp_path, "tasks=4", "task_mb=50")
    one = _run(tmp_path, "tasks=1", "task_mb=50")
    print("4 readers:", four["async_pf_speedup_pct"], "% faster; 1 reader:", one["async_pf_speedup_pct"], "%")
    assert four["async_pf_speedup_pct"] > 20
    assert one["async_pf_speedup_pct"] < four["async_pf_speedup_pct"]
    a, b = four["runs"]["async_pf"], four["runs"]["no_async_pf"]
    assert b["vcpu_guest_fraction"][0] == pytest.approx(0.38, abs=0.005)  # the input, from the paper's baseline
    assert b["vcpu_guest_fraction"][0] < a["vcpu_guest_fraction"][0] <= 1
    assert a["faults"]["apf_not_present"] == a["faults"]["apf_ready"] > 0 and b["faults"]["sync_faults"] > 0
    assert four["model"]["compute_ns"] == DEFAULTS["compute_ns"] and 63_000 < DEFAULTS["compute_ns"] < 64_500
    assert a["fetch"]["idle_us"] == pytest.approx(100, abs=0.5)  # the paper's idle fetch


def test_the_speed_up_over_tasks_grows_then_saturates_and_a_full_link_takes_it_back(tmp_path):
    # 1 vCPU: from 2 tasks on the vCPU never waits, so the gain is bound by
    # its compute plus the async-PF overhead per page, however many tasks
    gains = {n: _run(tmp_path, f"tasks={n}", "task_mb=2")["async_pf_speedup_pct"] for n in (1, 2, 4, 8, 16)}
    print("speed-up % by tasks, 1 vCPU, 10 GbE:", gains)
    d = DEFAULTS
    c, apf_cost = d["compute_ns"], d["exit_entry_ns"] + d["not_present_ns"] + d["guest_switch_ns"] + d["guest_wake_ns"]
    bound = 100 * (1 - (c + apf_cost) / (c + d["idle_stall_ns"]))
    assert gains[1] < 0 < gains[2] <= gains[4] + 0.2
    assert all(abs(gains[n] - bound) < 1 for n in (4, 8, 16)), (gains, bound)
    # 4 vCPUs with 2 readers each: 10 GbE keeps up; 1 GbE fills (the
    # replies queue) and the gain shrinks
    ten = _run(tmp_path, "tasks=8", "vcpus=4", "task_mb=2")
    one = _run(tmp_path, "tasks=8", "vcpus=4", "task_mb=2", "link_bytes_per_s=125e6")
    print("4 vCPUs x 2 readers:", ten["async_pf_speedup_pct"], "% on 10 GbE,", one["async_pf_speedup_pct"], "% on 1 GbE")
    assert ten["runs"]["async_pf"]["fetch"]["link_utilisation"] < 0.5 < 0.95 < one["runs"]["async_pf"]["fetch"]["link_utilisation"] <= 1
    assert one["runs"]["async_pf"]["fetch"]["mean_wait_us"] > 10 * ten["runs"]["async_pf"]["fetch"]["mean_wait_us"]
    assert one["async_pf_speedup_pct"] < ten["async_pf_speedup_pct"] - 5


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_r41_the_guest_fraction_never_exceeds_one(tmp_path, seed):
    # 105% at 8 and 16 tasks before issue #41 (compute 2 µs, the old
    # default): a page-ready's wake-up counted as guest time while another
    # task computed; guest, host and halted time now add up to the elapsed
    for tasks in range(1, 17):
        for vcpus in (1, 2):
            for compute in (2000, DEFAULTS["compute_ns"]):
                sets = {"tasks": tasks, "vcpus": vcpus, "task_mb": 1, "compute_ns": compute, "kernel_fault_fraction": 0.2, "seed": seed, "guest_slice_ns": 100_000 * seed}
                res = run_postcopy(None, tmp_path, {k: str(v) for k, v in sets.items()}, force=True)
                for name, r in res["runs"].items():
                    for g, h in zip(r["vcpu_guest_fraction"], r["vcpu_halted_fraction"]):
                        assert 0 <= g <= 1 and 0 <= h <= 1 and g + h <= 1, (sets, name, r["vcpu_guest_fraction"])


def test_background_stream_completes_the_migration_and_settings_are_checked(tmp_path):
    r = _run(tmp_path, "tasks=2", "task_mb=8", "vm_mb=32", "background_start_ns=0")
    assert r["runs"]["async_pf"]["migration_done_s"] is not None
    assert r["runs"]["async_pf"]["bytes"]["background"] > 0
    bad = run_cli("replay", "--scenario", "postcopy", "-o", tmp_path, "--set", "nope=1")
    assert bad.returncode == 2 and "not a postcopy setting" in bad.stderr
    # not numbers, and numbers that divided by zero, never ended (a 0 ns guest slice) or meant nothing
    for setting in ("tasks=many", "guest_slice_ns=0", "link_bytes_per_s=0", "vcpus=0", "vcpus=1.5", "kernel_fault_fraction=2", "rtt_ns=-1",
                    "source_workers=0", "source_workers=1.5", "source_service_ns=-1", "mtu_bytes=40", "frame_bytes=-1", "msg_header_bytes=x"):
        bad = run_cli("replay", "--scenario", "postcopy", "-o", tmp_path, "--set", setting)
        assert bad.returncode == 2 and f"--set {setting}: expected" in bad.stderr and "internal error" not in bad.stderr, bad.stderr
    bad = run_cli("replay", "--scenario", "postcopy", "-o", tmp_path, "--seed", "-5")
    assert bad.returncode == 2 and "seed -5" in bad.stderr


def test_the_seed_drives_postcopys_kernel_mode_draws(tmp_path):
    runs = {n: _run(tmp_path / n, "kernel_fault_fraction=0.3", "tasks=2", "task_mb=8", "vm_mb=32", seed=s) for n, s in (("a", 3), ("b", 3), ("c", 4))}
    assert runs["a"] == runs["b"] and runs["a"]["params"]["seed"] == 3
    assert runs["a"]["runs"] != runs["c"]["runs"]


def test_same_inputs_and_seed_give_identical_metrics(tmp_path):
    sets = ("tasks=6", "vcpus=2", "task_mb=2", "kernel_fault_fraction=0.3", "source_workers=2", "link_bytes_per_s=125e6", "background_start_ns=0", "vm_mb=16")
    a, b = _run(tmp_path / "a", *sets, seed=9), _run(tmp_path / "b", *sets, seed=9)
    assert a == b
    assert (tmp_path / "a" / "postcopy" / "metrics.json").read_bytes() == (tmp_path / "b" / "postcopy" / "metrics.json").read_bytes()


@pytest.mark.parametrize("procs, async_pf", [(4, "true"), (16, "true"), (16, "false")])
def test_generated_captures_replay_their_faults_within_bounds(tmp_path, procs, async_pf):
    # synth kvm-postcopy -> import -> model -> replay --scenario postcopy:
    # every major fault of the truth reaches the replay as a touch, once,
    # and no vCPU spends more than its elapsed time in the guest
    raw, cap, out = tmp_path / "raw", tmp_path / "cap", tmp_path / "rep"
    run_cli("synth", "kvm-postcopy", "-o", raw, "--raw", "--seed", "4", "--set", f"procs={procs}", "--set", f"async_pf={async_pf}", "--set", "duration_ms=12", "--set", "switch_ms=2", check=True)
    run_cli("import", raw, "-o", cap, "-q", check=True)
    run_cli("model", cap, "-q", check=True)
    p = run_cli("replay", cap, "-o", out, "--scenario", "postcopy", "--json")
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    truth = json.loads(next(raw.glob("*.truth.json")).read_text())
    assert res["touches_from"] == "capture faults"
    a, b = res["runs"]["async_pf"], res["runs"]["no_async_pf"]
    faults = truth["totals"]["faults"]
    assert faults > 0 and b["faults"]["sync_faults"] == faults == b["fetch"]["demand"] == a["fetch"]["demand"]
    assert a["faults"]["apf_not_present"] + a["faults"]["blocked_double"] + a["faults"]["blocked_limit"] == faults
    assert len(a["vcpu_guest_fraction"]) == truth["params"]["vcpus"]
    for r in (a, b):
        assert all(0 <= g <= 1 for g in r["vcpu_guest_fraction"]), r["vcpu_guest_fraction"]
