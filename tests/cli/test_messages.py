"""What the CLI prints for people: data in a message (a path, a warning)
prints as itself whatever brackets it holds, and off a terminal a message
is plain text, the same text Rich would have shown, on one line."""

from __future__ import annotations

import random

import pytest
from rich.markup import escape, render

from cratrace.cli.console import esc, plain
from tests.helpers import cratrace

ALPHABET = ["[", "]", "/", "\\", "a", "b", "#", "@", " ", "1", "="]


def _samples(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 14))) for _ in range(n)]


def test_esc_is_riches_escape():
    for s in _samples(5000, 1) + ["a [/b] c", "events[sched_switch]", "x\\", "[bold]hi[/]"]:
        assert esc(s) == escape(s), s


def test_plain_is_the_text_rich_renders():
    checked = 0
    for s in _samples(5000, 2) + ["[green]imported[/] 3 events into [bold]/tmp/x[/]", "a\\[bold] b", "a\\\\[bold]b[/]"]:
        try:
            want = render(s).plain
        except Exception:  # markup Rich itself refuses; we never send it such
            continue
        assert plain(s) == want, s
        checked += 1
    assert checked > 2000


@pytest.mark.parametrize("text", ["/data/run[/b]/cap", "events[sched_switch]", "a:smile:b", "cpu[3] \\"])
def test_data_prints_as_itself(text):
    assert plain(f"[yellow]warning:[/] {esc(text)}") == f"warning: {text}" + ("\\" if text.endswith("\\") else "")


def test_a_bracketed_output_path_is_named_whole(tmp_path):
    # A capture directory whose name reads as markup: before, the summary
    # line dropped "[x]" and a "[/b]" crashed the error handler itself.
    trace = tmp_path / "t.dat"
    cratrace("synth", "kvm-heavy-spin", "-o", trace, "--set", "duration_ms=5", "-q", check=True)
    out = tmp_path / "a[/b]" / "cap[x]"
    out.parent.mkdir(parents=True)
    p = cratrace("import", trace, "-o", out, check=True)
    lines = p.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("imported ") and lines[0].endswith(f" into {out}"), p.stdout
    again = cratrace("import", trace, "-o", out)
    assert again.returncode == 2 and again.stderr.strip() == f"error: {out}: already exists; pass --force to replace it", again.stderr
    info = cratrace("info", out, check=True)
    assert info.stdout.splitlines()[0].startswith(f"{out}  "), info.stdout


def test_long_messages_stay_on_one_line(tmp_path):
    # Rich wraps at 80 columns when it is not writing to a terminal; a log
    # or a grep wants the whole message on its line.
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    trace = deep / "t.dat"
    p = cratrace("synth", "kvm-heavy-spin", "-o", trace, "--set", "duration_ms=5")
    assert p.returncode == 0, p.stderr
    out = cratrace("import", trace, "-o", deep / "cap", check=True)
    assert out.stdout.count("\n") == 1 and str(deep / "cap") in out.stdout
