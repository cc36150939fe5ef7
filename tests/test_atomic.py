"""Outputs written under temporary names and moved into place."""

from __future__ import annotations

from pathlib import Path

import pytest

from cratrace import atomic


def test_a_set_of_files_is_replaced_together_or_not_at_all(tmp_path: Path):
    a, b, c = (tmp_path / n for n in ("a.csv", "b.csv", "c.csv"))
    for p in (a, b, c):
        p.write_text("old")

    def fails(tmp: Path) -> None:
        tmp.write_text("half")
        raise OSError("disk full")

    # the second file fails: the first, already written, is not moved in
    with pytest.raises(OSError, match="disk full"):
        atomic.write_all({a: lambda t: t.write_text("new"), b: fails, c: lambda t: t.write_text("new")})
    assert [p.read_text() for p in (a, b, c)] == ["old"] * 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.csv", "c.csv"]  # no temporaries left

    atomic.write_all({a: lambda t: t.write_text("new"), b: lambda t: t.write_text("new")})
    assert [p.read_text() for p in (a, b, c)] == ["new", "new", "old"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.csv", "c.csv"]
