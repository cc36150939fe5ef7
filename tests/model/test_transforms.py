"""Model transforms on small frames whose truth is known by construction."""

from __future__ import annotations

import json

import polars as pl

from cratrace.model.frames import empty
from cratrace.model.markers import markers
from cratrace.model.spin_episodes import from_pause_exits
from cratrace.model.vcpu_states import STATE, _overlay_spins, vcpu_states


def overlay(base: pl.DataFrame, over: pl.DataFrame) -> pl.DataFrame:
    """The model's spin overlay (`vcpu_states._overlay_spins`) on frames
    keyed by vm and vcpu: each (vm, vcpu) numbered, as the model does."""
    order = pl.concat([base.select("vm", "vcpu"), over.select("vm", "vcpu")]).unique().sort("vm", "vcpu").with_row_index("_key")
    segs = base.join(order, on=["vm", "vcpu"]).with_columns(pl.col("state").cast(STATE)).sort("_key", "start")
    out = _overlay_spins(segs.select("_key", "tid", "state", "start", "end", "pcpu"), over.join(order, on=["vm", "vcpu"]))
    return out.join(order, on="_key").with_columns(pl.col("state").cast(pl.String))


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
    out = overlay(base, over).sort("start")
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
        {"tid": [5, 6, 7], "comm": ["vif3.0-q0-guest-rx", "blkback.4.xvda", "kworker/0:1"], "first_ts": [0] * 3, "last_ts": [1] * 3, "pid": [None] * 3, "vm": [None] * 3, "vcpu": [None] * 3, "role": [None] * 3, "vm_evidence": [None] * 3},
        schema_overrides={"pid": pl.Int64, "vm": pl.String, "vcpu": pl.Int32, "role": pl.String, "vm_evidence": pl.String},
    )
    out, unseen = _infer_vms(df, {}, None)
    assert out.sort("tid").select("vm", "role").rows() == [("dom3", "io-worker"), ("dom4", "io-worker"), (None, None)] and unseen == 0


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


def _random_timelines(rng, keys, n):
    """Gap-free, non-overlapping segments per key (a vCPU timeline), and
    overlay intervals that overlap, touch and stick out of the timeline."""
    base, over = [], []
    for vm, vcpu in keys:
        t = 0
        for _ in range(n):
            d = rng.randint(1, 40)
            base.append((vm, vcpu, rng.choice(["guest", "vmm"]), t, t + d))
            t += d
        for _ in range(n // 2):
            s = rng.randint(-10, t + 10)
            over.append((vm, vcpu, s, s + rng.choice([0, 1, 5, 30, 120])))
        # touching pair
        over.append((vm, vcpu, t // 3, t // 2))
        over.append((vm, vcpu, t // 2, t // 2 + 7))
    return base, over


def test_overlay_matches_a_brute_force_reference_with_overlapping_intervals():
    import random

    rng = random.Random(7)
    keys = [("a", 0), ("a", 1), ("b", 0)]
    base, over = _random_timelines(rng, keys, 60)
    b = pl.DataFrame(base, schema={"vm": pl.String, "vcpu": pl.Int32, "state": pl.String, "start": pl.Int64, "end": pl.Int64}, orient="row").with_columns(
        (pl.col("end") - pl.col("start")).alias("dur"), pl.lit(0, pl.Int32).alias("pcpu"), pl.lit(1, pl.Int64).alias("tid")
    )
    o = pl.DataFrame(over, schema={"vm": pl.String, "vcpu": pl.Int32, "start": pl.Int64, "end": pl.Int64}, orient="row")
    out = overlay(b, o)
    got = sorted(zip(out["vm"], out["vcpu"], out["start"], out["end"], out["state"]))
    want = []
    for vm, vcpu, state, s, e in base:
        ivs = [(a, z) for v, c, a, z in over if (v, c) == (vm, vcpu)]
        cuts = sorted({s, e} | {x for a, z in ivs for x in (a, z) if s < x < e})
        for lo, hi in zip(cuts, cuts[1:]):
            # spinning replaces guest time only; other states pass whole
            covered = any(a <= lo and z >= hi for a, z in ivs)
            if state != "guest":
                want.append((vm, vcpu, s, e, state))
                break
            want.append((vm, vcpu, lo, hi, "spinning" if covered else state))
    assert got == sorted(want)
    assert any(st == "spinning" for *_, st in got) and any(st != "spinning" for *_, st in got)


def test_holder_is_a_sibling_preempted_at_the_episode_start_as_brute_force_finds():
    import random

    from cratrace.model.spin_episodes import with_holder

    rng = random.Random(11)
    keys = [("a", v) for v in range(4)] + [("b", v) for v in range(2)]
    states = []
    for vm, vcpu in keys:
        t = 0
        for _ in range(80):
            d = rng.randint(1, 30)
            states.append((vm, vcpu, rng.choice(["guest", "preempted", "halted"]), t, t + d))
            t += d
    st = pl.DataFrame(states, schema={"vm": pl.String, "vcpu": pl.Int32, "state": pl.String, "start": pl.Int64, "end": pl.Int64}, orient="row")
    eps = [(vm, vcpu, rng.randint(0, 1500)) for vm, vcpu in keys for _ in range(40)]
    ep = pl.DataFrame(eps, schema={"vm": pl.String, "vcpu": pl.Int32, "start": pl.Int64}, orient="row").with_columns((pl.col("start") + 5).alias("end"))
    got = with_holder(ep, st)["holder_vcpu"].to_list()
    want = []
    for vm, vcpu, s in eps:
        c = [v for (m, v, state, a, z) in states if m == vm and v != vcpu and state == "preempted" and a <= s < z]
        want.append(min(c) if c else None)
    assert got == want
    assert sum(h is not None for h in got) > 20


def test_spin_episodes_order_is_total_when_two_kicks_end_one_halt():
    # vCPU 1 (tid 11) halts at 100; siblings 0 (tid 10) and 2 (tid 12) both
    # kick it, at 300 and 200: two episodes [100, 200) and [100, 300) that
    # agree in (vm, vcpu, start), the table's documented order. Their
    # order came from the build's threads until every column broke ties.
    from cratrace.model.spin_episodes import spin_episodes

    threads = pl.DataFrame({"tid": [10, 11, 12], "vm": ["a"] * 3, "vcpu": [0, 1, 2], "role": ["vcpu"] * 3},
                           schema={"tid": pl.Int64, "vm": pl.String, "vcpu": pl.Int32, "role": pl.String})
    for kickers in ([10, 12], [12, 10]):
        ev = {
            "kvm_exit": _lf(ts=[100], cpu=[1], pid=[11], exit_reason=[12]),
            "kvm_hypercall": _lf(ts=[300 if k == 10 else 200 for k in kickers], cpu=[0, 2], pid=kickers, nr=[5, 5], a1=[1, 1]),
        }
        ep = spin_episodes(ev, threads, pl.DataFrame())
        assert list(zip(ep["start"], ep["end"], ep["clearer_vcpu"])) == [(100, 200, 2), (100, 300, 0)], kickers


def test_in_order_gives_the_sorted_frame_whether_or_not_it_was_sorted():
    import random

    from cratrace.model.frames import in_order

    rng = random.Random(7)
    for trial in range(200):
        n = rng.randint(0, 12)
        df = pl.DataFrame({
            "vm": [rng.choice(["a", "b", "c"]) for _ in range(n)],
            "vcpu": [rng.randint(0, 2) for _ in range(n)],
            "start": [rng.randint(0, 5) for _ in range(n)],
        }, schema={"vm": pl.String, "vcpu": pl.Int32, "start": pl.Int64})
        if trial % 3 == 0:
            df = df.sort("vm", "vcpu", "start")  # already in order: returned as it is
        if trial % 7 == 0 and n:
            df = df.with_columns(pl.when(pl.int_range(n) == 0).then(None).otherwise(pl.col("vcpu")).alias("vcpu"))
        got = in_order(df, "vm", "vcpu", "start")
        assert got.rows() == df.sort("vm", "vcpu", "start").rows(), df


def test_tables_with_rows_equal_in_their_sort_key_come_out_the_same_whatever_the_input_order():
    # Rows that tie in a table's documented order (a zero-length dispatch
    # and the slice after it start at one ns on one CPU; two vCPUs fault at
    # one ns) must not take their order from the rows given: replays and
    # builds are compared byte for byte.
    from cratrace.model.domains import with_idle
    from cratrace.model.faults import faults

    sl = pl.DataFrame({"cpu": [0, 0, 0], "tid": [7, 8, 9], "start": [10, 10, 30], "end": [10, 20, 40]},
                      schema={"cpu": pl.Int32, "tid": pl.Int64, "start": pl.Int64, "end": pl.Int64})
    seen = {tuple(with_idle(sl[list(order)], 50, 0, 1).rows()) for order in ([0, 1, 2], [1, 0, 2], [2, 1, 0])}
    assert len(seen) == 1
    # and idle fills only what no slice covers ([10, 30) was once called
    # idle when the zero-length slice came second)
    assert [r[1:4] for r in next(iter(seen))] == [(0, 0, 10), (7, 10, 10), (8, 10, 20), (0, 20, 30), (9, 30, 40), (0, 40, 50)]

    threads = pl.DataFrame({"tid": [5, 6], "vm": ["a", "a"], "vcpu": [0, 1]}, schema={"tid": pl.Int64, "vm": pl.String, "vcpu": pl.Int32})
    tables = set()
    for pids in ([5, 6], [6, 5]):
        ev = {"kvm_page_fault": _lf(ts=[100, 100], cpu=[0, 1], pid=pids, fault_address=[0x1000 * p for p in pids])}
        tables.add(tuple(faults(ev, threads).rows()))
    assert len(tables) == 1
    assert [(r[2], r[5]) for r in next(iter(tables))] == [(5, 0x5000), (6, 0x6000)]


def test_grouped_keeps_a_frame_whose_keys_are_together_and_sorts_one_whose_are_not():
    import random

    from cratrace.model.frames import grouped

    rng = random.Random(11)
    for trial in range(300):
        n = rng.randint(0, 10)
        df = pl.DataFrame({"tid": [rng.randint(0, 3) for _ in range(n)], "start": [rng.randint(0, 6) for _ in range(n)]}, schema={"tid": pl.Int64, "start": pl.Int64})
        if trial % 3 == 0:
            # together but not in key order: kept as it is
            order = {t: rng.random() for t in range(4)}
            df = df.with_columns(pl.col("tid").replace_strict(order, return_dtype=pl.Float64).alias("_o")).sort("_o", "start").drop("_o")
        got = grouped(df, "tid", "start")
        rows = got.rows()
        # each key's rows together, in start order within, and the same rows
        seen, last, prev = [], None, None
        for t, s in rows:
            if t != last:
                assert t not in seen, rows
                seen.append(t)
            else:
                assert s >= prev, rows
            last, prev = t, s
        assert sorted(rows) == sorted(df.rows())
        if trial % 3 == 0:
            assert rows == df.rows()


def _pairs_by_the_rule(m: pl.DataFrame) -> list[tuple]:
    """Spin marker pairs read off an attributed markers table line by
    line: per (vm, vcpu) in time order, a spin_begin whose next spin line
    is a spin_end."""
    last: dict[tuple, tuple] = {}
    out = []
    for vm, vcpu, tid, ts, name in m.select("vm", "vcpu", "tid", "ts", "name").iter_rows():
        if vm is None or vcpu is None or name not in ("spin_begin", "spin_end"):
            continue
        before = last.get((vm, vcpu))
        if before and before[0] == "spin_begin" and name == "spin_end":
            out.append((vm, vcpu, before[1], before[2], ts))
        last[(vm, vcpu)] = (name, tid, ts)
    return sorted(out, key=repr)


def test_spin_marker_pairs_follow_the_rule_whole_or_streamed(tmp_path):
    """`markers.pairs` (Rust, on the parsed lines) against the rule read
    off the attributed table, on random lines: of two VMs, with and
    without their own vm=/vcpu= (then the writer's), other markers between,
    lost begins and ends; parsed whole and streamed (the model's read)."""
    import random

    from cratrace import _native
    from cratrace.model import markers as marker_lines

    threads = pl.DataFrame({"tid": [10, 11, 20, 30], "vm": ["a", "a", "b", None], "vcpu": [0, 1, 0, None]}, schema={"tid": pl.Int64, "vm": pl.String, "vcpu": pl.Int32})
    rng = random.Random(7)
    for trial in range(30):
        n = rng.randrange(0, 300)
        texts, pids = [], []
        for _ in range(n):
            name = rng.choice(["spin_begin", "spin_end", "spin_begin", "spin_end", "txn_end"])
            own = rng.choice(["", f" vm={rng.choice('ab')} vcpu={rng.randrange(3)}", f" vm=a", " vcpu=1"])
            texts.append(name + own + "\n")
            pids.append(rng.choice([10, 11, 20, 30, 99]))
        ts = sorted(rng.randrange(0, 1000) for _ in range(n))
        prints = pl.DataFrame({"ts": ts, "cpu": [0] * n, "pid": pids, "instance": [""] * n, "buf": texts}, schema={"ts": pl.Int64, "cpu": pl.Int32, "pid": pl.Int64, "instance": pl.String, "buf": pl.String})
        whole = _native.MarkerLines.from_frame(prints)
        want = _pairs_by_the_rule(marker_lines.table(whole, threads))
        assert sorted(marker_lines.pairs(whole, threads).rows(), key=repr) == want, trial
        path = tmp_path / f"print-{trial}.parquet"
        prints.write_parquet(path)
        streamed = _native.MarkerLines.read(path, "lz4", list(marker_lines.SPIN_NAMES))
        assert sorted(marker_lines.pairs(streamed, threads).rows(), key=repr) == want, trial


def test_total_order_is_the_sort_by_every_column():
    # the order is found on the key columns, ties by every column: it must
    # be the full sort's, nulls and whole-row duplicates included
    import random

    from cratrace.model.frames import total_order

    rng = random.Random(3)
    for trial in range(300):
        n = rng.randrange(0, 60)
        df = pl.DataFrame(
            {"vm": [rng.choice(["a", "b", None]) for _ in range(n)], "vcpu": [rng.choice([0, 1, None]) for _ in range(n)],
             "start": [rng.randrange(4) for _ in range(n)], "end": [rng.randrange(3) for _ in range(n)], "s": [rng.choice(["x", "y", None]) for _ in range(n)]},
            schema={"vm": pl.String, "vcpu": pl.Int32, "start": pl.Int64, "end": pl.Int64, "s": pl.String},
        )
        assert total_order(df, "vm", "vcpu", "start").equals(df.sort("vm", "vcpu", "start", "end", "s")), trial
