"""Writing files so that a crash never leaves half of one: a temporary file in the same folder,
flushed and fsynced, then ``os.replace`` (atomic on POSIX). Pure standard library."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def atomic_write(path, write: Callable, mode: str = "wb") -> Path:
    """Call ``write(f)`` on a temporary file next to ``path``, then rename it over ``path``.
    The file gets the permissions a plain ``open()`` would give (not mkstemp's 0600)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def atomic_write_text(path, text: str) -> Path:
    """``path.write_text(text)``, atomically."""
    return atomic_write(path, lambda f: f.write(text), mode="w")


def probe_writable(folder) -> None:
    """Raise ``PermissionError`` unless a file can be created in ``folder`` (an existing
    directory). It tries for real (a temporary file, removed at once): ``os.access`` says yes to
    root on read-only file systems."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".splitnet-probe-")
    os.close(fd)
    os.unlink(tmp)


def nearest_existing(path) -> Path:
    """``path`` or its closest ancestor that exists."""
    p = Path(path).absolute()
    while not p.exists():
        p = p.parent
    return p


def require_writable_dir(out, flag: str = "--out") -> None:
    """ValueError naming ``flag`` unless directory ``out`` exists or can be created in a
    writable folder (its nearest existing ancestor, probed for real)."""
    out = Path(out)
    probe = nearest_existing(out)
    if not probe.is_dir():
        raise ValueError(f"{flag} {out}: {probe} exists and is not a directory")
    try:
        probe_writable(probe)
    except OSError as e:
        raise ValueError(f"{flag} {out}: cannot write to {probe} ({e.strerror})") from None


def remove_stale_temporaries(folder, name: str) -> int:
    """Delete ``.NAME.*.tmp`` files that a kill during :func:`atomic_write` left in ``folder``
    (the real file was never replaced by them). Returns how many were removed."""
    n = 0
    for p in Path(folder).glob(f".{name}.*.tmp"):
        p.unlink(missing_ok=True)
        n += 1
    return n


__all__ = ["atomic_write", "atomic_write_text", "nearest_existing", "probe_writable",
           "remove_stale_temporaries", "require_writable_dir"]
