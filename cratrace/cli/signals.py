"""Stopping a command: SIGINT, SIGTERM and SIGHUP alike (issue 42).

Each raises :class:`Stopped` (a KeyboardInterrupt) where the command is,
so the same clean-up runs for all three (temporaries removed, the
output's lock let go), and the command exits 128 + the signal's number:
130, 143, 129. The handlers are installed by the entry point before
anything slow is imported: Python's own SIGINT handler printed a
KeyboardInterrupt traceback for a Ctrl-C in the first tenth of a second.

Until the command itself starts (`arm`), there is nothing to clean up: a
signal then ends the process at once with its one line and status.

A native read sees the signal at its next progress check and stops with
its own KeyboardInterrupt; `received` keeps which signal it was. A third
signal ends the process at once (a clean-up that hangs).
"""

# no `from __future__` import: a module looked up on disk before the
# handlers are in place (this runs first; Python 3.10 reads `int | None`)
import os

# the C module: `signal` imports enum, 10-20 ms during which the default
# handler would still print a traceback
import _signal

#: the first signal received, if any
received: int | None = None
_count = 0
#: before the command runs, a signal ends the process there and then
_armed = False
#: the command has said how it stopped (the entry point then adds nothing)
reported = False

NAMES = {_signal.SIGINT: "SIGINT", _signal.SIGTERM: "SIGTERM", _signal.SIGHUP: "SIGHUP"}
SIGNALS = tuple(NAMES)


class Stopped(KeyboardInterrupt):
    """The command was asked to stop by signal `signum`."""

    def __init__(self, signum: int) -> None:
        super().__init__(NAMES.get(signum, str(signum)))
        self.signum = signum


def _handler(signum: int, frame: object) -> None:
    global received, _count
    _count += 1
    if received is None:
        received = signum
    if not _armed or _count >= 3:
        os.write(2, f"{describe()}\n".encode())
        os._exit(128 + signum)
    raise Stopped(signum)


def install() -> None:
    """Handle SIGINT, SIGTERM and SIGHUP from now on (a signal ignored
    when the process started, as under nohup, stays ignored)."""
    for s in SIGNALS:
        if _signal.getsignal(s) == _signal.SIG_IGN:
            continue
        _signal.signal(s, _handler)


def arm() -> None:
    """From now on a signal raises `Stopped` where the command is, for
    its clean-up to run (see the module's doc)."""
    global _armed
    _armed = True


def exit_code() -> int:
    """The exit status of a command stopped by a signal: 128 + its number
    (130 when a KeyboardInterrupt came some other way)."""
    return 128 + (received or _signal.SIGINT)


def describe() -> str:
    """'interrupted' for Ctrl-C, else the signal's name."""
    if received in (None, _signal.SIGINT):
        return "interrupted"
    return f"stopped by {NAMES.get(received, received)}"
