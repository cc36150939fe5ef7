"""Helpers for the synth tests: run `trace-cmd report -t` and parse its lines.

trace-cmd is the judge: every generated file must be read by it with exit
0 and nothing on stderr; the parsed lines are compared with what the test
asked the writer (or the scenario truth) for.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

LINE = re.compile(
    r"^(?:(?P<inst>[^\s:]+):)?\s*(?P<comm>.*?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?P<ts>\d+\.\d+):\s+(?P<name>\w+):\s*(?P<rest>.*)$"
)


@dataclass
class Line:
    instance: str
    comm: str
    pid: int
    cpu: int
    ts: int  # ns
    name: str
    rest: str


@dataclass
class Report:
    lines: list[Line]
    other: list[str]  # lines that are not events (cpus=N, drop notices)
    stderr: str
    rc: int

    def count(self, name: str) -> int:
        return sum(1 for ln in self.lines if ln.name == name)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for ln in self.lines:
            out[ln.name] = out.get(ln.name, 0) + 1
        return dict(sorted(out.items()))


def _ns(text: str) -> int:
    sec, frac = text.split(".")
    return int(sec) * 1_000_000_000 + int(frac.ljust(9, "0")[:9])


def trace_cmd_report(path: Path, *args: str) -> Report:
    if shutil.which("trace-cmd") is None:
        pytest.skip("trace-cmd is not installed")
    proc = subprocess.run(["trace-cmd", "report", "-t", *args, str(path)], capture_output=True, text=True, timeout=120)
    lines, other = [], []
    for raw in proc.stdout.splitlines():
        m = LINE.match(raw)
        if m:
            lines.append(Line(m["inst"] or "", m["comm"].strip(), int(m["pid"]), int(m["cpu"]), _ns(m["ts"]), m["name"], m["rest"]))
        else:
            other.append(raw)
    return Report(lines, other, proc.stderr, proc.returncode)


def trace_cmd_has_compression(name: str) -> bool:
    proc = subprocess.run(["trace-cmd", "list", "-c"], capture_output=True, text=True, timeout=30)
    return any(ln.strip().startswith(name + ",") or ln.strip() == name for ln in proc.stdout.splitlines())
