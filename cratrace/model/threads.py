"""`threads` and `thread_names`: who ran, under which names, for which VM.

VMs come from the capture's inventory (host.json: VM → pid → vCPU tids,
vhost and iothreads) when present. Otherwise they are inferred: threads
named ``CPU n/KVM`` are vCPU n of the process that created them (fork
events give the creator), ``vhost-<pid>`` threads work for the VM whose
QEMU has that pid, and the QEMU process's other threads are its VMM.
"""

from __future__ import annotations

import polars as pl

from cratrace.model.frames import conform, empty, top_buffer

VCPU_RE = r"^CPU (\d+)/KVM$"


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
    names = [vm.get("name") or f"qemu-{vm.get('pid')}" for vm in vms]
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


def threads(ev: dict[str, pl.LazyFrame], vms: list[dict], cmdlines: list, names: pl.DataFrame, sched_groups: dict | None = None) -> pl.DataFrame:
    last = names.sort("start").group_by("tid").agg(pl.col("comm").last(), pl.col("start").min().alias("first_ts"), pl.col("end").max().alias("last_ts"))
    if cmdlines:
        cl = pl.DataFrame({"tid": [int(p) for p, _ in cmdlines], "_cl": [c for _, c in cmdlines]}, schema={"tid": pl.Int64, "_cl": pl.String})
        last = last.join(cl, on="tid", how="full", coalesce=True).with_columns(pl.coalesce("comm", "_cl").alias("comm")).drop("_cl")
    if 0 not in last["tid"].to_list():
        # the idle task exists even when a busy capture never switched to it
        last = pl.concat([last, pl.DataFrame({"tid": [0], "comm": ["swapper"], "first_ts": [None], "last_ts": [None]}, schema=last.schema)])
    df = last.with_columns(pl.lit(None, pl.Int64).alias("pid"), pl.lit(None, pl.String).alias("vm"), pl.lit(None, pl.Int32).alias("vcpu"))
    inv = _inventory_rows(vms)
    if inv.height:
        df = df.join(inv, on="tid", how="full", coalesce=True, suffix="_inv")
        df = df.with_columns(
            pl.coalesce("pid_inv", "pid").alias("pid"), pl.coalesce("vm_inv", "vm").alias("vm"), pl.coalesce("vcpu_inv", "vcpu").alias("vcpu")
        ).drop("pid_inv", "vm_inv", "vcpu_inv")
    else:
        df = df.with_columns(pl.lit(None, pl.String).alias("role"))
        df = _infer_vms(df, ev)
    df = df.with_columns(
        pl.when(pl.col("tid") == 0)
        .then(pl.lit("idle"))
        .when(pl.col("role").is_not_null())
        .then(pl.col("role"))
        .otherwise(pl.lit("host"))
        .alias("role")
    )
    group_of = {int(t): key for key, g in ((sched_groups or {}).get("groups") or {}).items() for t in g.get("tids", [])}
    df = df.with_columns(pl.col("tid").replace_strict(group_of, default=None, return_dtype=pl.String).alias("sched_group"))
    return conform(df.sort("tid"), "threads")


def _infer_vms(df: pl.DataFrame, ev: dict[str, pl.LazyFrame]) -> pl.DataFrame:
    """No inventory: vCPU threads by name, grouped by their creator."""
    parent = pl.DataFrame(schema={"tid": pl.Int64, "creator": pl.Int64})
    if "sched_process_fork" in ev:
        parent = (
            top_buffer(ev["sched_process_fork"])
            .select(pl.col("child_pid").cast(pl.Int64).alias("tid"), pl.col("parent_pid").cast(pl.Int64).alias("creator"))
            .collect()
            .unique("tid", keep="last")
        )
    df = df.join(parent, on="tid", how="left")
    vcpu_n = pl.col("comm").str.extract(VCPU_RE, 1).cast(pl.Int32)
    # A vCPU's VM is its creator (QEMU's main thread); vCPU threads whose
    # creation was not traced fall into "vm-unknown".
    df = df.with_columns(
        pl.when(vcpu_n.is_not_null()).then(pl.col("creator")).alias("pid"),
        vcpu_n.alias("vcpu"),
        pl.when(vcpu_n.is_not_null()).then(pl.lit("vcpu")).alias("role"),
    )
    vm_pids = df.filter(pl.col("role") == "vcpu").select("pid").unique()["pid"].to_list()
    vm_name = {p: (f"qemu-{p}" if p is not None else "vm-unknown") for p in vm_pids}
    vhost_pid = pl.col("comm").str.extract(r"^vhost-(\d+)$", 1).cast(pl.Int64)
    df = df.with_columns(
        pl.when(pl.col("role") == "vcpu")
        .then(pl.col("pid").replace_strict(vm_name, default="vm-unknown", return_dtype=pl.String))
        .when(vhost_pid.is_in([p for p in vm_pids if p is not None]))
        .then(vhost_pid.replace_strict(vm_name, default=None, return_dtype=pl.String))
        .when(pl.col("tid").is_in([p for p in vm_pids if p is not None]))
        .then(pl.col("tid").replace_strict(vm_name, default=None, return_dtype=pl.String))
        .alias("vm"),
    )
    # Xen dom0: netback (`vif<dom>.<n>...`) and blkback (`blkback.<dom>...`)
    # threads work for the guest domain in their name
    xen_dom = pl.coalesce(pl.col("comm").str.extract(r"^vif(\d+)\.\d+", 1), pl.col("comm").str.extract(r"^blkback\.(\d+)", 1))
    df = df.with_columns(
        pl.when(pl.col("vm").is_null() & xen_dom.is_not_null()).then(pl.concat_str(pl.lit("dom"), xen_dom)).otherwise(pl.col("vm")).alias("vm"),
        pl.when(pl.col("role").is_null() & xen_dom.is_not_null()).then(pl.lit("io-worker")).otherwise(pl.col("role")).alias("role"),
    )
    df = df.with_columns(
        pl.when(pl.col("role").is_not_null())
        .then(pl.col("role"))
        .when(vhost_pid.is_not_null() & pl.col("vm").is_not_null())
        .then(pl.lit("io-worker"))
        .when(pl.col("vm").is_not_null())
        .then(pl.lit("vmm"))
        .alias("role"),
        pl.when(pl.col("vm").is_not_null() & pl.col("pid").is_null()).then(pl.coalesce(vhost_pid, pl.col("tid"))).otherwise(pl.col("pid")).alias("pid"),
    )
    return df.drop("creator")
