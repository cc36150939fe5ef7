"""`cratrace dump`: a capture's events as text, like `trace-cmd report`."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Annotated, Iterable, Optional

import typer

from cratrace.cli.options import Verbose
from cratrace.errors import UsageError

_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_TIME = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ns|us|ms|s)?\s*$")


def parse_time(text: str, option: str) -> int:
    """A time as the dump prints it (seconds, ``2084.021443``) or with a
    unit (``1500ms``, ``2084021443us``, ``12ns``), in ns."""
    m = _TIME.match(text)
    if not m:
        raise UsageError(f"{option} {text!r}: expected a time in seconds as the dump prints it (2084.021443) or with a unit (ns, us, ms, s)")
    number, unit = m.groups()
    scale = _UNITS[unit or "s"]
    whole, _, frac = number.partition(".")
    frac = (frac + "0" * 9)[:9]
    ns = int(whole or 0) * scale + int(frac) * scale // 1_000_000_000
    return ns


def _split(values: Optional[list[str]]) -> list[str]:
    """Repeated options and comma lists, as one list."""
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


def dump_cmd(
    capture: Annotated[Path, typer.Argument(help="Capture directory (from `cratrace import`).")],
    events: Annotated[Optional[list[str]], typer.Option("--event", "-e", help="Event to print (repeatable; also a comma list, a glob such as 'sched_*', or a system such as 'sched'). Default: all.")] = None,
    cpu: Annotated[Optional[list[str]], typer.Option("--cpu", help="Only this CPU's events (repeatable, or a comma list).")] = None,
    start: Annotated[Optional[str], typer.Option("--from", help="First time to print: seconds as the lines show them (2084.0215), or with a unit (1500ms).")] = None,
    end: Annotated[Optional[str], typer.Option("--to", help="Print events before this time (same forms as --from).")] = None,
    raw: Annotated[bool, typer.Option("--raw", "-R", help="Fields as name=value pairs, not the print format (trace-cmd report -R).")] = False,
    ns: Annotated[bool, typer.Option("--ns", "-t", help="Timestamps to the nanosecond (trace-cmd report -t).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object a line: ts (ns), cpu, pid, comm, event, info, fields.")] = False,
    pager: Annotated[bool, typer.Option("--pager/--no-pager", help="Page through $CRATRACE_PAGER, else $PAGER, else `less` when stdout is a terminal.")] = True,
    verbose: Verbose = False,
) -> None:
    """Print every event, one line each, in time order, as `trace-cmd
    report` does: COMM-PID [CPU] TIME: EVENT: the event's fields through
    the kernel's print format (kvm_exit's reason by name, not number).

    The format strings were kept by `cratrace import` (CAPTURE/formats.json);
    events without one (xentrace, perf, a capture imported before they were
    kept) print their fields as name=value, as with --raw. Streams in
    constant memory; paged on a terminal (like git: $PAGER, else `less`),
    plain when piped, so `cratrace dump CAP -e kvm_exit | grep PAUSE` works.

    Examples:

      cratrace dump CAP -e sched_switch -e sched_wakeup --cpu 2

      cratrace dump CAP -e kvm --from 12.5 --to 12.6

      cratrace dump CAP -e print --json | jq .info
    """
    from cratrace.dump import Dump, dump_lines, dump_records

    t0 = parse_time(start, "--from") if start is not None else None
    t1 = parse_time(end, "--to") if end is not None else None
    if t0 is not None and t1 is not None and t1 <= t0:
        raise UsageError(f"--to {end} is not after --from {start}")
    cpus = None
    if cpu:
        try:
            cpus = [int(c) for c in _split(cpu)]
        except ValueError:
            raise UsageError(f"--cpu {','.join(cpu)}: expected CPU numbers, e.g. --cpu 2 or --cpu 0,3") from None
        if any(c < 0 for c in cpus):
            raise UsageError(f"--cpu {','.join(cpu)}: CPU numbers are >= 0")
    names = _split(events) or None
    d = Dump(capture)
    d.select(names)  # a bad capture or event name: one line, before any output
    if as_json:
        import json

        lines: Iterable[str] = (json.dumps(r, default=str) for r in dump_records(d, names, cpus=cpus, start=t0, end=t1))
    else:
        lines = dump_lines(d, names, cpus=cpus, start=t0, end=t1, raw=raw, ns=ns)
    write_paged(lines, page=pager and not as_json)


def write_paged(lines: Iterable[str], page: bool = True) -> None:
    """Write `lines` to stdout: through a pager when stdout is a terminal
    (as git: $PAGER, else `less` with LESS=FRX so a short output just
    prints), plain otherwise; a reader that stops early (`| head`, quitting
    the pager) ends the output quietly."""
    import subprocess

    import shlex
    import shutil

    command = os.environ.get("CRATRACE_PAGER", os.environ.get("PAGER", "less"))
    try:
        words = shlex.split(command)
    except ValueError:
        words = []
    # a pager that is not installed: print plainly rather than into a shell's error
    runnable = bool(words) and (len(words) > 1 or (words[0] != "cat" and shutil.which(words[0]) is not None))
    if page and runnable and sys.stdout.isatty():
        env = dict(os.environ)
        env.setdefault("LESS", "FRX")
        try:
            proc = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, env=env, encoding="utf-8", errors="replace")
        except OSError:
            proc = None
        if proc is not None:
            assert proc.stdin is not None
            try:
                for line in lines:
                    proc.stdin.write(line + "\n")
                proc.stdin.close()
            except (BrokenPipeError, KeyboardInterrupt):
                pass
            finally:
                try:
                    proc.stdin.close()
                except BrokenPipeError:
                    pass
                proc.wait()
            return
    out = sys.stdout
    try:
        buf: list[str] = []
        for line in lines:
            buf.append(line)
            if len(buf) >= 1024:
                out.write("\n".join(buf) + "\n")
                buf.clear()
        if buf:
            out.write("\n".join(buf) + "\n")
        out.flush()
    except BrokenPipeError:
        # the reader left: no error, and none at exit when Python flushes
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def register(app: typer.Typer) -> None:
    app.command("dump", rich_help_panel="Explore")(dump_cmd)
