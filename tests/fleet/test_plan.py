"""The sweep's plan and dataset declaration, without a cluster: labels,
grids, what-ifs, run ids, and docs/fleet.md's reference section."""

from __future__ import annotations

import pytest

from cratrace.errors import UsageError
from cratrace.fleet.dataset import render_markdown
from cratrace.fleet.plan import Plan, capture_labels, parse_grid, parse_what_if


def test_labels_are_the_part_of_the_path_that_tells_captures_apart():
    assert list(capture_labels(["/x/hosts/h1/capture", "/x/hosts/h2/capture"]).values()) == ["h1", "h2"]
    assert list(capture_labels(["/a/h1", "/b/h1"]).values()) == ["a", "b"]  # the shared last part dropped
    assert list(capture_labels(["s3://bucket/web/cap", "/local/db/cap"]).values()) == ["web", "db"]
    assert list(capture_labels(["/only/one"]).values()) == ["one"]


def test_grid_is_every_combination_in_the_order_given():
    assert parse_grid(["a=1,2", "b=x,y"]) == [{"a": "1", "b": "x"}, {"a": "1", "b": "y"}, {"a": "2", "b": "x"}, {"a": "2", "b": "y"}]
    assert parse_grid([]) == [{}]
    with pytest.raises(UsageError, match="given twice"):
        parse_grid(["a=1", "a=2"])


def test_what_ifs_and_their_vms():
    w = parse_what_if("drop-vm=db; add-vm=@typical:2; cap.web=50")
    assert w.drop_vms == ("db",) and w.add_vms == (("@typical", 2),) and dict(w.sets) == {"cap.web": "50"}
    assert w.resolved("web").add_vms == (("web", 2),) and w.vms_named() == {"db", "@typical", "web"}
    with pytest.raises(UsageError, match="unknown setting"):
        parse_what_if("nope=1")


def test_run_ids_name_what_ran_and_skip_what_a_capture_lacks():
    plan = Plan(["own", "eevdf"], {}, parse_grid(["balance_k=1.1,1.2"]), [parse_what_if("drop-vm=web"), parse_what_if("add-vm=@typical:1")])
    scan = {"fingerprint": "f" * 32, "vms": ["db", "web"], "own_policy": "eevdf", "typical_vm": "db", "host": "h"}
    runs, notes = plan.runs_for("/c", "c", scan, "1")
    # own is eevdf here: its runs and eevdf's are the same runs, once
    assert len(runs) == 1 * 2 * 3 and notes == []
    assert len({r.run_id for r in runs}) == len(runs)
    again, _ = plan.runs_for("/elsewhere", "other", scan, "1")
    assert [r.run_id for r in again] == [r.run_id for r in runs]  # not the path: the content
    newer, _ = plan.runs_for("/c", "c", scan, "2")
    assert not {r.run_id for r in newer} & {r.run_id for r in runs}  # another cratrace version
    lacking, notes = plan.runs_for("/c", "c", {**scan, "vms": ["db"]}, "1")
    assert len(lacking) == 2 * 2 and notes == ["drop-vm=web: not run on c (no VM web)"]


def test_docs_have_the_declared_tables(repo_root):
    doc = (repo_root / "docs" / "fleet.md").read_text()
    assert render_markdown() in doc, "docs/fleet.md is stale: its reference section is `python -m cratrace.fleet.dataset`"
