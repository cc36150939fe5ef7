"""Benchmark: replay engine events/s with WAPD on a large generated
workload, against a plain-Python heapq implementation of the same fair
scheduler on the same workload (the reference), in one run.

The workload: 4 VMs × 4 vCPUs on 4 pCPUs, each vCPU repeating
work → lock → critical section → unlock → mark → block. Reports medians
of --runs: the engine's events/s, and the wall time of the engine and of
the Python reference on the same (smaller) workload, with the ratio.

Memory: a child process per size (a quarter of --txns, then all of it)
builds the workload (typed arrays, as `cratrace replay` hands it over),
resets its peak RSS (/proc/self/clear_refs) and replays it once. What
the replay added at its peak, less its output tables (their Arrow
buffers), is what it holds beyond them: the engine takes over each
thread's phases (16 bytes a phase) and gives their pages back as the
thread passes them, so past the start what it holds of the demand shrinks
while the outputs grow. Flat means about the same MiB at both sizes.

    python benchmarks/replay_engine.py [--runs 3] [--txns 100000] [--no-memory] [--quick]
"""

from __future__ import annotations

import argparse
import heapq
import json
import statistics
import subprocess
import sys
import time

from cratrace import _native

WORK, BLOCK, ACQUIRE, RELEASE, MARK = range(5)


def workload(vms: int, vcpus: int, txns: int) -> dict:
    tids, vm_of, vcpu_of, start = [], [], [], []
    pt, pk, pa = [], [], []
    t = 0
    for v in range(vms):
        for c in range(vcpus):
            tids.append(1000 + t)
            vm_of.append(v)
            vcpu_of.append(c)
            start.append(0)
            for k in range(txns):
                for kind, a in ((WORK, 200_000 + 13_000 * ((t + k) % 11)), (ACQUIRE, 0), (WORK, 60_000), (RELEASE, 0), (MARK, 0), (BLOCK, 150_000)):
                    pt.append(t)
                    pk.append(kind)
                    pa.append(a)
            t += 1
    return dict(thread_tid=tids, thread_vm=vm_of, thread_vcpu=vcpu_of, thread_start=start, phase_thread=pt, phase_kind=pk, phase_a=pa, phase_b=[0] * len(pt), vm_names=[f"vm{i}" for i in range(vms)], vm_weights=[256 * vcpus] * vms, vm_cpu_intensive=[None] * vms, vm_elasticity=[None] * vms)


def run_engine(w: dict, pcpus: int, policy: str) -> dict:
    return dict(_native.replay(**w, freq_khz=[2_000_000] * pcpus, recorded_khz=2_000_000, elasticity=-1.0, policy=policy, params={}, costs={}, limit_ns=10**15))


def python_fair(w: dict, pcpus: int, latency=6e6, min_gran=0.75e6) -> tuple[int, float]:
    """Reference: the same fair scheduler and lock semantics (native spin)
    with heapq, in plain Python. Returns (events, seconds)."""
    n = len(w["thread_tid"])
    phases = [[] for _ in range(n)]
    for t, k, a in zip(w["phase_thread"], w["phase_kind"], w["phase_a"]):
        phases[t].append((k, a))
    pos = [0] * n
    rem = [0] * n
    vr = [0.0] * n
    ready: list = []  # (vruntime, seq, thread)
    ev: list = []  # (time, seq, kind, a, b)
    seq = 0
    cur = [None] * pcpus
    since = [0] * pcpus
    holder: dict = {}
    spinners: dict = {}
    events = 0
    t0 = time.perf_counter()
    for t in range(n):
        seq += 1
        heapq.heappush(ready, (0.0, seq, t))
    for c in range(pcpus):
        seq += 1
        heapq.heappush(ev, (0, seq, "dispatch", c, 0))
    now = 0
    gen = [0] * n
    wstart = [-1] * n
    while ev:
        now, _, kind, a, b = heapq.heappop(ev)
        events += 1
        if kind == "dispatch":
            c = a
            if cur[c] is None and ready:
                _, _, t = heapq.heappop(ready)
                cur[c] = t
                since[c] = now
                gen[t] += 1
                wstart[t] = -1
                seq += 1
                heapq.heappush(ev, (now, seq, "step", t, gen[t]))
                seq += 1
                heapq.heappush(ev, (now + max(min_gran, latency / (len(ready) + 1)), seq, "slice", c, gen[t]))
            continue
        if kind == "slice":
            c = a
            t = cur[c]
            if t is None or gen[t] != b or not ready:
                continue
            vr[t] += now - since[c]
            if rem[t] > 0:
                rem[t] = max(rem[t] - (now - wstart[t]), 1)
            cur[c] = None
            gen[t] += 1
            seq += 1
            heapq.heappush(ready, (vr[t], seq, t))
            seq += 1
            heapq.heappush(ev, (now, seq, "dispatch", c, 0))
            continue
        if kind == "unblock":
            t = a
            seq += 1
            heapq.heappush(ready, (max(vr[t], (ready[0][0] if ready else vr[t]) - latency / 2), seq, t))
            for c in range(pcpus):
                if cur[c] is None:
                    seq += 1
                    heapq.heappush(ev, (now, seq, "dispatch", c, 0))
                    break
            continue
        t = a  # step
        if gen[t] != b or t not in cur:
            continue
        c = cur.index(t)
        while True:
            if pos[t] >= len(phases[t]):
                vr[t] += now - since[c]
                cur[c] = None
                seq += 1
                heapq.heappush(ev, (now, seq, "dispatch", c, 0))
                break
            k, amount = phases[t][pos[t]]
            if k == WORK:
                if rem[t] == 0:
                    rem[t] = amount
                elif wstart[t] >= 0 and now - wstart[t] >= rem[t]:
                    pos[t] += 1
                    rem[t] = 0
                    wstart[t] = -1
                    continue
                wstart[t] = now
                seq += 1
                heapq.heappush(ev, (now + rem[t], seq, "step", t, gen[t]))
                break
            if k == ACQUIRE:
                if holder.get(0) is None:
                    holder[0] = t
                    pos[t] += 1
                    continue
                spinners.setdefault(0, []).append(t)
                break
            if k == RELEASE:
                holder[0] = None
                for s in spinners.pop(0, []):
                    seq += 1
                    heapq.heappush(ev, (now, seq, "step", s, gen[s]))
                pos[t] += 1
                continue
            if k == MARK:
                pos[t] += 1
                continue
            if k == BLOCK:
                pos[t] += 1
                vr[t] += now - since[c]
                cur[c] = None
                gen[t] += 1
                seq += 1
                heapq.heappush(ev, (now + amount, seq, "unblock", t, 0))
                seq += 1
                heapq.heappush(ev, (now, seq, "dispatch", c, 0))
                break
    return events, time.perf_counter() - t0


#: bytes the engine takes over per phase of demand (replay::model::Phase)
PHASE_BYTES = 16


def _status_bytes(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise SystemExit(f"/proc/self/status has no {key}")


def memory_child(txns: int) -> dict:
    """In a fresh process: the replay's peak RSS above the built
    workload, its outputs' bytes and the demand it holds."""
    w = workload(4, 4, txns)
    # the phases as the replay command hands them over: typed arrays, read
    # in place (a list would be copied into columns first)
    from array import array

    from cratrace.replay.workload import PHASE_TYPECODES

    for key, code in zip(("phase_thread", "phase_kind", "phase_a", "phase_b"), PHASE_TYPECODES):
        w[key] = array(code, w[key])
    before = _status_bytes("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak (VmHWM) starts again from the current RSS
    r = run_engine(w, 4, "wapd")
    added = _status_bytes("VmHWM") - before
    import pyarrow as pa

    outputs = sum(pa.table(r[k]).nbytes for k in ("states", "slices", "marks", "episodes"))
    phases = len(w["phase_thread"])
    beyond = added - outputs
    return {"txns": txns, "events": r["events"], "phases": phases, "added_bytes": added, "output_bytes": outputs, "beyond_outputs_bytes": beyond, "beyond_outputs_per_phase": beyond / phases}


def memory(txns: int) -> list[dict]:
    out = []
    for t in (max(txns // 4, 50), txns):
        p = subprocess.run([sys.executable, "-m", "benchmarks.replay_engine", "--memory-child", str(t)], capture_output=True, text=True, check=True)
        out.append(json.loads(p.stdout))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--txns", type=int, default=100000, help="transactions per vCPU (16 vCPUs; 100000 gives >10M events)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-memory", action="store_true", help="skip the two memory runs")
    ap.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="one run of 200 transactions per vCPU (about 20,000 events), memory included")
    a = ap.parse_args()
    if a.quick:
        a.runs, a.txns = 1, 200
    if a.memory_child:
        print(json.dumps(memory_child(a.memory_child)))
        return
    w = workload(4, 4, a.txns)
    eng, evs = [], 0
    for _ in range(a.runs):
        r = run_engine(w, 4, "wapd")
        eng.append(r["wall_s"])
        evs = r["events"]
    # Same workload, same fair scheduler: engine wall time vs plain Python.
    small = workload(4, 4, max(a.txns // 50, 50))
    py_s = statistics.median(python_fair(small, 4)[1] for _ in range(a.runs))
    eng_small = statistics.median(run_engine(small, 4, "fair+spin")["wall_s"] for _ in range(a.runs))
    eng_rate = evs / statistics.median(eng)
    res = {"engine_events": evs, "engine_wapd_events_per_s": eng_rate, "same_workload_python_heapq_s": py_s, "same_workload_engine_s": eng_small, "ratio": py_s / eng_small}
    if not a.no_memory:
        res["memory"] = memory(a.txns)
    if a.json:
        print(json.dumps(res, indent=2))
        return
    print(f"engine (wapd): {evs:,} events at {eng_rate / 1e6:.2f} M events/s (median of {a.runs})")
    print(f"same fair workload: plain-Python heapq {py_s:.3f} s vs engine {eng_small:.4f} s: engine {res['ratio']:.0f}x faster")
    mib = 2**20
    for m in res.get("memory", []):
        print(
            f"memory, {m['events']:,} events ({m['phases']:,} phases): replay peak +{m['added_bytes'] / mib:.1f} MiB = "
            f"outputs {m['output_bytes'] / mib:.1f} MiB + {m['beyond_outputs_bytes'] / mib:.1f} MiB beyond them ({m['beyond_outputs_per_phase']:.1f} B per phase; the engine takes over {PHASE_BYTES} and gives them back as it passes them)"
        )
    if "memory" in res:
        m0, m1 = res["memory"]
        print(
            f"beyond the outputs, at {m1['events'] / m0['events']:.1f}x the events: {m1['beyond_outputs_bytes'] / m0['beyond_outputs_bytes']:.2f}x the memory, "
            f"{m0['beyond_outputs_per_phase']:.1f} and {m1['beyond_outputs_per_phase']:.1f} B per phase"
        )


if __name__ == "__main__":
    main()
