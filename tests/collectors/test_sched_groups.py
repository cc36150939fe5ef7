"""Which CFS group schedules each thread: the collector reads it from /proc
and the cgroup tree as the kernel decides it (a non-root CPU cgroup wins,
else the session's autogroup when autogroups are on)."""

from __future__ import annotations

import time
from pathlib import Path

import cratrace_collect as cc
from cratrace.lab import LabParams, start


def _proc(root: Path, pid: int, tids: list[int], cgroup: str, autogroup: str | None) -> None:
    d = root / str(pid)
    (d / "task").mkdir(parents=True)
    for t in tids:
        (d / "task" / str(t)).mkdir()
    (d / "cgroup").write_text(cgroup)
    if autogroup is not None:
        (d / "autogroup").write_text(autogroup)


V1_ROOT = "4:memory:/\n1:cpu,cpuacct:/\n0::/\n"


def _fake_proc(tmp_path: Path, autogroups: str) -> Path:
    proc = tmp_path / "proc"
    (proc / "sys" / "kernel").mkdir(parents=True)
    (proc / "sys" / "kernel" / "sched_autogroup_enabled").write_text(autogroups + "\n")
    _proc(proc, 100, [100, 101, 102], V1_ROOT, "/autogroup-5 nice 0\n")
    _proc(proc, 200, [200], V1_ROOT, "/autogroup-5 nice 0\n")
    _proc(proc, 300, [300, 301], V1_ROOT, "/autogroup-7 nice 5\n")
    _proc(proc, 2, [2], V1_ROOT, None)  # kthreadd: root group, no autogroup file
    _proc(proc, 400, [400, 401], "4:memory:/\n1:cpu,cpuacct:/machine/vm1\n0::/\n", "/autogroup-9 nice 0\n")
    (proc / "self").mkdir()  # not a pid: skipped
    return proc


def test_autogroups_collect_sessions_and_cgroups_win_over_them(tmp_path):
    proc = _fake_proc(tmp_path, "1")
    cg = tmp_path / "cg"
    (cg / "cpu" / "machine" / "vm1").mkdir(parents=True)
    (cg / "cpu" / "machine" / "vm1" / "cpu.shares").write_text("2048\n")
    got = cc.sched_groups(proc, cg)
    assert got["autogroup_enabled"] is True
    g = got["groups"]
    assert set(g) == {"autogroup-5", "autogroup-7", "cgroup:/machine/vm1"}
    assert sorted(g["autogroup-5"]["tids"]) == [100, 101, 102, 200]
    assert g["autogroup-5"]["shares"] == 1024 and g["autogroup-7"]["shares"] == 335  # nice 5
    assert g["cgroup:/machine/vm1"] == {"kind": "cgroup", "shares": 2048, "tids": [400, 401]}


def test_with_autogroups_off_only_cgroups_group_threads(tmp_path):
    proc = _fake_proc(tmp_path, "0")
    got = cc.sched_groups(proc, tmp_path / "no-cgroup-tree")
    assert got["autogroup_enabled"] is False
    # cpu.shares unreadable: the kernel's default weight
    assert got["groups"] == {"cgroup:/machine/vm1": {"kind": "cgroup", "shares": 1024, "tids": [400, 401]}}


def test_v2_groups_stop_where_a_parent_does_not_delegate_cpu(tmp_path):
    proc = tmp_path / "proc"
    (proc / "sys" / "kernel").mkdir(parents=True)
    (proc / "sys" / "kernel" / "sched_autogroup_enabled").write_text("1\n")
    _proc(proc, 10, [10], "0::/machine.slice/vm-a.scope/vcpu0\n", "/autogroup-1 nice 0\n")
    _proc(proc, 20, [20], "0::/user.slice/session-3.scope\n", "/autogroup-2 nice 0\n")
    cg = tmp_path / "cg"
    (cg / "machine.slice" / "vm-a.scope" / "vcpu0").mkdir(parents=True)
    (cg / "user.slice" / "session-3.scope").mkdir(parents=True)
    (cg / "cgroup.subtree_control").write_text("cpuset cpu io memory pids\n")
    (cg / "machine.slice" / "cgroup.subtree_control").write_text("cpu memory\n")
    (cg / "machine.slice" / "vm-a.scope" / "cgroup.subtree_control").write_text("memory\n")  # cpu stops here
    (cg / "machine.slice" / "vm-a.scope" / "cpu.weight").write_text("200\n")
    got = cc.sched_groups(proc, cg)["groups"]
    assert got["cgroup:/machine.slice/vm-a.scope"] == {"kind": "cgroup", "shares": 2048, "tids": [10]}
    # user.slice does not delegate cpu: session-3 is scheduled in user.slice
    assert got["cgroup:/user.slice"]["tids"] == [20]


def test_root_v2_without_cpu_delegation_falls_back_to_autogroups(tmp_path):
    proc = tmp_path / "proc"
    (proc / "sys" / "kernel").mkdir(parents=True)
    (proc / "sys" / "kernel" / "sched_autogroup_enabled").write_text("1\n")
    _proc(proc, 10, [10], "0::/user.slice/session-3.scope\n", "/autogroup-2 nice 0\n")
    cg = tmp_path / "cg"
    cg.mkdir()
    (cg / "cgroup.subtree_control").write_text("memory pids\n")
    assert set(cc.sched_groups(proc, cg)["groups"]) == {"autogroup-2"}


def test_merged_snapshots_keep_each_thread_in_its_last_group():
    a = {"autogroup_enabled": True, "groups": {"autogroup-1": {"kind": "autogroup", "shares": 1024, "tids": [1, 2]}}}
    b = {"autogroup_enabled": True, "groups": {"autogroup-3": {"kind": "autogroup", "shares": 1024, "tids": [2, 3]}}}
    got = cc.merge_sched_groups(a, b)["groups"]
    assert sorted(got["autogroup-1"]["tids"]) == [1] and sorted(got["autogroup-3"]["tids"]) == [2, 3]
    assert cc.merge_sched_groups(None, b) == b


def test_this_hosts_autogroups_follow_the_labs_vm_sessions():
    if (Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() != "1"
            or not Path("/proc/self/autogroup").exists()):
        import pytest

        pytest.skip("autogroups are off on this kernel")
    proc = start(LabParams(vms=2, vcpus=2, duration_s=1.5, vm_sessions="own"))
    try:
        time.sleep(0.5)
        vms = [v for v in cc.vmm_vms() if open(f"/proc/{v['pid']}/stat").read().rsplit(")", 1)[1].split()[1] == str(proc.pid)]
        groups = cc.sched_groups()["groups"]
        owner = {t: k for k, g in groups.items() for t in g["tids"]}
        vm_groups = [{owner.get(c["tid"]) for c in v["vcpus"]} for v in vms]
    finally:
        proc.wait(timeout=30)
    # each VM's vCPUs in one group, the two VMs in different groups (or all
    # in one CPU cgroup when this host puts the session in a non-root one)
    assert all(len(g) == 1 and None not in g for g in vm_groups), vm_groups
    if all(not k.startswith("cgroup:") for g in vm_groups for k in g):
        assert vm_groups[0] != vm_groups[1]


def test_a_process_that_exits_while_proc_is_read_is_left_out(tmp_path, monkeypatch):
    # /proc/PID/task vanishes between listing /proc and reading it when the
    # process exits meanwhile (seen in CI: the collector's inventory refresh
    # died with FileNotFoundError); the VMs still there are all found
    proc = tmp_path / "proc"
    for pid, name in ((500, "vm-a"), (600, "vm-b")):
        d = proc / str(pid)
        (d / "task").mkdir(parents=True)
        (d / "cmdline").write_bytes(b"\0".join([b"qemu-system-x86_64", b"-name", name.encode(), b""]))
        (d / "comm").write_text("qemu-system-x86\n")
        (d / "cgroup").write_text(V1_ROOT)
        (d / "autogroup").write_text("/autogroup-3 nice 0\n")
        for i, tid in enumerate((pid + 1, pid + 2)):
            (d / "task" / str(tid)).mkdir()
            (d / "task" / str(tid) / "comm").write_text(f"CPU {i}/KVM\n")
            (d / "task" / str(tid) / "status").write_text("Cpus_allowed_list:\t0\n")
    gone = proc / "600" / "task"
    real = Path.iterdir

    def iterdir(self):
        if self == gone:
            raise FileNotFoundError(2, "No such file or directory", str(self))
        return real(self)

    monkeypatch.setattr(Path, "iterdir", iterdir)
    vms = cc.vmm_vms(proc)
    assert [(v["name"], [c["tid"] for c in v["vcpus"]]) for v in vms] == [("vm-a", [501, 502]), ("vm-b", [])]
    assert cc.vm_affinity(vms, proc) == {"501": "0", "502": "0"}
    (proc / "sys" / "kernel").mkdir(parents=True)
    (proc / "sys" / "kernel" / "sched_autogroup_enabled").write_text("1\n")
    assert cc.sched_groups(proc, tmp_path / "no-cgroup-tree")["groups"]["autogroup-3"]["tids"] == [501, 502]
