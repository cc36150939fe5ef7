"""Run a scenario: write FILE and FILE.truth.json, atomically."""

from __future__ import annotations

import json
import os
from pathlib import Path

from cratrace.errors import OutputExistsError, UsageError
from cratrace.synth.scenarios import SCENARIOS


def synth(scenario: str, out: Path, seed: int = 1, params: dict[str, str] | None = None, force: bool = False) -> dict:
    if scenario not in SCENARIOS:
        raise UsageError(f"scenario {scenario!r}: available {', '.join(sorted(SCENARIOS))}")
    mod = SCENARIOS[scenario]
    params = dict(params or {})
    bad = [k for k in params if k not in mod.PARAMS]
    if bad:
        raise UsageError(f"{scenario}: unknown parameter(s) {', '.join(bad)} (allowed: {', '.join(mod.PARAMS)})")
    out = Path(out)
    truth_path = out.with_name(out.name + ".truth.json")
    if (out.exists() or truth_path.exists()) and not force:
        raise OutputExistsError(f"{out}: already exists; pass --force to replace it")
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    try:
        truth = mod.generate(tmp, seed=seed, **params)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    truth_path.write_text(json.dumps(truth, indent=2, sort_keys=True))
    return truth
