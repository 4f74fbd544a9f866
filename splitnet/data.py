"""Byte-level data for language modelling: corpus, split, and a resumable batch sequence.

Tokenizer: the identity on bytes, so the vocabulary is 256 and the loss in nats per token
converts to bits per byte as ``bpb = loss / ln 2``.

Default corpus: the ``.py`` files of the running Python's standard library (found through
``sysconfig``), read in sorted order of their path relative to the library root. A file belongs
to the validation split when ``sha256(relative path) mod 1000 < 1000 * val_fraction``: the rule
depends only on the relative path, so the same file lands on the same side on every machine
(the files themselves differ between Python versions). A user corpus (``--text FILE``) is split
by position: the last ``val_fraction`` of the bytes is validation.

Batches: the training windows of step ``s`` are drawn by a generator seeded with ``(seed, s)``,
so the whole batch sequence is a pure function of the step counter. Resuming at step ``s`` needs
no sampler state, and every rank of a distributed run can draw the same global batch and keep
its own slice (``rank``/``world_size``), which makes a run on N processes see exactly the
windows a single process would.
"""

from __future__ import annotations

import hashlib
import math
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

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
    h = int.from_bytes(hashlib.sha256(rel_path.encode("utf-8")).digest()[:8], "big")
    return (h % 1000) < round(1000 * val_fraction)


def _check_fraction(val_fraction: float) -> float:
    if not isinstance(val_fraction, (int, float)) or not 0.0 < float(val_fraction) < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction!r}")
    return float(val_fraction)


@dataclass
class Corpus:
    """Token arrays of the two splits (uint8 numpy) and where they came from."""

    train: np.ndarray
    val: np.ndarray
    source: str
    n_files: tuple[int, int] | None = None   # (train, val) files for the stdlib corpus

    def describe(self) -> str:
        files = (f", {self.n_files[0]} + {self.n_files[1]} files" if self.n_files else "")
        return (f"{self.source}: {len(self.train):,} train / {len(self.val):,} val bytes{files}")


def load_stdlib(val_fraction: float = 0.05, root: Path | None = None) -> Corpus:
    """The default corpus: the standard library's own source, split by file."""
    val_fraction = _check_fraction(val_fraction)
    files = stdlib_files(root)
    tr, va, ntr, nva = [], [], 0, 0
    for rel, p in files:
        b = p.read_bytes()
        if is_val_file(rel, val_fraction):
            va.append(b)
            nva += 1
        else:
            tr.append(b)
            ntr += 1
    train = np.frombuffer(b"".join(tr), dtype=np.uint8)
    val = np.frombuffer(b"".join(va), dtype=np.uint8)
    if len(train) == 0 or len(val) == 0:
        raise ValueError(f"standard library corpus under {root or stdlib_root()} is empty or has "
                         f"an empty split ({ntr} train / {nva} val files)")
    return Corpus(train, val, f"Python {sysconfig.get_python_version()} stdlib "
                              f"({root or stdlib_root()})", (ntr, nva))


def load_text(path, val_fraction: float = 0.05) -> Corpus:
    """A user corpus from one file, split by position (last ``val_fraction`` = validation)."""
    val_fraction = _check_fraction(val_fraction)
    path = Path(path)
    if not path.exists():
        raise ValueError(f"text file not found: {path}")
    if not path.is_file():
        raise ValueError(f"text path is not a file: {path}")
    data = np.frombuffer(path.read_bytes(), dtype=np.uint8)
    if len(data) == 0:
        raise ValueError(f"text file is empty: {path}")
    n_val = max(1, int(len(data) * val_fraction))
    return Corpus(data[:-n_val], data[-n_val:], str(path))


def load_corpus(text=None, val_fraction: float = 0.05) -> Corpus:
    return load_text(text, val_fraction) if text else load_stdlib(val_fraction)


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

