"""Run the engine once per policy, on the plan the policies share
(`cratrace.replay.plan`), and write the canonical tables and metrics
(layout: ``OUT/<policy>/model/<table>.parquet``, ``OUT/<policy>/metrics.json``,
``OUT/<policy>/run.json``).

metrics.json holds only what the inputs and seed determine, so two runs
are byte-identical; wall-clock figures go to run.json.
"""

from __future__ import annotations

import contextlib
import json
from concurrent.futures import ThreadPoolExecutor
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from cratrace import _native, atomic
from cratrace.capture import Capture
from cratrace.errors import UsageError
from cratrace.model.domains import domain_threads, with_idle
from cratrace.model.build import write_batches
from cratrace.model.frames import conform, total_order
from cratrace.replay import diagnostics
from cratrace.replay.concurrency import engines_at_once
from cratrace.replay.metrics import asymmetric_metrics, replay_metrics
from cratrace.replay.plan import ReplayPlan, plan_replay
from cratrace.replay.spill import removing_spills
from cratrace.replay.workload import Workload

#: the engine's state codes as vcpu_states names (from the engine, one
#: source); a thread that has finished its demand ("done") is off CPU
#: for the rest of the run, which vcpu_states calls blocked
STATE_NAMES = {c: ("blocked" if n == "done" else n) for c, n in _native.replay_state_names().items()}


def thread_power(w: Workload, host: dict) -> list[float | None]:
    """Each thread's power while it runs (W): as recorded (threads.power_w),
    a VM's vCPUs as `--set power.VM=W` says."""
    power = list(w.power_w)
    for vm, watts in (host.get("vm_power") or {}).items():
        i = w.vm_names.index(vm)
        power = [watts if v == i else p for v, p in zip(w.vm_of, power)]
    return power


def thread_affinity(w: Workload, host: dict, pcpus: int) -> list[list[int] | None]:
    """Each thread's allowed CPUs for the engine: as recorded (unless
    `--set affinity=off`), a VM's vCPUs as `--set affinity.VM=CPUS` says.
    The engine drops CPUs the replayed host lacks (all of them: any)."""
    allowed = list(w.allowed) if host.get("affinity", "recorded") == "recorded" else [None] * len(w.tids)
    for vm, cpus in (host.get("vm_affinity") or {}).items():
        i = w.vm_names.index(vm)
        allowed = [cpus if v == i else a for v, a in zip(w.vm_of, allowed)]
    return allowed


def asymmetric_host(w: Workload, policy: str, engine: dict, host: dict) -> dict:
    """The host an asymmetric replay (and its all-fast baseline) runs on:
    when the capture recorded no CPU frequency (`freq_khz` is then a
    stand-in) and `--set recorded_khz` does not say, the demand is taken
    as recorded at the fast cores' frequency (`fast_khz`, the paper's
    homogeneous host), so the all-fast baseline runs it as recorded and
    slow cores stretch it; at the stand-in 1 GHz every pool sped it up."""
    if "asymmetric" not in policy.split("+") or w.freq_known or "recorded_khz" in host:
        return host
    return {**host, "recorded_khz": int(float(engine.get("fast_khz", _native.replay_param_defaults()["fast_khz"])))}


def _run_engine(w: Workload, policy: str, engine: dict, costs: dict, host: dict, limit_ns: int, seed: int) -> dict:
    pcpus = int(host.get("pcpus", w.pcpus))
    freq = int(host.get("freq_khz", w.freq_khz))
    per_vm = {**host.get("vm_class", {}), **host.get("vm_elasticity", {}), **host.get("vm_affinity", {}), **host.get("vm_cap", {}), **host.get("vm_share", {}), **host.get("vm_power", {})}
    unknown = sorted(set(per_vm) - set(w.vm_names))
    if unknown:
        raise UsageError(f"--set class./elasticity./affinity./cap./weight.: no VM named {unknown[0]!r} in the capture (VMs: {', '.join(w.vm_names) or 'none'})")
    try:
        return dict(
            _native.replay(
                thread_tid=w.tids,
                thread_vm=w.vm_of,
                thread_vcpu=w.vcpu_of,
                thread_start=w.start,
                thread_cpu=w.start_cpu,
                thread_fine=w.fine_accounting,
                thread_group=w.group_of,
                thread_allowed=thread_affinity(w, host, pcpus),
                thread_power=thread_power(w, host),
                group_names=w.group_names,
                group_shares=w.group_shares,
                # the spill's files, read sequentially while the engine's
                # phases are built: the Python process never holds them
                **w.phases.native_args(),
                vm_names=w.vm_names,
                vm_weights=[256 * max(1, w.vm_of.count(i)) for i in range(len(w.vm_names))],
                vm_cpu_intensive=[host.get("vm_class", {}).get(v) for v in w.vm_names],
                vm_elasticity=[host.get("vm_elasticity", {}).get(v) for v in w.vm_names],
                vm_share=[float(host.get("vm_share", {}).get(v, 1.0)) for v in w.vm_names],
                vm_cap=[host.get("vm_cap", {}).get(v) for v in w.vm_names],
                freq_khz=[freq] * pcpus,
                recorded_khz=int(host.get("recorded_khz", w.freq_khz)),
                elasticity=float(host.get("elasticity", -1.0)),
                cpu_speed=[w.cpu_speed.get(c, []) for c in range(pcpus)],
                policy=policy,
                params=engine,
                costs=costs,
                limit_ns=limit_ns,
                seed=seed,
            )
        )
    except ValueError as e:
        raise UsageError(str(e)) from None


#: the engine's result tables: their columns, and the list keys a Python
#: policy (cratrace.replay.policy) returns them under
RESULT_TABLES = {
    "states": {"_t": ("state_thread", pl.UInt32), "code": ("state_code", pl.UInt8), "start": ("state_start", pl.Int64), "end": ("state_end", pl.Int64), "pcpu": ("state_pcpu", pl.Int32)},
    "slices": {"cpu": ("slice_cpu", pl.Int32), "_t": ("slice_thread", pl.UInt32), "start": ("slice_start", pl.Int64), "end": ("slice_end", pl.Int64)},
    "marks": {"_t": ("mark_thread", pl.UInt32), "ts": ("mark_ts", pl.Int64)},
    "episodes": {"_t": ("ep_thread", pl.UInt32), "start": ("ep_start", pl.Int64), "end": ("ep_end", pl.Int64), "holder": ("ep_holder", pl.Int64), "exits": ("ep_calls", pl.Int64), "retries": ("ep_retries", pl.Int64)},
}


def _as_tables(r: dict) -> dict:
    """A Python policy's list results as the engine's tables."""
    for name, cols in RESULT_TABLES.items():
        r[name] = pl.DataFrame({c: r.pop(key) for c, (key, _) in cols.items()}, schema={c: t for c, (_, t) in cols.items()})
    return r


#: rows of the replayed markers named and written at a time
MARKER_ROWS = 2_000_000
#: replayed states past which vcpu_states is named and written a vCPU at
#: a time (named rows, strings and all, take about 80 bytes)
STATE_ROWS = 2_000_000


def _write_frames(frames: Iterable[pl.DataFrame], path: Path, codec: str) -> None:
    """Write a table given as one frame or more (each a row group or more
    of the file, let go once written). One frame is written by polars, as
    replays always were: pyarrow, which appends row groups, is imported
    only for a table that comes in parts."""
    it = iter(frames)
    first = next(it)
    second = next(it, None)
    if second is None:
        first.write_parquet(path, compression=codec, statistics=False)
    else:
        write_batches(itertools.chain([first, second], it), path, codec)


def _write_tables(w: Workload, r: dict, cap: Capture, marker: str, model: Path, codec: str = "zstd") -> dict:
    """Write the replay's model tables into `model` (each built and let go
    in turn, the long ones a VM or a few million rows at a time: a 100 M
    event capture's replayed tables took 2 GB whole), and return the
    diagnostics of its vcpu_states."""
    t0 = w.t0
    tid = pl.Series(w.tids, dtype=pl.Int64)
    vm_names = w.vm_names
    th = pl.DataFrame({"_t": range(len(w.tids)), "tid": tid, "vm": [vm_names[v] if v >= 0 else None for v in w.vm_of], "vcpu": [c if c >= 0 else None for c in w.vcpu_of]}, schema={"_t": pl.UInt32, "tid": pl.Int64, "vm": pl.String, "vcpu": pl.Int32})

    def write(name: str, df: pl.DataFrame) -> None:
        _write_frames([df], model / f"{name}.parquet", codec)

    write("threads", _replayed_threads(w, cap, th))
    sl = pl.DataFrame(r.pop("slices"))
    sl = sl.join(th.select("_t", "tid"), on="_t").with_columns((pl.col("start") + t0).alias("start"), (pl.col("end") + t0).alias("end"))
    sl = with_idle(sl.select("cpu", "tid", "start", "end"), int(r["end_ns"]) + t0, t0, w.pcpus)
    khz = r.get("core_khz") or []
    if khz and (w.freq_known or any(k != w.freq_khz for k in khz)):
        # each core's frequency as the replay ran it (the recording's, or
        # the asymmetric pools'), so the report charges it as the engine
        # did; unknown when the capture had none and the replay kept it
        sl = sl.with_columns(pl.col("cpu").replace_strict(list(range(len(khz))), khz, default=None, return_dtype=pl.Int64).alias("freq_khz"))
    write("cpu_slices", conform(sl, "cpu_slices"))
    del sl
    diagnostics_ = _write_states(pl.DataFrame(r.pop("states")), th, t0, model / "vcpu_states.parquet", codec, vm_names)
    _write_frames(_named_marks(pl.DataFrame(r.pop("marks")), th, t0, marker), model / "markers.parquet", codec)
    ep = pl.DataFrame(r.pop("episodes"))
    hv = th.select(pl.col("_t").cast(pl.Int64).alias("holder"), pl.col("vcpu").alias("holder_vcpu"))
    ep = ep.join(th, on="_t").join(hv, on="holder", how="left").with_columns(
        (pl.col("start") + t0).alias("start"), (pl.col("end") + t0).alias("end"), pl.lit("replay").alias("source")
    ).with_columns((pl.col("end") - pl.col("start")).alias("dur"))
    write("spin_episodes", total_order(conform(ep, "spin_episodes"), "vm", "vcpu", "start"))
    del ep
    # the capture's own, but for the power a replay's power model gives
    for name in ("thread_names", "io_work", "faults") + (() if r.get("bal_ts") else ("power",)):
        write(name, cap.model[name].collect() if name in cap.model else conform(pl.DataFrame(), name))
    if r.get("bal_ts"):
        # energy per core and accounting period, from the replay's power model
        e = pl.DataFrame({"cpu": r["bal_core"], "end": r["bal_ts"], "value": r["bal_energy_j"]}, schema={"cpu": pl.Int32, "end": pl.Int64, "value": pl.Float64}).sort("cpu", "end")
        e = e.with_columns(pl.col("end").shift(1).over("cpu").fill_null(0).alias("start")).with_columns(
            (pl.col("start") + t0).alias("start"), (pl.col("end") + t0).alias("end"), pl.lit("energy").alias("kind"), pl.lit("model").alias("name"), pl.lit("J").alias("unit")
        )
        write("power", conform(e, "power"))
    return diagnostics_


def _named_marks(mk: pl.DataFrame, th: pl.DataFrame, t0: int, marker: str) -> Iterator[pl.DataFrame]:
    """The engine's marks (`_t`, ts) as markers rows, in (ts, tid) order,
    `MARKER_ROWS` at a time: sorted while narrow, then named (a sort of
    the named marks, three strings a row, was the tables' peak)."""
    mk = mk.join(th.select("_t", "tid"), on="_t").sort("ts", "tid")
    named = th.select("_t", "vm", "vcpu")
    for first in range(0, max(mk.height, 1), MARKER_ROWS):
        part = mk.slice(first, MARKER_ROWS).join(named, on="_t", maintain_order="left").with_columns(
            (pl.col("ts") + t0).alias("ts"), pl.lit(marker).alias("name"), pl.lit(marker).alias("text"), pl.lit("{}").alias("fields")
        )
        yield conform(part, "markers")


def _write_states(st: pl.DataFrame, th: pl.DataFrame, t0: int, path: Path, codec: str, vm_names: list[str]) -> dict:
    """Write the replayed vcpu_states and return their diagnostics: a vCPU
    at a time when there are over `STATE_ROWS` and each vCPU is one thread
    (its rows named, measured and written, then let go; a VM's sibling
    wakeups counted once all its vCPUs are), else whole (a Xen domain's
    vCPUs, without threads of their own, are counted as one)."""
    vcpus = th.filter(pl.col("vm").is_not_null())
    whole = st.height <= STATE_ROWS or not vcpus.height or vcpus["tid"].min() < 0
    if whole or not _one_thread_each(vcpus):
        states = _replayed_states(st, th, t0)
        _write_frames([states], path, codec)
        return diagnostics.measure(states, None if states["tid"].null_count() else [[vm] for vm in vm_names])
    # where the concentration's windows start, from the narrow rows of all
    # VMs (what `diagnostics.parts` reads of a whole timeline)
    p = diagnostics.parts(_named(st.lazy(), th, t0))
    # in vcpu_states' order, where each thread's rows are one stretch:
    # they end where the next rank's begin
    st = _by_vcpu(st.filter(pl.col("_t").is_in(vcpus["_t"].implode())), vcpus)
    ends = st["_rank"].search_sorted(pl.Series(range(1, vcpus.height + 1), dtype=pl.UInt32), "left")
    vms = vcpus.sort("vm", "vcpu")["vm"]
    last_of_vm = vms != vms.shift(-1)

    def per_vcpu() -> Iterator[pl.DataFrame]:
        first = 0
        for end, vm_done in zip(ends, last_of_vm.fill_null(True)):
            s = conform(_named(st.slice(first, end - first).drop("_rank"), th, t0), "vcpu_states")
            p.add(diagnostics.narrow(s))
            if vm_done:
                # a VM's wakeups pair with its own threads' stretches only
                p.count_wakeups()
            yield s
            first = end

    _write_frames(per_vcpu(), path, codec)
    return p.figures()


def _replayed_states(st: pl.DataFrame, th: pl.DataFrame, t0: int) -> pl.DataFrame:
    """The engine's states (`_t`, code, start, end, pcpu) of the vCPU
    threads as a vcpu_states table, in its order: sorted while narrow,
    then named (a sort of the named rows, strings and all, copied them)."""
    vcpus = th.filter(pl.col("vm").is_not_null())
    st = st.filter(pl.col("_t").is_in(vcpus["_t"].implode()))
    one_each = _one_thread_each(vcpus)
    if one_each:
        st = _by_vcpu(st, vcpus).drop("_rank")
    st = _named(st, th, t0)
    return conform(st if one_each else st.sort("vm", "vcpu", "start", "end"), "vcpu_states")


def _named(st: pl.DataFrame | pl.LazyFrame, th: pl.DataFrame, t0: int) -> pl.DataFrame | pl.LazyFrame:
    """The engine's states with their threads' names and the states'
    (vcpu_states' columns, in `st`'s order; lazily for a lazy `st`)."""
    # a Xen domain's vCPU states have no thread id, as in the recording
    named = th.with_columns(pl.when(pl.col("tid") >= 0).then(pl.col("tid")).alias("tid"))
    return st.join(named.lazy() if isinstance(st, pl.LazyFrame) else named, on="_t", maintain_order="left").with_columns(
        pl.col("code").replace_strict(STATE_NAMES, return_dtype=pl.String).alias("state"),
        (pl.col("start") + t0).alias("start"),
        (pl.col("end") + t0).alias("end"),
        pl.when(pl.col("pcpu") >= 0).then(pl.col("pcpu")).alias("pcpu"),
    ).with_columns((pl.col("end") - pl.col("start")).alias("dur"))


def _one_thread_each(vcpus: pl.DataFrame) -> bool:
    """Each vCPU (vm, vcpu) of the threads `vcpus` is one thread."""
    return not vcpus.select(pl.struct("vm", "vcpu").is_duplicated().any()).item()


def _by_vcpu(st: pl.DataFrame, vcpus: pl.DataFrame) -> pl.DataFrame:
    """The replayed states (`_t`, code, start, end, ...) of the vCPU
    threads `vcpus`, each vCPU one thread, with each thread's (vm, vcpu)
    rank as `_rank`, sorted by it. The engine writes each thread's
    segments in time order, each beginning where the one before ended: a
    stable sort by the rank alone gives vcpu_states' order (vm, vcpu,
    start, end; a sort by the four columns took 0.6 s of 4 M rows), and
    each thread's rows are then one stretch."""
    rank = vcpus.sort("vm", "vcpu").with_row_index("_rank")
    return st.with_columns(pl.col("_t").replace_strict(rank["_t"], rank["_rank"], return_dtype=pl.UInt32).alias("_rank")).sort("_rank", maintain_order=True)


def _replayed_threads(w: Workload, cap: Capture, th: pl.DataFrame) -> pl.DataFrame:
    """The capture's rows of the replayed threads (and idle), and one for
    each Xen vCPU's stand-in id, so that its slices belong to its domain."""
    rec = cap.model["threads"].collect().filter(pl.col("tid").is_in(w.tids + [0]))
    return pl.concat([rec, domain_threads(th.filter(pl.col("tid") < 0))]).sort("tid")


def speed_summary(mode: str, profile: dict[int, list[tuple[int, float]]]) -> dict:
    """What metrics.json says of the CPUs' recorded speeds: the mode, and
    when read, how many changes and the range."""
    speeds = [s for steps in profile.values() for _, s in steps]
    out: dict = {"mode": mode, "read": bool(speeds)}
    if speeds:
        out.update(changes=sum(len(st) - 1 for st in profile.values()), min=min(speeds), max=max(speeds))
    return out


@dataclass
class PolicyReplay:
    """One policy's replay: its metrics (what the inputs and seed
    determine) and its wall-clock figures (run.json); its tables are
    written as they are built."""

    policy: str
    metrics: dict
    run: dict


# the command's phases (its workloads' spills) go with it, however it ends
@removing_spills()
def replay_capture(cap: Capture | str | Path, policies: list[str], out: Path, *, settings: dict[str, str] | None = None, seed: int = 0, force: bool = False, python_policies: dict | None = None, drop_vms: list[str] = (), add_vms: list[str] = (), jobs: int = 1) -> dict[str, dict]:
    """Replay `cap` under each policy into ``out/<policy>/``; returns
    metrics per policy. `python_policies` maps extra policy names to
    objects implementing :class:`cratrace.replay.policy.PythonPolicy`.
    `drop_vms` and `add_vms` (`NAME[:COUNT]`) are consolidation what-ifs
    (`cratrace.replay.whatif`): a what-if replay is no fidelity check.
    `jobs`: engine policies replayed at once (threads: the engine runs
    without the GIL; the outputs do not depend on it; 0: as many as the
    CPUs and the memory allow, `cratrace.replay.concurrency`)."""
    python_policies = dict(python_policies or {})
    policies = list(policies) + [p for p in python_policies if p not in policies]
    plan = plan_replay(cap, settings=settings, seed=seed, drop_vms=drop_vms, add_vms=add_vms)
    out = Path(out)
    # every policy's output checked (and locked, for the whole command:
    # issue 42) before any is replayed: a clash found after the first
    # policies ran cost their time and left them behind
    dests = {policy: out / policy.replace("/", "_") for policy in policies}
    with contextlib.ExitStack() as outputs:
        held = {policy: outputs.enter_context(atomic.Destination(d, force=force, ours=is_replay, what="replay output")) for policy, d in dests.items()}

        def one(policy: str) -> dict:
            tmp = held[policy].temp()
            r = replay_policy(plan, policy, tmp / "model", python_policies.get(policy))
            write_replay(held[policy], tmp, r)
            return r.metrics

        engine_policies = [p for p in policies if p not in python_policies]
        jobs = jobs or engines_at_once(len(engine_policies), len(plan.workload.phases))
        if jobs > 1 and len(engine_policies) > 1:
            with ThreadPoolExecutor(max_workers=min(jobs, len(engine_policies))) as pool:
                done = dict(zip(engine_policies, pool.map(one, engine_policies)))
        else:
            done = {p: one(p) for p in engine_policies}
        # a Python policy holds the GIL throughout: one at a time
        done.update({p: one(p) for p in policies if p in python_policies})
        return {p: done[p] for p in policies}


def replay_policy(plan: ReplayPlan, policy: str, model: Path, python_policy=None) -> PolicyReplay:
    """Run one policy on the plan's workload, write its model tables into
    the directory `model` (made here) and return its metrics (with the
    fidelity check when it is the capture's own policy and no what-if is
    asked). An asymmetric policy also runs its all-fast-core baseline,
    which its saving is measured against."""
    w, engine, costs, host = plan.workload, plan.engine, plan.costs, plan.host
    limit_ns = int(plan.run.limit_s * 1e9)
    tolerance = plan.run.fidelity_tolerance_pct
    if python_policy is not None:
        from cratrace.replay.policy import run_python_policy

        r = _as_tables(run_python_policy(w, python_policy, int(host.get("pcpus", w.pcpus)), costs["context_switch_ns"], limit_ns))
    else:
        r = _run_engine(w, policy, engine, costs, asymmetric_host(w, policy, engine, host), limit_ns, plan.seed)
    gate = policy in (plan.baseline, f"{plan.baseline}+spin") and not plan.whatif
    metrics = replay_metrics(w, r, policy, plan.seed, plan.settings, tolerance, gate)
    metrics["host"]["sched_groups_mode"] = plan.groups_mode
    metrics["whatif"] = plan.whatif
    metrics["host"]["cpu_speed"] = speed_summary(plan.run.cpu_speed, w.cpu_speed)
    metrics["host"]["costs"] = {k: {"ns": int(v), "source": plan.cost_source[k]} for k, v in sorted(costs.items())}
    if any(p >= 0 for p in r.get("vcpu_pool", [])):
        # the fast cores' frequency and voltage as the engine set them
        f0 = r["core_pool"].index(0)
        fast = {**engine, "volt": r["core_volt"][f0]}
        hb = {**asymmetric_host(w, policy, engine, host), "freq_khz": r["core_khz"][f0]}
        # same spin response, credit on a host of fast cores only
        bp = "+".join(dict.fromkeys("credit" if part == "asymmetric" else part for part in policy.split("+")))
        rb = _run_engine(w, bp, fast, costs, hb, limit_ns, plan.seed)
        metrics["asymmetric"] = asymmetric_metrics(w, r, bp, metrics, replay_metrics(w, rb, bp, plan.seed, plan.settings, tolerance, False))
    run = {"wall_s": r["wall_s"], "events_per_s": r["events"] / max(r["wall_s"], 1e-9)}
    model.mkdir()
    replayed = _write_tables(w, r, plan.cap, plan.run.throughput_marker, model)
    metrics["fidelity"]["diagnostics"] = diagnostics.compare(w.recorded_diagnostics, replayed)
    return PolicyReplay(policy, metrics, run)


def write_replay(dest: atomic.Destination, tmp: Path, r: PolicyReplay) -> None:
    """One policy's output, whole or not at all: its model tables (already
    in `tmp`, `dest`'s temporary directory), metrics.json (byte-identical
    for the same inputs and seed), run.json."""
    (tmp / "metrics.json").write_text(json.dumps(r.metrics, indent=2, sort_keys=True))
    (tmp / "run.json").write_text(json.dumps(r.run, indent=2))
    dest.commit(tmp)


def is_replay(p: Path) -> bool:
    """An existing output `replay --force` may replace: a policy's
    directory of an earlier replay (its metrics.json), or an empty one."""
    p = Path(p)
    return p.is_dir() and not p.is_symlink() and ((p / "metrics.json").is_file() or not any(p.iterdir()))
