"""Byte-level data for language modelling: corpus, split, and a resumable batch sequence.

Tokenizer: the identity on bytes, so the vocabulary is 256 and the loss in nats per token
converts to bits per byte as ``bpb = loss / ln 2``.

Default corpus: the ``.py`` files of the running Python's standard library (found through
``sysconfig``), read in sorted order of their path relative to the library root. A file belongs
to the validation split when ``sha256(relative path) mod 1000 < 1000 * val_fraction``: the rule
depends only on the relative path, so the same file lands on the same side on every machine
(the files themselves differ between Python versions). A user corpus (``--text``) is one
file, split by position (the last ``val_fraction`` of the bytes is validation), or many files
(a directory, a glob, an archive), split by file with the same rule as the standard library.

Batches: the training windows of step ``s`` are drawn by a generator seeded with ``(seed, s)``,
so the whole batch sequence is a pure function of the step counter. Resuming at step ``s`` needs
no sampler state, and every rank of a distributed run can draw the same global batch and keep
its own slice (``rank``/``world_size``), which makes a run on N processes see exactly the
windows a single process would.
"""

from __future__ import annotations

import hashlib
import math
import os
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .._io import input_kind

VOCAB_SIZE = 256
LN2 = math.log(2.0)
_SKIP_DIRS = {"site-packages", "dist-packages", "__pycache__"}


def encode(text: str | bytes) -> torch.Tensor:
    """UTF-8 bytes of ``text`` as int64 token ids in [0, 256)."""
    b = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    return torch.tensor(list(b), dtype=torch.long)


def decode(ids) -> str:
    """Token ids back to text (invalid UTF-8 replaced)."""
    return bytes(int(i) for i in ids).decode("utf-8", errors="replace")


def stdlib_root() -> Path:
    """Directory of the running Python's standard library."""
    return Path(sysconfig.get_paths()["stdlib"])


def stdlib_files(root: Path | None = None) -> list[tuple[str, Path]]:
    """(relative posix path, path) of every ``.py`` file under ``root``, sorted by relative path;
    third-party package directories are skipped."""
    root = Path(root) if root is not None else stdlib_root()
    if not root.is_dir():
        raise ValueError(f"standard library directory not found: {root}")
    out = []
    for p in root.rglob("*.py"):
        rel = p.relative_to(root)
        if _SKIP_DIRS.intersection(rel.parts) or not p.is_file():
            continue
        out.append((rel.as_posix(), p))
    out.sort(key=lambda t: t[0])
    return out


def is_val_file(rel_path: str, val_fraction: float) -> bool:
    """The stable split rule: sha256 of the relative path, not Python's salted ``hash``."""
    # surrogateescape: a file name that is not UTF-8 (Latin-1, say) hashes as its raw bytes
    h = int.from_bytes(hashlib.sha256(rel_path.encode("utf-8", "surrogateescape")).digest()[:8],
                       "big")
    return (h % 1000) < round(1000 * val_fraction)


def _check_fraction(val_fraction: float) -> float:
    if isinstance(val_fraction, bool) or not isinstance(val_fraction, (int, float)) \
            or not 0.0 < float(val_fraction) < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction!r}")
    return float(val_fraction)


def is_text(data: bytes) -> bool:
    """A file counts as text when it has no NUL byte and is valid UTF-8."""
    if b"\0" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@dataclass
class Corpus:
    """Token arrays of the two splits (uint8 numpy) and where they came from.

    ``files``: (train, val) text files ((0, 0): one file split by position); ``skipped``: files
    left out as binary (not UTF-8 or with NUL bytes); ``digest``: sha256 over every file's
    relative path and bytes, in order, so a moved corpus keeps its fingerprint and a changed one
    does not."""

    train: np.ndarray
    val: np.ndarray
    source: str
    files: tuple[int, int] = (0, 0)
    skipped: int = 0
    digest: str = ""

    @property
    def n_files(self) -> int:
        """Files in the corpus (one file split by position counts once)."""
        return 1 if self.files == (0, 0) else sum(self.files)

    def describe(self) -> str:
        skip = f", {self.skipped} binary files skipped" if self.skipped else ""
        split = ("1 file split by position" if self.files == (0, 0) else
                 f"{sum(self.files):,} files ({self.files[0]:,} train / {self.files[1]:,} val)")
        return (f"{self.source}: {split}, {len(self.train):,} train / {len(self.val):,} val "
                f"bytes{skip}")

    def fingerprint(self) -> dict:
        """What a checkpoint records to notice a changed corpus on resume."""
        return {"source": self.source, "files": self.n_files,
                "bytes": int(len(self.train) + len(self.val)), "sha256": self.digest}


def same_content(a, b) -> bool:
    """Two fingerprints of one corpus, wherever it lies: files, bytes and digest equal (a corpus
    that moved, or is spelled otherwise, is the same corpus)."""
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return a == b
    return {k: v for k, v in a.items() if k != "source"} == \
        {k: v for k, v in b.items() if k != "source"}


def describe_fingerprint(fp) -> str:
    if not isinstance(fp, dict):
        return "none recorded"
    n = fp.get("files")
    return (f"{fp.get('source')}, {n} file{'' if n == 1 else 's'}, {fp.get('bytes'):,} bytes, "
            f"sha256 {str(fp.get('sha256'))[:12]}")


def _split_files(items, val_fraction: float, source: str, skipped: int = 0) -> Corpus:
    """A corpus from ``(relative path, bytes)`` pairs in order, split by :func:`is_val_file`."""
    tr, va, h = [], [], hashlib.sha256()
    for rel, b in items:
        h.update(rel.encode("utf-8", "surrogateescape") + b"\0" + hashlib.sha256(b).digest())
        (va if is_val_file(rel, val_fraction) else tr).append(b)
    train = np.frombuffer(b"".join(tr), dtype=np.uint8)
    val = np.frombuffer(b"".join(va), dtype=np.uint8)
    if len(train) == 0 or len(val) == 0:
        raise ValueError(f"{source} is empty or has an empty split: {len(tr)} train / "
                         f"{len(va)} val files with {len(train)} / {len(val)} bytes; each split "
                         f"needs text (give more files, or one file to split by position)")
    return Corpus(train, val, source, (len(tr), len(va)), skipped, h.hexdigest())


def load_stdlib(val_fraction: float = 0.05, root: Path | None = None) -> Corpus:
    """The default corpus: the standard library's own source, split by file."""
    val_fraction = _check_fraction(val_fraction)
    files = stdlib_files(root)
    source = f"Python {sysconfig.get_python_version()} stdlib ({root or stdlib_root()})"
    return _split_files(((rel, p.read_bytes()) for rel, p in files), val_fraction, source)


def load_file(path, val_fraction: float = 0.05) -> Corpus:
    """One text file, split by position (the last ``val_fraction`` is validation)."""
    path = Path(path)
    data = path.read_bytes()
    if len(data) == 0:
        raise ValueError(f"text file is empty: {path}")
    arr = np.frombuffer(data, dtype=np.uint8)
    n_val = max(1, int(len(arr) * val_fraction))
    digest = hashlib.sha256(b"\0" + hashlib.sha256(data).digest()).hexdigest()
    return Corpus(arr[:-n_val], arr[-n_val:], str(path), (0, 0), 0, digest)


# Archives are untrusted input: a 1 MB zip may expand to gigabytes. Members are streamed with
# these caps (declared sizes checked before reading, actual bytes counted while reading), and
# a binary member is recognised from its first bytes and skipped without reading the rest.
MAX_MEMBER = 128 << 20      # bytes of one text file in an archive
MAX_ARCHIVE = 1 << 30       # bytes of text in one archive
_CHUNK = 1 << 20


def _too_big(name: str, n: int, cap: int) -> ValueError:
    return ValueError(f"{name} holds {n:,} bytes of text, more than the {cap >> 20} MiB splitnet "
                      f"reads from one archive member; extract it and pass the file itself")


def _read_text(f, name: str, cap: int | None, declared: int = 0) -> bytes | None:
    """The bytes of the open binary file ``f`` when they are text (no NUL byte, valid UTF-8:
    :func:`is_text`, decided chunk by chunk), None as soon as they are not (a binary member
    costs one chunk, whatever its size). ``cap``: a ValueError naming ``name`` when the text
    grows beyond it, or as soon as its first chunk is text and its ``declared`` size is."""
    import codecs

    dec = codecs.getincrementaldecoder("utf-8")()
    chunks, n = [], 0
    while True:
        b = f.read(_CHUNK)
        if not b:
            break
        try:
            dec.decode(b)
        except UnicodeDecodeError:
            return None
        if b"\0" in b:
            return None
        n += len(b)
        if cap is not None and max(n, declared) > cap:
            raise _too_big(name, max(n, declared), cap)
        chunks.append(b)
    try:
        dec.decode(b"", final=True)
    except UnicodeDecodeError:
        return None
    return b"".join(chunks)


def _walk(items, source: str, val_fraction: float, caps: tuple | None = None) -> Corpus:
    """Text files among ``(relative path, opener, declared size)`` items (``opener()``: a binary
    file), binary ones counted and skipped. ``caps``: (per file, in all) for archives."""
    texts, skipped, total = [], 0, 0
    member_cap, total_cap = caps or (None, None)
    for rel, open_, size in sorted(items, key=lambda t: t[0]):
        name = f"{source}: {rel!r}"
        with open_() as f:
            b = _read_text(f, name, member_cap, size)
        if b is None:
            skipped += 1
            continue
        if len(b) == 0:
            continue
        total += len(b)
        if total_cap is not None and total > total_cap:
            raise ValueError(f"{source} holds more than {total_cap >> 30} GiB of text, the most "
                             f"splitnet reads from one archive; extract it and pass the folder")
        texts.append((rel, b))
    if not texts:
        raise ValueError(f"{source}: no text files in it ({skipped} binary files skipped)")
    return _split_files(texts, val_fraction, source, skipped)


def _excluded(p: Path, exclude) -> bool:
    return any(p == e or e in p.parents for e in exclude)


def _directory(root: Path, val_fraction: float, exclude=()) -> Corpus:
    exclude = [Path(e).resolve() for e in exclude]
    items = [(p.relative_to(root).as_posix(), lambda p=p: p.open("rb"), 0)
             for p in root.rglob("*")
             if p.is_file() and not any(part.startswith(".") for part in
                                         p.relative_to(root).parts)
             and not _excluded(p.resolve(), exclude)]
    return _walk(items, f"directory {root}", val_fraction)


def _archive(path: Path, val_fraction: float) -> Corpus:
    import lzma
    import tarfile
    import zipfile
    import zlib

    source = f"archive {path}"
    caps = (MAX_MEMBER, MAX_ARCHIVE)
    # what the standard library's readers raise for a corrupt, truncated, encrypted or
    # unsupported archive (CRC, deflate, gzip, xz, "password required", "compression method")
    corrupt = (tarfile.TarError, zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error,
               lzma.LZMAError, EOFError, OSError, RuntimeError, NotImplementedError)
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                items = [(i.filename, lambda i=i: z.open(i), i.file_size) for i in z.infolist()
                         if not i.is_dir()]
                return _walk(items, source, val_fraction, caps)
        with tarfile.open(path) as t:
            items = [(m.name, lambda m=m: t.extractfile(m), m.size) for m in t.getmembers()
                     if m.isfile()]
            return _walk(items, source, val_fraction, caps)
    except corrupt as e:
        msg = " ".join(str(e).split()) or type(e).__name__
        raise ValueError(f"{path} is not a readable .tar/.tar.gz/.tar.xz/.zip archive "
                         f"(corrupt, truncated, encrypted or an unsupported compression: "
                         f"{msg})") from None


def _glob(pattern: str, val_fraction: float, exclude=()) -> Corpus:
    import glob

    exclude = [Path(e).resolve() for e in exclude]
    paths = sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p)
                   and not _excluded(Path(p).resolve(), exclude))
    if not paths:
        raise ValueError(f"no file matches {pattern!r}")
    root = Path(os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in paths]))
    items = [(Path(os.path.abspath(p)).relative_to(root).as_posix(),
              lambda p=p: open(p, "rb"), 0) for p in paths]
    return _walk(items, f"files matching {pattern}", val_fraction)


ARCHIVES = (".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tar.xz", ".zip")


def load_text(text, val_fraction: float = 0.05, exclude=()) -> Corpus:
    """A user corpus: a file (split by position), a directory (every text file below it,
    recursively, split by file), a glob pattern, or a ``.tar(.gz)`` / ``.zip`` archive of text
    files (split by file; members streamed, at most :data:`MAX_MEMBER` bytes each and
    :data:`MAX_ARCHIVE` in all). Binary files are skipped and counted. ``exclude``: folders
    whose files are never part of the corpus (a run directory inside its own corpus folder)."""
    val_fraction = _check_fraction(val_fraction)
    s = str(text)
    if any(ch in s for ch in "*?[") and not os.path.exists(s):
        return _glob(s, val_fraction, exclude)
    path = Path(s)
    if not path.exists():
        raise ValueError(f"text not found: {path} (give a file, a directory, a glob pattern or "
                         f"an archive)")
    # the one rule for inputs (splitnet._io.input_kind): a FIFO or a device (/dev/zero) is
    # refused in one line, as every command does; the corpus is read again on --resume
    if input_kind(path, "text", folder=True) == "folder":
        return _directory(path, val_fraction, exclude)
    if s.lower().endswith(ARCHIVES):
        return _archive(path, val_fraction)
    return load_file(path, val_fraction)


def load_corpus(text=None, val_fraction: float = 0.05, exclude=()) -> Corpus:
    """``text`` (see :func:`load_text`), or the standard library when None."""
    return load_text(text, val_fraction, exclude) if text else load_stdlib(val_fraction)


def check_context(corpus: Corpus, context: int) -> None:
    """Every split must hold at least one window of ``context + 1`` bytes (inputs + targets)."""
    if isinstance(context, bool) or not isinstance(context, int) or context < 1:
        raise ValueError(f"context must be a positive int, got {context!r}")
    for name, arr in (("train", corpus.train), ("val", corpus.val)):
        if len(arr) < context + 1:
            raise ValueError(f"{name} split of {corpus.source} has {len(arr)} bytes, fewer than "
                             f"context + 1 = {context + 1}; use a longer text or a shorter "
                             f"--context")


def _windows(arr: np.ndarray, starts: torch.Tensor, context: int):
    idx = starts.numpy()[:, None] + np.arange(context + 1)[None, :]
    w = torch.from_numpy(arr[idx].astype(np.int64))       # (B, context + 1)
    return w[:, :-1].contiguous(), w[:, 1:].contiguous()


def step_generator(seed: int, step: int) -> torch.Generator:
    """The generator of step ``step``: seeded by (seed, step), independent of any history."""
    g = torch.Generator()
    g.manual_seed((int(seed) * 1_000_003 + int(step) * 7_919 + 12_345) % (2 ** 63 - 1))
    return g


def train_batch(corpus: Corpus, step: int, global_batch: int, context: int, seed: int,
                rank: int = 0, world_size: int = 1):
    """Inputs and targets ``(global_batch // world_size, context)`` of rank ``rank`` at ``step``.

    Every rank draws the whole global batch and keeps the contiguous block
    ``[r * b, (r + 1) * b)`` with ``b = global_batch / world_size``, so concatenating the ranks'
    blocks gives the single-process batch row for row."""
    if global_batch % world_size:
        raise ValueError(f"global batch {global_batch} is not divisible by world size "
                         f"{world_size}")
    n = len(corpus.train) - context
    starts = torch.randint(0, n, (global_batch,), generator=step_generator(seed, step))
    b = global_batch // world_size
    return _windows(corpus.train, starts[rank * b:(rank + 1) * b], context)


def val_starts(corpus: Corpus, n_windows: int, context: int, seed: int = 0) -> torch.Tensor:
    """Fixed validation windows (the same at every evaluation, so curves are not sampling noise):
    evenly spaced over the split when it is short, otherwise drawn once from ``seed``."""
    n = len(corpus.val) - context
    if n <= n_windows:
        return torch.arange(n)
    g = torch.Generator()
    g.manual_seed(10_007 + int(seed))
    return torch.randperm(n, generator=g)[:n_windows].sort().values


def val_batches(corpus: Corpus, starts: torch.Tensor, batch_size: int, context: int):
    """Yield (inputs, targets) over the fixed validation windows in chunks of ``batch_size``."""
    for i in range(0, len(starts), batch_size):
        yield _windows(corpus.val, starts[i:i + batch_size], context)


__all__ = [
    "ARCHIVES",
    "LN2",
    "MAX_ARCHIVE",
    "MAX_MEMBER",
    "VOCAB_SIZE",
    "Corpus",
    "check_context",
    "decode",
    "describe_fingerprint",
    "encode",
    "is_text",
    "is_val_file",
    "load_corpus",
    "load_file",
    "load_stdlib",
    "load_text",
    "same_content",
    "stdlib_files",
    "stdlib_root",
    "step_generator",
    "train_batch",
    "val_batches",
    "val_starts",
]
