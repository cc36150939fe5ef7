"""Compatibility entry point: ``synth(scenario, out, seed, params, force)``.

An earlier ``cratrace synth`` exposed this name; it now delegates to
:func:`cratrace.synth.generate.synthesize`, which owns the work.
"""

from __future__ import annotations

from pathlib import Path

from cratrace.synth.generate import synthesize


def synth(scenario: str, out: Path, seed: int = 1, params: dict[str, str] | None = None, force: bool = False) -> dict:
    """Write ``out`` and ``out.truth.json`` for ``scenario``; return the truth."""
    return synthesize(scenario, out, seed=seed, overrides=params or {}, force=force)
