"""Capture references: what a sweep names a capture by, and how a worker
gets a local directory for it.

A reference is a path on a file system the workers share (the usual
case: NFS, a cluster's scratch), ``file://PATH``, or any URL fsspec
understands (``s3://bucket/hosts/h1/capture``, ``gs://...``). A remote
capture is copied once per worker into a cache directory named by the
URL's hash (``CRATRACE_CACHE``, else the system's temporary directory),
whole or not at all, and reused by every run of that capture on that
worker.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from cratrace.errors import CaptureError


def is_url(ref: str) -> bool:
    """Whether `ref` is a URL (``scheme://...``) rather than a path."""
    head, sep, _ = ref.partition("://")
    return bool(sep) and head.isidentifier() and len(head) > 1


def local_path(ref: str) -> Path | None:
    """The path `ref` names on this machine's file systems (a plain path
    or ``file://``), or None for a remote URL."""
    if ref.startswith("file://"):
        return Path(ref[len("file://"):])
    return None if is_url(ref) else Path(ref)


def cache_root() -> Path:
    return Path(os.environ.get("CRATRACE_CACHE") or Path(tempfile.gettempdir()) / "cratrace-cache")


def local_capture(ref: str) -> Path:
    """A local directory holding the capture `ref` names."""
    path = local_path(ref)
    if path is not None:
        if not (path / "capture.json").is_file():
            raise CaptureError(f"{ref}: not a capture (no capture.json); create one with `cratrace import` and `cratrace model`")
        return path
    try:
        import fsspec
    except ImportError:
        raise CaptureError(f"{ref}: reading captures from URLs needs fsspec (pip install 'cratrace[fleet]')") from None
    dest = cache_root() / hashlib.sha256(ref.encode()).hexdigest()[:24]
    if (dest / "capture.json").is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        fs, root = fsspec.core.url_to_fs(ref)
        if not fs.exists(f"{root.rstrip('/')}/capture.json"):
            raise CaptureError(f"{ref}: not a capture (no capture.json)")
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
        try:
            for sub in ("capture.json", "model", "events"):
                src = f"{root.rstrip('/')}/{sub}"
                if fs.exists(src):
                    fs.get(src, str(tmp / sub), recursive=fs.isdir(src))
            os.rename(tmp, dest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            if not (dest / "capture.json").is_file():
                raise
    except CaptureError:
        raise
    except (OSError, ValueError, ImportError) as e:
        raise CaptureError(f"{ref}: cannot read ({type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else 'no detail'})") from None
    return dest
