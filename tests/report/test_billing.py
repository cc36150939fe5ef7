"""Billing against the published driver-domain measurements (Woo 2012,
Table 4.1; ../shared/papers/billing.md). Expected values are the paper's
numbers, not this code's."""

from __future__ import annotations

import polars as pl
import pytest

from cratrace.report.billing import RULES, billing

MS = 1_000_000  # ns per ms


def io_rows(rows):
    """rows: (vm or None, direction, ms, packets) for one 1-second window."""
    return pl.DataFrame(
        [{"window_start": 0, "window_end": 10**9, "vm": vm, "worker_tid": None, "worker": "netback", "kind": "netback", "direction": d, "cpu_ns": int(round(ms * MS)), "packets": int(p), "bytes": int(p) * 1000, "requests": 0} for vm, d, ms, p in rows],
        schema_overrides={"vm": pl.String, "worker_tid": pl.Int64},
    )


CPU_NET = io_rows([
    (None, "rx", 24.099, 0), (None, "tx", 21.151, 0),
    ("U1", "rx", 0.000, 0), ("U1", "tx", 0.015, 14),
    ("U2", "rx", 29.012, 19836), ("U2", "tx", 35.945, 39688),
])
NET_NET = io_rows([
    (None, "rx", 32.545, 0), (None, "tx", 32.888, 0),
    ("U1", "rx", 16.832, 11057), ("U1", "tx", 19.818, 22140),
    ("U2", "rx", 17.152, 10807), ("U2", "tx", 21.188, 21637),
])
ONE_CPU_SECOND = {"U1": 10**9, "U2": 10**9}


@pytest.mark.parametrize("rule", ["proportional", "packets", "bytes"])
def test_one_networking_vm_bills_110_ms_per_s_an_11_percent_excess(rule):
    bill, rec = billing(ONE_CPU_SECOND, CPU_NET, 1.0, rule)
    u2 = bill.filter(pl.col("vm") == "U2").row(0, named=True)
    # U1's 0.015 ms of keep-alive Tx (14 of 59,538 packets) takes at most
    # 0.0104 ms of the common pool under these rules
    assert u2["host_work_ms_per_s"] == pytest.approx(110.2, abs=0.05)
    assert u2["attributed_rx_ms_per_s"] == pytest.approx(29.012) and u2["attributed_tx_ms_per_s"] == pytest.approx(35.945)
    assert round(u2["excess_per_cpu_s_pct"], 1) == 11.0
    assert rec["reconciles"]


def test_equal_splits_the_pool_among_every_vm_with_io():
    # U1's keep-alive traffic is I/O: each VM takes half of the 45.25 ms
    bill, rec = billing(ONE_CPU_SECOND, CPU_NET, 1.0, "equal")
    rows = {r["vm"]: r for r in bill.iter_rows(named=True)}
    assert rows["U1"]["common_share_ms_per_s"] == pytest.approx(45.25 / 2, abs=1e-3)
    assert rows["U2"]["host_work_ms_per_s"] == pytest.approx(64.957 + 45.25 / 2, abs=1e-3)
    assert rows["U1"]["host_work_ms_per_s"] == pytest.approx(0.015 + 45.25 / 2, abs=1e-3)
    assert rec["reconciles"]


@pytest.mark.parametrize("rule", ["proportional", "packets", "bytes", "equal"])
def test_every_rule_bills_110_when_one_vm_alone_does_io(rule):
    # billing.md §6.3: all the rules reproduce 110 ms / 11% when only one
    # VM does networking (U1's keep-alive rows left out)
    only_u2 = CPU_NET.filter(pl.col("vm").is_null() | (pl.col("vm") == "U2"))
    bill, rec = billing(ONE_CPU_SECOND, only_u2, 1.0, rule)
    rows = {r["vm"]: r for r in bill.iter_rows(named=True)}
    assert rows["U2"]["host_work_ms_per_s"] == pytest.approx(110.207, abs=1e-3)
    assert rows["U1"]["host_work_ms_per_s"] == 0
    assert round(rows["U2"]["excess_per_cpu_s_pct"], 1) == 11.0 and rec["reconciles"]


def test_the_excess_over_one_cpu_second_and_over_the_vms_own_cpu():
    # the same 110.2 ms/s of host work for a VM that ran 250 ms/s itself:
    # 11% of a CPU-second (the thesis's denominator), 44% of its own CPU
    bill, _ = billing({"U1": 10**9, "U2": 250 * MS}, CPU_NET, 1.0, "proportional")
    u2 = bill.filter(pl.col("vm") == "U2").row(0, named=True)
    assert u2["excess_per_cpu_s_pct"] == pytest.approx(11.02, abs=0.01)
    assert u2["excess_pct"] == pytest.approx(100 * 110.2 / 250, abs=0.05)
    assert u2["excess_denominator_ms_per_s"] == pytest.approx(250.0)


def test_bytes_without_byte_counts_splits_by_packets_and_says_so():
    no_bytes = NET_NET.with_columns(pl.lit(0).alias("bytes"))
    by_bytes, rec = billing(ONE_CPU_SECOND, no_bytes, 1.0, "bytes")
    by_packets, _ = billing(ONE_CPU_SECOND, no_bytes, 1.0, "packets")
    # NET-NET's U1 moved 33,197 of the 65,641 packets: 50.57% of the 65.433 ms pool
    u1 = by_bytes.filter(pl.col("vm") == "U1")["common_share_ms_per_s"][0]
    assert u1 == pytest.approx(65.433 * 33197 / 65641, abs=1e-3)
    assert by_bytes["common_share_ms_per_s"].to_list() == by_packets["common_share_ms_per_s"].to_list()
    assert rec["rule_fallbacks"] and rec["common_unallocated_ms_per_s"] == 0


def test_unallocated_keeps_the_common_pool_as_its_own_line():
    bill, rec = billing(ONE_CPU_SECOND, CPU_NET, 1.0, "unallocated")
    u2 = bill.filter(pl.col("vm") == "U2").row(0, named=True)
    assert u2["host_work_ms_per_s"] == pytest.approx(64.957, abs=1e-3)
    assert rec["common_unallocated_ms_per_s"] == pytest.approx(45.25, abs=1e-3)
    assert rec["vm_host_work_ms_per_s"] + rec["common_unallocated_ms_per_s"] + rec["residual_ms_per_s"] == pytest.approx(rec["host_total_ms_per_s"])


@pytest.mark.parametrize("rule", RULES)
def test_two_networking_vms_bill_140_4_ms_per_s_in_total(rule):
    bill, rec = billing(ONE_CPU_SECOND, NET_NET, 1.0, rule)
    total = bill["host_work_ms_per_s"].sum() + rec["common_unallocated_ms_per_s"]
    assert total == pytest.approx(140.42, abs=0.01)
    assert rec["host_total_ms_per_s"] == pytest.approx(140.42, abs=0.01) and rec["reconciles"]


def test_unknown_rule_is_a_usage_error():
    from cratrace.errors import UsageError

    with pytest.raises(UsageError, match="allowed"):
        billing(ONE_CPU_SECOND, CPU_NET, 1.0, "magic")  # type: ignore[arg-type]


def test_residual_host_work_is_reported_not_billed():
    bill, rec = billing(ONE_CPU_SECOND, CPU_NET, 1.0, "proportional", host_total_ns=int(200 * MS))
    # all netback work of Table 4.1's CPU-NET pair: 45.250 common + 64.957 + 0.015 attributed
    assert rec["residual_ms_per_s"] == pytest.approx(200 - 110.222, abs=0.01)
    assert bill["host_work_ms_per_s"].sum() == pytest.approx(110.222, abs=0.01)
