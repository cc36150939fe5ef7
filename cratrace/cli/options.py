"""Options that every command spells and means the same way.

* ``-v/--verbose``: more detail where the command has some (each says
  which), and on stderr at the end the time and peak memory the command
  took; with an error, its traceback before the one-line message.
* ``CRATRACE_*`` environment variables stand for the options users set
  every time (`--help` shows each beside its option): ``CRATRACE_COMPRESSION``
  (import's codec), ``CRATRACE_CPU_HZ`` (xentrace's TSC frequency),
  ``CRATRACE_THROUGHPUT_MARKER`` (the marker that counts a transaction).
"""

from __future__ import annotations

from typing import Annotated

import typer

_state = {"verbose": False}


def _set_verbose(value: bool) -> bool:
    if value:
        _state["verbose"] = True
    return value


def verbose() -> bool:
    """Whether the running command was given -v/--verbose."""
    return _state["verbose"]


def verbose_option(detail: str = "") -> typer.models.OptionInfo:
    """The -v/--verbose option; `detail` says what more this command prints."""
    what = f"{detail}; also" if detail else "Also"
    return typer.Option("--verbose", "-v", help=f"{what} the time and peak memory the command took, and a traceback with an error.", callback=_set_verbose)


Verbose = Annotated[bool, verbose_option()]

#: names of the environment variables (one place, for the docs and tests)
ENV_COMPRESSION = "CRATRACE_COMPRESSION"
ENV_CPU_HZ = "CRATRACE_CPU_HZ"
ENV_THROUGHPUT_MARKER = "CRATRACE_THROUGHPUT_MARKER"
