"""Entry point of the `cratrace` CLI.

Each command group lives in its own module under ``cratrace/cli/`` and
exposes ``register(app)``; this file only assembles them and decides exit
codes, in one place:

* 0: the command did what was asked;
* 1: it ran but found problems (e.g. a fidelity gate missed, lost events);
* 2: it could not run (bad input, missing file, invalid option).

Errors are one line on stderr, never a traceback (``-v`` prints one before
the line; ``CRATRACE_DEBUG=1`` lets it propagate).

``cratrace --version`` names the package and the native core's build;
``--install-completion``/``--show-completion`` set up shell completion.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Annotated, Callable, Optional

import typer

from cratrace.cli.console import err_console, esc
from cratrace.errors import CratraceError
from cratrace.optional import optional_module

app = typer.Typer(
    name="cratrace",
    help="Capture, import, model, replay and report on KVM/Xen host traces.\n\n"
    "Typical flow: `cratrace record` on the host, `cratrace import RAW -o CAP`, "
    "`cratrace model CAP`, `cratrace replay CAP --policy wapd -o OUT`, "
    "`cratrace report CAP --replays OUT -o report.html`. Many hosts: "
    "`cratrace sweep CAPS... -p POLICY -o SWEEP`, `cratrace fleet-report SWEEP`.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
    rich_markup_mode="rich",
)

# Command name → its module, in pipeline order; a module that is not there
# yet is simply not offered.
COMMAND_MODULES = {
    "record": "record",
    "lab": "lab",
    "import": "import_",
    "info": "info",
    "sql": "sql",
    "dump": "dump",
    "model": "model",
    "replay": "replay",
    "report": "report",
    "synth": "synth",
    "sweep": "sweep",
    "fleet-report": "fleet_report",
    "export": "export",
}


def version_text() -> str:
    """What `cratrace --version` prints: the package's version, the native
    core's build (or why it cannot be loaded) and the Python running it."""
    import platform

    from cratrace import __version__

    lines = [f"cratrace {__version__}"]
    try:
        from cratrace import _native

        b = _native.build_info()
        debug = ", debug assertions" if b.get("debug_assertions") == "true" else ""
        lines.append(f"native core {b['version']} ({b['profile']} profile, opt-level {b['opt_level']}{debug}; {b['target']}; {b['rustc']})")
    except ImportError as e:
        lines.append(f"native core: not loadable ({e})")
    except AttributeError:  # a core built before build_info existed
        from cratrace import _native

        lines.append(f"native core {getattr(_native, '__version__', '?')} (build details unknown: rebuild it)")
    lines.append(f"Python {platform.python_version()} ({sys.executable})")
    return "\n".join(lines)


def _version(value: bool) -> None:
    if value:
        print(version_text())
        raise typer.Exit(0)


@app.callback()
def _group(
    version: Annotated[Optional[bool], typer.Option("--version", help="Print the version of cratrace and of its native core's build, then exit.", callback=_version, is_eager=True)] = None,
) -> None:
    # A callback keeps `cratrace` a group of commands even when only one
    # is registered (typer runs a lone command directly otherwise).
    pass


def _register(argv: list[str]) -> None:
    """Register the command `argv` names, or every command (for `--help`,
    no command, or a name that is not one). Typer reads the signature of
    every registered command on each call: for all ten, a sixth of the
    start-up of a small `cratrace import`."""
    first = next((a for a in argv if not a.startswith("-")), None)
    if first is None and "--version" in argv:
        return  # the version needs no command
    modules = [COMMAND_MODULES[first]] if first in COMMAND_MODULES else list(COMMAND_MODULES.values())
    for name in modules:
        mod = optional_module(f"cratrace.cli.{name}")
        if mod is not None:
            mod.register(app)


def main(argv: list[str] | None = None, ready: Callable[[], None] | None = None) -> None:
    """Run the CLI, mapping every cratrace error to one line and exit code 2.
    `ready` is called once the command is registered, before it runs."""
    from cratrace.cli import signals

    argv = sys.argv[1:] if argv is None else argv
    t0 = time.perf_counter()
    _register(argv)
    if ready is not None:
        ready()
    signals.arm()
    rc = _run(argv)
    from cratrace.cli.options import verbose

    if verbose():
        err_console.print(f"cratrace: exit {rc} after {time.perf_counter() - t0:.2f} s, peak memory {_peak_mib():,.0f} MiB", markup=False, highlight=False, soft_wrap=True)
    sys.exit(rc)


def _peak_mib() -> float:
    """Peak resident memory of this process and of the children it waited for."""
    import resource

    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return kib / 1024


def _traceback() -> None:
    """With -v, the traceback of the error being handled, before its line."""
    from cratrace.cli.options import verbose

    if verbose():
        import traceback

        traceback.print_exc(file=sys.stderr)


def _run(argv: list[str]) -> int:
    from cratrace.cli import signals

    try:
        # Without standalone mode click returns typer.Exit's code instead of
        # exiting; prog_name keeps completion's variable _CRATRACE_COMPLETE
        # also under `python -m cratrace`.
        rc = app(args=argv, prog_name="cratrace", standalone_mode=False)
    except CratraceError as e:
        if os.environ.get("CRATRACE_DEBUG"):
            raise
        _traceback()
        err_console.print(f"[bold red]error:[/] {esc(e)}", markup=True, highlight=False, soft_wrap=True)
        return 2
    except typer.Exit as e:
        if signals.received is not None:
            if not signals.reported:  # else the command said how it stopped
                sys.stderr.write(f"{signals.describe()}\n")
            return signals.exit_code()
        return e.exit_code
    except (typer.Abort, KeyboardInterrupt):
        # SIGINT, SIGTERM and SIGHUP alike: the command's clean-up has run
        sys.stderr.write(f"{signals.describe()}\n")
        return signals.exit_code()
    except OSError as e:
        # the file system said no (a path through a file, no permission, a
        # full disk): what and where, as for cratrace's own errors
        if os.environ.get("CRATRACE_DEBUG"):
            raise
        _traceback()
        where = ": ".join(str(f) for f in (e.filename, e.filename2) if f is not None)
        what = e.strerror or str(e)
        err_console.print(f"[bold red]error:[/] {esc(where) + ': ' if where else ''}{esc(what)}", markup=True, highlight=False, soft_wrap=True)
        return 2
    except Exception as e:  # click usage errors and the unexpected
        # click (or the copy typer vendors) usage errors know how to show themselves
        if hasattr(e, "show") and hasattr(e, "exit_code"):
            e.show()
            return 2
        if os.environ.get("CRATRACE_DEBUG"):
            raise
        _traceback()
        err_console.print(f"[bold red]internal error:[/] {type(e).__name__}: {esc(e)} (CRATRACE_DEBUG=1 for a traceback)")
        return 2
    if signals.received is not None:
        # typer returns 130 for any KeyboardInterrupt, without a word
        if not signals.reported:  # else the command said how it stopped
            sys.stderr.write(f"{signals.describe()}\n")
        return signals.exit_code()
    return rc if isinstance(rc, int) else 0


if __name__ == "__main__":
    main()
