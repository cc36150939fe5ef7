"""Model transforms on small frames whose truth is known by construction."""

from __future__ import annotations

import json

import polars as pl

from cratrace.model.frames import empty, overlay
from cratrace.model.markers import markers
from cratrace.model.spin_episodes import from_pause_exits
from cratrace.model.vcpu_states import vcpu_states


def _lf(**cols) -> pl.LazyFrame:
    n = len(next(iter(cols.values())))
    return pl.LazyFrame({"instance": [""] * n, **cols})


def test_kvm_vcpu_timeline_guest_vmm_preempted_halted():
    # vCPU thread 100 of vm "a": runs [0,50) on cpu 0 with entry@5 exit@20
    # (reason 1) entry@25 exit@40 (HLT=12), switched out sleeping at 50,
    # back at 70 (exit... entry@75), preempted (state 0) at 90, end 100.
    ev = {
        "kvm_entry": _lf(ts=[5, 25, 75], cpu=[0, 0, 1], pid=[100] * 3, vcpu_id=[0] * 3),
        "kvm_exit": _lf(ts=[20, 40], cpu=[0, 0], pid=[100] * 2, exit_reason=[1, 12]),
        "sched_switch": _lf(ts=[50, 90], cpu=[0, 1], pid=[100, 100], prev_pid=[100, 100], prev_state=[1, 0], next_pid=[0, 0]),
    }
    threads = pl.DataFrame({"tid": [100], "vm": ["a"], "vcpu": [0], "role": ["vcpu"]}, schema={"tid": pl.Int64, "vm": pl.String, "vcpu": pl.Int32, "role": pl.String})
    slices = pl.DataFrame({"cpu": [0, 1], "tid": [100, 100], "start": [0, 70], "end": [50, 90], "dur": [50, 20]}, schema={"cpu": pl.Int32, "tid": pl.Int64, "start": pl.Int64, "end": pl.Int64, "dur": pl.Int64})
    vs = vcpu_states(ev, threads, slices, empty("spin_episodes"), (0, 100)).sort("start")
    got = list(zip(vs["start"], vs["end"], vs["state"]))
    assert got == [
        (0, 5, "vmm"),
        (5, 20, "guest"),
        (20, 25, "vmm"),
        (25, 40, "guest"),
        (40, 50, "vmm"),
        (50, 70, "halted"),
        (70, 75, "vmm"),
        (75, 90, "guest"),
        (90, 100, "preempted"),
    ]
    assert vs["pcpu"].to_list()[:5] == [0] * 5 and vs["pcpu"][5] is None


def test_overlay_splits_segments_at_episode_bounds():
    base = pl.DataFrame({"vm": ["a"], "vcpu": [0], "tid": [1], "state": ["guest"], "start": [0], "end": [100], "dur": [100], "pcpu": [0]})
    over = pl.DataFrame({"vm": ["a", "a"], "vcpu": [0, 0], "start": [10, 60], "end": [20, 200]})
    out = overlay(base, over, ["vm", "vcpu"], "spinning").sort("start")
    assert list(zip(out["start"], out["end"], out["state"])) == [(0, 10, "guest"), (10, 20, "spinning"), (20, 60, "guest"), (60, 100, "spinning")]


def test_pause_exit_clusters_split_on_the_gap():
    ev = {"kvm_exit": _lf(ts=[0, 10, 20, 1000, 1005], cpu=[0] * 5, pid=[7] * 5, exit_reason=[40, 40, 40, 40, 1])}
    vc = pl.DataFrame({"tid": [7], "vm": ["v"], "vcpu": [1]}, schema={"tid": pl.Int64, "vm": pl.String, "vcpu": pl.Int32})
    ep = from_pause_exits(ev, vc, gap_ns=100).sort("start")
    assert ep["exits"].to_list() == [3, 1] and ep["start"].to_list() == [0, 1000]


def test_markers_parse_names_and_fields_with_quotes():
    lf = _lf(ts=[1, 2], cpu=[0, 1], pid=[5, 6], buf=["txn_end vm=a vcpu=1\n", 'note msg="x" path=C:\\d\n'])
    m = markers(lf, empty("threads"))
    assert m["name"].to_list() == ["txn_end", "note"]
    assert json.loads(m["fields"][0]) == {"vm": "a", "vcpu": "1"}
    assert json.loads(m["fields"][1]) == {"msg": '"x"', "path": "C:\\d"}
    assert m["vm"].to_list() == ["a", None] and m["vcpu"].to_list() == [1, None]


def test_xen_dom0_backend_threads_work_for_their_guest():
    from cratrace.model.threads import _infer_vms

    df = pl.DataFrame(
        {"tid": [5, 6, 7], "comm": ["vif3.0-q0-guest-rx", "blkback.4.xvda", "kworker/0:1"], "first_ts": [0] * 3, "last_ts": [1] * 3, "pid": [None] * 3, "vm": [None] * 3, "vcpu": [None] * 3, "role": [None] * 3},
        schema_overrides={"pid": pl.Int64, "vm": pl.String, "vcpu": pl.Int32, "role": pl.String},
    )
    out = _infer_vms(df, {})
    assert out.select("vm", "role").rows() == [("dom3", "io-worker"), ("dom4", "io-worker"), (None, None)]


def test_cpu_slices_recover_switch_ins_the_kernel_did_not_emit():
    # cpu 1: 7 runs [0,10), switches to idle at 10; 7 is woken on cpu 1 at 30
    # and switched out at 45 without an idle -> 7 switch (this sandbox's
    # kernel omits them); then idle until 60, 8 runs from 60 to the end.
    from cratrace.model.cpu_slices import cpu_slices

    ev = {
        "sched_switch": _lf(ts=[10, 45, 60], cpu=[1, 1, 1], pid=[7, 7, 0], prev_pid=[7, 7, 0], prev_state=[1, 1, 0], next_pid=[0, 0, 8]),
        "sched_wakeup": _lf(ts=[30], cpu=[1], pid=[0], field_pid=[7], target_cpu=[1]),
    }
    s = cpu_slices(ev, (0, 100))
    assert list(zip(s["tid"], s["start"], s["end"])) == [(7, 0, 10), (0, 10, 30), (7, 30, 45), (0, 45, 60), (8, 60, 100)]
    # without the wakeup there is no evidence: the gap stays with idle
    s = cpu_slices({"sched_switch": ev["sched_switch"]}, (0, 100))
    assert list(zip(s["tid"], s["start"], s["end"])) == [(7, 0, 10), (0, 10, 45), (0, 45, 60), (8, 60, 100)]


def test_thread_names_are_runs_of_one_name_and_the_idle_task_is_one_thread():
    from cratrace.model.threads import thread_names

    obs = pl.DataFrame({
        "tid": [0, 0, 0, 5, 5, 5, 5, 7, 7],
        "comm": ["swapper/0", "swapper/1", "swapper/0", "bash", "bash", "cat", "bash", "x", None],
        "ts": [10, 11, 12, 40, 20, 30, 50, 60, 70],
    })
    runs = thread_names(obs, 100).sort("tid", "start")
    assert runs.rows() == [
        (0, "swapper", 10, 100),
        (5, "bash", 20, 30), (5, "cat", 30, 40), (5, "bash", 40, 100),
        (7, "x", 60, 70), (7, None, 70, 100),
    ]
