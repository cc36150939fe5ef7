"""Shared Rich consoles and the progress bar used by long commands.

Progress is shown only on a terminal and never with ``--quiet``; machine
output (``--json``) goes to stdout, everything for humans to stderr.

Rich is imported on first use, not at start-up: it costs about 45 ms, which
a command that prints nothing (``--quiet``, ``--json``, a script's import)
should not pay. Off a terminal (a pipe, a log, a script) nothing is styled,
so a line of text is written as it is, markup taken out, and Rich is not
imported at all; such lines are not wrapped at 80 columns either, so a log
keeps each message on one line.

Messages are Rich markup: put any text that comes from data (paths,
warnings, names) through `esc`, or a ``[word]`` in it is read as a style
and a ``[/x]`` as a closing tag that breaks the message.
"""

from __future__ import annotations

import os
import re
import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterator

# Rich's markup tags (rich.markup.RE_TAGS): backslashes, then "[" and a
# letter, "#", "/" or "@" ... "]". Groups: all of it, the backslashes, the
# tag's text.
_TAG = re.compile(r"((\\*)\[([a-z#/@][^[]*?)])")
# What makes Rich style output that is not a terminal.
_FORCE_STYLE = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")


def esc(value: object) -> str:
    """`value` as markup that prints as itself (rich.markup.escape)."""
    # each backslash before a tag doubled, then one more to escape the tag
    text = _TAG.sub(lambda m: f"{m.group(2) * 2}\\[{m.group(3)}]", str(value))
    if text.endswith("\\") and not text.endswith("\\\\"):
        text += "\\"
    return text


def plain(markup: str) -> str:
    """The text `markup` shows, tags taken out and escapes undone, as Rich
    reads them (rich.markup._parse)."""
    pieces: list[str] = []
    pos = 0
    for m in _TAG.finditer(markup):
        full, escapes, _ = m.groups()
        start, end = m.span()
        pieces.append(markup[pos:start])
        pos = end
        if escapes:
            backslashes, escaped = divmod(len(escapes), 2)
            pieces.append("\\" * backslashes)
            if escaped:
                pieces.append(full[len(escapes):])
    pieces.append(markup[pos:])
    # a "\[" outside any tag is an escaped bracket
    return "".join(piece.replace("\\[", "[") for piece in pieces)


class _LazyConsole:
    """A `rich.console.Console` created when first used."""

    def __init__(self, **options: Any) -> None:
        self._options = {"emoji": False, **options}
        self._console: Any = None

    def get(self) -> Any:
        """The console itself (created now if need be)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return self._console

    def _stream(self) -> Any:
        return sys.stderr if self._options.get("stderr") else sys.stdout

    def _unstyled(self) -> bool:
        """Whether Rich would print this console's text with no styling."""
        try:
            tty = self._stream().isatty()
        except (AttributeError, ValueError):
            return False
        return not tty and not any(v in os.environ for v in _FORCE_STYLE) and "ipykernel" not in sys.modules

    def print(self, *objects: Any, sep: str = " ", end: str = "\n", markup: bool | None = None, **options: Any) -> None:
        """Print as Rich does; text off a terminal is written directly."""
        if set(options) <= {"highlight", "soft_wrap"} and all(isinstance(o, str) for o in objects) and self._unstyled():
            text = sep.join(objects if markup is False else (plain(o) for o in objects))
            stream = self._stream()
            stream.write(text + end)
            stream.flush()
            return
        self.get().print(*objects, sep=sep, end=end, markup=markup, **options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.get(), name)


console = _LazyConsole()
err_console = _LazyConsole(stderr=True)


def print_outcomes(failed: dict[str, str], warnings: dict[str, list[str]]) -> bool:
    """For a command run on many captures: one line per capture that
    failed and per warning of those that ran, each led by the capture's
    name. Whether there was any (the command then exits 1)."""
    for name, err in failed.items():
        err_console.print(f"[bold red]error:[/] {esc(name)}: {esc(err)}", highlight=False, soft_wrap=True)
    for name, lines in warnings.items():
        for line in lines:
            err_console.print(f"[yellow]warning:[/] {esc(name)}: {esc(line)}", highlight=False, soft_wrap=True)
    return bool(failed or warnings)


@contextmanager
def progress_bar(description: str, total: int, quiet: bool = False) -> Iterator[Callable[[int], None]]:
    """Yield a ``(done, total)`` callback; a no-op when quiet or not a TTY."""
    if quiet or not sys.stderr.isatty():
        yield lambda done, total=total: None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=err_console.get(),
        transient=True,
    ) as prog:
        task = prog.add_task(description, total=total)
        yield lambda done, total=total: prog.update(task, completed=done, total=total)
