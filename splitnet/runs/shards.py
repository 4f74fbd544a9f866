"""Sharded checkpoints: a sharded run's weights and optimiser state in
``torch.distributed.checkpoint`` files beside its ``checkpoint.pt``.

A run trained with ``--parallel fsdp`` saves every rank's shards at once into
``OUT/shards-<step>.tmp/`` (each rank writes its own file, nothing is gathered), renamed to
``OUT/shards-<step>/`` once every rank has written; then ``checkpoint.pt`` (written atomically, as
every checkpoint) names that folder under ``"shards"``, with empty ``"model"`` and
``"optimizer"`` entries, and the older folders are removed. A kill at any point leaves the
previous ``checkpoint.pt`` and the folder it names intact (a ``.tmp`` folder is a torn save,
removed at the next start); a full disk fails the save on every rank before anything is renamed.

:func:`expand` is what :func:`splitnet.runs.checkpoint.load` does with such a file: it reads the
shards back whole (``torch.distributed.checkpoint`` reshards on read, in one process, with no
process group), so every command reads a sharded checkpoint as any other and a run resumes
from it at any world size. The shards carry ``torch.distributed.checkpoint``'s own metadata,
not splitnet's per-tensor CRC digests (those cover ``checkpoint.pt``).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from pathlib import Path

PREFIX = "shards-"
TORN = ".tmp"
KEY = "shards"
FOLDER = "shards_folder"   # a lazily expanded checkpoint's shards folder (expand)


def folder_for(out, step: int, torn: bool = False) -> Path:
    """``OUT/shards-<step>`` (or its ``.tmp`` while being written)."""
    return Path(out) / f"{PREFIX}{step}{TORN if torn else ''}"


def publish(out, step: int) -> str:
    """Rename the written ``.tmp`` folder of ``step`` to its final name; its name to record."""
    final = folder_for(out, step)
    if final.exists():                 # a save of this step interrupted after its rename
        shutil.rmtree(final)
    folder_for(out, step, torn=True).rename(final)
    return final.name


def remove_others(out, keep: str | None) -> int:
    """Delete every shards folder of ``out`` but ``keep`` (older saves, torn ones)."""
    n = 0
    for p in Path(out).glob(f"{PREFIX}*"):
        if p.is_dir() and p.name != keep:
            shutil.rmtree(p, ignore_errors=True)
            n += 1
    return n


def expand(ck: dict, f, whole: bool = True) -> dict:
    """``ck`` with the model and optimiser state of the shards folder it names read back
    whole; a checkpoint without shards is returned as it is. ``whole=False`` (a sharded resume,
    which reads each rank's own chunks: :func:`splitnet.training.sharding.load_shards`) reads
    only the folder's metadata: the weights as meta tensors of their shapes (for the checks),
    no optimiser state, and the folder's path under :data:`FOLDER`. A missing or damaged folder
    is a one-line ValueError."""
    name = ck.get(KEY)
    if name is None:
        return ck
    if not isinstance(name, str) or not name.startswith(PREFIX) or "/" in name:
        raise ValueError(f"{f}: its 'shards' entry {name!r} is not a shards folder name (the "
                         f"file was edited or damaged)")
    folder = Path(f).parent / name
    if not folder.is_dir():
        raise ValueError(f"{f} names the sharded weights {folder}, which is missing: a "
                         f"sharded checkpoint needs its folder beside it")
    from torch.distributed.checkpoint.api import CheckpointException

    try:
        if not whole:
            return {**ck, "model": _shapes(folder), "optimizer": {"state": {}, "param_groups": []},
                    FOLDER: str(folder)}
        state = read_whole(folder)
    except (Exception, CheckpointException) as e:   # CheckpointException is a BaseException
        first = first_line(e)
        raise ValueError(f"{folder}: the sharded weights cannot be read ({first})") from None
    return {**ck, "model": state["model"], "optimizer": state.get("optimizer", {})}


def first_line(e: BaseException) -> str:
    """The first line of ``e``'s message; for a CheckpointException (one failure per rank), the
    first rank's own error."""
    failures = getattr(e, "failures", None)
    if isinstance(failures, dict) and failures:
        e = next(iter(failures.values()))           # (exception, traceback) of a rank
        e = e[0] if isinstance(e, tuple) else e
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


@contextlib.contextmanager
def quiet():
    """Logging silenced for the read: on a damaged folder torch.distributed.checkpoint logs its
    fallbacks with the whole traceback (on the root logger) before raising, and the raise is
    what a command turns into its one line."""
    before = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(before)


def read_whole(folder) -> dict:
    """The ``model`` and ``optimizer`` states of a shards folder, whole (resharded on read, in
    one process, with no process group)."""
    import warnings

    from torch.distributed.checkpoint.state_dict_loader import _load_state_dict_from_keys

    with warnings.catch_warnings(), quiet():   # "assuming the intent is to load in one process"
        warnings.simplefilter("ignore", UserWarning)
        return _load_state_dict_from_keys({"model", "optimizer"}, checkpoint_id=str(folder))


def _shapes(folder) -> dict:
    """The saved weights of a shards folder as meta tensors (shape and dtype, no data)."""
    import torch
    from torch.distributed.checkpoint import FileSystemReader

    with quiet():
        meta = FileSystemReader(str(folder)).read_metadata().state_dict_metadata
    return {k[len("model."):]: torch.empty(m.size, dtype=m.properties.dtype, device="meta")
            for k, m in meta.items() if k.startswith("model.") and hasattr(m, "size")}


__all__ = ["FOLDER", "KEY", "PREFIX", "TORN", "expand", "first_line", "folder_for", "publish",
           "quiet", "read_whole", "remove_others"]
