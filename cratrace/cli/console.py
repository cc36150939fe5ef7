"""Shared Rich consoles and the progress bar used by long commands.

Progress is shown only on a terminal and never with ``--quiet``; machine
output (``--json``) goes to stdout, everything for humans to stderr.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator, Callable

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

console = Console()
err_console = Console(stderr=True)


@contextmanager
def progress_bar(description: str, total: int, quiet: bool = False) -> Iterator[Callable[[int], None]]:
    """Yield a ``(done, total)`` callback; a no-op when quiet or not a TTY."""
    if quiet or not sys.stderr.isatty():
        yield lambda done, total=total: None
        return
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
    ) as prog:
        task = prog.add_task(description, total=total)
        yield lambda done, total=total: prog.update(task, completed=done, total=total)
