"""capture.json's layout: indented, long flat lists a row a line, and
always loading back to what was written."""

from __future__ import annotations

import json

from cratrace import jsonfile


def test_rows_go_one_a_line_and_strings_that_look_like_boundaries_survive():
    awkward = ["x], [y", "a\x01b", 'q"], [', "line\nbreak", "ünï", ""]
    rows = [[i, awkward[i % len(awkward)]] for i in range(100)]
    doc = {"summary": {"cmdlines": rows, "cpus": [1, 2]}, "events": {"sched_switch": 5}, "sources": [{"path": "/a"}] * 40}
    text = jsonfile.dumps(doc)
    assert json.loads(text) == doc
    lines = text.splitlines()
    # each row on a line of its own, the short list and the dicts as json.dumps(indent=2) has them
    assert sum(1 for ln in lines if ln.lstrip("[").startswith(tuple(f"{i}, " for i in range(100)))) == 100
    assert '"cpus": [' in text and '"path": "/a"' in text
    assert len(lines) < len(json.dumps(doc, indent=2).splitlines()) - 200


def test_a_long_list_of_scalars_is_one_line_and_tuples_are_lists():
    doc = {"ids": list(range(1000)), "pairs": [(1, "a")] * 50}
    text = jsonfile.dumps(doc)
    assert json.loads(text) == {"ids": list(range(1000)), "pairs": [[1, "a"]] * 50}
    assert any(ln.count(",") >= 999 for ln in text.splitlines())
