"""The run directory: one writer at a time, and earlier runs kept.

* **One writer.** :class:`RunLock` holds an exclusive ``flock`` on ``DIR/.lock`` for the life of
  a run and records its pid, host and start time there; a second trainer on the same directory
  is refused with a line naming the first. The kernel drops the lock when its process dies,
  even by ``kill -9``, so a stale lock file is simply taken over.
* **Nothing deleted.** :func:`move_aside` moves an earlier run's files (``--overwrite``, or a
  run killed before its first save) into ``DIR/previous-N/``.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import sys
from pathlib import Path

from .checkpoint import CKPT, LOCK, METRICS, PLOT


class RunLocked(ValueError):
    """Another process holds the run directory."""


class RunDirectoryReplaced(RuntimeError):
    """The run directory was removed, renamed or replaced while its run was going."""


class RunLock:
    """Exclusive lock on a run directory for the life of one run (see the module docstring).
    Use as a context manager; :meth:`acquire` raises :class:`RunLocked` naming the holder.

    The lock belongs to the directory it was taken in, not to its name: :meth:`verify` (the
    trainer calls it before every save and at every step's bookkeeping) raises
    :class:`RunDirectoryReplaced` when the path no longer leads to that directory (inode) and
    its locked ``.lock`` file, e.g. after ``rm -rf DIR`` while the run was alive and a second
    trainer started in a new ``DIR``."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.path = self.folder / LOCK
        self._fd: int | None = None
        self._identity: tuple | None = None

    def acquire(self) -> RunLock:
        import fcntl

        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise self.locked(holder) from None
        info = {"pid": os.getpid(), "host": socket.gethostname(),
                "started": datetime.datetime.now().isoformat(timespec="seconds"),
                "argv": sys.argv}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        self._fd = fd
        d, lk = os.stat(self.folder), os.fstat(fd)
        self._identity = (d.st_dev, d.st_ino, lk.st_dev, lk.st_ino)
        try:
            self.verify()           # the lock file was replaced between open and flock
        except RunDirectoryReplaced:
            self.release()
            raise RunLocked(f"{self.folder} changed while this run took its lock (another "
                            f"process is starting there); try again") from None
        return self

    def locked(self, holder: str) -> RunLocked:
        return RunLocked(f"{self.folder} is in use by another splitnet train ({holder}); wait "
                         f"for it to finish, stop it, or choose another --out")

    def refuse_if_held(self) -> None:
        """:class:`RunLocked` naming the holder when another process holds the lock now
        (nothing taken, nothing created): said before advice that only the holder could
        follow ('pass --resume or --overwrite', which the lock would then refuse)."""
        import fcntl

        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return                       # no lock file: nobody has run here since
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise self.locked(_read_holder(fd)) from None
        finally:
            os.close(fd)                 # closing drops the shared lock just taken

    def verify(self) -> None:
        """:class:`RunDirectoryReplaced` unless ``folder`` is still the directory locked (same
        device and inode) holding the locked ``.lock``."""
        if self._identity is None:
            return
        try:
            d, lk = os.stat(self.folder), os.stat(self.path)
            now = (d.st_dev, d.st_ino, lk.st_dev, lk.st_ino)
        except OSError:
            now = None
        if now != self._identity:
            raise RunDirectoryReplaced(
                f"{self.folder} was removed or replaced while this run was going (another "
                f"run may be using it now): stopping without writing anything there")

    def release(self) -> None:
        if self._fd is None:
            return
        import fcntl

        try:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _read_holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
        return f"pid {info['pid']} on host {info['host']}, started {info['started']}"
    except (ValueError, KeyError, OSError):
        return "a process that has not written its name yet"


PREVIOUS = "previous-"    # OUT/previous-1, previous-2, ...: earlier runs, oldest first


def move_aside(folder) -> Path | None:
    """Move the state of an earlier run in ``folder`` (checkpoint, metrics, plot, a sharded
    run's ``shards-*`` folders) into a new
    ``folder/previous-N/`` (N one more than the highest there), so ``--overwrite`` leaves
    nothing that ``--resume`` could pick up and loses nothing: every earlier run keeps its own
    generation, and no folder is ever deleted or replaced (a ``previous/`` of your own is left
    alone). Returns the new location, or None if there was nothing to move."""
    from .shards import PREFIX as SHARDS

    folder = Path(folder)
    # a sharded run's weights live in shards-<step>/ folders beside its checkpoint: they go
    # with it (left behind, the next run's first save would remove them as superseded)
    shards = sorted(p.name for p in folder.glob(f"{SHARDS}*") if p.is_dir())
    names = [n for n in (CKPT, METRICS, PLOT) if (folder / n).exists()] + shards
    if not names:
        return None
    taken = [int(p.name[len(PREVIOUS):]) for p in folder.iterdir()
             if p.name.startswith(PREVIOUS) and p.name[len(PREVIOUS):].isdigit()]
    n = max(taken, default=0) + 1
    while True:
        prev = folder / f"{PREVIOUS}{n}"
        try:
            prev.mkdir()             # atomic: never into a generation that exists
            break
        except FileExistsError:
            n += 1
    for name in names:      # the checkpoint first: after it, --resume finds nothing
        os.replace(folder / name, prev / name)
    return prev


__all__ = ["PREVIOUS", "RunDirectoryReplaced", "RunLock", "RunLocked", "move_aside"]
