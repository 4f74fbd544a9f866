"""Writing files so that a crash never leaves half of one, and never over something that is not
a file. Pure standard library.

* :func:`atomic_write`: a temporary file in the same folder, flushed and fsynced, then
  ``os.replace`` (atomic on POSIX) -- but only over a new name or an existing *regular* file: a
  device (``/dev/null``), a FIFO, a socket or a directory at the target is refused, never
  replaced. A write that fails (disk full, a file-size limit) leaves the old file as it was
  and no temporary behind, and is one :class:`OSError` naming the file.
* :func:`check_output_file` / :func:`check_outputs`: the same rule for the command line, before
  any work: every output a new name or a regular file in a writable folder, no two the same,
  none of them a file the command reads (:func:`check_not_inputs`).
* :func:`atomic_directory`: a whole directory (an export) written beside its target and moved
  into place only when complete.

Inputs follow one rule too (:func:`input_kind`, :func:`read_input`): a regular file, a folder
where a command reads folders, and a stream (a FIFO, a pipe as ``/dev/stdin``, a character
device such as ``/dev/null``) where a command reads its input once, front to back. Anything
else (missing, a socket, a folder for a file, a stream read more than once) is one ValueError
naming the option and the path; text is checked chunk by chunk, so an endless or binary input
(``/dev/zero``, ``/dev/urandom``) is refused after its first chunk, never read to the end.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def file_kind(path) -> str | None:
    """None when ``path`` does not exist or is a regular file (a link to one counts as one);
    otherwise what it is (``"a FIFO"``, ``"a character device"``, ...)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def input_kind(path, flag: str | None = None, *, folder: bool = False,
               stream: bool = False) -> str:
    """What a command may read at ``path``: ``"file"`` (a regular file, or a link to one),
    ``"folder"`` (only with ``folder=True``) or ``"stream"`` (only with ``stream=True``: a FIFO
    or a character device, which ``/dev/stdin``, ``/dev/null`` and ``/dev/zero`` are; read
    once from the front). Anything else is a ValueError naming ``flag`` and ``path``: missing,
    a folder where a file is read, a socket or block device, a stream where the input is read
    more than once, or the system's reason (permission, a name too long)."""
    where = f"{flag} {path}" if flag else str(path)
    wanted = "a file or a folder" if folder else "a file"
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise ValueError(f"{where}: no such file{' or folder' if folder else ''}") from None
    except OSError as e:
        raise ValueError(f"{where}: {e.strerror}") from None
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        if folder:
            return "folder"
        raise ValueError(f"{where} is a directory; give a file")
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        if stream:
            return "stream"
        raise ValueError(f"{where} is {kind}, which can be read only once; give {wanted}")
    raise ValueError(f"{where} is {kind}; give {wanted}")


READ_CHUNK = 1 << 20      # bytes read at a time from an input (and checked, when text)


def read_input(path, where: str | None = None, *, text: bool = False,
               limit: int | None = None) -> bytes:
    """The bytes of a file or stream ``path`` (see :func:`input_kind`), read once, front to
    back, in chunks of :data:`READ_CHUNK`. ``text=True``: the bytes must be UTF-8 without a
    NUL byte, checked chunk by chunk, so a binary or endless non-text input is refused after
    its first chunk: ValueError ``"{where}:{line}: binary file ..."`` or ``"...: not UTF-8
    ..."``. ``limit``: a ValueError once more than that many bytes arrive (an endless text
    stream). An OSError while reading is a ValueError with the system's reason."""
    import codecs

    where = where or str(path)
    dec = codecs.getincrementaldecoder("utf-8")()
    chunks: list[bytes] = []
    n = 0
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if limit is not None and stat.S_ISREG(st.st_mode) and st.st_size > limit:
                raise ValueError(f"{where}: {st.st_size:,} bytes, more than the {limit:,} read")
            while b := f.read(READ_CHUNK):
                chunks.append(b)
                n += len(b)
                if text:
                    _check_text(chunks, dec, where)
                if limit is not None and n > limit:
                    raise ValueError(f"{where}: more than the {limit:,} bytes read (an endless "
                                     f"stream?)")
            if text:
                _check_text(chunks, dec, where, final=True)
    except OSError as e:
        raise ValueError(f"{where}: {e.strerror or e}") from None
    return b"".join(chunks)


def _check_text(chunks: list[bytes], dec, where: str, final: bool = False) -> None:
    """ValueError naming the line of the first NUL byte or invalid UTF-8 in ``chunks``: the
    last chunk is new (``dec``, an incremental UTF-8 decoder, has seen the others); ``final``:
    no chunk is new, the input ended (a character cut at the end is invalid)."""
    new = b"" if final else chunks[-1]
    nul = new.find(b"\0")                 # valid UTF-8: the decoder does not see it
    try:
        dec.decode(new, final=final)
        bad = None
    except UnicodeDecodeError:
        bad = -1
    if nul < 0 and bad is None:
        return
    data = b"".join(chunks)
    if bad is not None:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as e:
            bad = e.start
    at = len(data) - len(new) + nul
    if nul >= 0 and (bad is None or at <= bad):
        line = data.count(b"\n", 0, at) + 1
        raise ValueError(f"{where}:{line}: binary file (NUL byte), expected UTF-8 text")
    line = data.count(b"\n", 0, bad) + 1
    raise ValueError(f"{where}:{line}: not UTF-8 (byte 0x{data[bad]:02x}), expected UTF-8 "
                     f"text")


def require_replaceable(path, flag: str | None = None) -> Path:
    """ValueError unless ``path`` is a new name or a regular file (what
    :func:`atomic_write` may replace); OSError problems (a name too long, a component that is a
    file) become the same one-line ValueError."""
    path = Path(path)
    where = f"{flag} {path}" if flag else str(path)
    try:
        kind = file_kind(path)
    except OSError as e:
        raise ValueError(f"{where}: {e.strerror}") from None
    if kind == "a directory":
        raise ValueError(f"{where} is a directory; give a file name")
    if kind is not None:
        raise ValueError(f"{where} exists and is {kind}, not a regular file: splitnet writes "
                         f"only new files or replaces regular ones")
    return path


class _Recorder:
    """A file wrapper that remembers the OSError a write raised: writers in C++ (torch.save)
    turn it into a RuntimeError, and :func:`atomic_write` gives the real cause back."""

    def __init__(self, f):
        self._f = f
        self.error: OSError | None = None

    def write(self, b):
        try:
            return self._f.write(b)
        except OSError as e:
            self.error = e
            raise

    def __getattr__(self, name):
        return getattr(self._f, name)


class WriteFailed(OSError):
    """A write that could not complete (disk full, quota, file-size limit): one line naming the
    file; nothing was replaced."""

    def __str__(self) -> str:
        return str(self.strerror)


# how writers that are not Python (safetensors, torch's C++ writer) report the same errors
_FULL = re.compile(r"No space left|StorageFull|os error 28|code: 28|Disk quota|os error 122|"
                   r"File too large|FileTooLarge|os error 27|code: 27", re.I)


def write_failure(e: BaseException, path) -> WriteFailed | None:
    """A :class:`WriteFailed` naming ``path`` when ``e`` (an OSError, or any exception whose
    text says so: safetensors reports a full disk as its own error type) is a full disk, a
    quota or a file-size limit; None for anything else."""
    if isinstance(e, WriteFailed):
        return e
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return _write_error(Path(path), e)
    m = _FULL.search(str(e))
    if m is None:
        return None
    code = errno.EFBIG if "27" in m.group(0) or "large" in m.group(0).lower() else errno.ENOSPC
    return _write_error(Path(path), OSError(code, os.strerror(code)))


def _write_error(path: Path, e: OSError) -> WriteFailed:
    what = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exceeded",
            errno.EFBIG: "the file is larger than allowed"}.get(e.errno, e.strerror or str(e))
    return WriteFailed(e.errno, f"cannot write {path}: {what}; nothing was written (an "
                                f"earlier version, if any, is kept)")


def atomic_write(path, write: Callable, mode: str = "wb") -> Path:
    """Call ``write(f)`` on a temporary file next to ``path``, then rename it over ``path``.
    The file gets the permissions a plain ``open()`` would give (not mkstemp's 0600).
    ``path`` must be a new name or a regular file (ValueError otherwise, before writing)."""
    path = require_replaceable(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as f:
            rec = _Recorder(f)
            try:
                write(rec)
                f.flush()
                os.fsync(f.fileno())
            except OSError as e:
                raise _write_error(path, e) from None
            except Exception:
                if rec.error is not None:
                    raise _write_error(path, rec.error) from None
                raise
        os.chmod(tmp, 0o666 & ~current_umask())
        require_replaceable(path)          # made a FIFO or device while we wrote? keep it
        os.replace(tmp, path)
    except WriteFailed:
        raise
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):  # close() flushing, say
            raise _write_error(path, e) from None
        raise
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def current_umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


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
    try:
        probe = nearest_existing(out)
    except OSError as e:
        raise ValueError(f"{flag} {out}: {e.strerror}") from None
    if not probe.is_dir():
        raise ValueError(f"{flag} {out}: {probe} exists and is not a directory")
    try:
        probe_writable(probe)
    except OSError as e:
        raise ValueError(f"{flag} {out}: cannot write to {probe} ({e.strerror})") from None


def check_output_file(path, flag: str = "--out") -> Path:
    """An output file we can create or replace: a new name or a regular file (never a
    directory, device, FIFO or socket), in an existing folder we can write to (tried for real,
    see :func:`probe_writable`). ValueError naming ``flag`` otherwise."""
    p = require_replaceable(path, flag)
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise ValueError(f"{flag} {p}: directory {parent} does not exist")
    try:
        probe_writable(parent)
    except OSError as e:
        raise ValueError(f"{flag} {p}: cannot write to {parent} ({e.strerror})") from None
    return p


def check_not_inputs(outputs, inputs) -> None:
    """No output ``(flag, path)`` is, by any spelling (a link, ``..``, a relative path), one of
    the ``inputs`` ``(what, path)`` a command reads, nor a file inside one that is a folder: one
    ValueError naming both, before any work (an evaluation's ``--json`` given the run's own
    ``checkpoint.pt`` would replace it after the whole evaluation)."""
    real = [(what, Path(p), os.path.realpath(p)) for what, p in inputs if p]
    for flag, path in outputs:
        if not path:
            continue
        out = os.path.realpath(path)
        for what, p, r in real:
            inside = os.path.isdir(r) and out.startswith(r + os.sep) and os.path.exists(out)
            if out == r or inside:
                raise ValueError(f"{flag} {path} is {what} {p}, which this command reads: "
                                 f"writing there would replace it; give the output another "
                                 f"name")


def check_outputs(outputs, inputs=()) -> None:
    """:func:`check_output_file` for every ``(flag, path)`` with a path, no two of them the
    same file (one would overwrite the other), and none of them one of ``inputs``
    (:func:`check_not_inputs`)."""
    check_not_inputs(outputs, inputs)
    seen: dict[str, str] = {}
    for flag, path in outputs:
        if not path:
            continue
        check_output_file(path, flag)
        key = os.path.realpath(path)
        if key in seen:
            raise ValueError(f"{flag} {path} is the same file as {seen[key]}: give each output "
                             f"its own name")
        seen[key] = f"{flag} {path}"


@contextmanager
def atomic_directory(target):
    """Yield a new temporary directory beside ``target``; on success its files are moved into
    ``target`` (created if absent; each file replaced atomically, subfolders moved whole), on
    any failure or interruption it is removed and ``target`` is left as it was."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"))
    try:
        yield tmp
        for p in tmp.iterdir():
            os.chmod(p, (0o777 if p.is_dir() else 0o666) & ~current_umask())
        if not target.exists():
            os.replace(tmp, target)
            os.chmod(target, 0o777 & ~current_umask())
            return
        for p in sorted(tmp.iterdir()):
            require_replaceable(target / p.name)
        for p in sorted(tmp.iterdir()):
            if p.is_dir() and (target / p.name).is_dir():
                raise ValueError(f"{target / p.name} is a folder: splitnet does not replace "
                                 f"folders")
            os.replace(p, target / p.name)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def remove_stale_temporaries(folder, name: str) -> int:
    """Delete ``.NAME.*.tmp`` files that a kill during :func:`atomic_write` left in ``folder``
    (the real file was never replaced by them). Returns how many were removed."""
    n = 0
    for p in Path(folder).glob(f".{name}.*.tmp"):
        if p.is_file() and not p.is_symlink():
            p.unlink(missing_ok=True)
            n += 1
    return n


__all__ = ["READ_CHUNK", "WriteFailed", "atomic_directory", "atomic_write",
           "atomic_write_text", "check_not_inputs", "check_output_file", "check_outputs",
           "current_umask",
           "file_kind", "input_kind", "nearest_existing", "probe_writable", "read_input",
           "remove_stale_temporaries", "require_replaceable", "require_writable_dir",
           "write_failure"]
