"""Checkpoints and metrics files of a run directory.

A run directory (``splitnet train --out DIR``) holds ``checkpoint.pt``, ``metrics.jsonl``,
``loss.png`` and ``.lock``.

* **Safe to open.** A checkpoint holds only tensors and plain data (numbers, strings, lists,
  dicts; the model config as :meth:`~splitnet.configs.config.SplitConfig.to_dict`, RNG states as
  tensors
  and lists) and is always read with ``torch.load(weights_only=True)``: opening a checkpoint
  someone sent you cannot run code. A file that needs more (the pickled objects of splitnet 0.1,
  or anything crafted) is refused unless the caller passes ``trust=True``
  (``--trust-checkpoint``).
* **Never half written.** :func:`save` writes a temporary file, fsyncs it and renames it over the
  old one (:mod:`splitnet._io`).
* **Checked when read.** :func:`save` stores a CRC-32 of every tensor it writes (its bytes, dtype
  and shape; entry ``"digests"``) and :func:`load` recomputes them: a flipped bit anywhere in the
  weights, the optimiser state or the RNG states is a one-line ``ValueError`` naming the tensor,
  never garbage output or a resume that trains on. (A digest against damage, not against an
  editor: whoever can rewrite the file can rewrite its digests; what a file may *run* is the
  separate ``trust`` question.) Files written before the digests existed load as before.
* **Unreadable files said so.** An empty, cut-short, non-torch or otherwise damaged file, a
  folder or a device in its place: one line saying which, never a bare exception name.
* **One writer**, and earlier runs kept: :mod:`splitnet.runs.lock`.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import shutil
from pathlib import Path

import torch

from .._io import atomic_write, atomic_write_text, file_kind, remove_stale_temporaries
from ..configs import stacks as _stacks
from .integrity import DIGESTS, check_records, digest_record, verify_digests, why_unreadable
from .shards import PREFIX as SHARDS_PREFIX
from .shards import TORN, expand

CKPT, METRICS, PLOT, LOCK = "checkpoint.pt", "metrics.jsonl", "loss.png", ".lock"
VERSION = 2
_TRUST_HINT = ("if you trust where it came from, pass --trust-checkpoint (Python: trust=True) "
               "to load it anyway; the next save writes the safe format")


def checkpoint_file(path) -> Path:
    """``DIR/checkpoint.pt`` for a run directory, or the file itself."""
    p = Path(path)
    return p if p.is_file() or (p.suffix == ".pt" and not p.is_dir()) else p / CKPT


def run_files(path) -> list[tuple[str, Path]]:
    """``(what, path)`` of every file of the run a command reads at ``path`` (its folder or
    checkpoint file): the checkpoint, metrics, plot, lock and shards folders. What an output
    option must never be written over (:func:`splitnet._io.check_not_inputs`)."""
    from .shards import PREFIX as SHARDS

    f = checkpoint_file(path)
    out = [("the checkpoint", f)]
    # the folder the path names and, through a link, the folder the checkpoint really is in
    for folder in dict.fromkeys((f.parent, Path(os.path.realpath(f)).parent)):
        out += [(f"the run's {n}", folder / n) for n in (METRICS, PLOT, LOCK) if n != f.name]
        out += [("the run's shards folder", p) for p in sorted(folder.glob(f"{SHARDS}*"))
                if p.is_dir()]
    return out


def save(obj: dict, path) -> Path:
    """``torch.save`` atomically (temporary file, fsync, rename), with the digest of every
    tensor in ``obj`` under ``"digests"`` (see :func:`digest_record`)."""
    if isinstance(obj, dict):
        obj = {**{k: v for k, v in obj.items() if k != DIGESTS}, DIGESTS: digest_record(obj)}
    return atomic_write(path, lambda f: torch.save(obj, f))


def remove_torn_saves(folder) -> int:
    """Delete temporary files that a kill during :func:`save` left in ``folder``, and shards
    folders a kill left half written (:mod:`splitnet.runs.shards`)."""
    torn = [p for p in Path(folder).glob(f"{SHARDS_PREFIX}*{TORN}") if p.is_dir()]
    for p in torn:
        shutil.rmtree(p, ignore_errors=True)
    return remove_stale_temporaries(folder, CKPT) + len(torn)


def load(path, trust: bool = False, whole: bool = True) -> dict:
    """The checkpoint dict at ``path`` (a run directory or the file), read with
    ``weights_only=True`` and its tensors checked against their digests (:func:`verify_digests`);
    a sharded run's weights read whole, or with ``whole=False`` only their shapes
    (:func:`splitnet.runs.shards.expand`).
    Every problem is a one-line ``ValueError``: missing file, unreadable or damaged file (saying
    how: empty, cut short, not a torch.save file, a record that fails its CRC, ...), a file that
    needs code to load (unless ``trust``), a dict without a model, a tensor that changed."""
    f = _existing_checkpoint(path)
    try:
        ck = torch.load(f, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        if "unsupported global" not in str(e).lower():
            raise ValueError(f"{f} is not a readable checkpoint: {why_unreadable(f, e)}") \
                from None
        if not trust:
            raise ValueError(f"{f} holds Python objects beyond tensors and plain data (an old "
                             f"splitnet format, or crafted): loading it could run code; "
                             f"{_TRUST_HINT}") from None
        ck = _load_trusted(f)
    except Exception as e:
        raise ValueError(f"{f} is not a readable checkpoint: {why_unreadable(f, e)}") from None
    if not isinstance(ck, dict) or "model" not in ck or "model_config" not in ck:
        raise ValueError(f"{f} is not a splitnet checkpoint (no model and model_config in it)")
    check_records(f)
    ck = expand(verify_digests(_upgrade(ck, f), f), f, whole)   # a sharded run's weights
    _check_model_entries(ck, f)
    return ck


def _existing_checkpoint(path) -> Path:
    """The checkpoint file of ``path``, which must be a regular file: a folder, a device or a
    FIFO in its place is a ValueError saying so (a FIFO would block the read forever)."""
    f = Path(path)
    if not f.is_dir() and f.exists():
        f = f if file_kind(f) is not None else checkpoint_file(f)
    else:
        f = checkpoint_file(f)
    try:
        kind = file_kind(f)
    except OSError as e:
        raise ValueError(f"{f}: {e.strerror}") from None
    if kind is not None:
        raise ValueError(f"{f} is not a readable checkpoint: it is {kind}, not a file written "
                         f"by 'splitnet train'")
    if not f.exists():
        raise ValueError(f"no checkpoint at {f} (a run directory of 'splitnet train --out DIR' "
                         f"holds one)")
    return f


def _bad(f: Path, what: str) -> ValueError:
    return ValueError(f"{f}: {what} (the file was edited or damaged; it is not used)")


def _check_model_entries(ck: dict, f: Path) -> None:
    """The model part of a loaded checkpoint, checked before anything is built from it: the
    weights a dict of names to tensors that own their storage (a tensor expanded from one
    element would let a tiny file describe gigabytes), the config a dict."""
    weights = ck["model"]
    if not isinstance(weights, dict):
        raise _bad(f, f"'model' must be a dict of tensors, got {type(weights).__name__}")
    for k, t in weights.items():
        if not isinstance(k, str) or not isinstance(t, torch.Tensor):
            raise _bad(f, f"'model' entry {k!r} is {type(t).__name__}, not a tensor")
        if t.numel() and t.untyped_storage().nbytes() < t.numel() * t.element_size():
            raise _bad(f, f"'model' entry {k!r} of shape {tuple(t.shape)} is backed by "
                          f"{t.untyped_storage().nbytes()} bytes")
    if not isinstance(ck["model_config"], dict):
        raise _bad(f, f"'model_config' must be a dict, got {type(ck['model_config']).__name__}")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _rng_problem(rng) -> str | None:
    """What is wrong with the RNG states of a checkpoint (the layout of
    :func:`plain_rng_state`), or None."""
    if not isinstance(rng, dict):
        return f"'rng' must be a dict, got {type(rng).__name__}"
    py, np_, tr = rng.get("python"), rng.get("numpy"), rng.get("torch")
    if not (isinstance(py, (list, tuple)) and len(py) == 3 and _is_int(py[0])
            and isinstance(py[1], (list, tuple)) and len(py[1]) == 625
            and all(_is_int(x) and 0 <= x < 2**32 for x in py[1][:624]) and _is_int(py[1][624])
            and (py[2] is None or isinstance(py[2], float))):
        return "'rng' has no valid Python random state"
    if not (isinstance(np_, (list, tuple)) and len(np_) == 5 and isinstance(np_[0], str)
            and isinstance(np_[1], torch.Tensor) and tuple(np_[1].shape) == (624,)
            and _is_int(np_[2]) and 0 <= np_[2] <= 624 and _is_int(np_[3])
            and isinstance(np_[4], (int, float))):
        return "'rng' has no valid numpy random state"
    if not (isinstance(tr, torch.Tensor) and tr.dtype == torch.uint8 and tr.dim() == 1):
        return "'rng' has no valid torch random state"
    return None


def check_training_state(ck: dict, path) -> None:
    """Everything ``--resume`` reads from a checkpoint, checked before it is used (a missing
    key or a value of the wrong type is a ValueError naming the file and the entry, never a
    KeyError halfway through restoring)."""
    f = checkpoint_file(path)
    missing = [k for k in ("step", "train_config", "optimizer", "scheduler", "rng") if k not in ck]
    if missing:
        raise _bad(f, f"it has no {', '.join(map(repr, missing))}")
    step = ck.get("step")
    if not _is_int(step) or step < 0:
        raise _bad(f, f"'step' must be an int >= 0, got {step!r}")
    for key in ("train_config", "optimizer", "scheduler"):
        if not isinstance(ck.get(key), dict):
            raise _bad(f, f"{key!r} must be a dict, got {type(ck.get(key)).__name__}")
    opt = ck["optimizer"]
    if not isinstance(opt.get("state"), dict) or not isinstance(opt.get("param_groups"), list) \
            or not all(isinstance(g, dict) and isinstance(g.get("params"), list)
                       for g in opt["param_groups"]):
        raise _bad(f, "'optimizer' is not an optimiser state (state, param_groups)")
    problem = _rng_problem(ck.get("rng"))
    if problem:
        raise _bad(f, problem)
    if ck.get("corpus") is not None and not isinstance(ck["corpus"], dict):
        raise _bad(f, f"'corpus' must be a dict, got {type(ck['corpus']).__name__}")


def _load_trusted(f: Path) -> dict:
    try:
        return torch.load(f, map_location="cpu", weights_only=False)
    except Exception as e:
        raise ValueError(f"{f} is not a readable checkpoint: {why_unreadable(f, e)}") from None


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


# what a checkpoint's "model_kind" says it holds (absent: "lm"): the registered network kinds
# (splitnet.configs.stacks.NETWORKS, the one registry of them)
MODEL_KINDS = _stacks.NETWORKS


def model_kind(model) -> str:
    """The network kind of ``model`` (``"lm"``, ``"seq2seq"``, ...): what a checkpoint stores as
    ``model_kind`` so that :func:`model_from_state` rebuilds the class."""
    return _stacks.kind_of(model)


def model_classes(state: dict, f) -> tuple:
    """(config class, model class) of a loaded checkpoint (``model_kind``, default lm)."""
    kind = state.get("model_kind", "lm")
    if kind not in MODEL_KINDS:
        raise _bad(Path(f), f"unknown model_kind {kind!r} (this splitnet reads "
                            f"{', '.join(MODEL_KINDS)})")
    kind = MODEL_KINDS[kind]
    return kind.config_class(), kind.network_class()


def check_weights(state: dict, path):
    """The config (:class:`~splitnet.configs.config.SplitConfig`, or a
    :class:`~splitnet.configs.seq2seq.Seq2SeqConfig` for ``model_kind`` seq2seq) of a loaded
    checkpoint ``state``, once its weights are known to fit it: the model is built on the meta
    device (no memory) and every weight's name and shape compared, and the parameters must fit
    in free memory. A mismatch is a ValueError naming the file and the first weight that
    differs, before anything is allocated."""
    from ..runenv import require_memory

    f = checkpoint_file(path)
    config_cls, model_cls = model_classes(state, f)
    try:
        cfg = config_cls.from_dict(state["model_config"])
    except (ValueError, TypeError) as e:
        raise _bad(f, f"its model config is not valid ({_first_line(e)})") from None
    with torch.device("meta"):
        shapes = {k: tuple(v.shape) for k, v in model_cls.from_config(cfg)
                  .state_dict().items()}
    weights = state["model"]
    problem = next((f"no weights for {k!r}" for k in shapes if k not in weights), None) or \
        next((f"unexpected weights {k!r}" for k in weights if k not in shapes), None) or \
        next((f"{k!r} has shape {tuple(weights[k].shape)}, the config needs {shp}"
              for k, shp in shapes.items() if tuple(weights[k].shape) != shp), None)
    if problem:
        raise ValueError(f"{f}: the weights do not fit the model its config describes "
                         f"({problem})")
    n = sum(math.prod(s) for s in shapes.values())
    require_memory(8.0 * n, f"the model of {f} ({n:,} parameters)", "use a machine with more "
                   "memory")
    return cfg


def model_from_state(state: dict, path):
    """The :class:`~splitnet.nets.models.SplitTransformer` (or ``SplitSeq2Seq``, by ``model_kind``)
    of a loaded checkpoint ``state`` (read from ``path``), built only after
    :func:`check_weights` found that its weights fit its config (a file whose config describes
    gigabytes that it does not hold allocates nothing)."""
    cfg = check_weights(state, path)
    try:
        model = model_classes(state, checkpoint_file(path))[1].from_config(cfg)
        model.load_state_dict(state["model"])
    except (RuntimeError, KeyError, TypeError) as e:
        raise ValueError(f"{checkpoint_file(path)}: the weights do not fit the model its config "
                         f"describes ({_first_line(e)})") from None
    return model


def load_model(path, trust: bool = False, map_location="cpu"):
    """The trained :class:`~splitnet.nets.models.SplitTransformer` of a checkpoint, in eval mode."""
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
    """The records of a metrics.jsonl file (a torn last line, or any line that is not a JSON
    object, e.g. bytes that are not UTF-8, is skipped). A folder or a device in its place is a
    ValueError saying so."""
    kind = file_kind(path)
    if kind is not None:
        raise ValueError(f"{path} is {kind}, not a metrics file (splitnet train writes one "
                         f"JSON record per line there)")
    out = []
    for line in Path(path).read_bytes().decode("utf-8", errors="replace").splitlines():
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


__all__ = ["CKPT", "LOCK", "METRICS", "MODEL_KINDS", "PLOT", "VERSION", "check_training_state",
           "check_weights", "checkpoint_file", "load", "load_model", "model_classes",
           "model_from_state", "model_kind", "plain_rng_state", "read_metrics",
           "remove_torn_saves", "rng_state", "run_files", "save", "set_rng_state",
           "truncate_metrics"]
