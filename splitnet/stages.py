"""Stages: the data every scheme is made of, and the words for the two fields.

A stage ``(field, coeff)`` advances ``field`` for ``coeff * h``. This module owns the field
names, the :class:`Stage` value, and the pure functions of a stage sequence that the machinery
(:mod:`~splitnet.flows`, :mod:`~splitnet.layers`, :mod:`~splitnet.check`) and the scheme
classes (:mod:`~splitnet.schemes`) share: clocks, merging, the second-order defect, the
diagram, and the parser of stage strings such as ``"c:0.5,d:1,c:0.5"``. Pure Python: it
imports neither torch nor numpy, so the command line can start fast.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DIFFUSION = "diffusion"
CONVECTION = "convection"
FIELDS = (DIFFUSION, CONVECTION)
LETTER = {DIFFUSION: "s", CONVECTION: "f"}   # sandwich-paper letters: s = self-attention, f = FFN
_ALIAS = {"d": DIFFUSION, "s": DIFFUSION, DIFFUSION: DIFFUSION,
          "c": CONVECTION, "f": CONVECTION, CONVECTION: CONVECTION}


@dataclass(frozen=True)
class Stage:
    """One sub-flow of a scheme: advance ``field`` for ``coeff * h``."""

    field: str
    coeff: float

    def __post_init__(self) -> None:
        if not isinstance(self.field, str):
            raise TypeError(f"Stage field must be a str, got {type(self.field).__name__}")
        if self.field not in FIELDS:
            raise ValueError(f"unknown field {self.field!r} in stage; expected one of {FIELDS}")
        if isinstance(self.coeff, bool) or not isinstance(self.coeff, numbers.Real):
            raise TypeError(f"Stage coeff must be a real number, got {type(self.coeff).__name__}")
        if not math.isfinite(self.coeff):
            raise ValueError(f"stage coefficient must be finite, got {self.coeff!r}")
        object.__setattr__(self, "coeff", float(self.coeff))

    def __repr__(self) -> str:
        return f"Stage({self.field!r}, {self.coeff!r})"


def as_stage(item) -> Stage:
    """A :class:`Stage` from a Stage or a ``(field, coeff)`` pair."""
    if isinstance(item, Stage):
        return item
    if isinstance(item, (tuple, list)) and len(item) == 2:
        return Stage(item[0], item[1])
    raise TypeError(f"a stage is a Stage or a (field, coeff) pair, got {item!r}")


def as_stages(items: Iterable) -> tuple[Stage, ...]:
    """A tuple of stages from any iterable of stages or pairs (no validation of the sums)."""
    if isinstance(items, (str, bytes)):
        raise TypeError(f"stages must be a sequence of (field, coeff) pairs, got a string "
                        f"{items!r} (parse it with splitnet.stages.parse)")
    return tuple(as_stage(s) for s in items)


def coefficient_sums(stages: Sequence[Stage]) -> dict[str, float]:
    """Sum of the coefficients of each field (1 for a consistent, normalised scheme)."""
    return {f: math.fsum(s.coeff for s in stages if s.field == f) for f in FIELDS}


def field_coeffs(stages: Sequence[Stage], field: str) -> tuple[float, ...]:
    """The coefficients of ``field``'s stages, in order."""
    return tuple(s.coeff for s in stages if s.field == field)


def clocks(stages: Sequence[Stage]) -> tuple[float, ...]:
    """Start time of every stage, as a fraction of h, on its own field's clock: a stage of
    field X starts at ``sum of X's earlier coefficients`` (each field keeps its own clock)."""
    acc = {DIFFUSION: 0.0, CONVECTION: 0.0}
    out = []
    for st in stages:
        out.append(acc[st.field])
        acc[st.field] += st.coeff
    return tuple(out)


def progress(stages: Sequence[Stage]) -> tuple[float, ...]:
    """Progress after each stage, as a fraction of h: the mean of the two fields' clocks
    (Lie–Trotter: 0.5, 1; Strang: 0.25, 0.75, 1). Negative coefficients move it back."""
    acc = {DIFFUSION: 0.0, CONVECTION: 0.0}
    out = []
    for st in stages:
        acc[st.field] += st.coeff
        out.append(0.5 * (acc[DIFFUSION] + acc[CONVECTION]))
    return tuple(out)


def merge(stages: Sequence[Stage]) -> tuple[Stage, ...]:
    """Adjacent stages of one field merged into one (coefficients added; zeros dropped)."""
    out: list[Stage] = []
    for s in stages:
        if out and out[-1].field == s.field:
            c = out.pop().coeff + s.coeff
            if abs(c) > 1e-15:
                out.append(Stage(s.field, c))
        else:
            out.append(s)
    return tuple(out)


def is_palindrome(stages: Sequence[Stage], tol: float = 1e-12) -> bool:
    """True when the merged sequence reads the same backwards: the scheme is symmetric
    (``step(h)`` then ``step(-h)`` returns to the start with exact sub-flows)."""
    m = merge(stages)
    return all(a.field == b.field and abs(a.coeff - b.coeff) <= tol * max(1.0, abs(a.coeff))
               for a, b in zip(m, reversed(m)))


def second_order_defect(stages: Sequence[Stage]) -> float:
    """Coefficient of ``h^2 [D, C]`` in the scheme's modified equation, up to a factor 1/2.

    For a consistent scheme the BCH formula gives ``log(scheme) = h (D + C) + h^2/2 (1 - 2 S)
    [D, C] + O(h^3)`` with ``S = sum over diffusion stage i before convection stage j of d_i
    c_j``. The scheme is (at least) second order iff ``S = 1/2``; this returns ``1 - 2 S``.
    """
    seen_d = 0.0
    s = 0.0
    for st in stages:
        if st.field == DIFFUSION:
            seen_d += st.coeff
        else:
            s += seen_d * st.coeff
    return 1.0 - 2.0 * s


def diagram(stages: Sequence[Stage]) -> str:
    """A short human-readable picture, e.g. ``f/2 s f/2`` for Strang (s = diffusion,
    f = convection). For display only; :func:`format_stages` writes the parseable form."""
    parts = []
    for st in stages:
        c, letter = st.coeff, LETTER[st.field]
        if abs(c - 1.0) < 1e-12:
            parts.append(letter)
        elif abs(c - 0.5) < 1e-12:
            parts.append(f"{letter}/2")
        else:
            parts.append(f"{letter}*{c:.4g}")
    return " ".join(parts)


def format_stages(stages: Sequence[Stage]) -> str:
    """The stage string that :func:`parse` reads back exactly, e.g. ``c:0.5,d:1.0,c:0.5``."""
    return ",".join(f"{'d' if s.field == DIFFUSION else 'c'}:{s.coeff!r}" for s in stages)


def parse(text: str) -> tuple[Stage, ...]:
    """Stages from ``"field:coeff,field:coeff,..."``; fields ``d``/``s``/``diffusion`` and
    ``c``/``f``/``convection``. Stages may also be separated by newlines or semicolons (one stage
    per line in a file); ``#`` starts a comment. Every problem is a ValueError naming the item."""
    if not isinstance(text, str):
        raise TypeError(f"a stage string must be a str, got {type(text).__name__}")
    items = []
    for line in text.splitlines():
        line = line.split("#", 1)[0]
        items += [x.strip() for x in line.replace(";", ",").split(",")]
    items = [x for x in items if x]
    if not items:
        raise ValueError("no stages given: write them as field:coeff,... e.g. "
                         "'c:0.5,d:1,c:0.5'")
    out = []
    for i, item in enumerate(items, 1):
        if ":" not in item:
            raise ValueError(f"stage {i} {item!r} is not field:coeff (e.g. 'd:0.5')")
        f, c = (p.strip() for p in item.split(":", 1))
        if f.lower() not in _ALIAS:
            raise ValueError(f"stage {i} {item!r}: unknown field {f!r}; use d/s/diffusion or "
                             f"c/f/convection")
        if not c:
            raise ValueError(f"stage {i} {item!r} has no coefficient after ':'")
        try:
            value = float(c)
        except ValueError:
            raise ValueError(f"stage {i} {item!r}: coefficient {c!r} is not a number") from None
        out.append(Stage(_ALIAS[f.lower()], value))
    return tuple(out)


__all__ = ["CONVECTION", "DIFFUSION", "FIELDS", "LETTER", "Stage", "as_stage", "as_stages",
           "clocks", "coefficient_sums", "diagram", "field_coeffs", "format_stages",
           "is_palindrome", "merge", "parse", "progress", "second_order_defect"]
