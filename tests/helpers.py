"""Helpers shared by tests: run the CLI, ask trace-cmd for its view."""

from __future__ import annotations

import collections
import re
import subprocess
import sys
from pathlib import Path

_REPORT_LINE = re.compile(r"^\s*(?P<comm>.*?)-(?P<pid>-?\d+)\s+\[(?P<cpu>\d+)\]\s+(?P<ts>\d+\.\d+):\s+(?P<event>[^:\s]+):\s?(?P<rest>.*)$")


def cratrace(*args: str | Path, check: bool = False) -> subprocess.CompletedProcess:
    """Run `python -m cratrace ARGS` and capture its output."""
    p = subprocess.run([sys.executable, "-m", "cratrace", *map(str, args)], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"cratrace {args} exited {p.returncode}: {p.stderr}")
    return p


def report_lines(path: Path, raw: bool = False) -> list[dict]:
    """trace-cmd report's events as dicts (comm, pid, cpu, ts, event, rest)."""
    args = ["trace-cmd", "report", *(["-R"] if raw else []), str(path)]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        m = _REPORT_LINE.match(line)
        if m:
            rows.append(m.groupdict())
    return rows


def report_counts(path: Path) -> dict[str, int]:
    """Events per name according to `trace-cmd report`."""
    return dict(collections.Counter(r["event"] for r in report_lines(path)))
