"""The `cratrace` executable (and `python -m cratrace`) starts here.

Start-up builds tens of thousands of objects that live as long as the
process (typer, click, the command's modules) and no garbage, yet the
cyclic collector walks them several times while they are imported and once
more at exit: about 10 ms of a 0.5 s one-core `cratrace import` (medians of
25 runs, benchmarks/import_tracedat.py's trace). So collection is off while
the CLI is assembled; then what exists is frozen (never walked again) and
collection resumes for what the command itself allocates.

Importing `cratrace.cli.main` from a library or a test leaves the collector
alone: only this entry point touches it.

The signal handlers (`cratrace.cli.signals`) are installed first, when
this module is imported, before the native module, typer or any command
is: a Ctrl-C, SIGTERM or SIGHUP in the first tenth of a second printed a
KeyboardInterrupt traceback (issue 42); now it exits 130, 143 or 129 with
one line (at once until the command runs, after its clean-up once it
does).
"""

# First, before any other import (issue 42); see the module's doc. No
# `from __future__` import either: it is looked up on disk.
from cratrace.cli import signals

signals.install()

import gc  # noqa: E402


def _collect_from_here() -> None:
    gc.freeze()
    gc.enable()


def main() -> None:
    gc.disable()
    from cratrace.cli.main import main as run

    run(ready=_collect_from_here)
