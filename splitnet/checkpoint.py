"""Checkpoints, metrics files and the lock on a run directory.

A run directory (``splitnet train --out DIR``) holds ``checkpoint.pt``, ``metrics.jsonl``,
``loss.png`` and ``.lock``.

* **Safe to open.** A checkpoint holds only tensors and plain data (numbers, strings, lists,
  dicts; the model config as :meth:`~splitnet.config.SplitConfig.to_dict`, RNG states as tensors
  and lists) and is always read with ``torch.load(weights_only=True)``: opening a checkpoint
  someone sent you cannot run code. A file that needs more (the pickled objects of splitnet 0.1,
  or anything crafted) is refused unless the caller passes ``trust=True``
  (``--trust-checkpoint``).
* **Never half written.** :func:`save` writes a temporary file, fsyncs it and renames it over the
  old one (:mod:`splitnet._io`).
* **One writer.** :class:`RunLock` holds an exclusive ``flock`` on ``DIR/.lock`` for the life of
  a run and records its pid, host and start time there; a second trainer on the same directory is
  refused with a line naming the first. The kernel drops the lock when its process dies, even by
  ``kill -9``, so a stale lock file is simply taken over.
"""

from __future__ import annotations

import datetime
import json
import os
import pickle
import socket
import sys
from pathlib import Path

import torch

from ._io import atomic_write, atomic_write_text, remove_stale_temporaries

CKPT, METRICS, PLOT, LOCK = "checkpoint.pt", "metrics.jsonl", "loss.png", ".lock"
VERSION = 2
_TRUST_HINT = ("if you trust where it came from, pass --trust-checkpoint (Python: trust=True) "
               "to load it anyway; the next save writes the safe format")


def checkpoint_file(path) -> Path:
    """``DIR/checkpoint.pt`` for a run directory, or the file itself."""
    p = Path(path)
    return p if p.is_file() or (p.suffix == ".pt" and not p.is_dir()) else p / CKPT


def save(obj: dict, path) -> Path:
    """``torch.save`` atomically (temporary file, fsync, rename)."""
    return atomic_write(path, lambda f: torch.save(obj, f))


def remove_torn_saves(folder) -> int:
    """Delete temporary files that a kill during :func:`save` left in ``folder``."""
    return remove_stale_temporaries(folder, CKPT)


def load(path, trust: bool = False) -> dict:
    """The checkpoint dict at ``path`` (a run directory or the file), read with
    ``weights_only=True``. Every problem is a one-line ``ValueError``: missing file, unreadable
    file, a file that needs code to load (unless ``trust``), a dict without a model."""
    f = checkpoint_file(path)
    if not f.is_file():
        raise ValueError(f"no checkpoint at {f} (a run directory of 'splitnet train --out DIR' "
                         f"holds one)")
    try:
        ck = torch.load(f, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        if "unsupported global" not in str(e).lower():
            raise ValueError(f"{f} is not a readable checkpoint (not a torch.save file, or "
                             f"cut short)") from None
        if not trust:
            raise ValueError(f"{f} holds Python objects beyond tensors and plain data (an old "
                             f"splitnet format, or crafted): loading it could run code; "
                             f"{_TRUST_HINT}") from None
        ck = _load_trusted(f)
    except Exception as e:
        raise ValueError(f"{f} is not a readable checkpoint ({_first_line(e)})") from None
    if not isinstance(ck, dict) or "model" not in ck or "model_config" not in ck:
        raise ValueError(f"{f} is not a splitnet checkpoint (no model and model_config in it)")
    return _upgrade(ck, f)


def _load_trusted(f: Path) -> dict:
    try:
        return torch.load(f, map_location="cpu", weights_only=False)
    except Exception as e:
        raise ValueError(f"{f} is not a readable checkpoint ({_first_line(e)})") from None


def _upgrade(ck: dict, f: Path) -> dict:
    """A version-1 checkpoint (loaded with trust) in the version-2 layout."""
    if ck.get("version") == VERSION:
        return ck
    if ck.get("version") != 1:
        raise ValueError(f"{f}: unknown checkpoint version {ck.get('version')!r} (this splitnet "
                         f"reads {VERSION})")
    ck = dict(ck)
    cfg = ck["model_config"]
    if isinstance(cfg, dict):
        cfg = dict(cfg)
        if isinstance(cfg.get("gate_layers"), tuple):
            cfg["gate_layers"] = list(cfg["gate_layers"])
        ck["model_config"] = cfg
    ck["rng"] = plain_rng_state(ck.get("rng") or {})
    ck["version"] = VERSION
    return ck


def _first_line(e: Exception) -> str:
    s = str(e).strip().splitlines()
    return f"{type(e).__name__}: {s[0]}" if s else type(e).__name__


def model_from_state(state: dict, path):
    """The :class:`~splitnet.models.SplitTransformer` of a loaded checkpoint ``state`` (read from
    ``path``, named in the error when its weights do not fit its config)."""
    from .models import SplitTransformer

    try:
        model = SplitTransformer.from_config(state["model_config"])
        model.load_state_dict(state["model"])
    except (RuntimeError, KeyError, TypeError) as e:
        raise ValueError(f"{checkpoint_file(path)}: the weights do not fit the model its config "
                         f"describes ({_first_line(e)})") from None
    return model


def load_model(path, trust: bool = False, map_location="cpu"):
    """The trained :class:`~splitnet.models.SplitTransformer` of a checkpoint, in eval mode."""
    return model_from_state(load(path, trust=trust), path).to(map_location).eval()


# ---------------------------------------------------------------------------------------------
# RNG states as plain data


def plain_rng_state(st: dict) -> dict:
    """RNG states as tensors and lists (loadable with ``weights_only=True``)."""
    import numpy as np

    out = {}
    if "python" in st:
        v, state, gauss = st["python"]
        out["python"] = [int(v), [int(x) for x in state], gauss]
    if "numpy" in st:
        name, keys, pos, has_gauss, cached = st["numpy"]
        out["numpy"] = [str(name), torch.as_tensor(np.asarray(keys, dtype=np.int64)), int(pos),
                        int(has_gauss), float(cached)]
    if "torch" in st:
        out["torch"] = st["torch"]
    if "cuda" in st:
        out["cuda"] = list(st["cuda"])
    return out


def rng_state(device) -> dict:
    """python, numpy, torch (and cuda) RNG states, as plain data."""
    import random

    import numpy as np

    st = {"python": random.getstate(), "numpy": np.random.get_state(),
          "torch": torch.get_rng_state()}
    if device.type == "cuda":
        st["cuda"] = torch.cuda.get_rng_state_all()
    return plain_rng_state(st)


def set_rng_state(st: dict, device) -> None:
    import random

    import numpy as np

    v, state, gauss = st["python"]
    random.setstate((v, tuple(state), gauss))
    name, keys, pos, has_gauss, cached = st["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(st["torch"])
    if device.type == "cuda" and "cuda" in st:
        try:
            torch.cuda.set_rng_state_all(st["cuda"])
        except (RuntimeError, IndexError):  # different GPU count: weights and data still exact
            pass


# ---------------------------------------------------------------------------------------------
# metrics.jsonl


def read_metrics(path) -> list[dict]:
    """The records of a metrics.jsonl file (a torn last line is skipped)."""
    out = []
    for line in Path(path).read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def truncate_metrics(path, step: int) -> int:
    """Keep the lines of ``path`` with ``step <= step`` (drop later ones and any torn last
    line); rewritten atomically. Returns the number of lines kept."""
    path = Path(path)
    if not path.exists():
        return 0
    kept = [r for r in read_metrics(path) if isinstance(r.get("step"), int) and r["step"] <= step]
    atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in kept))
    return len(kept)


# ---------------------------------------------------------------------------------------------
# the run directory


class RunLocked(ValueError):
    """Another process holds the run directory."""


class RunLock:
    """Exclusive lock on a run directory for the life of one run (see the module docstring).
    Use as a context manager; :meth:`acquire` raises :class:`RunLocked` naming the holder."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.path = self.folder / LOCK
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        import fcntl

        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise RunLocked(f"{self.folder} is in use by another splitnet train ({holder}); wait "
                            f"for it to finish, stop it, or choose another --out") from None
        info = {"pid": os.getpid(), "host": socket.gethostname(),
                "started": datetime.datetime.now().isoformat(timespec="seconds"),
                "argv": sys.argv}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        self._fd = fd
        return self

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


def move_aside(folder) -> Path | None:
    """Move the state of an earlier run in ``folder`` (checkpoint, metrics, plot) into
    ``folder/previous/`` (replacing an older one), so ``--overwrite`` leaves nothing that
    ``--resume`` could pick up. Returns the new location, or None if there was nothing."""
    folder = Path(folder)
    names = [n for n in (CKPT, METRICS, PLOT) if (folder / n).exists()]
    if not names:
        return None
    prev = folder / "previous"
    if prev.exists():
        import shutil

        shutil.rmtree(prev)
    prev.mkdir()
    for n in (CKPT, METRICS, PLOT):   # the checkpoint first: after it, --resume finds nothing
        if n in names:
            os.replace(folder / n, prev / n)
    return prev


__all__ = ["CKPT", "LOCK", "METRICS", "PLOT", "VERSION", "RunLock", "RunLocked",
           "checkpoint_file", "load", "load_model", "model_from_state", "move_aside",
           "plain_rng_state", "read_metrics", "remove_torn_saves", "rng_state", "save",
           "set_rng_state", "truncate_metrics"]
