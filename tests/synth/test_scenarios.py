"""Every scenario's file is read by `trace-cmd report` without complaint, its
event counts equal the truth's, the same seed gives the same bytes, and the
truth's headline numbers can be recounted from trace-cmd's own output.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from cratrace.synth.generate import is_xentrace, synthesize
from cratrace.synth.scenarios import SCENARIOS
from tests.synth.conftest import trace_cmd_report

# trace.dat scenarios (xentrace ones: tests/synth/test_xen_io_billing.py)
TRACEDAT = [n for n, m in SCENARIOS.items() if not is_xentrace(m)]

# small but non-trivial settings so the whole file runs in seconds
SMALL = {
    "kvm-heavy-spin": {"duration_ms": "15", "hold_us": "20"},
    "kvm-io-billing": {"duration_ms": "10", "workload": "cpu-net"},
    "kvm-postcopy": {"duration_ms": "12", "switch_ms": "2"},
    "hetero": {"duration_ms": "20"},
    "thermal": {"duration_ms": "40"},
    "gang": {"duration_ms": "30", "phase_us": "1000", "slice_us": "3000"},
}


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    d = tmp_path_factory.mktemp("synth")
    out = {}
    for name in TRACEDAT:
        path = d / f"{name}.dat"
        truth = synthesize(name, path, seed=7, overrides=SMALL[name])
        out[name] = (path, truth, trace_cmd_report(path))
    return out


@pytest.mark.parametrize("name", TRACEDAT)
def test_trace_cmd_reads_it_and_counts_match(generated, name):
    path, truth, rep = generated[name]
    assert rep.rc == 0, rep.stderr
    assert rep.stderr == ""
    assert rep.counts() == truth["event_counts"]
    assert sum(truth["event_counts"].values()) == truth["total_events"] > 0
    on_disk = json.loads(path.with_name(path.name + ".truth.json").read_text())
    assert on_disk["scenario"] == name and on_disk["seed"] == 7 and on_disk["scenario_version"] >= 1
    assert on_disk["event_counts"] == truth["event_counts"]
    # per-CPU timestamps are non-decreasing and inside the declared span
    for cpu in {ln.cpu for ln in rep.lines}:
        ts = [ln.ts for ln in rep.lines if ln.cpu == cpu]
        assert ts == sorted(ts)
        assert truth["start_ns"] <= ts[0] and ts[-1] <= truth["end_ns"] + 1_000_000


@pytest.mark.parametrize("name", TRACEDAT)
def test_same_seed_same_bytes_other_seed_differs(tmp_path, name):
    a, b, c = tmp_path / "a.dat", tmp_path / "b.dat", tmp_path / "c.dat"
    synthesize(name, a, seed=3, overrides=SMALL[name])
    synthesize(name, b, seed=3, overrides=SMALL[name])
    synthesize(name, c, seed=4, overrides=SMALL[name])
    assert a.read_bytes() == b.read_bytes()
    assert (tmp_path / "a.dat.truth.json").read_bytes() == (tmp_path / "b.dat.truth.json").read_bytes()
    if name != "thermal":  # thermal's only randomness is none: it is deterministic by design
        assert a.read_bytes() != c.read_bytes()


def _markers(rep, word):
    return [ln for ln in rep.lines if ln.name == "print" and re.search(rf": {word} ", ln.rest + " ")]


def test_spin_truth_recounted_from_report(generated):
    _, truth, rep = generated["kvm-heavy-spin"]
    tot = truth["totals"]
    assert tot["spin_episodes"] > 0 and tot["pause_exits"] > 0 and tot["kicks"] > 0 and tot["lhp_episodes"] > 0
    assert len(_markers(rep, "spin_begin")) == tot["spin_episodes"] + truth["open_spin_episodes"]
    assert len(_markers(rep, "spin_end")) == tot["spin_episodes"]
    assert len(_markers(rep, "txn_end")) == tot["txns"]
    assert sum(1 for ln in rep.lines if ln.name == "kvm_exit" and "PAUSE_INSTRUCTION" in ln.rest) == tot["pause_exits"]
    wk = [ln for ln in rep.lines if ln.name == "kvm_vcpu_wakeup"]
    halts = [ln for ln in rep.lines if ln.name == "kvm_exit" and "reason HLT" in ln.rest]
    assert 0 < len(wk) <= len(halts) == tot["halts"]
    hc = [ln for ln in rep.lines if ln.name == "kvm_hypercall"]
    assert len(hc) == tot["kicks"] and all("nr 0x5 " in ln.rest for ln in hc)
    # each episode's start/end are the marker timestamps trace-cmd shows
    begins = {ln.ts for ln in _markers(rep, "spin_begin")}
    ends = {ln.ts for ln in _markers(rep, "spin_end")}
    for ep in truth["spin_episodes"]:
        assert ep["start"] in begins and ep["end"] in ends and ep["end"] > ep["start"]
    # vCPU threads are `CPU n/KVM` in qemu processes
    vc = [t for t in truth["threads"] if t["role"] == "vcpu"]
    assert vc and all(t["comm"] == f"CPU {t['vcpu']}/KVM" for t in vc)
    assert {ln.comm for ln in rep.lines if ln.name == "kvm_entry"} <= {t["comm"] for t in vc}


def test_io_billing_packets_recounted_from_report(generated):
    _, truth, rep = generated["kvm-io-billing"]
    rx = Counter()
    rx_bytes = Counter()
    tx = Counter()
    for ln in rep.lines:
        m = re.search(r"dev=(\S+).*len=(\d+)", ln.rest)
        if ln.name == "net_dev_xmit" and m:
            rx[m[1]] += 1
            rx_bytes[m[1]] += int(m[2])
        if ln.name == "netif_receive_skb" and m:
            tx[m[1]] += 1
    for vm in truth["per_vm"]:
        assert rx[vm["tap"]] == vm["P_rx"] and tx[vm["tap"]] == vm["P_tx"] and rx_bytes[vm["tap"]] == vm["B_rx"]
        if vm["kind"] == "net":
            assert vm["P_rx"] > 0 and vm["D_rx_ns"] > 0
            # packet events come from that VM's vhost thread
            assert {ln.comm for ln in rep.lines if ln.name == "net_dev_xmit" and f"dev={vm['tap']} " in ln.rest} == {f"vhost-{vm['vhost_tid'] - 50}"}
    assert truth["common"]["K_ns"] > 0
    assert rep.count("softirq_entry") == truth["common"]["softirqs"]
    # vhost on-CPU time minus the nested common work is the packet cost, to within
    # the 1-ns ordering nudges (at most a couple per 1 ms window)
    th = {t["tid"]: t for t in truth["threads"]}
    windows = truth["params"]["duration_ms"]
    for vm in truth["per_vm"]:
        vh, vc = th[vm["vhost_tid"]], th[vm["vcpu_tid"]]
        assert abs(vh["oncpu_ns"] - vh["irq_ns"] - vm["D_rx_ns"] - vm["D_tx_ns"]) <= 2 * windows
        assert vm["S_ns"] == vc["oncpu_ns"] - vc["irq_ns"]
        assert abs(vm["S_ns"] - vm["S_model_ns"]) <= 2 * windows
    # common work is the irq->softirq_exit spans trace-cmd shows
    spans, start = 0, {}
    for ln in rep.lines:
        if ln.name == "irq_handler_entry":
            start[ln.cpu] = ln.ts
        elif ln.name == "softirq_exit":
            spans += ln.ts - start.pop(ln.cpu)
    assert spans == truth["common"]["K_ns"]


def test_io_billing_link_is_shared(tmp_path):
    """Table 4.2's shape: aggregate packets stay (nearly) constant as N grows."""
    totals = []
    for n in (1, 2, 4):
        t = synthesize("kvm-io-billing", tmp_path / f"n{n}.dat", seed=1, overrides={"workload": f"net{n}", "duration_ms": "20"})
        nets = [v for v in t["per_vm"] if v["kind"] == "net"]
        assert len(nets) == n
        totals.append(sum(v["P_rx"] + v["P_tx"] for v in nets))
        for v in nets:
            assert abs(v["P_rx"] / v["P_tx"] - 2.0) < 0.25  # guest Rx = 2 x Tx
    assert max(totals) / min(totals) < 1.05
    # and common work grows with the number of networking VMs
    ks = [json.loads((tmp_path / f"n{n}.dat.truth.json").read_text())["common"]["K_ns"] for n in (1, 2, 4)]
    assert ks[0] < ks[1] < ks[2]


def test_postcopy_tokens_pair_in_report(generated):
    _, truth, rep = generated["kvm-postcopy"]
    tok = lambda ln: re.search(r"token (0x[0-9a-f]+)", ln.rest)[1]
    np_ = {tok(ln): ln.ts for ln in rep.lines if ln.name == "kvm_async_pf_not_present"}
    rd = {tok(ln): ln.ts for ln in rep.lines if ln.name == "kvm_async_pf_ready"}
    assert len(np_) == truth["totals"]["faults"] > 0
    assert set(rd) <= set(np_) and len(rd) == truth["totals"]["ready"]
    for f in truth["faults"]:
        if f["ready_ts"] is not None:
            assert rd[hex(f["token"])] == f["ready_ts"] and np_[hex(f["token"])] == f["not_present_ts"]
            assert f["latency_ns"] == f["ready_ts"] - f["not_present_ts"] > 0
    switch = truth["switch_ns"]
    assert all(ts >= switch for ts in np_.values())


def test_hetero_frequencies_and_cycles(generated):
    _, truth, rep = generated["hetero"]
    freqs = {ln.cpu: int(re.search(r"state=(\d+)", ln.rest)[1]) for ln in rep.lines if ln.name == "cpu_frequency"}
    for c in truth["cores"]:
        assert freqs[c["cpu"]] == c["khz"]
    kinds = {(v["fast"], v["kind"]) for v in truth["per_vcpu"]}
    assert kinds == {(True, "cpu"), (True, "io"), (False, "cpu"), (False, "io")}
    for v in truth["per_vcpu"]:
        assert v["cycles"] == v["run_ns"] * v["core_khz"] // 1_000_000
        if v["kind"] == "io":
            assert v["bursts"] > 0


def test_gang_barriers_recounted_from_report(generated):
    _, truth, rep = generated["gang"]
    g = truth["per_vm"]["gang"]
    vcpus = [v for v in truth["per_vcpu"] if v["vm"] == "gang"]
    assert g["phases"] > 3 and all(v["phases"] == g["phases"] for v in vcpus)
    # every vCPU arrives at and goes past every barrier (the job ends as one
    # opens); vCPU 0 marks each phase
    assert len(_markers(rep, "barrier_wait")) == len(vcpus) * g["phases"]
    # (a waiter preempted when the last barrier opened goes past it after the end)
    assert len(vcpus) * (g["phases"] - 1) < len(_markers(rep, "barrier_done")) <= len(vcpus) * g["phases"]
    assert len(_markers(rep, "txn_end")) == g["txns"] == g["phases"]
    # spinning waiters PAUSE-exit while they wait; they never halt for it
    assert g["spin_ns"] > 0 and g["sleep_ns"] == 0
    assert rep.count("kvm_exit") > 0


def test_thermal_hot_core_throttles(generated):
    _, truth, rep = generated["thermal"]
    temps = [ln for ln in rep.lines if ln.name == "thermal_temperature"]
    assert len(temps) == len(truth["temperature_samples"])
    hot_core = [c for c in truth["cores"] if any(v["hot"] and v["core"] == c["cpu"] for v in truth["per_vcpu"])][0]
    cold = [c for c in truth["cores"] if c is not hot_core][0]
    assert hot_core["final_temp_c"] > cold["final_temp_c"]
    assert hot_core["energy_j"] > cold["energy_j"]
    throttles = [ln for ln in rep.lines if ln.name == "cpu_frequency" and "state=1600000" in ln.rest]
    assert throttles and {ln.cpu for ln in throttles} == {hot_core["cpu"]}


def test_v6_and_uncompressed_scenarios_read(tmp_path):
    for version, comp in ((6, "none"), (7, "none")):
        p = tmp_path / f"s{version}.dat"
        truth = synthesize("kvm-heavy-spin", p, seed=1, overrides=SMALL["kvm-heavy-spin"], version=version, compression=comp)
        rep = trace_cmd_report(p)
        assert rep.rc == 0 and rep.stderr == "" and rep.counts() == truth["event_counts"]


SWITCH = re.compile(r"(?P<prev>.*):(?P<ppid>\d+) \[\d+\] \S+ ==> (?P<next>.*):(?P<npid>\d+) \[\d+\]")


@pytest.mark.parametrize("name", TRACEDAT)
def test_thread_oncpu_truth_recounted_from_switches(generated, name):
    """threads[].oncpu_ns = time between trace-cmd's sched_switch lines (open slices closed at end_ns)."""
    _, truth, rep = generated[name]
    since: dict[int, int] = {}
    cur: dict[int, int] = {}
    on: Counter = Counter()
    for ln in rep.lines:
        if ln.name != "sched_switch":
            continue
        m = SWITCH.search(ln.rest)
        prev, nxt = int(m["ppid"]), int(m["npid"])
        if prev:
            on[prev] += ln.ts - since.get(ln.cpu, truth["start_ns"])
        since[ln.cpu] = ln.ts
        cur[ln.cpu] = nxt
    for cpu, tid in cur.items():
        if tid:
            on[tid] += truth["end_ns"] - since[cpu]
    assert {t["tid"]: t["oncpu_ns"] for t in truth["threads"] if t["oncpu_ns"]} == {k: v for k, v in on.items() if v}
    assert any(t["oncpu_ns"] > 0 for t in truth["threads"] if t["role"] == "vcpu")


@pytest.mark.parametrize("name", TRACEDAT)
def test_every_truth_key_is_documented(generated, name):
    """docs/synth.md is the contract the model/replay helpers read: every key a
    scenario writes (top level and one level into lists of records) is named there."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "synth.md").read_text()
    _, truth, _ = generated[name]
    missing = [k for k in truth if f"`{k}" not in doc]
    for k, v in truth.items():
        if isinstance(v, list) and v and isinstance(v[0], dict) and k not in ("vms",):
            missing += [f"{k}.{f}" for f in v[0] if f"`{f}`" not in doc]
    assert not missing, f"undocumented truth keys in {name}: {missing}"


def test_postcopy_baseline_blocks_and_is_slower(tmp_path):
    """async_pf=false: faults block the vCPU thread (prev_state D), no async-PF events,
    and the guest gets less compute done than with async PFs (the paper's result)."""
    over = dict(SMALL["kvm-postcopy"])
    apf = synthesize("kvm-postcopy", tmp_path / "apf.dat", seed=5, overrides=over)
    base = synthesize("kvm-postcopy", tmp_path / "base.dat", seed=5, overrides={**over, "async_pf": "false"})
    rep = trace_cmd_report(tmp_path / "base.dat")
    assert rep.rc == 0 and rep.stderr == "" and rep.counts() == base["event_counts"]
    assert not any(n.startswith("kvm_async_pf") for n in base["event_counts"])
    assert base["totals"]["sync"] == base["totals"]["faults"] == rep.count("kvm_page_fault") > 0
    blocked = [ln for ln in rep.lines if ln.name == "sched_switch" and "] D ==> " in ln.rest]
    assert len(blocked) == base["totals"]["sync"]
    assert sum(v["guest_ns"] for v in base["per_vcpu"]) < sum(v["guest_ns"] for v in apf["per_vcpu"])


@pytest.mark.parametrize("name,over", [
    ("kvm-heavy-spin", {"vms": "6", "vcpus": "8", "pcpus": "1", "duration_ms": "5", "locks": "3"}),
    ("kvm-heavy-spin", {"duration_ms": "1"}),
    ("kvm-io-billing", {"workload": "net4", "pcpus": "1", "duration_ms": "3"}),
    ("kvm-postcopy", {"vcpus": "1", "procs": "1", "switch_ms": "40", "duration_ms": "3"}),
    ("hetero", {"cores": "1", "fast_cores": "0", "duration_ms": "3"}),
    ("hetero", {"cpu_vms": "0", "io_vms": "5", "cores": "2", "duration_ms": "5"}),
    ("thermal", {"hot_vcpus": "0", "duration_ms": "5"}),
    ("gang", {"vcpus": "2", "cpu_vms": "0", "io_vms": "0", "cores": "1", "barrier": "block", "duration_ms": "3", "phase_us": "200"}),
])
def test_edge_parameters_still_give_readable_files(tmp_path, name, over):
    t = synthesize(name, tmp_path / "e.dat", seed=1, overrides=over)
    rep = trace_cmd_report(tmp_path / "e.dat")
    assert rep.rc == 0 and rep.stderr == "" and rep.counts() == t["event_counts"]
