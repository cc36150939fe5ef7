"""Commands timed as users run them: with cratrace's bytecode compiled.

pip compiles a wheel's modules when it installs them, and an editable
install writes their bytecode on first import, unless
PYTHONDONTWRITEBYTECODE is set (this project's sandbox sets it): then
every command compiles the cratrace modules it imports from source again,
about 35 ms of a short import here (`cratrace import` of a 165 KB sample:
120 ms a command without bytecode, 86 ms with it). The benchmarks that
time commands compile it first; a file changed later is compiled again
where it is imported, as always.
"""

from __future__ import annotations

import compileall
from pathlib import Path

import cratrace


def compile_cratrace() -> None:
    """Write the bytecode of every cratrace module (quietly; up-to-date
    files are left alone)."""
    compileall.compile_dir(str(Path(cratrace.__file__).parent), quiet=1)
