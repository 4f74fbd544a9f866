"""Sub-flow methods: how each stage ``x -> phi^f_{dt}(x)`` of a scheme is advanced.

A registry of names to small solver classes (torchdiffeq style). Every explicit method is data:
a Butcher tableau (:class:`ButcherTableau`: ``A`` strictly lower triangular, ``b``, ``c``)
advanced by one generic explicit Runge–Kutta stepper (:class:`ExplicitRungeKutta`). Its ``order``
q is *derived* from the tableau by the classical order conditions (one per rooted tree t with
at most :data:`MAX_TREE_ORDER` vertices: ``sum_i b_i Phi_i(t) = 1 / gamma(t)``); a declared
order is checked against it on construction. ``evals`` is the number of stages (field
evaluations per sub-step). ``exact`` (torchdiffeq) is a class of its own (``order`` and
``evals`` None). ``splitnet schemes``, the configs' choices, the command-line help, cost and the
plots read :data:`METHODS`, the one list of these names. Pure Python at import (no torch), so
the command line's ``--help`` stays fast; :class:`Exact` imports torch and torchdiffeq when it
runs.

===========  =====  =====  ==============================================================
name         q      evals  update for ``dx/dt = f(t, x)`` over ``dt``
===========  =====  =====  ==============================================================
euler        1      1      ``x + dt f(t, x)`` -- a residual sub-layer
midpoint     2      2      ``x + dt f(t + dt/2, x + dt/2 f(t, x))``
heun         2      2      Heun's RK2: ``x + dt/2 (k1 + f(t + dt, x + dt k1))``
rk3          3      3      Kutta's third-order method (Simpson weights 1/6, 4/6, 1/6)
rk4          4      4      classical Runge–Kutta
exact        --     adapt  torchdiffeq ``odeint`` (dopri5 by default) at tight tolerances
===========  =====  =====  ==============================================================

Adding an explicit method is one entry of :data:`TABLEAUX` (its tableau, declared order and
the text of its row; the class is named from the name: ``rk3`` -> ``RK3``, ``heun`` ->
``Heun``). :func:`method_table` renders this table from the registry and a test fails when the
docstring is stale.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

from ..names import unknown_name

if TYPE_CHECKING:  # pragma: no cover
    import torch

Field = Callable[[float, "torch.Tensor"], "torch.Tensor"]

# Rooted trees up to this many vertices give the order conditions checked (1 + 1 + 2 + 4 + 9 +
# 20 = 37 trees); a tableau meeting all of them is reported as order MAX_TREE_ORDER (a lower
# bound). An explicit method of order 6 needs at least 7 stages.
MAX_TREE_ORDER = 6
# Float tableaux (irrational coefficients) meet a condition when it holds to this much.
FLOAT_TOLERANCE = 1e-12


# ---------------------------------------------------------------------------------------------
# Rooted trees and the order conditions (Butcher; Hairer, Nørsett & Wanner I, §II.2)

Tree = tuple  # a rooted tree: the sorted tuple of its root's subtrees; the leaf is ()


def _grow(tree: Tree):
    """Every tree with one more vertex than ``tree``: a leaf attached to each vertex."""
    yield tuple(sorted((*tree, ())))
    for i, child in enumerate(tree):
        for g in _grow(child):
            yield tuple(sorted((*tree[:i], g, *tree[i + 1:])))


@functools.lru_cache(maxsize=None)
def trees(n: int) -> tuple[Tree, ...]:
    """The rooted trees with ``n`` vertices (1, 1, 2, 4, 9, 20 for n = 1..6), canonical."""
    if n < 1:
        raise ValueError(f"a tree has at least one vertex, got {n}")
    if n == 1:
        return ((),)
    return tuple(sorted({g for t in trees(n - 1) for g in _grow(t)}))


def _size(tree: Tree) -> int:
    return 1 + sum(_size(u) for u in tree)


def density(tree: Tree) -> int:
    """``gamma(t) = |t| prod gamma(u)`` over the root's subtrees u: the condition's 1/gamma."""
    return _size(tree) * math.prod(density(u) for u in tree)


def condition_text(tree: Tree) -> str:
    """The condition of ``tree`` in vector notation, e.g. ``sum b A(c^2) = 1/12`` (products of
    vectors are elementwise; a leaf subtree is ``c``, another subtree u is ``A(...)``)."""
    def vec(t: Tree) -> str:
        leaves = sum(1 for u in t if not u)
        parts = [] if not leaves else ["c" if leaves == 1 else f"c^{leaves}"]
        for u in sorted(u for u in t if u):
            inner = vec(u)
            parts.append("A c" if inner == "c" else f"A({inner})")
        return " ".join(parts)

    body, g = vec(tree), density(tree)
    return f"sum b{' ' + body if body else ''} = {'1' if g == 1 else f'1/{g}'}"


def _elementary_weight(tree: Tree, a, b):
    """``sum_i b_i Phi_i(t)``, ``Phi_i(t) = prod_u sum_j a_ij Phi_j(u)`` (leaf: Phi_j = 1)."""
    def phi(t: Tree) -> list:
        subs = [phi(u) for u in t]
        return [math.prod(sum((a_ij * pu[j] for j, a_ij in enumerate(row)), 0) for pu in subs)
                for row in a]

    return sum((bi * p for bi, p in zip(b, phi(tree))), 0)


def failed_conditions(a, b, order: int) -> list[str]:
    """The conditions of the trees with ``order`` vertices that ``(a, b)`` does not meet
    (exactly for fractions, to :data:`FLOAT_TOLERANCE` for floats)."""
    bad = []
    for t in trees(order):
        got, want = _elementary_weight(t, a, b), Fraction(1, density(t))
        ok = (got == want if isinstance(got, (int, Fraction))
              else abs(float(got) - float(want)) <= FLOAT_TOLERANCE)
        if not ok:
            bad.append(f"{condition_text(t)} (gets {float(got):.6g})")
    return bad


# ---------------------------------------------------------------------------------------------
# Tableaux

def _entry(v, what: str):
    """A tableau entry as a Fraction (ints and Fractions: exact arithmetic) or a finite float."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{what} must be a real number (int, Fraction or float), got "
                        f"{type(v).__name__}")
    if isinstance(v, numbers.Rational):
        return Fraction(v)
    if not math.isfinite(v):
        raise ValueError(f"{what} must be finite, got {v!r}")
    return float(v)


@dataclass(frozen=True)
class ButcherTableau:
    """An explicit Runge–Kutta method: ``k_i = f(t + c_i dt, x + dt sum_(j<i) a_ij k_j)``,
    ``x+ = x + dt sum_i b_i k_i``. ``a``: row i (from 0) has the i entries ``a_i0 .. a_i,i-1``
    (strictly lower triangular, so row 0 is ``()``); ``c_i = sum_j a_ij`` is required (the
    fields depend on time, and the order conditions below assume it). ``order`` (derived): the
    largest p such that every rooted tree with at most p vertices meets its condition;
    ``declared``, when given, must equal it (ValueError otherwise). ``text``: the row of the
    table in the module docstring."""

    name: str
    a: tuple[tuple, ...]
    b: tuple
    c: tuple
    declared: int | None = None
    text: str = ""
    order: int = field(init=False)

    def __post_init__(self):
        where = f"tableau {self.name!r}"
        s = len(self.b)
        if s == 0 or len(self.a) != s or len(self.c) != s:
            raise ValueError(f"{where}: A, b and c need one entry per stage (at least one), got "
                             f"{len(self.a)} rows, {s} weights, {len(self.c)} nodes")
        for i, row in enumerate(self.a):
            if len(row) != i:
                raise ValueError(f"{where}: row {i} of A must have {i} entries (explicit: "
                                 f"strictly lower triangular), got {len(row)}")
        a = tuple(tuple(_entry(v, f"{where}: a[{i}][{j}]") for j, v in enumerate(row))
                  for i, row in enumerate(self.a))
        b = tuple(_entry(v, f"{where}: b[{i}]") for i, v in enumerate(self.b))
        c = tuple(_entry(v, f"{where}: c[{i}]") for i, v in enumerate(self.c))
        for i, (row, ci) in enumerate(zip(a, c)):
            if abs(float(sum(row, 0) - ci)) > FLOAT_TOLERANCE:
                raise ValueError(f"{where}: c[{i}] = {ci} is not the sum of row {i} of A "
                                 f"({sum(row, 0)})")
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)
        object.__setattr__(self, "c", c)
        object.__setattr__(self, "order", self._derive(where))

    def _derive(self, where: str) -> int:
        order, failed = 0, []
        while order < MAX_TREE_ORDER:
            failed = failed_conditions(self.a, self.b, order + 1)
            if failed:
                break
            order += 1
        if order == 0:
            raise ValueError(f"{where} is not consistent: {failed[0]}")
        if self.declared is not None and self.declared != order:
            why = f"fails {failed[0]}" if failed else "meets every condition checked"
            raise ValueError(f"{where} declares order {self.declared} but its tableau meets the "
                             f"order conditions up to order {order} ({why})")
        return order

    @property
    def stages(self) -> int:
        return len(self.b)


_F = Fraction   # short, so the tables read as tables
TABLEAUX: dict[str, ButcherTableau] = {t.name: t for t in (
    ButcherTableau("euler", a=((),), b=(1,), c=(0,), declared=1,
                   text="``x + dt f(t, x)`` -- a residual sub-layer"),
    ButcherTableau("midpoint", a=((), (_F(1, 2),)), b=(0, 1), c=(0, _F(1, 2)), declared=2,
                   text="``x + dt f(t + dt/2, x + dt/2 f(t, x))``"),
    ButcherTableau("heun", a=((), (1,)), b=(_F(1, 2), _F(1, 2)), c=(0, 1), declared=2,
                   text="Heun's RK2: ``x + dt/2 (k1 + f(t + dt, x + dt k1))``"),
    ButcherTableau("rk3", a=((), (_F(1, 2),), (-1, 2)), b=(_F(1, 6), _F(2, 3), _F(1, 6)),
                   c=(0, _F(1, 2), 1), declared=3,
                   text="Kutta's third-order method (Simpson weights 1/6, 4/6, 1/6)"),
    ButcherTableau("rk4", a=((), (_F(1, 2),), (0, _F(1, 2)), (0, 0, 1)),
                   b=(_F(1, 6), _F(1, 3), _F(1, 3), _F(1, 6)), c=(0, _F(1, 2), _F(1, 2), 1),
                   declared=4, text="classical Runge–Kutta"),
)}
del _F


# ---------------------------------------------------------------------------------------------
# The methods

class SubflowMethod:
    name: str = ""
    order: int | None = None
    evals: int | None = None
    options: tuple[str, ...] = ()
    text: str = ""          # its row in the table of the module docstring

    def __init__(self, **options):
        unknown = set(options) - set(self.options)
        if unknown:
            allowed = ", ".join(self.options) or "none"
            raise ValueError(f"option(s) {sorted(unknown)} do not apply to method {self.name!r} "
                             f"(its options: {allowed})")

    def __call__(self, f: Field, t: float, x: torch.Tensor, dt: float) -> torch.Tensor:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _common(row) -> tuple[int, tuple]:
    """``(d, w)`` with ``row = w / d``: d the least common denominator and w integers when every
    entry is a fraction (d = 1 and w the floats otherwise). ``dt/d * (w1 k1 + ...)`` is then
    bit for bit the hand-written ``dt/6 * (k1 + 2 k2 + 2 k3 + k4)`` of classical RK4."""
    if any(isinstance(v, float) for v in row):
        return 1, tuple(float(v) for v in row)
    d = math.lcm(*(v.denominator for v in row)) if row else 1
    return d, tuple(int(v * d) for v in row)


def _combine(weights, ks):
    """``w1 k1 + w2 k2 + ...`` left to right, zero terms skipped, unit weights not multiplied."""
    acc = None
    for w, k in zip(weights, ks):
        if w == 0:
            continue
        term = k if w == 1 else w * k
        acc = term if acc is None else acc + term
    return acc


def _part(dt, d: int):
    """``dt / d`` (``dt`` itself for d = 1: no rounding, no extra tensor op)."""
    return dt if d == 1 else dt / d


def _at(t, dt, c):
    """The stage time ``t + c dt`` (``dt * num / den``: one rounding for a fraction)."""
    if c == 0:
        return t
    if isinstance(c, float):
        return t + dt * c
    if c.numerator == 1:
        return t + _part(dt, c.denominator)
    return t + dt * c.numerator / c.denominator


class ExplicitRungeKutta(SubflowMethod):
    """One step of an explicit Runge–Kutta method given by :attr:`tableau` (a
    :class:`ButcherTableau`); ``order`` and ``evals`` come from it. A subclass per tableau is
    registered in :data:`METHODS` (``Euler``, ``Midpoint``, ``Heun``, ``RK3``, ``RK4``)."""

    tableau: ButcherTableau

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        tab = cls.tableau
        cls.name, cls.order, cls.evals, cls.text = tab.name, tab.order, tab.stages, tab.text
        # the arithmetic, planned once: stage rows and weights over a common denominator
        cls._rows = tuple(_common(row) for row in tab.a)
        cls._weights = _common(tab.b)

    def __call__(self, f, t, x, dt):
        ks = []
        for (d, w), c in zip(self._rows, self.tableau.c):
            s = _combine(w, ks)
            ks.append(f(_at(t, dt, c), x if s is None else x + _part(dt, d) * s))
        d, w = self._weights
        return x + _part(dt, d) * _combine(w, ks)

    def __reduce__(self):
        # the class is made at import; pickle the method by its registered name
        return get_method, (self.name,)


def _class_name(name: str) -> str:
    """``rk4`` -> ``RK4``, ``ssprk3`` -> ``SSPRK3``, ``heun`` -> ``Heun``."""
    return name.upper() if any(ch.isdigit() for ch in name) else name.capitalize()


def _explicit_class(tab: ButcherTableau) -> type[ExplicitRungeKutta]:
    doc = f"{tab.text or tab.name}: order {tab.order}, {tab.stages} field evaluation(s)."
    return type(_class_name(tab.name), (ExplicitRungeKutta,),
                {"tableau": tab, "__doc__": doc, "__module__": __name__})


def default_tolerances(dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol) for ``exact``: tight in float64, sensible in float32/16."""
    import torch

    if dtype == torch.float64:
        # dopri5 at these reaches ~3e-13 relative on the built-in system (checked against
        # scipy's DOP853 at rtol 1e-14). torchdiffeq's dopri8 stalls near 1e-9 here: not used.
        return 1e-13, 1e-15
    return 1e-6, 1e-8


class Exact(SubflowMethod):
    """The sub-flow solved by torchdiffeq (``solver``, default ``dopri5``) at tight tolerances
    (float64: rtol 1e-13, atol 1e-15; lower precision: 1e-6, 1e-8)."""

    name, order, evals = "exact", None, None
    options = ("rtol", "atol", "solver")
    text = "torchdiffeq ``odeint`` (dopri5 by default) at tight tolerances"

    def __init__(self, rtol: float | None = None, atol: float | None = None,
                 solver: str = "dopri5", **unknown):
        super().__init__(**unknown)   # unknown option -> ValueError naming it
        for k, v in (("rtol", rtol), ("atol", atol)):
            if v is not None and not (isinstance(v, numbers.Real) and not isinstance(v, bool)
                                      and math.isfinite(v) and v > 0):
                raise ValueError(f"{k} must be a positive number, got {v!r}")
        self.rtol, self.atol, self.solver = rtol, atol, solver

    def __call__(self, f, t, x, dt):
        import torch
        from torchdiffeq import odeint

        rtol, atol = default_tolerances(x.dtype)
        times = torch.tensor([t, t + dt], dtype=x.dtype if x.is_floating_point() else None,
                             device=x.device)
        return odeint(f, x, times, rtol=self.rtol or rtol, atol=self.atol or atol,
                      method=self.solver)[-1]


METHODS: dict[str, type[SubflowMethod]] = {
    **{name: _explicit_class(tab) for name, tab in TABLEAUX.items()}, "exact": Exact,
}
# What a study runs when not told (splitnet refine, the refinement study): one method of each
# order the docs' tables read, 1, 2 and 4, and the exact flow; any registered one on request.
STUDY_METHODS = ("euler", "midpoint", "rk4", "exact")
# The classes other modules name (``layers`` tests ``isinstance(method, Euler)``).
Euler, Midpoint, RK4 = METHODS["euler"], METHODS["midpoint"], METHODS["rk4"]


def get_method(method, **options) -> SubflowMethod:
    """A sub-flow method from its name (or an instance, returned as is)."""
    if isinstance(method, SubflowMethod):
        if options:
            raise ValueError("pass options when naming the method, not with an instance")
        return method
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(unknown_name("method", method, METHODS))
    return METHODS[method](**options)


def method_table() -> str:
    """The registry as the reStructuredText table of the module docstring: name, order q
    (``--`` when none), evaluations per sub-step (``adapt`` when adaptive), the update."""
    rows = [("name", "q", "evals", "update for ``dx/dt = f(t, x)`` over ``dt``")]
    rows += [(n, "--" if m.order is None else str(m.order),
              "adapt" if m.evals is None else str(m.evals), m.text) for n, m in METHODS.items()]
    widths = [max(w, *(len(r[i]) for r in rows)) for i, w in enumerate((11, 5, 5, 60))]
    rule = "  ".join("=" * w for w in widths)
    lines = ["  ".join(f"{v:<{w}}" for v, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join([rule, lines[0], rule, *lines[1:], rule])


__all__ = ["FLOAT_TOLERANCE", "MAX_TREE_ORDER", "METHODS", "RK4", "STUDY_METHODS", "TABLEAUX",
           "ButcherTableau",
           "Euler", "Exact", "ExplicitRungeKutta", "Field", "Midpoint", "SubflowMethod", "Tree",
           "condition_text", "default_tolerances", "density", "failed_conditions", "get_method",
           "method_table", "trees"]
