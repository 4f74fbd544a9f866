"""Stages: the data every scheme is made of, and the names of the fields.

A stage ``(field, coeff)`` advances ``field`` for ``coeff * h``. Fields are names: the built-in
``diffusion`` (self-attention; letters d, s), ``convection`` (feed-forward; c, f) and ``cross``
(attention to a fixed memory such as an encoder's output; x), or any identifier (``"a"``,
``"gravity"``): the numerical API takes any names, networks the registered field kinds. A stage
may advance the **sum** of fields, ``"diffusion+convection"`` (string ``d+c:1``): the unsplit
sub-flow of ``dx/dt = D(x) + C(x)``, used by unsplit integrators (the parallel block).

This module owns the field names, the :class:`Stage` value, and the pure functions of a stage
sequence that the machinery (:mod:`~splitnet.integrators.flows`,
:mod:`~splitnet.integrators.layers`,
:mod:`~splitnet.order.check`) and the scheme classes (:mod:`~splitnet.integrators.schemes`) share:
the fields a
list uses, coefficient sums, clocks, merging, the second-order conditions, the diagram, and the
parser of stage strings such as ``"c:0.5,d:1,x:1,c:0.5"``. Pure Python: it imports neither torch
nor numpy, so the command line can start fast.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DIFFUSION = "diffusion"
CONVECTION = "convection"
CROSS = "cross"
FIELDS = (DIFFUSION, CONVECTION)   # the two fields of a decoder-only layer: the default scheme
BUILTIN = (DIFFUSION, CONVECTION, CROSS)
# Display letters (the sandwich paper's s = self-attention, f = feed-forward; x = cross) and the
# letters of stage strings; both read back through ALIASES.
LETTER = {DIFFUSION: "s", CONVECTION: "f", CROSS: "x"}
STRING_LETTER = {DIFFUSION: "d", CONVECTION: "c", CROSS: "x"}
ALIASES = {"d": DIFFUSION, "s": DIFFUSION, DIFFUSION: DIFFUSION,
           "c": CONVECTION, "f": CONVECTION, CONVECTION: CONVECTION,
           "x": CROSS, CROSS: CROSS}
SUM = "+"
# The order a scheme declares when its step is the exact flow of the sum of its fields (one stage
# advancing all of them, e.g. the unsplit "parallel" scheme): no finite order; with sub-flows of
# order q its effective order is q.
EXACT_ORDER = 1000


def field_name(name) -> str:
    """The canonical name of a field or a sum of fields: a built-in name or letter (any case)
    becomes the built-in name (``"d"`` -> ``"diffusion"``), any other identifier stays as
    given; ``"d+c"`` -> ``"diffusion+convection"``. Anything else is a ``ValueError``."""
    if not isinstance(name, str):
        raise TypeError(f"a field name must be a str, got {type(name).__name__}")
    parts = [p.strip() for p in name.split(SUM)]
    out = []
    for p in parts:
        canon = ALIASES.get(p.lower(), p)
        if not canon.isidentifier():
            raise ValueError(f"field {name!r}: {p!r} is not a field name (an identifier such as "
                             f"'diffusion', or a letter d/s, c/f, x)")
        if canon in out:
            raise ValueError(f"field {name!r} names {canon!r} twice in one sum")
        out.append(canon)
    return SUM.join(out)


@dataclass(frozen=True)
class Stage:
    """One sub-flow of a scheme: advance ``field`` for ``coeff * h``."""

    field: str
    coeff: float

    def __post_init__(self) -> None:
        if not isinstance(self.field, str):
            raise TypeError(f"Stage field must be a str, got {type(self.field).__name__}")
        object.__setattr__(self, "field", field_name(self.field))
        if isinstance(self.coeff, bool) or not isinstance(self.coeff, numbers.Real):
            raise TypeError(f"Stage coeff must be a real number, got {type(self.coeff).__name__}")
        if not math.isfinite(self.coeff):
            raise ValueError(f"stage coefficient must be finite, got {self.coeff!r}")
        object.__setattr__(self, "coeff", float(self.coeff))

    def __repr__(self) -> str:
        return f"Stage({self.field!r}, {self.coeff!r})"

    @property
    def components(self) -> tuple[str, ...]:
        """The fields this stage advances: one, or several for a sum stage."""
        return tuple(self.field.split(SUM))

    @property
    def is_sum(self) -> bool:
        return SUM in self.field


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
                        f"{items!r} (parse it with splitnet.stagelists.stages.parse)")
    return tuple(as_stage(s) for s in items)


def field_names(stages: Sequence[Stage]) -> tuple[str, ...]:
    """The fields a stage list advances, in order of first appearance (components of sum stages
    included): ``("convection", "diffusion")`` for Strang."""
    out: dict[str, None] = {}
    for st in stages:
        out.update(dict.fromkeys(st.components))
    return tuple(out)


def coefficient_sums(stages: Sequence[Stage], fields: Sequence[str] | None = None
                     ) -> dict[str, float]:
    """Sum of the coefficients of each field (a sum stage counts for each of its components):
    1 for every field of a consistent, normalised scheme. ``fields`` (default: those the list
    uses) may name fields the list lacks (their sum is 0)."""
    names = field_names(stages) if fields is None else tuple(fields)
    return {f: math.fsum(s.coeff for s in stages if f in s.components) for f in names}


def per_field_normalized(stages: Sequence[Stage], tol: float = 1e-12
                         ) -> tuple[Stage, ...] | None:
    """Each field's coefficients divided by that field's sum: a method whose fields sum to 1
    with ``s_f`` each, read as a consistent method for the rescaled fields ``s_f F_f`` (what
    learned coefficients integrate). None when a sum is 0 or a sum stage joins fields whose sums
    differ (by more than ``tol``, relative): no such reading exists."""
    sums = coefficient_sums(stages)
    if any(abs(v) < 1e-300 for v in sums.values()):
        return None
    out = []
    for st in stages:
        s = [sums[f] for f in st.components]
        if max(s) - min(s) > tol * max(abs(x) for x in s):
            return None
        out.append(Stage(st.field, st.coeff / s[0]))
    return tuple(out)


def field_coeffs(stages: Sequence[Stage], field: str) -> tuple[float, ...]:
    """The coefficients of the stages that advance ``field`` (alone or in a sum), in order."""
    return tuple(s.coeff for s in stages if field in s.components)


def component_clocks(stages: Sequence[Stage]) -> tuple[tuple[float, ...], ...]:
    """For every stage, the start time of each of its components, as a fraction of h, on that
    field's own clock: a field's clock is the sum of its earlier coefficients (each field keeps
    its own clock; a sum stage advances every component's clock by its coefficient)."""
    acc: dict[str, float] = {}
    out = []
    for st in stages:
        out.append(tuple(acc.get(f, 0.0) for f in st.components))
        for f in st.components:
            acc[f] = acc.get(f, 0.0) + st.coeff
    return tuple(out)


def clocks(stages: Sequence[Stage]) -> tuple[float, ...]:
    """Start time of every stage, as a fraction of h, on its own field's clock: a stage of
    field X starts at ``sum of X's earlier coefficients`` (each field keeps its own clock; for a
    sum stage, the clock of its first component -- :func:`component_clocks` has them all)."""
    return tuple(c[0] for c in component_clocks(stages))


def progress(stages: Sequence[Stage]) -> tuple[float, ...]:
    """Progress after each stage, as a fraction of h: the mean of the fields' clocks
    (Lie–Trotter: 0.5, 1; Strang: 0.25, 0.75, 1). Negative coefficients move it back."""
    names = field_names(stages)
    acc = dict.fromkeys(names, 0.0)
    out = []
    for st in stages:
        for f in st.components:
            acc[f] += st.coeff
        out.append(math.fsum(acc.values()) / len(names))
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


def pair_defects(stages: Sequence[Stage]) -> dict[tuple[str, str], float]:
    """The second-order conditions, one per pair of fields ``(a, b)`` (``a`` first appearing
    first): ``S_ba - S_ab`` with ``S_ab = sum over stages p before q of a_p b_q`` (a stage's
    coefficient counts for each field it advances; a sum stage's own pairs do not count: its
    sub-flow is exact for the sum).

    By BCH, one step is ``exp(h sum_f F_f + h^2/2 sum_(a<b) (S_ba - S_ab) [F_a, F_b] + O(h^3))``
    (operator brackets), so a consistent scheme is (at least) second order iff every entry is
    0. For Lie–Trotter, D then C, the entry is -1; for Strang 0."""
    names = field_names(stages)
    before = dict.fromkeys(names, 0.0)
    s: dict[tuple[str, str], float] = {}
    for st in stages:
        for b in st.components:
            for a in names:
                if a != b:
                    s[a, b] = s.get((a, b), 0.0) + before[a] * st.coeff
        for f in st.components:
            before[f] += st.coeff
    return {(a, b): s.get((b, a), 0.0) - s.get((a, b), 0.0)
            for i, a in enumerate(names) for b in names[i + 1:]}


def second_order_defect(stages: Sequence[Stage]) -> float:
    """The largest second-order condition of :func:`pair_defects` in magnitude (with its sign):
    0 iff the consistent scheme is (at least) second order. For two fields, diffusion and
    convection, this is ``1 - 2 S`` with ``S`` the sum of ``d_i c_j`` over diffusion stages i
    before convection stages j: BCH gives ``log(scheme) = h (D + C) + h^2/2 (1 - 2 S) [D, C] +
    O(h^3)``."""
    d = pair_defects(stages)
    if not d:
        return 0.0
    worst = max(d, key=lambda k: abs(d[k]))
    if set(worst) == {DIFFUSION, CONVECTION}:    # the sign of the two-field formula, 1 - 2 S
        return -d[worst] if worst == (CONVECTION, DIFFUSION) else d[worst]
    return d[worst]


# Reversible networks (splitnet.reversible): the block of the partitioned state (x1, x2) each
# field writes (0: x1, 1: x2); it reads the other one. The one table.
WRITES = {DIFFUSION: 0, CROSS: 0, CONVECTION: 1}


def reversible_unsupported(stages: Sequence[Stage]) -> str | None:
    """Why a network with these stages cannot be reversible, or ``None``: every stage must
    write one block reading the other -- one field, or a sum of fields that write the same
    block (``d+x``: both write x1 from x2); ``parallel``'s ``d+c`` writes both blocks from both:
    not a shear."""
    for i, st in enumerate(stages):
        unknown = [c for c in st.components if c not in WRITES]
        if unknown:
            return (f"stage {i + 1} advances {unknown[0]!r}: a reversible layer knows only "
                    f"{', '.join(WRITES)}")
        if len({WRITES[c] for c in st.components}) > 1:
            return (f"stage {i + 1} ({st.field}) sums fields that write both blocks: a "
                    f"reversible layer needs every stage to write one block from the other "
                    f"(a shear)")
    return None


def _display(field: str) -> str:
    return SUM.join(LETTER.get(f, f) for f in field.split(SUM))


def diagram(stages: Sequence[Stage]) -> str:
    """A short human-readable picture, e.g. ``f/2 s f/2`` for Strang (s = diffusion,
    f = convection, x = cross; other fields by name; ``s+f`` a sum stage). For display only;
    :func:`format_stages` writes the parseable form."""
    parts = []
    for st in stages:
        c, letter = st.coeff, _display(st.field)
        if abs(c - 1.0) < 1e-12:
            parts.append(letter)
        elif abs(c - 0.5) < 1e-12:
            parts.append(f"{letter}/2")
        else:
            parts.append(f"{letter}*{c:.4g}")
    return " ".join(parts)


def format_stages(stages: Sequence[Stage]) -> str:
    """The stage string that :func:`parse` reads back exactly, e.g. ``c:0.5,d:1.0,c:0.5``
    (built-in fields by letter, others by name, sums with ``+``)."""
    return ",".join(
        f"{SUM.join(STRING_LETTER.get(f, f) for f in s.components)}:{s.coeff!r}" for s in stages)


def parse(text: str) -> tuple[Stage, ...]:
    """Stages from ``"field:coeff,field:coeff,..."``: fields ``d``/``s``/``diffusion``,
    ``c``/``f``/``convection``, ``x``/``cross``, any other identifier, or a sum such as ``d+c``.
    Stages may also be separated by newlines or semicolons (one stage per line in a file); ``#``
    starts a comment. Every problem is a ValueError naming the item."""
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
        try:
            name = field_name(f)
        except ValueError:
            raise ValueError(f"stage {i} {item!r}: {f!r} is not a field; use d/s/diffusion, "
                             f"c/f/convection, x/cross, another name, or a sum such as d+c"
                             ) from None
        if not c:
            raise ValueError(f"stage {i} {item!r} has no coefficient after ':'")
        try:
            value = float(c)
        except ValueError:
            raise ValueError(f"stage {i} {item!r}: coefficient {c!r} is not a number") from None
        out.append(Stage(name, value))
    return tuple(out)


__all__ = ["ALIASES", "BUILTIN", "CONVECTION", "CROSS", "DIFFUSION", "EXACT_ORDER", "FIELDS",
           "LETTER", "STRING_LETTER", "SUM", "WRITES", "Stage", "as_stage", "as_stages",
           "clocks", "coefficient_sums", "component_clocks", "diagram", "field_coeffs",
           "field_name", "field_names", "format_stages", "is_palindrome", "merge",
           "pair_defects", "parse", "per_field_normalized", "progress", "reversible_unsupported",
           "second_order_defect"]
