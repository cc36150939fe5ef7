"""VM and vCPU attribution without an inventory (`cratrace.model.vms`):
the VMMs' thread names, the evidence that groups threads into VMs, and
the end-to-end cases a foreign trace brings (no tgids, two `CPU 0/KVM`
threads, a VMM whose vCPUs are created by a thread of its own)."""

from __future__ import annotations

import json

import polars as pl
import pytest

from cratrace.model.vms import CLONE_THREAD, group, recognise, split_repeats, vcpu_names
from cratrace.synth.tracedat_writer import Event, write_tracedat
from tests.helpers import cratrace

#: task:task_newtask as Linux 6.18 declares it (/sys/kernel/tracing/events/task/task_newtask/format)
TASK_NEWTASK = """system: task
name: task_newtask
ID: 205
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:pid_t pid;\toffset:8;\tsize:4;\tsigned:1;
\tfield:char comm[16];\toffset:12;\tsize:16;\tsigned:0;
\tfield:u64 clone_flags;\toffset:32;\tsize:8;\tsigned:0;
\tfield:short oom_score_adj;\toffset:40;\tsize:2;\tsigned:1;

print fmt: "pid=%d comm=%s clone_flags=%llx oom_score_adj=%hd", REC->pid, REC->comm, REC->clone_flags, REC->oom_score_adj
"""


@pytest.mark.parametrize(
    "comm, vmm, index",
    [
        ("CPU 3/KVM", "qemu", 3),
        ("CPU 12/TCG", "qemu", 12),
        ("fc_vcpu 2", "firecracker", 2),
        ("vcpu7", "cloud-hypervisor", 7),
        ("crosvm_vcpu1", "crosvm", 1),
        ("kvm-vcpu-0", "kvmtool", 0),
        ("kworker/0:1", None, None),
        ("vcpu", None, None),
        ("CPU 0/KVMX", None, None),
        ("qemu-system-x86", None, None),
    ],
)
def test_each_vmm_names_its_vcpus(comm, vmm, index):
    got = recognise(pl.DataFrame({"tid": [10], "comm": [comm]}), vcpu_names(), {})
    assert got.select("vmm", "vcpu").rows() == ([] if vmm is None else [(vmm, index)])


def test_a_thread_that_entered_a_guest_is_a_vcpu_whatever_its_name():
    got = recognise(pl.DataFrame({"tid": [10, 11], "comm": ["worker", "CPU 1/KVM"]}), vcpu_names(), {10: 4, 11: 1})
    assert sorted(got.select("tid", "vmm", "vcpu").rows()) == [(10, "kvm", 4), (11, "qemu", 1)]


def test_a_user_pattern_names_vcpus_and_their_vm():
    pats = vcpu_names(r"(?P<vm>\w+)-v(?P<vcpu>\d+)")
    got = recognise(pl.DataFrame({"tid": [1, 2, 3], "comm": ["web-v0", "web-v1", "db-v0"]}), pats, {})
    assert sorted(got.select("tid", "vm_named", "vcpu").rows()) == [(1, "web", 0), (2, "web", 1), (3, "db", 0)]
    out = group(got, {}, set())
    assert sorted(out.select("tid", "vm", "vm_evidence").rows()) == [(1, "web", "pattern"), (2, "web", "pattern"), (3, "db", "pattern")]


def _vcpus(rows: list[tuple[int, int]], vmm: str = "qemu") -> pl.DataFrame:
    return pl.DataFrame([(t, vmm, i, None) for t, i in rows], schema={"tid": pl.Int64, "vmm": pl.String, "vcpu": pl.Int32, "vm_named": pl.String}, orient="row")


def test_creators_group_vcpus_and_a_vmm_thread_leads_to_its_process():
    # Cloud Hypervisor: main 100 creates its `vmm` thread 101 (a thread),
    # which creates vcpu0..1 (102, 103); another VM's process 200 creates
    # its vCPUs itself
    parent = {101: 100, 102: 101, 103: 101, 201: 200, 202: 200}
    as_thread = {101, 102, 103, 201, 202}
    out = group(_vcpus([(102, 0), (103, 1), (201, 0), (202, 1)], "cloud-hypervisor"), parent, as_thread)
    assert sorted(out.rows()) == [
        (102, "cloud-hypervisor-100", 100, "fork"),
        (103, "cloud-hypervisor-100", 100, "fork"),
        (201, "cloud-hypervisor-200", 200, "fork"),
        (202, "cloud-hypervisor-200", 200, "fork"),
    ]


def test_one_vm_worth_of_vcpus_is_one_vm_and_several_are_never_merged():
    one = group(_vcpus([(7, 0), (8, 1), (9, 2)]), {}, set())
    assert set(one["vm"]) == {"qemu-t7"} and set(one["vm_evidence"]) == {"single"}
    # two VMs created one after the other before the trace: 0 1 | 0 1 2
    two = group(_vcpus([(10, 0), (11, 1), (20, 0), (21, 1), (22, 2)]), {}, set())
    by_vm = two.group_by("vm").agg(pl.col("tid").sort()).sort("vm").rows()
    assert by_vm == [("qemu-t10", [10, 11]), ("qemu-t20", [20, 21, 22])]
    assert set(two["vm_evidence"]) == {"creation-order"}


def test_repeated_indices_in_one_vm_are_split_off():
    t = pl.DataFrame(
        {"tid": [1, 2, 3, 4], "vm": ["a", "a", "a", None], "vcpu": [0, 0, 1, None], "role": ["vcpu", "vcpu", "vcpu", "host"], "vm_evidence": ["inventory", "inventory", "inventory", None]},
        schema_overrides={"vcpu": pl.Int32},
    )
    out = split_repeats(t).sort("tid")
    assert out.select("vm", "vcpu", "vm_evidence").rows() == [("a", 0, "inventory"), ("a#2", 0, "inventory, split"), ("a", 1, "inventory"), (None, None, None)]


def _switches(tids: list[int], comms: dict[int, str], start: int = 1_000_000, rounds: int = 50, cpus: int = 2) -> list[Event]:
    """Each tid runs 1 ms in turn on its CPU (tid index mod cpus), with
    a `txn_end` marker at the end of each run."""
    evs = []
    t = start
    for r in range(rounds):
        for i, tid in enumerate(tids):
            cpu = i % cpus
            evs.append(Event(ts=t, cpu=cpu, name="sched_switch", pid=0, fields={"prev_comm": "swapper", "prev_pid": 0, "prev_prio": 120, "prev_state": 0, "next_comm": comms[tid], "next_pid": tid, "next_prio": 120}))
            evs.append(Event(ts=t + 900_000, cpu=cpu, name="print", pid=tid, fields={"ip": 0, "buf": "txn_end\n"}))
            evs.append(Event(ts=t + 1_000_000, cpu=cpu, name="sched_switch", pid=tid, fields={"prev_comm": comms[tid], "prev_pid": tid, "prev_prio": 120, "prev_state": 1, "next_comm": "swapper", "next_pid": 0, "next_prio": 120}))
            t += 1_000_000 // cpus + 1000
    return evs


def test_two_qemus_without_tgids_model_as_two_vms_and_replay(tmp_path):
    """The shape of issue 40: `CPU n/KVM` threads of two QEMUs started
    before the trace, markers without vm=/vcpu= fields. The model must not
    merge them (it made one `vm-unknown` whose duplicate vCPU indices
    crashed the replay); it says the grouping is a guess and exits 1."""
    comms = {10: "CPU 0/KVM", 11: "CPU 1/KVM", 20: "CPU 0/KVM", 21: "CPU 1/KVM"}
    f = write_tracedat(tmp_path / "t.dat", _switches(list(comms), comms), comms={**comms, 5: "CPU 0/KVM"})
    cap = tmp_path / "cap"
    cratrace("import", f, "-o", cap, check=True)
    p = cratrace("model", cap, "--json")
    assert p.returncode == 1, p.stderr
    assert "grouped by thread creation order" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    out = json.loads(p.stdout)
    assert sorted((v["vm"], v["vcpus"], v["evidence"]) for v in out["vms"]) == [("qemu-t10", 2, "creation-order"), ("qemu-t20", 2, "creation-order")]
    # tid 5 is only in the saved command lines: no event, no vCPU
    assert any("saved command lines" in r for r in out["remarks"])
    r = cratrace("replay", cap, "-o", tmp_path / "rep", "-p", "fair", "-p", "eevdf", "--json")
    assert r.returncode in (0, 1) and "internal error" not in r.stderr, r.stderr
    metrics = json.loads((tmp_path / "rep" / "fair" / "metrics.json").read_text())
    assert sorted(metrics["vms"]) == ["qemu-t10", "qemu-t20"]
    # each VM's transactions, replayed: 2 vCPUs x 50 rounds
    assert {vm: m["marks"] for vm, m in metrics["vms"].items()} == {"qemu-t10": 100, "qemu-t20": 100}
    rep = cratrace("report", cap, "--replays", tmp_path / "rep", "-o", tmp_path / "r.html")
    assert rep.returncode in (0, 1) and "internal error" not in rep.stderr, rep.stderr


def test_a_vmm_thread_that_creates_the_vcpus_is_followed_to_its_process(tmp_path):
    """Cloud Hypervisor's `vmm` thread creates the `vcpuN` threads; with
    task_newtask's clone flags the VM's process is its main thread."""
    comms = {100: "cloud-hyperviso", 101: "vmm", 102: "vcpu0", 103: "vcpu1"}
    news = [
        Event(ts=900_000 + i, cpu=0, name="task_newtask", pid=creator, fields={"pid": child, "comm": comms[creator], "clone_flags": CLONE_THREAD | 0x100, "oom_score_adj": 0})
        for i, (child, creator) in enumerate([(101, 100), (102, 101), (103, 101)])
    ]
    f = write_tracedat(tmp_path / "t.dat", news + _switches([101, 102, 103], comms), formats=[TASK_NEWTASK], comms=comms)
    cap = tmp_path / "cap"
    cratrace("import", f, "-o", cap, check=True)
    p = cratrace("model", cap, "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["vms"] == [{"vm": "cloud-hypervisor-100", "vcpus": 2, "pid": 100, "evidence": "fork"}]
    threads = pl.read_parquet(cap / "model" / "threads.parquet").filter(pl.col("tid") >= 100).sort("tid")
    assert threads.select("tid", "vm", "role").rows() == [
        (100, "cloud-hypervisor-100", "vmm"),
        (101, "cloud-hypervisor-100", "vmm"),
        (102, "cloud-hypervisor-100", "vcpu"),
        (103, "cloud-hypervisor-100", "vcpu"),
    ]
