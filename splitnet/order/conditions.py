"""The order conditions in torch: differentiable in the stage coefficients.

:mod:`splitnet.order.algebra` writes a scheme's step as a series in the free associative algebra of
its fields and reads the independent order conditions off ``log(step)`` on the Lyndon words
(numpy, any number type). This module computes the same conditions from a *tensor* of
coefficients, so that a training loss can hold learned coefficients to a method of a given
order (:func:`order_penalty`)::

    step = exp(c_s X_s) ... exp(c_1 X_1)              (X_i a field's letter, or a sum of them)
    log(step) = sum_w a_w(c) w                       (a Lie series: BCH)
    conditions of degree d:  a_w(c) - [d == 1]  for the Lyndon words w of d letters

Degree 1 is consistency (each field's coefficients sum to 1); degree 2 is the one condition
``S_ba - S_ab`` per pair of fields; a method has order p iff every condition of degree <= p
vanishes. The structure (which letters each stage advances) is fixed by a stage list; only the
coefficients are tensors. Letters, words and Lyndon words are :mod:`splitnet.order.algebra`'s, and
``tests/test_learned.py`` checks the conditions against
:func:`splitnet.order.algebra.lie_conditions`
and their gradient against finite differences.

Cost: two fields to degree 6 is arrays of 64 numbers per degree; a few milliseconds per layer
for a 9-stage scheme (Yoshida's triple jump of Strang steps).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ..stagelists.stages import as_stages
from .algebra import alphabet, lyndon_words, word_index

MAX_DEGREE = 8      # conditions up to this degree (2 fields: 256 words; 3 fields: 6561)


def structure(stages, fields: Sequence[str] | None = None) -> tuple[tuple[tuple[int, ...], ...],
                                                                    int]:
    """``(letters of each stage, k)``: the letter indices each stage advances (one, or several
    for a sum stage) over the alphabet of :func:`splitnet.order.algebra.alphabet`, and its size
    k."""
    stages = as_stages(stages)
    letters = alphabet(stages, fields)
    pos = {f: i for i, f in enumerate(letters)}
    return tuple(tuple(pos[f] for f in st.components) for st in stages), len(letters)


def _power_words(ids: tuple[int, ...], m: int, k: int, like: torch.Tensor) -> torch.Tensor:
    """The indicator of the words of ``m`` letters drawn from ``ids`` (``X^m`` expanded for a
    sum ``X`` of those letters), a vector of k^m entries."""
    out = torch.zeros(k ** m, dtype=like.dtype, device=like.device)
    idx = torch.zeros(1, dtype=torch.long)
    for _ in range(m):
        idx = (idx[:, None] * k + torch.tensor(ids)[None, :]).reshape(-1)
    out[idx.to(like.device)] = 1
    return out


def _outer(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Concatenation of words: (..., n) x (..., m) -> (..., n m), a's letters leftmost."""
    return (a[..., :, None] * b[..., None, :]).flatten(-2)


def word_series(coeffs: torch.Tensor, letters: Sequence[tuple[int, ...]], k: int,
                max_degree: int) -> list[torch.Tensor]:
    """Coefficients of ``exp(c_s X_s) ... exp(c_1 X_1)`` on the words of each degree 0..D
    (:func:`splitnet.order.algebra.word_series` in torch): ``out[d]`` has k^d entries (last axis),
    leftmost letter most significant. ``coeffs`` (..., s): one per stage, with any leading
    (batch) axes, e.g. one row per layer. Differentiable in ``coeffs``."""
    batch = coeffs.shape[:-1]
    kw = {"dtype": coeffs.dtype, "device": coeffs.device}
    v = [torch.ones(*batch, 1, **kw)] + [torch.zeros(*batch, k ** d, **kw)
                                         for d in range(1, max_degree + 1)]
    powers: dict = {}
    for i, ids in enumerate(letters):
        c = coeffs[..., i, None]
        new = list(v)
        for d in range(1, max_degree + 1):
            acc = v[d]
            for m in range(1, d + 1):
                if (ids, m) not in powers:
                    powers[ids, m] = _power_words(ids, m, k, coeffs)
                acc = acc + (c ** m / math.factorial(m)) * _outer(powers[ids, m], v[d - m])
            new[d] = acc
        v = new
    return v


def _product(a: list, b: list, max_degree: int) -> list:
    """Product of two graded series without constant term (words concatenated)."""
    out = [torch.zeros_like(x) for x in a]
    for da in range(1, max_degree):
        for db in range(1, max_degree - da + 1):
            out[da + db] = out[da + db] + _outer(a[da], b[db])
    return out


def log_series(series: list) -> list:
    """``log(S)`` of a graded series with ``S[0] = 1``: ``sum_n (-1)^(n+1) (S - 1)^n / n``."""
    n_max = len(series) - 1
    y = [torch.zeros_like(series[0])] + list(series[1:])
    out = list(y)
    power = y
    for n in range(2, n_max + 1):
        power = _product(power, y, n_max)
        sign = 1.0 if n % 2 else -1.0
        out = [o + (sign / n) * p for o, p in zip(out, power)]
    return out


def lie_conditions(coeffs: torch.Tensor, letters: Sequence[tuple[int, ...]], k: int,
                   max_degree: int) -> list[torch.Tensor]:
    """The independent order conditions of degrees 1..D as tensors: ``log(step)`` on the
    Lyndon words of each degree minus the exact flow's (1 on each letter, 0 above degree 1);
    :func:`splitnet.order.algebra.lie_conditions` in torch. ``out[d - 1]`` has Witt(k, d) entries
    (last axis; leading axes as ``coeffs``'s)."""
    if not 1 <= max_degree <= MAX_DEGREE:
        raise ValueError(f"max_degree must be in 1..{MAX_DEGREE}, got {max_degree}")
    log = log_series(word_series(coeffs, letters, k, max_degree))
    out = []
    for d in range(1, max_degree + 1):
        idx = torch.tensor([word_index(w, k) for w in lyndon_words(k, d)], dtype=torch.long,
                           device=coeffs.device)
        cond = log[d][..., idx]
        out.append(cond - 1.0 if d == 1 else cond)
    return out


def penalty(coeffs: torch.Tensor, letters: Sequence[tuple[int, ...]], k: int,
            order: int) -> torch.Tensor:
    """``sum over degrees 1..order of the squared conditions`` (summed over leading axes too):
    0 exactly when the coefficients are a consistent method of that order (degree 1 is
    consistency)."""
    return sum((c ** 2).sum() for c in lie_conditions(coeffs, letters, k, order))


__all__ = ["MAX_DEGREE", "lie_conditions", "log_series", "penalty", "structure", "word_series"]
