"""`threads` and `thread_names`: who ran, under which names, for which VM.

VMs come from the capture's inventory (host.json: VM → pid → vCPU tids,
vhost and iothreads) when present. Threads it does not cover are inferred
(`cratrace.model.vms`): vCPU threads by their VMM's names or the KVM
tracepoints they ran, grouped into VMs by the best evidence the trace has;
``vhost-<pid>`` threads work for the VM whose VMM has that pid, and the
VMM process's other threads are its VMM (``IO ...`` iothreads: I/O workers).
"""

from __future__ import annotations

import re

import polars as pl

from cratrace.model.affinity import inferred as inferred_affinity
from cratrace.model.affinity import recorded as recorded_affinity
from cratrace.model.frames import conform, empty, top_buffer
from cratrace.model.vms import creators, group, kvm_vcpu_ids, process_of, recognise, split_repeats, vcpu_names
from cratrace.model.vms import notes as vm_notes


def name_observations(ev: dict[str, pl.LazyFrame]) -> pl.LazyFrame:
    """(tid, comm, ts) whenever an event shows a thread's name, as a query:
    every switch shows two, so collected whole they were the model's
    largest frame (3 M rows and 0.47 GiB at the peak on an 11.6 M-event
    trace); `thread_names` aggregates them as they are read."""
    obs = []
    if "sched_switch" in ev:
        sw = top_buffer(ev["sched_switch"])
        obs.append(sw.select(pl.col("prev_pid").cast(pl.Int64).alias("tid"), pl.col("prev_comm").alias("comm"), "ts"))
        obs.append(sw.select(pl.col("next_pid").cast(pl.Int64).alias("tid"), pl.col("next_comm").alias("comm"), "ts"))
    for name in ("sched_wakeup", "sched_waking", "sched_wakeup_new"):
        if name in ev:
            lf = top_buffer(ev[name])
            pid = "field_pid" if "field_pid" in lf.collect_schema().names() else "pid"
            obs.append(lf.select(pl.col(pid).cast(pl.Int64).alias("tid"), "comm", "ts"))
    if "sched_process_fork" in ev:
        lf = top_buffer(ev["sched_process_fork"])
        obs.append(lf.select(pl.col("child_pid").cast(pl.Int64).alias("tid"), pl.col("child_comm").alias("comm"), "ts"))
    if "task_rename" in ev:
        lf = top_buffer(ev["task_rename"])
        pid = "field_pid" if "field_pid" in lf.collect_schema().names() else "pid"
        obs.append(lf.select(pl.col(pid).cast(pl.Int64).alias("tid"), pl.col("newcomm").alias("comm"), "ts"))
    if not obs:
        return pl.LazyFrame(schema={"tid": pl.Int64, "comm": pl.String, "ts": pl.Int64})
    return pl.concat(obs)


def thread_names(obs: pl.LazyFrame | pl.DataFrame, span_end: int) -> pl.DataFrame:
    """Runs of the same name per thread → [start, end) segments."""
    obs = obs.lazy()
    tid, comm = pl.col("tid"), pl.col("comm")
    # tid 0 is the idle task of every CPU, shown as swapper/<cpu>: one
    # name, not a rename at every switch between CPUs' views of it
    obs = obs.with_columns(pl.when(tid == 0).then(pl.lit("swapper")).otherwise(comm).alias("comm"))
    # Most threads keep one name: a hash group-by settles them; only the
    # renamed ones need their observations in time order.
    names = obs.group_by("tid", "comm").agg(pl.col("ts").min()).collect(engine="streaming")
    if names.height == 0:
        return empty("thread_names")
    renamed = names.filter(pl.len().over("tid") > 1)["tid"].unique()
    one = names.filter(~tid.is_in(renamed.implode()))
    new_run = (tid != tid.shift(1)) | comm.ne_missing(comm.shift(1))
    # the events are read again, for the few renamed threads' rows only
    many = obs.filter(tid.is_in(renamed.implode())).collect(engine="streaming").sort("tid", "ts").filter(new_run.fill_null(True))
    o = pl.concat([one.select("tid", "comm", "ts"), many.select("tid", "comm", "ts")]).sort("tid", "ts")
    runs = o.select("tid", "comm", pl.col("ts").alias("start"))
    last = (tid != tid.shift(-1)).fill_null(True)
    runs = runs.with_columns(pl.when(last).then(pl.lit(span_end)).otherwise(pl.col("start").shift(-1)).alias("end"))
    return conform(runs, "thread_names")


def _inventory_rows(vms: list[dict]) -> pl.DataFrame:
    rows = []
    names = [vm.get("name") or f"{vm.get('vmm') or 'qemu'}-{vm.get('pid')}" for vm in vms]
    for vm, name in zip(vms, names):
        if names.count(name) > 1:
            # two QEMU processes with one -name (a restart, two hosts' labs): keep them apart
            name = f"{name}@{vm.get('pid')}"
        pid = vm.get("pid")
        for v in vm.get("vcpus", []):
            rows.append({"tid": int(v["tid"]), "pid": pid, "vm": name, "vcpu": int(v["index"]), "role": "vcpu"})
        for t in vm.get("vhost_tids", []) + vm.get("iothread_tids", []):
            rows.append({"tid": int(t), "pid": pid, "vm": name, "vcpu": None, "role": "io-worker"})
        if pid is not None:
            rows.append({"tid": int(pid), "pid": pid, "vm": name, "vcpu": None, "role": "vmm"})
    return pl.DataFrame(rows, schema={"tid": pl.Int64, "pid": pl.Int64, "vm": pl.String, "vcpu": pl.Int32, "role": pl.String})


def threads(ev: dict[str, pl.LazyFrame], vms: list[dict], cmdlines: list, names: pl.DataFrame, sched_groups: dict | None = None, vm_pattern: str | None = None, affinity: dict | None = None, ncpus: int = 0, power_w: dict | None = None) -> tuple[pl.DataFrame, tuple[list[str], list[str]]]:
    """The threads table (with host.json's `affinity`, {tid: CPU list},
    as allowed_cpus), and what the VM attribution guessed and what it
    remarks, one line each (`cratrace.model.vms.notes`)."""
    last = names.sort("start").group_by("tid").agg(pl.col("comm").last(), pl.col("start").min().alias("first_ts"), pl.col("end").max().alias("last_ts"))
    if cmdlines:
        cl = pl.DataFrame({"tid": [int(p) for p, _ in cmdlines], "_cl": [c for _, c in cmdlines]}, schema={"tid": pl.Int64, "_cl": pl.String})
        last = last.join(cl, on="tid", how="full", coalesce=True).with_columns(pl.coalesce("comm", "_cl").alias("comm")).drop("_cl")
    if 0 not in last["tid"].to_list():
        # the idle task exists even when a busy capture never switched to it
        last = pl.concat([last, pl.DataFrame({"tid": [0], "comm": ["swapper"], "first_ts": [None], "last_ts": [None]}, schema=last.schema)])
    df = last.with_columns(pl.lit(None, pl.Int64).alias("pid"), pl.lit(None, pl.String).alias("vm"), pl.lit(None, pl.Int32).alias("vcpu"), pl.lit(None, pl.String).alias("role"), pl.lit(None, pl.String).alias("vm_evidence"))
    inv = _inventory_rows(vms)
    if inv.height:
        df = df.join(inv, on="tid", how="full", coalesce=True, suffix="_inv")
        df = df.with_columns(
            pl.coalesce("pid_inv", "pid").alias("pid"),
            pl.coalesce("vm_inv", "vm").alias("vm"),
            pl.coalesce("vcpu_inv", "vcpu").alias("vcpu"),
            pl.coalesce("role_inv", "role").alias("role"),
            pl.when(pl.col("vm_inv").is_not_null()).then(pl.lit("inventory")).alias("vm_evidence"),
        ).drop("pid_inv", "vm_inv", "vcpu_inv", "role_inv")
    # threads the inventory does not cover (no host.json, or VMs it missed)
    df, unseen = _infer_vms(df, ev, vm_pattern)
    df = split_repeats(df)
    df = df.with_columns(
        pl.when(pl.col("tid") == 0)
        .then(pl.lit("idle"))
        .when(pl.col("role").is_not_null())
        .then(pl.col("role"))
        .otherwise(pl.lit("host"))
        .alias("role")
    )
    aff = recorded_affinity(affinity, ncpus)
    df = df.join(aff, on="tid", how="left")
    power = {int(t): float(w) for t, w in (power_w or {}).items() if isinstance(w, (int, float)) and w >= 0}
    df = df.with_columns(pl.col("tid").replace_strict(power, default=None, return_dtype=pl.Float64).alias("power_w"))
    group_of = {int(t): key for key, g in ((sched_groups or {}).get("groups") or {}).items() for t in g.get("tids", [])}
    df = df.with_columns(pl.col("tid").replace_strict(group_of, default=None, return_dtype=pl.String).alias("sched_group"))
    out = conform(df.sort("tid"), "threads")
    return out, vm_notes(out, unseen, xen=any(k.startswith("xen_") for k in ev))


def with_inferred_affinity(threads: pl.DataFrame, states: pl.DataFrame | pl.LazyFrame, slices: pl.DataFrame, ncpus: int) -> pl.DataFrame:
    """`threads` with the affinity the vCPU timelines show for vCPUs that
    host.json said nothing of (`cratrace.model.affinity.inferred`)."""
    known = threads.filter(pl.col("allowed_cpus").is_not_null())["tid"]
    found = inferred_affinity(states.filter(~pl.col("tid").is_in(known.implode())), slices, ncpus)
    if found.height == 0:
        return threads
    return threads.join(found, on="tid", how="left", suffix="_t").with_columns(
        pl.coalesce("allowed_cpus", "allowed_cpus_t").alias("allowed_cpus"),
        pl.coalesce("affinity_evidence", "affinity_evidence_t").alias("affinity_evidence"),
    ).drop("allowed_cpus_t", "affinity_evidence_t")


def _infer_vms(df: pl.DataFrame, ev: dict[str, pl.LazyFrame], vm_pattern: str | None) -> tuple[pl.DataFrame, int]:
    """vCPU threads by name or KVM tracepoints, grouped into VMs by the
    best evidence the trace has (`cratrace.model.vms`); then the VMM
    processes' other threads and Xen dom0's back-ends. Returns the frame
    and how many vCPU-named threads appear in no event."""
    parent, as_thread = creators(ev)
    kvm = kvm_vcpu_ids(ev)
    free = df.filter(pl.col("role").is_null() & (pl.col("tid") != 0))
    # a thread with no event (only in the saved command lines) did not run
    # here: often a thread of a process that ended before the trace
    seen = pl.col("first_ts").is_not_null() | pl.col("tid").is_in(list(kvm))
    patterns = vcpu_names(vm_pattern)
    found = recognise(free.filter(seen), patterns, kvm)
    unseen = recognise(free.filter(~seen), patterns, {}).height
    grouped = group(found, parent, as_thread).join(found.select("tid", "vcpu"), on="tid")
    df = df.join(grouped, on="tid", how="left", suffix="_g").with_columns(
        pl.coalesce("vm", "vm_g").alias("vm"),
        pl.coalesce("pid", "pid_g").alias("pid"),
        pl.coalesce("vcpu", "vcpu_g").alias("vcpu"),
        pl.coalesce("vm_evidence", "vm_evidence_g").alias("vm_evidence"),
        pl.when(pl.col("vm_g").is_not_null()).then(pl.lit("vcpu")).otherwise("role").alias("role"),
    ).drop("vm_g", "pid_g", "vcpu_g", "vm_evidence_g")
    # the VMM processes known by pid: their own threads work for their VM
    known = df.filter(pl.col("role").is_in(["vcpu", "vmm"]) & pl.col("pid").is_not_null())
    vm_of_pid = {int(p): (vm, ev) for p, vm, ev in known.select("pid", "vm", "vm_evidence").unique("pid").iter_rows()}
    rows = []
    for tid, comm in df.filter(pl.col("role").is_null()).select("tid", "comm").iter_rows():
        comm = comm or ""
        vhost = re.fullmatch(r"vhost-(\d+)", comm)
        if vhost and int(vhost.group(1)) in vm_of_pid:
            pid = int(vhost.group(1))
            rows.append((tid, vm_of_pid[pid][0], pid, "io-worker", "vhost-name"))
        elif tid in vm_of_pid:
            rows.append((tid, vm_of_pid[tid][0], tid, "vmm", vm_of_pid[tid][1]))
        elif tid in parent and (pid := process_of(tid, parent, as_thread)) in vm_of_pid:
            # created by the VMM's process: its I/O threads and helpers
            io = comm.startswith("IO ") or comm.startswith("iothread")
            rows.append((tid, vm_of_pid[pid][0], pid, "io-worker" if io else "vmm", "fork"))
        else:
            # Xen dom0: netback (`vif<dom>.<n>...`) and blkback
            # (`blkback.<dom>...`) threads work for the domain in their name
            dom = re.match(r"vif(\d+)\.\d+", comm) or re.match(r"blkback\.(\d+)", comm)
            if dom:
                rows.append((tid, f"dom{dom.group(1)}", None, "io-worker", "backend-name"))
    if rows:
        extra = pl.DataFrame(rows, schema={"tid": pl.Int64, "vm_x": pl.String, "pid_x": pl.Int64, "role_x": pl.String, "ev_x": pl.String}, orient="row")
        df = df.join(extra, on="tid", how="left").with_columns(
            pl.coalesce("vm", "vm_x").alias("vm"),
            pl.coalesce("pid", "pid_x").alias("pid"),
            pl.coalesce("role", "role_x").alias("role"),
            pl.coalesce("vm_evidence", "ev_x").alias("vm_evidence"),
        ).drop("vm_x", "pid_x", "role_x", "ev_x")
    return df, unseen
