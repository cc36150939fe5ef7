"""Replays of a lab capture recorded here: outputs, determinism, fidelity
reporting, and the behaviour the spin-reduction methods are known for."""

from __future__ import annotations

import json

import polars as pl
import pytest

from cratrace.errors import UsageError
from cratrace.replay import extract_workload, replay_capture
from cratrace.replay.plan import baseline_policy, linux_base_slice_ns, linux_newidle_odds, linux_release
from cratrace.replay.workload import ACQUIRE, MARK, RELEASE, WORK
from cratrace.tables import MODEL_TABLES
from tests.helpers import cratrace as run_cli
from tests.model.conftest import lab_capture  # noqa: F401  (session fixture)

POLICIES = ["fair", "fair+spin", "eevdf", "yield", "wapd", "wopd", "rslp", "credit"]


@pytest.fixture(scope="module")
def replays(lab_capture, tmp_path_factory):  # noqa: F811
    out = tmp_path_factory.mktemp("replays")
    return out, replay_capture(lab_capture, POLICIES, out)


def test_workload_has_every_transaction_under_the_lock(lab_capture):  # noqa: F811
    w = extract_workload(lab_capture)
    marks = sum(1 for k in w.phase_kind if k == MARK)
    assert marks == sum(w.recorded_marks.values()) > 100
    assert w.phase_kind.count(ACQUIRE) == w.phase_kind.count(RELEASE) == marks
    assert all(k != WORK or a > 0 for k, a in zip(w.phase_kind, w.phase_a))
    assert 50_000 < w.critical_ns["vm0"] < 1_000_000, "lab critical sections are 100 µs plus marker writes"


def test_outputs_are_canonical_tables_and_metrics(replays):
    out, res = replays
    for p in POLICIES:
        d = out / p
        for name, t in MODEL_TABLES.items():
            assert pl.read_parquet(d / "model" / f"{name}.parquet").columns == t.column_names, (p, name)
        m = json.loads((d / "metrics.json").read_text())
        # the figures are what the run's own tables hold, VM by VM
        states = pl.read_parquet(d / "model" / "vcpu_states.parquet")
        slices = pl.read_parquet(d / "model" / "cpu_slices.parquet").join(pl.read_parquet(d / "model" / "threads.parquet").select("tid", "vm", "role"), on="tid")
        marks = pl.read_parquet(d / "model" / "markers.parquet")
        for vm, v in m["vms"].items():
            spin = states.filter((pl.col("vm") == vm) & (pl.col("state") == "spinning"))["dur"].sum()
            assert v["spin_s"] == pytest.approx(spin / 1e9, abs=1e-6), (p, vm)
            cpu = slices.filter((pl.col("vm") == vm) & (pl.col("role") == "vcpu"))["dur"].sum()
            assert v["cpu_s"] == pytest.approx(cpu / 1e9, abs=1e-6), (p, vm)
            assert v["marks"] == marks.filter(pl.col("vm") == vm).height, (p, vm)
        host = m["host"]
        assert host["etr"] == pytest.approx(sum(v["throughput_per_s"] for v in m["vms"].values() if v["marks"]), rel=1e-6)
        assert host["itr"] == pytest.approx(host["etr"] / (host["busy_pct"] / 100), rel=1e-3)
        assert 0 <= host["guest_util_pct"] <= host["busy_pct"] <= 100
        assert {"cpu_time_err_pct", "throughput_err_pct", "passed"} <= set(m["fidelity"])
        assert m["events"] > 0 and "seed" in m and "wall_s" in json.loads((d / "run.json").read_text())


def test_every_transaction_is_replayed_and_vcpu_timelines_are_gap_free(replays, lab_capture):  # noqa: F811
    out, res = replays
    recorded = sum(lab_capture.model["markers"].collect().filter(pl.col("name") == "txn_end").group_by("vm").len()["len"])
    for p in POLICIES:
        assert sum(v["marks"] for v in res[p]["vms"].values()) == recorded, p
        vs = pl.read_parquet(out / p / "model" / "vcpu_states.parquet").sort("vm", "vcpu", "start")
        gaps = vs.group_by("vm", "vcpu").agg(((pl.col("start") - pl.col("end").shift(1)).drop_nulls() == 0).all().alias("ok"))
        assert gaps["ok"].all(), p
        sl = pl.read_parquet(out / p / "model" / "cpu_slices.parquet").sort("cpu", "start")
        assert sl.group_by("cpu").agg(((pl.col("start") - pl.col("end").shift(1)).drop_nulls() == 0).all().alias("ok"))["ok"].all(), p


def test_same_inputs_and_seed_give_byte_identical_outputs(lab_capture, tmp_path):  # noqa: F811
    # also when the policies are replayed at once (threads sharing the
    # plan and its workload): one at a time, then all three together
    policies = ["wapd", "credit", "asymmetric+yield"]
    a, b = tmp_path / "a", tmp_path / "b"
    ma = replay_capture(lab_capture, policies, a, seed=7, jobs=1)
    mb = replay_capture(lab_capture, policies, b, seed=7, jobs=3)
    assert list(mb) == policies and ma == mb
    for p in policies:
        files = sorted(f for f in (a / p).rglob("*") if f.is_file() and f.name != "run.json")
        assert len(files) >= 10, p
        for f in files:
            assert f.read_bytes() == (b / p / f.relative_to(a / p)).read_bytes(), f


def test_the_seed_drives_the_policies_random_draws(lab_capture, tmp_path):  # noqa: F811
    # eevdf's newidle balancing throws a die per idle CPU (newidle_odds 1,
    # Linux 6.18.5+): the seed chooses the throws, nothing else is random
    odds = {"newidle_odds": "1"}
    runs = {name: replay_capture(lab_capture, ["eevdf"], tmp_path / name, settings=odds, seed=seed)["eevdf"] for name, seed in (("a", 7), ("b", 7), ("c", 8))}
    states = {name: (tmp_path / name / "eevdf" / "model" / "cpu_slices.parquet").read_bytes() for name in runs}
    assert states["a"] == states["b"] and runs["a"] == runs["b"]
    assert states["a"] != states["c"]
    assert [runs[n]["seed"] for n in "ac"] == [7, 8]
    # energy-balance decides and realises swaps by its rule alone: no draws
    eb = {seed: replay_capture(lab_capture, ["energy-balance"], tmp_path / f"eb{seed}", settings={"force_swap_hz": "200", "balance_k": "1e12"}, seed=seed)["energy-balance"] for seed in (7, 8)}
    assert eb[7]["energy_balance"] == eb[8]["energy_balance"] and eb[7]["energy_balance"]["swaps_decided"] > 100
    with pytest.raises(UsageError, match="--seed -1"):
        replay_capture(lab_capture, ["fair"], tmp_path / "d", seed=-1)


def test_fidelity_is_measured_and_reported_not_hidden(replays, lab_capture):  # noqa: F811
    _, res = replays
    base = baseline_policy(lab_capture)
    assert base in ("eevdf", "fair")
    f = res[base]["fidelity"]
    assert f["gate_applies"] is True
    assert res["fair" if base == "eevdf" else "eevdf"]["fidelity"]["gate_applies"] is False
    # the throughput error is the worst VM's, from the per-VM figures beside it
    worst = max(abs(v["throughput_per_s"] / v["recorded_throughput_per_s"] - 1) * 100 for v in res[base]["vms"].values() if v["recorded_throughput_per_s"])
    assert f["throughput_err_pct"] == pytest.approx(worst, abs=1e-3)
    assert f["passed"] == (f["cpu_time_err_pct"] <= 5 and f["throughput_err_pct"] <= 5)
    assert res["wapd"]["fidelity"]["gate_applies"] is False


def test_recorded_spin_is_reported_beside_the_replayed(replays, lab_capture):  # noqa: F811
    _, res = replays
    rec = dict(lab_capture.sql("SELECT vm, sum(\"end\" - start) FROM vcpu_states WHERE state = 'spinning' GROUP BY vm").rows())
    assert rec, "the lab capture has spinning vCPUs"
    for p in POLICIES:
        for vm, v in res[p]["vms"].items():
            assert v["recorded_spin_s"] == pytest.approx(int(rec.get(vm, 0)) / 1e9, abs=1e-6), (p, vm)


def test_spin_responses_change_spin_waste_and_calls(replays):
    _, res = replays
    spin = {p: sum(v["spin_s"] for v in res[p]["vms"].values()) for p in POLICIES}
    assert spin["wapd"] < spin["fair"], spin
    assert res["fair"]["host"]["hypercalls"] == 0
    assert res["wapd"]["host"]["hypercalls"] > 0 and res["yield"]["host"]["hypercalls"] > 0


def test_cli_replay_exit_code_follows_the_gate(lab_capture, tmp_path):  # noqa: F811
    # no --policy: the policy that produced the capture, gate applied
    p = run_cli("replay", lab_capture.path, "-o", tmp_path / "r", "--json")
    (name, m), = json.loads(p.stdout).items()
    assert name == baseline_policy(lab_capture) and m["fidelity"]["gate_applies"]
    assert p.returncode == (0 if m["fidelity"]["passed"] else 1)
    bad = run_cli("replay", lab_capture.path, "-o", tmp_path / "r2", "-p", "fair+magic")
    assert bad.returncode == 2 and "magic" in bad.stderr and "allowed" in bad.stderr
    bad = run_cli("replay", lab_capture.path, "-o", tmp_path / "r2", "-p", "wapd+rslp")
    assert bad.returncode == 2 and "two spin responses (wapd and rslp)" in bad.stderr
    bad = run_cli("replay", lab_capture.path, "-o", tmp_path / "r3", "--set", "nonsense=1")
    assert bad.returncode == 2 and "unknown setting" in bad.stderr
    # values that are not numbers: a usage error naming them, not an internal one
    for setting in ("ple_window_ns=abc", "context_switch_ns=nan", "pcpus=x", "limit_s=soon"):
        bad = run_cli("replay", lab_capture.path, "-o", tmp_path / "r4", "--set", setting)
        assert bad.returncode == 2 and f"--set {setting}: expected" in bad.stderr and "internal error" not in bad.stderr, bad.stderr
    # and numbers out of range: freq_khz=0 never finished (work at 0 kHz), the others were taken
    for setting, says in (("freq_khz=0", "above 0"), ("pcpus=2.5", "whole number"), ("elasticity=5", "from -1"),
                          ("context_switch_ns=-5", ">= 0"), ("limit_s=0", "above 0"), ("fidelity_tolerance_pct=-1", ">= 0")):
        bad = run_cli("replay", lab_capture.path, "-o", tmp_path / "r5", "--set", setting)
        assert bad.returncode == 2 and f"--set {setting}: expected" in bad.stderr and says in bad.stderr, bad.stderr


def test_an_existing_output_is_refused_before_any_policy_runs(lab_capture, tmp_path):  # noqa: F811
    # the second policy's output is there: nothing is replayed, the first
    # policy's output is not written; --force replaces only what a replay
    # wrote (issue 42: it replaced a directory of the user's)
    out = tmp_path / "r"
    (out / "wapd").mkdir(parents=True)
    (out / "wapd" / "keep.txt").write_text("mine")
    p = run_cli("replay", lab_capture.path, "-o", out, "-p", "fair", "-p", "wapd")
    assert p.returncode == 2 and "wapd" in p.stderr and "--force" in p.stderr, p.stderr
    assert not (out / "fair").exists() and (out / "wapd" / "keep.txt").read_text() == "mine"
    p = run_cli("replay", lab_capture.path, "-o", out, "-p", "fair", "-p", "wapd", "--force")
    assert p.returncode == 2 and "not a replay output cratrace wrote" in p.stderr, p.stderr
    assert not (out / "fair").exists() and (out / "wapd" / "keep.txt").read_text() == "mine"
    (out / "wapd" / "keep.txt").unlink()
    assert run_cli("replay", lab_capture.path, "-o", out, "-p", "fair", "-p", "wapd").returncode == 2  # still there, empty
    assert run_cli("replay", lab_capture.path, "-o", out, "-p", "fair", "-p", "wapd", "--force").returncode in (0, 1)
    assert (out / "fair" / "metrics.json").is_file() and (out / "wapd" / "metrics.json").is_file()
    first = (out / "wapd" / "metrics.json").stat().st_ino
    assert run_cli("replay", lab_capture.path, "-o", out, "-p", "wapd", "--force").returncode in (0, 1)
    assert (out / "wapd" / "metrics.json").stat().st_ino != first and not [x for x in out.iterdir() if x.name.startswith(".")]


def test_a_workload_read_a_vcpu_at_a_time_is_the_same_workload(lab_capture, monkeypatch):  # noqa: F811
    # a long capture's timelines are read a batch of vCPUs at a time;
    # every field of the workload (phases, starts, recorded figures,
    # diagnostics) must be what reading them whole gives
    import dataclasses

    from cratrace.replay import workload as wl

    whole = extract_workload(lab_capture, switch_ns=2000, migration_ns=5000)
    monkeypatch.setattr(wl, "SEGMENTS_PER_BATCH", 1)
    batched = extract_workload(lab_capture, switch_ns=2000, migration_ns=5000)
    assert len(whole.vm_names) == 2 and len(whole.phase_kind) > 1000
    for f in dataclasses.fields(whole):
        assert getattr(batched, f.name) == getattr(whole, f.name), f.name


def test_python_policy_interface_replays_every_transaction(lab_capture, tmp_path):  # noqa: F811
    from cratrace.replay.policy import RoundRobin

    res = replay_capture(lab_capture, [], tmp_path, python_policies={"rr": RoundRobin(), "rr-spin": RoundRobin(yield_on_spin=False)})
    recorded = sum(extract_workload(lab_capture).recorded_marks.values())
    for name, m in res.items():
        assert sum(v["marks"] for v in m["vms"].values()) == recorded, name
        assert pl.read_parquet(tmp_path / name / "model" / "vcpu_states.parquet").height > 0
    assert res["rr"]["host"]["hypercalls"] > 0  # yields are counted as calls
    assert sum(v["spin_s"] for v in res["rr-spin"]["vms"].values()) > sum(v["spin_s"] for v in res["rr"]["vms"].values())


def test_energy_balance_policy_reports_swaps_and_per_core_energy(lab_capture, tmp_path):  # noqa: F811
    res = replay_capture(lab_capture, ["fair+energy-balance"], tmp_path)
    eb = res["fair+energy-balance"]["energy_balance"]
    assert eb["swaps_decided"] >= eb["swaps_realised"] > 0
    assert len(eb["core_energy_j"]) == res["fair+energy-balance"]["host"]["pcpus"]
    pw = pl.read_parquet(tmp_path / "fair+energy-balance" / "model" / "power.parquet")
    assert set(pw["kind"]) == {"energy"} and pw["value"].sum() == pytest.approx(sum(eb["core_energy_j"]), rel=1e-6)
    # what the balancer weighed is the energy the run reports: both count
    # a thread's time from its dispatch, the switch included
    assert eb["core_energy_j"] == pytest.approx(res["fair+energy-balance"]["energy"]["core_energy_j"], rel=1e-3)
    forced = replay_capture(lab_capture, ["energy-balance"], tmp_path / "f", settings={"force_swap_hz": "100", "balance_k": "1e12"})
    m = forced["energy-balance"]
    assert m["energy_balance"]["swaps_decided"] == pytest.approx(100 * m["duration_s"], abs=2)


def test_asymmetric_policy_pools_vcpus_and_reports_saving_against_all_fast(lab_capture, tmp_path):  # noqa: F811
    w = extract_workload(lab_capture)
    vm0, vm1 = w.vm_names[:2]
    # labels per VM (the lab's vCPUs block often: unlabelled they all count as I/O)
    res = replay_capture(lab_capture, ["asymmetric+yield"], tmp_path, settings={"fast_cores": "1", "spill_slow": "0", f"class.{vm0}": "cpu", f"class.{vm1}": "io"})
    m = res["asymmetric+yield"]
    a = m["asymmetric"]
    assert a["pools"]["fast"]["cores"] == [0] and a["pools"]["fast"]["khz"] == 2_790_000
    assert {x.split("/")[0] for x in a["pools"]["fast"]["vcpus"]} == {vm0}
    assert {x.split("/")[0] for x in a["pools"]["slow"]["vcpus"]} == {vm1}
    assert a["baseline"] == "credit+yield with every core fast"
    # vm1's demand on a slow core at 0.65 V costs less dynamic energy per
    # unit of its work than at 1.40 V, and draws less power
    assert a["dynamic_energy_saving_per_work_pct"] > 0 and a["dynamic_power_saving_equal_time_pct"] > 0
    e = m["energy"]
    assert sum(e["core_energy_j"]) == pytest.approx(e["total_energy_j"], rel=1e-5)
    # every vCPU's slices stay in its pool
    sl = pl.read_parquet(tmp_path / "asymmetric+yield" / "model" / "cpu_slices.parquet").filter(pl.col("tid") != 0)
    tids = {v: [t for t, x in zip(w.tids, w.vm_of) if x >= 0 and w.vm_names[x] == v] for v in (vm0, vm1)}
    assert set(sl.filter(pl.col("tid").is_in(tids[vm0]))["cpu"]) == {0}
    assert 0 not in set(sl.filter(pl.col("tid").is_in(tids[vm1]))["cpu"])
    # CPU-bound work (elasticity -1) scales with slow-core/recorded frequency;
    # a frequency-insensitive VM (elasticity 0) keeps its recorded CPU time
    ins = replay_capture(lab_capture, ["asymmetric+yield"], tmp_path / "e", settings={"fast_cores": "1", "spill_slow": "0", f"class.{vm0}": "cpu", f"class.{vm1}": "io", f"elasticity.{vm1}": "0"})
    ratio = m["vms"][vm1]["cpu_s"] / ins["asymmetric+yield"]["vms"][vm1]["cpu_s"]
    # (a capture without frequencies is taken as recorded at the fast cores' 2.79 GHz)
    recorded = w.freq_khz if w.freq_known else 2_790_000
    assert ratio == pytest.approx(recorded / 1_330_000, rel=0.05)
    bad = run_cli("replay", lab_capture.path, "-o", tmp_path / "b", "--policy", "asymmetric", "--set", "class.nosuchvm=io")
    assert bad.returncode == 2 and "no VM named 'nosuchvm'" in bad.stderr


def test_the_baseline_policy_follows_the_host_kernel():
    from types import SimpleNamespace

    def cap(kernel=None, kind="tracedat"):
        return SimpleNamespace(meta={"sources": [{"kind": kind}], "host": {"kernel": kernel} if kernel else {}}, model={})

    assert linux_release("Linux 6.18.44-fc-v595 #1 SMP PREEMPT_DYNAMIC @0 x86_64") == (6, 18, 44)
    assert linux_release("Linux 5.10.0-28-amd64 #1 SMP Debian") == (5, 10, 0)
    assert linux_release("Linux 6.19-rc4 #1 SMP") == (6, 19, 0)
    assert linux_release("FreeBSD 14.0") is None
    assert baseline_policy(cap("Linux 6.6.0 #1")) == "eevdf"
    assert baseline_policy(cap("Linux 6.5.13 #1")) == "fair"
    assert baseline_policy(cap()) == "fair"
    assert baseline_policy(cap("Linux 6.18.0", kind="xentrace")) == "credit"
    # vCPUs that halted inside spin episodes ran paravirtual spinlocks
    assert baseline_policy(cap("Linux 6.6.0 #1"), SimpleNamespace(pv_halts=3)) == "eevdf+pv"
    assert baseline_policy(cap("Linux 5.15.0 #1"), SimpleNamespace(pv_halts=1)) == "fair+pv"
    assert baseline_policy(cap("Linux 6.6.0 #1"), SimpleNamespace(pv_halts=0)) == "eevdf"


def test_the_base_slice_follows_the_recorded_kernel():
    # 0.70 ms from Linux 6.15, scaled by 1 + log2(CPUs) with CPUs capped at 8
    assert linux_base_slice_ns((6, 18), 2) == pytest.approx(1.4e6)
    assert linux_base_slice_ns((6, 15), 1) == pytest.approx(0.7e6)
    assert linux_base_slice_ns((7, 0), 6) == pytest.approx(2.1e6)
    assert linux_base_slice_ns((6, 18), 64) == pytest.approx(2.8e6)
    # before 6.15 (and for unknown kernels) the engine's 0.75 ms default
    assert linux_base_slice_ns((6, 14), 2) is None
    assert linux_base_slice_ns(None, 2) is None


def test_newidle_odds_follow_the_recorded_kernel():
    # proportional newidle balancing came with 6.18.5 and 6.19
    assert linux_newidle_odds((6, 18, 4)) == 0.0
    assert linux_newidle_odds((6, 12, 40)) == 0.0
    assert linux_newidle_odds((6, 18, 5)) is None
    assert linux_newidle_odds((6, 19, 0)) is None
    assert linux_newidle_odds(None) is None


def test_threads_whose_runtime_the_kernel_updated_every_few_us_get_exact_slice_ends(lab_capture):  # noqa: F811
    from cratrace.replay.workload import fine_accounting

    ev = pl.LazyFrame({"field_pid": [1, 1, 1, 2, 2, 0], "runtime": [2_000, 3_000, 2_500, 4_000_000, 100_000, 5]})
    assert fine_accounting(ev) == {1}
    assert fine_accounting(None) == set()
    # the lab's counted bursts make no system calls (as a vCPU in guest
    # mode): in a real capture no vCPU's runtime is updated every few µs
    w = extract_workload(lab_capture)
    vcpus = [f for f, v in zip(w.fine_accounting, w.vm_of) if v >= 0]
    assert vcpus and not any(vcpus)


def test_work_is_net_of_the_switches_the_replay_charges_again(lab_capture):  # noqa: F811
    # a recorded run's time includes the switch into it (and the move, if
    # it changed CPU); the engine charges both again at each dispatch
    gross = extract_workload(lab_capture)
    net = extract_workload(lab_capture, switch_ns=2_000, migration_ns=5_000)

    def work(w, t):
        return sum(a for th, k, a in zip(w.phase_thread, w.phase_kind, w.phase_a) if th == t and k == WORK)

    states = lab_capture.model["vcpu_states"].collect().sort("tid", "start")
    on = pl.col("state").is_in(["guest", "vmm", "spinning"])
    runs = (
        states.with_columns(on.alias("on"))
        .with_columns((pl.col("on") & ~pl.col("on").shift(1).over("tid").fill_null(False)).cum_sum().over("tid").alias("run"))
        .filter(pl.col("on"))
        .group_by("tid", "run")
        .agg(pl.col("state").first(), pl.col("dur").first(), pl.col("pcpu").first(), pl.col("start").first())
        .sort("tid", "start")
        .with_columns((pl.col("pcpu") != pl.col("pcpu").shift(1).over("tid")).fill_null(False).alias("moved"))
    )
    vcpus = set(states["tid"].unique().to_list())
    for t, tid in enumerate(gross.tids):
        paid = work(gross, t) - work(net, t)
        if tid in vcpus:
            r = runs.filter(pl.col("tid") == tid)
            most = 2_000 * r.height + 5_000 * r["moved"].sum()
            # runs that began with at least 7 µs of guest time paid in full
            least = r.filter((pl.col("state") == "guest") & (pl.col("dur") >= 7_000)).height * 2_000
            assert least <= paid <= most and least > 0, (tid, least, paid, most)
        else:
            s = lab_capture.model["cpu_slices"].collect().filter(pl.col("tid") == tid).sort("start")
            moved = (s["cpu"] != s["cpu"].shift(1)).fill_null(False)
            assert paid == sum(min(d, 2_000 + 5_000 * m) for d, m in zip(s["dur"], moved))


def test_workload_keeps_the_hosts_scheduling_groups_and_recorded_cpus(lab_capture):  # noqa: F811
    w = extract_workload(lab_capture)
    threads = lab_capture.model["threads"].collect()
    groups = lab_capture.meta.get("sched_groups") or {}
    vcpu_tids = set(threads.filter(pl.col("role") == "vcpu")["tid"].to_list())
    if groups.get("autogroup_enabled") or any(g["kind"] == "cgroup" for g in groups.get("groups", {}).values()):
        # the lab ran in one session (the collector starts its command in
        # a new one): every vCPU in the same group, named as recorded
        vcpu_groups = set(threads.filter(pl.col("role") == "vcpu")["sched_group"].to_list())
        assert len(vcpu_groups) == 1 and None not in vcpu_groups
        idx = {g for g, t in zip(w.group_of, w.tids) if t in vcpu_tids}
        assert len(idx) == 1 and w.group_names[idx.pop()] == vcpu_groups.pop()
        assert len(w.group_names) == len(w.group_shares) and all(s > 0 for s in w.group_shares)
    # every work phase knows a CPU of the recording (1-based; 0: unknown)
    cpus = {b for k, b in zip(w.phase_kind, w.phase_b) if k == WORK}
    assert cpus == set(range(1, lab_capture.meta["cpus"] + 1))


def test_sched_groups_are_replayed_when_asked_and_bad_values_are_refused(lab_capture, tmp_path):  # noqa: F811
    on = replay_capture(lab_capture, ["eevdf"], tmp_path / "on", settings={"sched_groups": "recorded"})["eevdf"]
    auto = replay_capture(lab_capture, ["eevdf"], tmp_path / "auto")["eevdf"]
    assert on["host"]["sched_groups"] == len(set(extract_workload(lab_capture).group_of) - {-1})
    assert on["params"] == {"sched_groups": "recorded"} and on["host"]["sched_groups_mode"] == "recorded"
    # the lab's VMs shared one session: one group for all of them, so auto
    # replays groups only if other sessions were busy beside it (this
    # machine's other load), measured here from the tables themselves
    from cratrace.replay.plan import OTHER_GROUPS_SHARE

    th = lab_capture.model["threads"].collect()
    vm_groups = th.filter(pl.col("role") == "vcpu")["sched_group"].unique().to_list()
    others = th.filter(pl.col("role").ne_missing("vcpu") & pl.col("sched_group").is_not_null() & ~pl.col("sched_group").is_in(vm_groups))["tid"]
    busy = lab_capture.model["cpu_slices"].collect().filter(pl.col("tid").is_in(others.implode()))["dur"].sum()
    lo, hi = lab_capture.meta["time_range_ns"]
    share = busy / ((hi - lo + 1) * extract_workload(lab_capture).pcpus)
    assert len(vm_groups) == 1
    if share < OTHER_GROUPS_SHARE:
        assert auto["host"]["sched_groups_mode"] == "off" and auto["host"]["sched_groups"] == 0
    else:
        assert auto["host"]["sched_groups_mode"] == "recorded" and auto["host"]["sched_groups"] >= 2
    bad = run_cli("replay", lab_capture.path, "-o", tmp_path / "bad", "--set", "sched_groups=flat")
    assert bad.returncode == 2 and "sched_groups=flat" in bad.stderr and bad.stderr.strip().count("\n") == 0


def test_a_throughput_marker_asked_for_by_name_must_be_in_the_capture(lab_capture, tmp_path):  # noqa: F811
    # a typo would otherwise turn every VM's throughput into useful guest
    # seconds per second (the no-marker fallback) without a word
    typo = run_cli("replay", lab_capture.path, "-o", tmp_path / "typo", "--set", "throughput_marker=txn_ned")
    assert typo.returncode == 2 and typo.stderr.strip().count("\n") == 0, typo.stderr
    assert "txn_ned" in typo.stderr and "txn_end" in typo.stderr  # the names it does have
    empty = run_cli("replay", lab_capture.path, "-o", tmp_path / "empty", "--set", "throughput_marker=")
    assert empty.returncode == 2 and "throughput_marker" in empty.stderr
    assert not (tmp_path / "typo").exists() and not (tmp_path / "empty").exists()
    # the default, named explicitly, is accepted and counts marks
    m = replay_capture(lab_capture, ["eevdf"], tmp_path / "named", settings={"throughput_marker": "txn_end"})["eevdf"]
    assert all(v["throughput_unit"] == "marks/s" for v in m["vms"].values())


def test_auto_groups_only_when_each_vm_has_a_group_of_its_own():
    from cratrace.replay.plan import resolve_sched_groups
    from cratrace.replay.workload import Workload

    def w(vm_of, group_of):
        return Workload(t0=0, duration_ns=1, vm_of=vm_of, group_of=group_of)

    assert resolve_sched_groups(w([0, 0, 1, 1, -1], [0, 0, 1, 1, 2]), "auto") == "recorded"
    assert resolve_sched_groups(w([0, 0, 1, 1, -1], [0, 0, 0, 0, 1]), "auto") == "off"  # one group for both VMs
    assert resolve_sched_groups(w([0, 0, 1, 1], [0, -1, 1, 1]), "auto") == "off"  # a vCPU in the root group
    assert resolve_sched_groups(w([0, 1], [-1, -1]), "auto") == "off"  # nothing recorded
    assert resolve_sched_groups(w([0, 0], [0, 0]), "auto") == "off"  # one VM: no split to decide
    assert resolve_sched_groups(w([0, 1], [-1, -1]), "recorded") == "recorded"


def test_auto_groups_when_another_group_was_busy_beside_the_vms():
    # both VMs in one session (group 0); a host thread in another (1) and
    # one in the root group (-1); 2 CPUs for 1 s: 2e9 ns of CPU time
    from cratrace.replay.plan import OTHER_GROUPS_SHARE, resolve_sched_groups
    from cratrace.replay.workload import Workload

    def w(other_ns, root_ns=0):
        return Workload(t0=0, duration_ns=10**9, pcpus=2, vm_of=[0, 0, 1, 1, -1, -1], group_of=[0, 0, 0, 0, 1, -1], recorded_cpu_ns=[4 * 10**8] * 4 + [other_ns, root_ns])

    edge = int(OTHER_GROUPS_SHARE * 2e9)
    assert resolve_sched_groups(w(edge), "auto") == "recorded"
    assert resolve_sched_groups(w(edge - 1), "auto") == "off"
    # the root group's threads compete one by one, as in a flat queue
    assert resolve_sched_groups(w(0, root_ns=10**9), "auto") == "off"
    assert resolve_sched_groups(w(edge), "off") == "off"


def test_recorded_placement_runs_work_where_the_capture_ran_it(lab_capture, tmp_path):  # noqa: F811
    res = replay_capture(lab_capture, ["eevdf+recorded"], tmp_path)["eevdf+recorded"]
    rec = lab_capture.sql("SELECT tid, pcpu, sum(\"end\" - start)::BIGINT AS ns FROM vcpu_states WHERE state = 'guest' GROUP BY tid, pcpu")
    rep = pl.read_parquet(tmp_path / "eevdf+recorded" / "model" / "vcpu_states.parquet")
    rep = rep.filter(pl.col("state") == "guest").group_by("tid", "pcpu").agg((pl.col("end") - pl.col("start")).sum().alias("ns"))
    share = lambda df: {(t, c): ns / df.filter(pl.col("tid") == t)["ns"].sum() for t, c, ns in df.select("tid", "pcpu", "ns").iter_rows()}  # noqa: E731
    a, b = share(rec), share(rep)
    # each vCPU's guest time splits over the CPUs as it did when recorded
    assert max(abs(a.get(k, 0) - b.get(k, 0)) for k in set(a) | set(b)) < 0.1
    assert res["events"] > 0
