"""Publish an output directory as one step: the complete new directory or the untouched old one.

A command builds its whole output in a staging directory beside the target (`.NAME.staging-…`),
carrying over from the old directory what is still valid (hard links, so gigabytes of traces cost
nothing), and then exchanges the two directories with one `renameat2(RENAME_EXCHANGE)` call. Where
the system has no exchange (not Linux, or a filesystem without it) it renames the old directory
aside and the new one in, with SIGINT/SIGTERM held back between the two renames; a process killed
in between leaves `.NAME.old-…`, which the next publication of NAME puts back. Leftovers of killed
processes (`.NAME.staging-HOST-PID-…`) are removed by the next publication of NAME on the same host
once PID is gone.

Never written through: the new directory is built from scratch, so a symlink inside the old one is
carried as a symlink and never followed for writing. A target that is itself a symlink to a
directory is published where it points (the link stays).
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import os
import shutil
import signal
import socket
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from astra_hetero.errors import RunDirError

STAGING_TAG = ".staging-"
OLD_TAG = ".old-"
_RENAME_EXCHANGE = 2


def host_tag() -> str:
    """Short, filesystem-safe name of this host: leftovers are only judged by their own host."""
    return hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]


def output_target(root: Path) -> Path:
    """Where an output directory will be: `root`, or where it points if it is a symlink to one."""
    root = Path(os.path.abspath(root))
    if root.is_symlink():
        try:
            target = root.resolve(strict=True)
        except (OSError, RuntimeError):
            raise RunDirError(f"{root}: a symlink that leads nowhere (or in a loop)") from None
        if not target.is_dir():
            raise RunDirError(f"{root}: a symlink to something that is not a directory")
        return target
    if root.exists() and not root.is_dir():
        raise RunDirError(f"{root}: exists and is not a directory; choose another output directory")
    if root.parent == root or os.path.ismount(root):
        raise RunDirError(
            f"{root}: a filesystem root or mount point cannot be replaced; choose a directory in it"
        )
    return root


class Staging:
    """The new directory while it is built, and the old one it will replace (None if there is none)."""

    def __init__(self, path: Path, root: Path, previous: Path | None) -> None:
        self.path = path
        self.root = root  # where it will be published
        self.previous = previous

    def carry(self, relative: str, skip: Callable[[str], bool] = lambda name: False) -> bool:
        """Bring `relative` (a file, directory or symlink) over from the old directory; False if absent.

        Files are hard-linked where possible (nothing in a run directory is modified in place), and
        copied otherwise; directories are rebuilt; `skip(relative path)` leaves parts of a directory out.
        """
        if self.previous is None:
            return False
        source = self.previous / relative
        if not os.path.lexists(source):
            return False
        try:
            _clone(source, self.path / relative, relative, skip, os.lstat(self.previous).st_dev)
        except OSError as exc:
            raise RunDirError(f"{source}: cannot carry it into the new directory ({_reason(exc)})") from None
        return True

    def previous_entries(self) -> list[str]:
        return sorted(os.listdir(self.previous)) if self.previous is not None else []


def _clone(source: Path, target: Path, relative: str, skip: Callable[[str], bool], device: int) -> None:
    if skip(relative):
        return
    info = os.lstat(source)
    if info.st_dev != device:
        raise RunDirError(f"{source}: another filesystem is mounted there; move it out of the directory")
    mode = info.st_mode
    target.parent.mkdir(parents=True, exist_ok=True)
    if stat.S_ISLNK(mode):
        os.symlink(os.readlink(source), target)
    elif stat.S_ISDIR(mode):
        target.mkdir()
        for name in sorted(os.listdir(source)):
            _clone(source / name, target / name, f"{relative}/{name}", skip, device)
        shutil.copystat(source, target)
    elif stat.S_ISREG(mode):
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)
    else:
        raise RunDirError(f"{source}: a special file (FIFO, socket or device); move it out of the directory")


@contextmanager
def staged(root: Path) -> Iterator[Staging]:
    """Yield a Staging for `root` (see `output_target`); on success publish it, on any exception (or
    KeyboardInterrupt) remove it and leave `root` exactly as it was."""
    root = output_target(root)
    staging: Path | None = None
    try:
        with _signals_held():  # no interrupt between creating the staging directory and knowing it
            try:
                root.parent.mkdir(parents=True, exist_ok=True)
                clean_leftovers(root)
                prefix = f".{root.name}{STAGING_TAG}{host_tag()}-{os.getpid()}-"
                staging = Path(tempfile.mkdtemp(prefix=prefix, dir=root.parent))
            except OSError as exc:
                raise RunDirError(f"{root}: cannot prepare the output beside it ({_reason(exc)})") from None
        yield Staging(staging, root, root if root.is_dir() else None)
        os.chmod(staging, 0o777 & ~_umask())  # mkdtemp makes it private; an output directory is not
        with _signals_held():
            swap_in(staging, root)
    finally:
        if staging is not None:
            with _signals_held():  # an interrupt takes effect once the staging (or old) directory is gone
                shutil.rmtree(staging, ignore_errors=True)  # after the swap, this is the old directory


def swap_in(staging: Path, root: Path, exchange: Callable[[Path, Path], bool] | None = None) -> None:
    """Put `staging` where `root` is; afterwards `staging` holds the old directory (if there was one).

    `exchange` swaps two directories atomically, or returns False where it cannot (default: renameat2).
    """
    if not root.exists():
        _rename(staging, root)
        return
    if (exchange or exchange_paths)(staging, root):
        return
    aside = Path(
        tempfile.mkdtemp(prefix=f".{root.name}{OLD_TAG}{host_tag()}-{os.getpid()}-", dir=root.parent)
    )
    with _signals_held():
        _rename(root, aside)
        _rename(staging, root)
        _rename(aside, staging)  # the caller removes `staging`, now the old directory


def _rename(source: Path, target: Path) -> None:
    try:
        os.replace(source, target)
    except OSError as exc:
        raise RunDirError(f"{target}: cannot publish ({_reason(exc)})") from None


def exchange_paths(a: Path, b: Path) -> bool:
    """Atomically exchange two paths (Linux renameat2); False where the system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    result = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise RunDirError(f"{b}: cannot publish ({os.strerror(code)})")


@contextmanager
def _signals_held() -> Iterator[None]:
    """Defer SIGINT and SIGTERM over renames and removals; re-deliver them afterwards to whatever
    handler was there (main thread only: elsewhere Python cannot change handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {sig: signal.signal(sig, lambda number, frame: caught.append(number)) for sig in _HELD}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(caught):
            os.kill(os.getpid(), sig)


_HELD = (signal.SIGINT, signal.SIGTERM)


def clean_leftovers(root: Path) -> list[Path]:
    """Remove staging directories of `root` left by dead processes of this host; put back an old
    directory that a killed swap had moved aside. Returns what was removed or restored."""
    if not root.parent.is_dir():
        return []
    return _clean(
        root.parent, [name for name in os.listdir(root.parent) if name.startswith(f".{root.name}.")]
    )


def clean_directory(parent: Path) -> list[Path]:
    """`clean_leftovers` for every output directory in `parent` at once (one listing)."""
    return _clean(parent, os.listdir(parent)) if parent.is_dir() else []


def _clean(parent: Path, names: list[str]) -> list[Path]:
    done: list[Path] = []
    mine = f"{host_tag()}-"
    for tag in (OLD_TAG, STAGING_TAG):  # old directories first: they are put back where they were
        for name in sorted(names):
            head, found, rest = name.partition(f"{tag}{mine}")
            pid = _pid_of(rest) if found and head.startswith(".") else None
            if pid is None or _alive(pid):
                continue
            entry, root = parent / name, parent / head[1:]
            if tag == OLD_TAG and not root.exists():
                os.replace(entry, root)  # the old directory, moved aside by a swap that was killed
            else:
                shutil.rmtree(entry, ignore_errors=True)
            done.append(entry)
    return done


def _pid_of(rest: str) -> int | None:
    head = rest.split("-", 1)[0]
    return int(head) if head.isdigit() else None


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__
