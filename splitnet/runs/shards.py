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
from it at any world size. ``checkpoint.pt`` also records the CRC-32 of every chunk the folder
stores (:func:`digests`, under ``"shard_digests"``: rank 0 reads the bytes as written, nothing is
gathered), and every reader checks them first (:func:`check_digests`): a flipped bit in a shard
is a one-line error naming the weight or optimiser entry, as in a single-file checkpoint.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import zlib
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
        check_digests(folder, ck.get(DIGESTS))
        if not whole:
            return {**ck, "model": _shapes(folder), "optimizer": {"state": {}, "param_groups": []},
                    FOLDER: str(folder)}
        state = read_whole(folder)
    except ValueError as e:
        if str(e).startswith(str(folder)):            # check_digests's own line
            raise
        raise ValueError(f"{folder}: the sharded weights cannot be read ({first_line(e)})") \
            from None
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


DIGESTS = "shard_digests"   # checkpoint.pt's record of the CRC-32 of every stored item
_MAP = ".metadata"           # torch.distributed.checkpoint's storage map, digested first
_BLOCK = 1 << 24


def _crc(path: Path, offset: int = 0, length: int | None = None) -> int:
    """CRC-32 of ``length`` bytes of ``path`` from ``offset`` (to the end: None), in blocks."""
    crc, left = 0, length
    with open(path, "rb") as fh:
        fh.seek(offset)
        while left is None or left > 0:
            chunk = fh.read(_BLOCK if left is None else min(_BLOCK, left))
            if not chunk:
                break
            crc = zlib.crc32(chunk, crc)
            left = None if left is None else left - len(chunk)
    return crc


def _items(folder: Path):
    """``(name, file, offset, length)`` of every item the folder stores (a rank's chunk of a
    weight or of an optimiser entry), from the storage map."""
    from torch.distributed.checkpoint import FileSystemReader

    with quiet():
        storage = FileSystemReader(str(folder)).read_metadata().storage_data
    for idx, info in storage.items():
        at = "" if idx.offset is None else "@" + ",".join(str(o) for o in idx.offset)
        yield f"{idx.fqn}{at}", info.relative_path, info.offset, info.length


def digests(folder) -> dict[str, int]:
    """CRC-32 of the storage map and of every item a shards folder stores, by name
    (``fqn@offsets``): what ``checkpoint.pt`` records of its sharded weights, written by rank 0
    once every rank has saved. Each is computed from the bytes as stored, so no weight is
    gathered (rank 0 reads each file once)."""
    folder = Path(folder)
    out = {_MAP: _crc(folder / _MAP)}
    out.update((name, _crc(folder / rel, off, n)) for name, rel, off, n in _items(folder))
    return out


def check_digests(folder, recorded: dict | None) -> None:
    """Every item of the shards folder against the digests ``checkpoint.pt`` recorded (none
    recorded, a checkpoint of before them: nothing to check). A mismatch, a missing item or an
    extra one is a one-line ValueError naming the weight or optimiser entry and its file."""
    if not recorded:
        return
    folder = Path(folder)
    if _crc(folder / _MAP) != recorded.get(_MAP):
        raise ValueError(f"{folder / _MAP}: the shards' storage map does not match its digest "
                         f"(changed or damaged after it was written)")
    seen = set()
    for name, rel, off, n in _items(folder):
        seen.add(name)
        if _crc(folder / rel, off, n) != recorded.get(name):
            raise ValueError(f"{folder}: {name} (in {rel}) does not match its digest: the "
                             f"sharded weights were changed or damaged after they were written")
    missing = sorted(set(recorded) - seen - {_MAP})
    if missing:
        raise ValueError(f"{folder}: {missing[0]} is recorded but not stored (the folder is "
                         f"not the one its checkpoint names)")


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


__all__ = ["DIGESTS", "FOLDER", "KEY", "PREFIX", "TORN", "check_digests", "digests", "expand",
           "first_line", "folder_for", "publish", "quiet", "read_whole", "remove_others"]
