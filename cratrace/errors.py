"""The exception hierarchy, in one place.

Native errors are raised by ``cratrace._native`` already mapped to these
classes (the mapping lives in ``bindings/src/errors.rs``); Python code raises
the same classes, so callers catch one root, :class:`CratraceError`. The CLI
turns any of them into a one-line message and exit code 2.
"""

from __future__ import annotations

try:  # the native module defines the classes so Rust can raise them
    from cratrace._native import (  # type: ignore[attr-defined]
        CorruptTraceError,
        CratraceError,
        UnsupportedFormatError,
    )
except ImportError:  # doc-only fallbacks when the extension is not built

    class CratraceError(Exception):  # type: ignore[no-redef]
        """Root of every error cratrace raises on purpose."""

    class CorruptTraceError(CratraceError):  # type: ignore[no-redef]
        """A trace file is damaged: truncated, bad header, offsets past EOF."""

    class UnsupportedFormatError(CratraceError):  # type: ignore[no-redef]
        """A file is not in a format cratrace reads (or a version it does not)."""


class OutputExistsError(CratraceError):
    """The output exists and --force was not given; nothing was written."""


class OutputBusyError(OutputExistsError):
    """Another cratrace command holds the output's lock; nothing was written."""


class CaptureError(CratraceError):
    """A capture directory is missing, incomplete or of an unknown schema."""


class UsageError(CratraceError):
    """An option value is invalid (names the option, allowed values, bad value)."""


__all__ = [
    "CratraceError",
    "CorruptTraceError",
    "UnsupportedFormatError",
    "OutputExistsError",
    "OutputBusyError",
    "CaptureError",
    "UsageError",
]
