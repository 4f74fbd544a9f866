"""What the trainer checks of a task's answers, so that a user's task that hands it the wrong
thing fails in words (``task 'NAME': batch() returned ...``), before step 1 where it can, and
never as torch's internals or a silently wrong number:

* :func:`check_fingerprint` -- ``corpus.fingerprint()`` is plain data (dicts, lists, strings,
  finite numbers, bools, None), so the checkpoint stores it and ``--resume`` compares it;
* :func:`check_batch` -- ``batch()`` returned ``(tensors, tokens)``: a list of tensors with this
  rank's rows of the step, and a count of tokens that is a whole number >= 0;
* :func:`fits_loss` -- the first micro-batch is one the task's loss module takes (its arity,
  its targets in range: the loss's own error, said as the task's);
* :func:`check_held_out` -- ``held_out()`` returned ``(finite loss, dict of numbers)``.

Pure Python at import; torch is imported by the checks that look at tensors.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import numbers


def _plain(x, where: str = "") -> str | None:
    """Where in ``x`` something is not plain data, or None."""
    if x is None or isinstance(x, (str, bool)):
        return None
    if isinstance(x, numbers.Number) and type(x).__module__ == "builtins":
        return None if not isinstance(x, float) or math.isfinite(x) else f"{where or 'it'} " \
            f"is {x!r}"
    if isinstance(x, dict):
        for k, v in x.items():
            if not isinstance(k, str):
                return f"{where or 'it'} has the key {k!r} (keys must be strings)"
            bad = _plain(v, f"{where}[{k!r}]")
            if bad:
                return bad
        return None
    if isinstance(x, (list, tuple)):
        return next((b for i, v in enumerate(x) if (b := _plain(v, f"{where}[{i}]"))), None)
    return f"{where or 'it'} is a {type(x).__module__}.{type(x).__name__}"


def check_fingerprint(task, corpus) -> dict:
    """``corpus.fingerprint()``, checked to be plain data (it is stored in the checkpoint and
    compared on ``--resume``); a ValueError naming the task and the first bad entry."""
    fp = getattr(corpus, "fingerprint", None)
    if not callable(fp):
        raise ValueError(f"task {task.name!r}: corpus() returned a "
                         f"{type(corpus).__name__} without fingerprint()")
    value = fp()
    if not isinstance(value, dict):
        raise ValueError(f"task {task.name!r}: corpus().fingerprint() must be a dict of plain "
                         f"data, got a {type(value).__name__}")
    bad = _plain(value)
    if bad:
        raise ValueError(f"task {task.name!r}: corpus().fingerprint() must be plain data "
                         f"(dicts, lists, strings, finite numbers): {bad}")
    return value


def _count(tokens) -> int | None:
    """``tokens`` as an int when it is a whole number >= 0 (an int, or a 0-d integer tensor)."""
    if hasattr(tokens, "dim") and tokens.dim() == 0 and not tokens.is_floating_point():
        tokens = int(tokens)
    if isinstance(tokens, numbers.Integral) and not isinstance(tokens, bool) and tokens >= 0:
        return int(tokens)
    return None


def check_batch(task, out, step: int, rows: int, accum: int) -> tuple[list, int]:
    """``batch()``'s answer ``out`` for optimiser step ``step``: ``(tensors, tokens)`` with
    every tensor holding this rank's ``rows`` rows (split into ``accum`` micro-batches) and
    ``tokens`` a whole number >= 0; a ValueError ``task 'NAME': batch() returned ...``."""
    import torch

    def bad(what: str):
        return ValueError(f"task {task.name!r}: batch() returned {what} at step {step}; it "
                          f"returns ([tensors], tokens), each tensor this rank's {rows} rows")

    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise bad(f"a {type(out).__name__}" + (f" of {len(out)} items" if isinstance(
            out, (tuple, list)) else ""))
    batch, tokens = out
    if not isinstance(batch, (list, tuple)) or not batch:
        raise bad(f"{type(batch).__name__} as its tensors")
    for i, t in enumerate(batch):
        if not isinstance(t, torch.Tensor):
            raise bad(f"a {type(t).__name__} as tensor {i}")
        if t.dim() == 0 or t.shape[0] != rows:
            raise bad(f"tensor {i} of shape {tuple(t.shape)}")
    if rows % accum:
        raise bad(f"{rows} rows, which --grad-accum {accum} does not divide")
    n = _count(tokens)
    if n is None:
        raise bad(f"{tokens!r} as its token count (a whole number >= 0)")
    return list(batch), n


@contextlib.contextmanager
def fits_loss(task, loss_module, step: int):
    """The first micro-batch's forward and backward: an error of the loss on the task's batch
    (the arguments it does not take, targets out of range) is a ValueError naming the task."""
    try:
        yield
    except (TypeError, IndexError, ValueError, RuntimeError) as e:
        if isinstance(e, RuntimeError) and "out of memory" in str(e):
            raise
        sig = _signature(loss_module)
        first = " ".join(str(e).split()) or type(e).__name__
        raise ValueError(f"task {task.name!r}: batch() of step {step} does not fit its loss "
                         f"{type(loss_module).__name__}{sig} ({type(e).__name__}: "
                         f"{first[:200]})") from None


def _signature(module) -> str:
    try:
        return str(inspect.signature(module.forward))
    except (TypeError, ValueError, AttributeError):
        return ""


def check_held_out(task, out) -> tuple[float, dict]:
    """``held_out()``'s answer: ``(loss, metrics)``, the loss a finite number, the metrics a
    dict of names to finite numbers; a ValueError naming the task otherwise."""
    ok = isinstance(out, (tuple, list)) and len(out) == 2
    loss, extra = out if ok else (None, None)
    if hasattr(loss, "item") and getattr(loss, "numel", lambda: 0)() == 1:
        loss = loss.item()
    if not ok or isinstance(loss, bool) or not isinstance(loss, numbers.Real) or \
            not isinstance(extra, dict):
        raise ValueError(f"task {task.name!r}: held_out() returned {out!r:.80} ; it returns "
                         f"(mean held-out loss in nats, {{metric: number}})")
    bad = [k for k, v in extra.items() if isinstance(v, bool) or not isinstance(v, numbers.Real)]
    if bad:
        raise ValueError(f"task {task.name!r}: held_out()'s metrics must be numbers, got "
                         f"{', '.join(f'{k}={extra[k]!r:.40}' for k in bad)}")
    return float(loss), {k: float(v) for k, v in extra.items()}


__all__ = ["check_batch", "check_fingerprint", "check_held_out", "fits_loss"]
