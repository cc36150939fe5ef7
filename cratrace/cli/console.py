"""Shared Rich consoles and the progress bar used by long commands.

Progress is shown only on a terminal and never with ``--quiet``; machine
output (``--json``) goes to stdout, everything for humans to stderr.

Rich is imported on first use, not at start-up: it costs about 50 ms, which
a command that prints nothing (``--quiet``, ``--json``, a script's import)
should not pay.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterator


class _LazyConsole:
    """A `rich.console.Console` created when first used."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Any = None

    def get(self) -> Any:
        """The console itself (created now if need be)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.get(), name)


console = _LazyConsole()
err_console = _LazyConsole(stderr=True)


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
