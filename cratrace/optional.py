"""Modules a build may leave out: the CLI's commands and the importers
are discovered by name, and a name whose module is absent is skipped."""

from __future__ import annotations

import importlib
from types import ModuleType


def optional_module(name: str) -> ModuleType | None:
    """The module `name`, or None when this build does not have it. A
    module that exists but fails to import (or imports something missing)
    still raises."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name != name:
            raise
        return None
