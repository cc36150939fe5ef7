"""Commands timed as users run them: with cratrace's bytecode compiled.

pip compiles a wheel's modules when it installs them, and an editable
install writes their bytecode on first import, unless
PYTHONDONTWRITEBYTECODE is set (this project's sandbox sets it): then
every command compiles the cratrace modules it imports from source again,
about 35 ms of a short import here (`cratrace import` of a 165 KB sample:
120 ms a command without bytecode, 86 ms with it). The benchmarks that
time commands compile it first; a file changed later is compiled again
where it is imported, as always.

Run as a script, it measures that difference: `cratrace import` of the
165 KB sample (sample-traces/xen-io-billing.bin), medians of --runs taken
in turn, from two copies of the package, one without bytecode (compiled
from source by every command) and one compiled.

    python benchmarks/as_installed.py [--runs 10] [--quick]
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cratrace

SAMPLE = Path(__file__).resolve().parents[1] / "sample-traces" / "xen-io-billing.bin"


def compile_cratrace() -> None:
    """Write the bytecode of every cratrace module (quietly; up-to-date
    files are left alone)."""
    compileall.compile_dir(str(Path(cratrace.__file__).parent), quiet=1)


def command_s(packages: Path, out: Path) -> float:
    """Wall seconds of `cratrace import SAMPLE` with the cratrace package
    under `packages`, writing no bytecode."""
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(packages), "PYTHONDONTWRITEBYTECODE": "1"}
    t = time.perf_counter()
    # run from there too: `-m` puts the current directory first on the path
    subprocess.run([sys.executable, "-m", "cratrace", "import", str(SAMPLE), "-o", str(out), "--cpu-hz", "2.4e9", "-q"], check=True, env=env, cwd=packages)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="one run each")
    a = ap.parse_args()
    runs = 1 if a.quick else a.runs
    tmp = Path(tempfile.mkdtemp(prefix="cratrace-as-installed-"))
    try:
        # copies, so that one can lack bytecode whatever the working tree has
        source, compiled = tmp / "source", tmp / "compiled"
        for d in (source, compiled):
            shutil.copytree(Path(cratrace.__file__).parent, d / "cratrace", ignore=shutil.ignore_patterns("__pycache__"))
        compileall.compile_dir(str(compiled / "cratrace"), quiet=1)
        times: dict[Path, list[float]] = {source: [], compiled: []}
        for _ in range(runs):
            # in turn: the machine's slow and fast phases fall on both alike
            for d in times:
                times[d].append(command_s(d, tmp / "cap"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    s, c = statistics.median(times[source]), statistics.median(times[compiled])
    print(f"cratrace import of {SAMPLE.name} ({SAMPLE.stat().st_size / 1000:.0f} KB): {s * 1e3:.0f} ms a command without bytecode, {c * 1e3:.0f} ms with it: {s / c:.2f}x (medians of {runs})")


if __name__ == "__main__":
    main()
