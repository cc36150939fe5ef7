"""Outputs that appear whole or not at all: each is written under a
temporary name beside its destination and renamed into place.

`tempfile` makes those temporaries private (files 0600, directories 0700),
right while they are half-written but wrong once they are a user's capture
or report: a report served by a web server, or a capture a team shares,
would be readable by its writer alone. So the temporaries here are given,
before anything is written into them, the mode a plain ``open()`` or
``mkdir()`` would have given them under the process's umask.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable, TypeVar

T = TypeVar("T")


def umask() -> int:
    """The process's umask. Read from /proc where Linux has it: setting
    the umask to read it back is a race with threads creating files."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def temp_file(dest: Path) -> Path:
    """An empty file beside `dest` (a hidden name in its directory), with
    the mode a new `dest` would have."""
    dest = Path(dest)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    try:
        os.fchmod(fd, 0o666 & ~umask())
    finally:
        os.close(fd)
    return Path(tmp)


def temp_dir(dest: Path, infix: str = "") -> Path:
    """An empty directory beside `dest`, with the mode `mkdir(dest)`
    would give; `infix` says in its name what is being made there."""
    dest = Path(dest)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.{infix}", dir=dest.parent))
    os.chmod(tmp, 0o777 & ~umask())
    return tmp


def write_with(path: Path, write: Callable[[Path], T]) -> T:
    """Run `write(tmp)` on a temporary file beside `path`, then move it
    into place: a reader sees the old file or the whole new one, never
    half of it. Returns what `write` returned."""
    tmp = temp_file(path)
    try:
        result = write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return result


def write_all(writers: dict[Path, Callable[[Path], object]]) -> None:
    """Write several files that belong together: each under a temporary
    name first, then all moved into place, so that a failure while any is
    written leaves every earlier file as it was, not half of a set new."""
    done: list[tuple[Path, Path]] = []
    try:
        for path, write in writers.items():
            tmp = temp_file(path)
            done.append((tmp, path))
            write(tmp)
    except BaseException:
        for tmp, _ in done:
            tmp.unlink(missing_ok=True)
        raise
    for tmp, path in done:
        os.replace(tmp, path)


def write_text(path: Path, text: str) -> None:
    """Write `text` to `path` atomically."""
    write_with(path, lambda tmp: tmp.write_text(text))
