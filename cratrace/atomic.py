"""Outputs that appear whole or not at all: each is written under a
temporary name beside its destination and renamed into place.

Every writing command (import, model, replay, report, synth, record, lab)
goes through one :class:`Destination` (issue 42): it holds an exclusive
lock on the destination for the whole command (a second command writing
the same output is refused in one line, not left to race it), removes
the temporaries of dead processes left beside it (a SIGKILL, a power
cut), refuses an existing output unless ``--force`` and, with
``--force``, anything cratrace did not write, and moves the finished
output in without replacing what appeared meanwhile: ``renameat2`` with
``RENAME_NOREPLACE``, or ``RENAME_EXCHANGE`` when replacing (the old one
is swapped out whole, then removed), with a link-then-unlink fallback for
files where the file system lacks them. Temporaries carry the writer's
PID in their name (``.NAME.importing-PID-xxxx``), which is how a later
run tells a dead writer's leftovers from a live one's.

`tempfile` makes those temporaries private (files 0600, directories 0700),
right while they are half-written but wrong once they are a user's capture
or report: a report served by a web server, or a capture a team shares,
would be readable by its writer alone. So the temporaries here are given,
before anything is written into them, the mode a plain ``open()`` or
``mkdir()`` would have given them under the process's umask.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, TypeVar

T = TypeVar("T")


def umask() -> int:
    """The process's umask. Read from /proc where Linux has it: setting
    the umask to read it back is a race with threads creating files."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def temp_file(dest: Path) -> Path:
    """An empty file beside `dest` (a hidden name in its directory), with
    the mode a new `dest` would have."""
    dest = Path(dest)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.{os.getpid()}-", dir=dest.parent)
    try:
        os.fchmod(fd, 0o666 & ~umask())
    finally:
        os.close(fd)
    return Path(tmp)


def temp_dir(dest: Path, infix: str = "") -> Path:
    """An empty directory beside `dest`, with the mode `mkdir(dest)`
    would give; `infix` says in its name what is being made there."""
    dest = Path(dest)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.{infix}{os.getpid()}-", dir=dest.parent))
    os.chmod(tmp, 0o777 & ~umask())
    return tmp


def write_with(path: Path, write: Callable[[Path], T]) -> T:
    """Run `write(tmp)` on a temporary file beside `path`, then move it
    into place: a reader sees the old file or the whole new one, never
    half of it. Returns what `write` returned."""
    tmp = temp_file(path)
    try:
        result = write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return result


def write_all(writers: dict[Path, Callable[[Path], object]], replace: set[Path] | None = None) -> None:
    """Write several files that belong together: each under a temporary
    name first, then all moved into place, so that a failure while any is
    written leaves every earlier file as it was, not half of a set new.
    With `replace`, only those paths may be replaced; the others are moved
    in without replacing a file that appeared meanwhile (OutputExistsError
    then, the rest left as they were)."""
    done: list[tuple[Path, Path]] = []
    try:
        for path, write in writers.items():
            tmp = temp_file(path)
            done.append((tmp, path))
            write(tmp)
    except BaseException:
        for tmp, _ in done:
            tmp.unlink(missing_ok=True)
        raise
    if replace is not None:
        from cratrace.errors import OutputExistsError

        appeared = [path for _, path in done if path not in replace and os.path.lexists(path)]
        if appeared:
            for tmp, _ in done:
                tmp.unlink(missing_ok=True)
            raise OutputExistsError(f"{appeared[0]}: appeared while this command ran; left as it is, nothing written")
    for tmp, path in done:
        if replace is None or path in replace:
            os.replace(tmp, path)
        else:
            try:
                rename_noreplace(tmp, path)
            except FileExistsError:
                tmp.unlink(missing_ok=True)
                raise


def write_text(path: Path, text: str) -> None:
    """Write `text` to `path` atomically."""
    write_with(path, lambda tmp: tmp.write_text(text))


# ------------------------------------------------------------ destinations


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: alive
        return True
    return True


def _stale_name(name: str | None) -> re.Pattern:
    """A temporary this module makes beside `name` (``.NAME.[infix-]PID-x``,
    x tempfile's eight characters), or beside any name."""
    who = re.escape(name) if name is not None else ".+"
    return re.compile(rf"^\.{who}\.(?:[a-z]+-)*(\d+)-[a-z0-9_]{{8}}$")


def remove_stale(dest: Path) -> list[Path]:
    """Remove the temporaries beside `dest` whose writer (the PID in the
    name) is dead; return what was removed. A live writer's are left."""
    dest = Path(dest)
    return _remove_stale(dest.parent, _stale_name(dest.name))


def remove_stale_in(directory: Path) -> list[Path]:
    """`remove_stale` for every output in `directory` (a capture's model
    tables and capture.json, which `cratrace model` rewrites in place)."""
    return _remove_stale(Path(directory), _stale_name(None))


def _remove_stale(directory: Path, pattern: re.Pattern) -> list[Path]:
    removed = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for e in entries:
        m = pattern.match(e.name)
        if not m or int(m.group(1)) == os.getpid() or _pid_alive(int(m.group(1))):
            continue
        p = Path(e.path)
        try:
            if e.is_dir(follow_symlinks=False):
                shutil.rmtree(p)
            else:
                p.unlink()
            removed.append(p)
        except OSError:
            pass
    return removed


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP back while the block runs (a step
    that must not be cut in two: a temporary made but not yet recorded
    for removal); they are handled when it ends."""
    import signal

    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    try:
        before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    except (AttributeError, OSError, ValueError):  # not the main thread's to block, or no such call
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


#: destinations this process holds the lock of (a command that calls
#: another, as `lab` calls the import, takes it once)
_held: dict[str, int] = {}


@contextmanager
def locked(dest: Path) -> Iterator[None]:
    """Hold the exclusive lock of `dest` (``.NAME.lock`` beside it) while
    the block runs; a destination another process holds is refused at
    once with :class:`~cratrace.errors.OutputBusyError`. The lock file is
    removed on release; whoever opened it meanwhile sees it gone (the
    inode check) and takes a fresh one."""
    dest = Path(dest)
    key = os.path.abspath(dest)
    if key in _held:
        _held[key] += 1
        try:
            yield
        finally:
            _held[key] -= 1
        return
    lock_path = dest.parent / f".{dest.name}.lock"
    fd = None
    try:
        # a signal held back here is handled as the block ends, inside
        # this try: the lock is let go whatever happens from the moment
        # it is taken
        with signals_deferred():
            fd = _take_lock(dest, lock_path)
            _held[key] = 1
        yield
    finally:
        if fd is not None:
            _held.pop(key, None)
            try:
                os.unlink(lock_path)  # still holding it: nobody else owns this file
            except OSError:
                pass
            os.close(fd)


def _take_lock(dest: Path, lock_path: Path) -> int:
    import fcntl

    from cratrace.errors import CratraceError, OutputBusyError

    while True:
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666 & ~umask())
        except OSError as e:  # the output could not be written there either
            raise CratraceError(f"cannot write {dest}: {e.strerror or e}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            who = f" (pid {holder})" if holder.isdigit() else ""
            raise OutputBusyError(f"{dest}: another cratrace command{who} is writing it; wait for it to finish or choose another output") from None
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.fstat(fd)[1:3] == os.stat(lock_path)[1:3]
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # removed by its last holder after we opened it: again
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _renameat2(src: Path, dst: Path, flags: int) -> None:
    """renameat2(2); OSError(ENOSYS) where the C library lacks it."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is None:
        raise OSError(errno.ENOSYS, "renameat2 is not available", str(src))
    if fn(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), str(src), None, str(dst))


def rename_noreplace(src: Path, dst: Path) -> None:
    """Move `src` to `dst` unless `dst` exists (FileExistsError then).
    Without renameat2 (an old C library, a file system without the flag):
    a file is linked then unlinked, which refuses an existing `dst` too; a
    directory is renamed after a last look, a window the kernel's flag
    does not have."""
    try:
        _renameat2(src, dst, _RENAME_NOREPLACE)
        return
    except OSError as e:
        if e.errno == errno.EEXIST:
            raise FileExistsError(errno.EEXIST, "exists", str(dst)) from None
        if e.errno not in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
            raise
    if not os.path.isdir(src):
        os.link(src, dst)
        os.unlink(src)
        return
    if os.path.lexists(dst):
        raise FileExistsError(errno.EEXIST, "exists", str(dst))
    os.rename(src, dst)


def exchange(src: Path, dst: Path) -> Path | None:
    """Put `src` in place of the existing `dst` in one step; return where
    the old `dst` now is (to be removed), or None when nothing is left of
    it. Falls back to os.replace for a file and to a rename aside for a
    directory where RENAME_EXCHANGE is missing."""
    try:
        _renameat2(src, dst, _RENAME_EXCHANGE)
        return Path(src)
    except OSError as e:
        if e.errno not in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
            raise
    if not os.path.isdir(dst):
        os.replace(src, dst)
        return None
    old = Path(tempfile.mkdtemp(prefix=f".{Path(dst).name}.old-{os.getpid()}-", dir=Path(dst).parent))
    os.rename(dst, old / "x")
    try:
        rename_noreplace(src, dst)
    except BaseException:
        os.rename(old / "x", dst)
        old.rmdir()
        raise
    return old


def remove(p: Path) -> None:
    """Remove a file or a directory tree, whichever `p` is."""
    if os.path.isdir(p) and not os.path.islink(p):
        shutil.rmtree(p, ignore_errors=True)
    else:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


class Destination:
    """One command's output, locked from the start to the end of the
    command (see the module's doc).

    `ours(path)` says whether an existing output is one cratrace wrote
    (a capture with its capture.json, a report with its title): only those
    are replaced, and only with `force`. `what` names the kind of output in
    messages ("capture", "report"). Use as a context manager; `temp()`
    gives a temporary beside the output, `commit(tmp)` moves it in::

        with Destination(out, force=force, ours=is_capture, what="capture") as d:
            tmp = d.temp("importing-")
            ...  # write into tmp
            d.commit(tmp)

    Temporaries not committed are removed on the way out, whatever
    ended the block (an error, Ctrl-C, SIGTERM).
    """

    def __init__(self, path: Path, *, force: bool = False, ours: Callable[[Path], bool], what: str, directory: bool = True) -> None:
        self.path = Path(path)
        self.force, self.ours, self.what, self.directory = force, ours, what, directory
        self._temps: list[Path] = []
        self._existed = False
        self._lock = None

    def __enter__(self) -> Destination:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = locked(self.path)
        self._lock.__enter__()
        try:
            remove_stale(self.path)
            self.check()
            self._existed = os.path.lexists(self.path)
        except BaseException:
            self._lock.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            for t in self._temps:
                remove(t)
        finally:
            self._lock.__exit__(*exc)

    def check(self) -> None:
        """Refuse an existing output that may not be replaced: any,
        without force; one cratrace did not write, with it."""
        from cratrace.errors import OutputExistsError

        p = self.path
        if not os.path.lexists(p):
            return
        if not self.force:
            raise OutputExistsError(f"{p}: already exists; pass --force to replace it")
        if not self.ours(p):
            raise OutputExistsError(f"{p}: not a {self.what} cratrace wrote; --force replaces only those: move it away or choose another output")

    def temp(self, infix: str = "") -> Path:
        """A temporary directory (or file) beside the output."""
        with signals_deferred():
            t = temp_dir(self.path, infix) if self.directory else temp_file(self.path)
            self._temps.append(t)
        return t

    def commit(self, tmp: Path) -> None:
        """Move `tmp` into place: beside nothing, never over what appeared
        while the command ran; over an existing output only as `check`
        allows (checked again now)."""
        from cratrace.errors import OutputExistsError

        if os.path.lexists(self.path):
            if not self._existed:
                raise OutputExistsError(f"{self.path}: appeared while this command ran; left as it is, nothing written")
            self.check()
            with signals_deferred():
                old = exchange(tmp, self.path)
                # `tmp` is now the old output (removed on the way out)
                # or nothing at all
                if old is not None and old != tmp:
                    self._temps.append(old)
        else:
            with signals_deferred():
                try:
                    rename_noreplace(tmp, self.path)
                except FileExistsError:
                    raise OutputExistsError(f"{self.path}: appeared while this command ran; left as it is, nothing written") from None
                self._temps.remove(tmp)


def is_capture(p: Path) -> bool:
    """An existing output `import` may replace: a capture directory (its
    capture.json says so) or an empty directory."""
    p = Path(p)
    if not p.is_dir() or p.is_symlink():
        return False
    try:
        if not any(p.iterdir()):
            return True
        import json

        meta = json.loads((p / "capture.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and "schema_version" in meta and "events" in meta
