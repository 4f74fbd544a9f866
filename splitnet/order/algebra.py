"""The order conditions, exactly: a scheme in the free algebra of its fields.

One step ``exp(c_s h X_s) ... exp(c_1 h X_1)`` (``X`` a field, or the sum of fields of a sum
stage) is a series in the free associative algebra over k letters, one per field
(:func:`word_series`); the exact flow is ``exp(h sum_f X_f)``, whose coefficient on every word
of degree d is ``1/d!``. The scheme has order p for *all* fields iff the two series agree up to
degree p (:func:`condition_defects`, :func:`algebraic_order`).

Fewer conditions say the same thing: ``log(step)`` is a Lie series (BCH), and a Lie polynomial
of degree d is fixed by its coefficients on the **Lyndon words** of length d (Reutenauer, *Free
Lie Algebras*, Thm 5.1: the Lyndon bracketings P_w = w + larger words form a basis). So the
independent order conditions of degree d are the coefficients of ``log(step)`` on the Lyndon
words of length d (:func:`lie_conditions`), and their number is Witt's dimension of the degree-d
part of the free Lie algebra on k letters (:func:`witt`): 2, 1, 2, 3, 6, 9, 18, 30 for k = 2 and
3, 3, 8, 18, 48, 116, 312, 810 for k = 3. Every function takes ``one`` (``1.0`` for float64,
``mpmath.mpf(1)`` for any precision).

Letters: the built-in fields in the order diffusion, convection, cross, then other fields in
order of appearance (:func:`alphabet`); for diffusion and convection, D is letter 0 and C
letter 1.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from ..stagelists.stages import BUILTIN, Stage, field_name


def _pairs(stages) -> list[tuple[tuple[str, ...], object]]:
    """(components, coeff) of Stages or ``(field, coeff)`` pairs."""
    out = []
    for st in stages:
        f, c = (st.field, st.coeff) if isinstance(st, Stage) else st
        out.append((tuple(field_name(f).split("+")), c))
    return out


def alphabet(stages, fields: Sequence[str] | None = None) -> tuple[str, ...]:
    """The letters: ``fields`` if given, else the built-in fields the list uses (diffusion,
    convection, cross; diffusion and convection always, so two-field lists keep D = 0, C = 1),
    then its other fields in order of appearance."""
    if fields is not None:
        return tuple(field_name(f) for f in fields)
    used = [f for comps, _ in _pairs(stages) for f in comps]
    head = [f for f in BUILTIN if f in used or f in BUILTIN[:2]]
    return tuple(head + list(dict.fromkeys(f for f in used if f not in BUILTIN)))


def _zeros(n: int, one):
    return np.zeros(n) if isinstance(one, float) else np.full(n, one * 0, dtype=object)


def word_index(word: Sequence[int], k: int) -> int:
    """Position of a word (letters as integers, leftmost most significant) in its degree's
    array."""
    i = 0
    for letter in word:
        i = i * k + letter
    return i


def word_series(stages, max_degree: int, one=1.0, fields: Sequence[str] | None = None
                ) -> list[np.ndarray]:
    """Taylor coefficients of one step ``exp(c_s X_s) ... exp(c_1 X_1)`` (h = 1; a word of d
    letters carries h^d) in the free associative algebra of the fields (:func:`alphabet`).

    ``out[d][w]`` is the coefficient of the word of ``d`` letters whose base-k digits, leftmost
    letter most significant, spell ``w``. A stage multiplies the series from the left by
    ``sum_m (c X)^m / m!``, which prepends every word of m letters of X's components (one word,
    X^m, for a single field). ``stages``: Stages or ``(field, coeff)`` pairs; ``one`` sets the
    number type (``mpmath.mpf(1)``: the arrays then hold objects)."""
    letters = alphabet(stages, fields)
    k = len(letters)
    pos = {f: i for i, f in enumerate(letters)}
    v = [_zeros(k ** d, one) for d in range(max_degree + 1)]
    v[0][0] = one
    for comps, c in _pairs(stages):
        c = c * one
        ids = [pos[f] for f in comps]
        new = [x.copy() for x in v]
        for d in range(1, max_degree + 1):
            cm = one
            for m in range(1, d + 1):
                cm = cm * c / m
                width = k ** (d - m)
                for word in itertools.product(ids, repeat=m):
                    start = word_index(word, k) * width
                    new[d][start:start + width] += cm * v[d - m]
        v = new
    return v


def condition_defects(stages, max_degree: int, one=1.0) -> list:
    """Largest ``|coefficient of the scheme - coefficient of exp(sum X)|`` over the words of
    each degree 1..max_degree (the exact flow has ``1/d!`` on every word of degree d). The scheme
    has order p (for all non-commuting fields) iff the defects of degrees 1..p vanish."""
    v = word_series(stages, max_degree, one)
    return [max(abs(x - one / math.factorial(d)) for x in v[d])
            for d in range(1, max_degree + 1)]


def algebraic_order(stages, max_degree: int = 11, tol: float = 1e-13, one=1.0) -> int:
    """The largest p <= max_degree with every defect of degree <= p at most ``tol`` (float64 by
    default: defects of a few 1e-16 are round-off; use ``one=mpmath.mpf(1)`` and a tiny ``tol``
    to check coefficient sets to more digits)."""
    p = 0
    for d, x in enumerate(condition_defects(stages, max_degree, one), 1):
        if x > tol:
            break
        p = d
    return p


# ---------------------------------------------------------------------------------------------
# the independent conditions: log(step) on the Lyndon words


def lyndon_words(k: int, length: int) -> list[tuple[int, ...]]:
    """The Lyndon words of ``length`` letters over ``0..k-1`` in lexicographic order (Duval's
    algorithm): words strictly smaller than each of their proper rotations."""
    out, w = [], [-1]
    while w:
        w[-1] += 1
        if len(w) == length:
            out.append(tuple(w))
        m = len(w)
        while len(w) < length:
            w.append(w[len(w) - m])
        while w and w[-1] == k - 1:
            w.pop()
    return out


def witt(k: int, d: int) -> int:
    """Witt's formula: the dimension of the degree-d part of the free Lie algebra on k letters,
    ``(1/d) sum_(e | d) mu(e) k^(d/e)``."""
    def mobius(n: int) -> int:
        out, p = 1, 2
        while p * p <= n:
            if n % p == 0:
                n //= p
                if n % p == 0:
                    return 0
                out = -out
            p += 1
        return -out if n > 1 else out

    return sum(mobius(e) * k ** (d // e) for e in range(1, d + 1) if d % e == 0) // d


def _product(a: list, b: list, max_degree: int, one) -> list:
    """The product of two graded series without constant term (concatenation of words)."""
    k = len(a[1]) if len(a) > 1 else 1
    out = [_zeros(k ** d, one) for d in range(max_degree + 1)]
    for da in range(1, max_degree):
        for db in range(1, max_degree - da + 1):
            out[da + db] += np.outer(a[da], b[db]).ravel()
    return out


def log_series(series: list, one=1.0) -> list:
    """``log(S)`` of a graded series with ``S[0] = 1``, truncated at its degree:
    ``sum_(n >= 1) (-1)^(n+1) Y^n / n`` with ``Y = S - 1``."""
    n_max = len(series) - 1
    y = [_zeros(1, one)] + [x.copy() for x in series[1:]]
    out = [_zeros(1, one)] + [x.copy() for x in series[1:]]
    power = y
    for n in range(2, n_max + 1):
        power = _product(power, y, n_max, one)
        sign = one if n % 2 else -one
        for d in range(1, n_max + 1):
            out[d] = out[d] + sign * power[d] / n
    return out


def lie_conditions(stages, max_degree: int, one=1.0, fields: Sequence[str] | None = None
                   ) -> dict[int, np.ndarray]:
    """The independent order conditions: for each degree d, the coefficients of ``log(step)``
    on the Lyndon words of d letters, minus those of the exact flow (``1`` on each letter, 0
    above degree 1). The scheme has order p iff they all vanish up to degree p; there are
    :func:`witt` of them per degree."""
    letters = alphabet(stages, fields)
    k = len(letters)
    log = log_series(word_series(stages, max_degree, one, letters), one)
    out = {}
    for d in range(1, max_degree + 1):
        coeffs = [log[d][word_index(w, k)] for w in lyndon_words(k, d)]
        exact = one if d == 1 else one * 0
        out[d] = np.array([c - exact for c in coeffs],
                          dtype=float if isinstance(one, float) else object)
    return out


def lie_defects(stages, max_degree: int, one=1.0, fields: Sequence[str] | None = None) -> list:
    """Largest |condition| of :func:`lie_conditions` per degree 1..max_degree (over ``fields``,
    default :func:`alphabet`'s)."""
    cond = lie_conditions(stages, max_degree, one, fields)
    return [max(abs(x) for x in cond[d]) if len(cond[d]) else one * 0
            for d in range(1, max_degree + 1)]


__all__ = ["algebraic_order", "alphabet", "condition_defects", "lie_conditions", "lie_defects",
           "log_series", "lyndon_words", "witt", "word_index", "word_series"]
