"""Measure the order of any stage list on random non-commuting matrices.

For linear fields ``F_f(x) = M_f x`` (one random matrix per field: diffusion, convection,
cross or any other name) the sub-flows are exact matrix exponentials and one step of a scheme is
the product ``expm(c_s h X_s) ... expm(c_1 h X_1)`` (a sum stage's X is the sum of its fields'
matrices). Its local error against ``expm(h sum_f M_f)`` is ``O(h^(p+1))`` for a method of order
p. Random dense 6x6 matrices share no structure (they do not commute and no kick/drift symmetry
hides a defect), unlike a harmonic oscillator, on which wrong higher-order coefficient sets have
passed before.

The check runs in three steps (:func:`measure_order`):

1. **Consistency first.** Each field's coefficients must sum to 1 (to 1e-12): a stage list
   whose coefficients sum to 2 is a different, inconsistent method, not "the same method,
   normalised". ``normalize=True`` rescales explicitly.
2. **Adaptive step sizes.** h starts at 8 and is halved until the local error (for a unit
   state: the operator norm ``||step(h) - expm(h sum M)||_2``; each M has norm 1) falls under
   the round-off floor (1e-13, grown for lists of more than 100 stages or very large
   coefficients: :func:`round_off_floor`); where fewer than 5 errors lie in the window
   [1e-13, 1e-6] (high orders: an order-10 error drops by 2^11 per halving) the grid is refined
   (ratios 2^(-1/2), 2^(-1/4), 2^(-1/8)). The log-log slope is fitted on the window
   (``measured``) and on its three smallest h (``tail``, the asymptotic order). Fewer than 3
   usable errors: the verdict is "undetermined", with the reason, never "mismatch".
3. **What the check can see.** A coefficient error changes the local error by about
   ``delta * s(h)``; at the smallest fitted h the scheme's own error is ``e``, so errors of size
   ``e / s`` and larger show up in the tail slope (:attr:`OrderCheck.detectable`).

Why this window, measured on the 30 zoo sets x 12 seeds (docs/zoo.md): above ~1e-6 the next
terms of the error expansion still bend the curve (a window reaching 1e-2 fits orders 8 and 10
up to 0.5 too high), and an error relative to ``||expm(h (A + B))||`` instead of the unit state
adds a spurious ``-h log||expm(A + B)||`` to the log error (order-10 sets then fit 1.5 too low).
In [1e-13, 1e-6] the tail is within 0.26 of the order for every zoo set up to order 10, the whole
window within 0.48 (hence the verdict asks the tail for ``tolerance`` = 0.3 and the window for
twice that).

The algebraic counterpart lives in :mod:`splitnet.order.algebra` (re-exported here): the scheme's
expansion in the free algebra of its fields, compared word by word with ``exp(sum X)``, and the
independent conditions on Lyndon words; with ``one=mpmath.mpf(1)`` they verify coefficient sets
to any precision.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from ..stagelists.stages import (
    BUILTIN,
    CONVECTION,
    DIFFUSION,
    EXACT_ORDER,
    Stage,
    as_stages,
    coefficient_sums,
)
from .fit import (
    CEILING,
    FLOOR,
    adaptive_errors,
    check_declared,
    check_fit,
    usable_steps,
    window_fit,
)

VERDICTS = ("ok", "mismatch", "undetermined", "inconsistent")
SUM_TOL = 1e-12      # consistency: each field's coefficients sum to 1 within this


@dataclass(frozen=True)
class OrderCheck:
    """The result of :func:`measure_order` (``sn.check_order``).

    ``measured`` is the global order (fitted local slope − 1) over the window of local errors
    [``floor``, ``ceiling``]; ``tail`` the same over its three smallest h (the asymptotic
    order: a set right to a few digits only has the right slope at large h and a lower one once
    its defect takes over). ``sums`` are the raw per-field coefficient sums; ``detectable`` the
    smallest coefficient error (max-norm, sums kept; symmetry kept for a symmetric list of order
    4 or more, broken for one of order 2, where no symmetric move lowers the order) that changes
    the error at the smallest fitted h by as much as the scheme's own error there (NaN with
    ``detectable_reason`` when no coefficient can move)."""

    name: str
    declared: int | None
    verdict: str
    measured: float
    tail: float
    step_sizes: np.ndarray
    errors: np.ndarray
    used: np.ndarray = field(repr=False)
    sums: dict = field(default_factory=dict)
    reason: str = ""
    detectable: float = float("nan")
    normalized: bool = False
    tolerance: float = 0.3
    floor: float = FLOOR
    ceiling: float = CEILING
    detectable_reason: str = ""    # why ``detectable`` is NaN, when it is
    # the largest order condition of degree <= the declared order (log(step) on the Lyndon
    # words, splitnet.order.algebra.lie_defects): a model's layers (measure_layers) only
    condition_defect: float = float("nan")

    @property
    def ok(self) -> bool:
        """``verdict == "ok"``: consistent, the tail order within ``tolerance`` of the declared
        order (of the nearest integer when none is declared) and the window's order within twice
        that (it includes the start of the asymptotic range)."""
        return self.verdict == "ok"

    def __str__(self) -> str:
        """``print(check)``: the verdict in words (:meth:`summary`)."""
        return self.summary()

    def __repr__(self) -> str:
        """One line: the name, verdict, orders and fit; the arrays stay attributes
        (``step_sizes``, ``errors``, ``used``), out of the way."""
        d = _declared_text(self.declared)
        n = int(np.sum(self.used))
        return (f"OrderCheck({self.name!r}: {self.verdict}, declared {d}, measured "
                f"{_order_text(self.measured)}, smallest h {_order_text(self.tail)}, {n} of "
                f"{len(self.step_sizes)} points fitted)")

    def summary(self) -> str:
        d = _declared_text(self.declared, unsplit="exact (unsplit)")
        sums = ", ".join(f"{f} {v:.15g}" for f, v in self.sums.items())
        head = f"{self.name}: declared order {d}"
        defect = ("" if math.isnan(self.condition_defect) else
                  f"; largest order condition {self.condition_defect:.1e}")
        if self.verdict in ("inconsistent", "undetermined") or math.isinf(self.measured):
            return (f"{head}: {self.reason} (coefficient sums: {sums}{defect}) -> "
                    f"{self.verdict.upper()}")
        n = int(self.used.sum())
        h = self.step_sizes[self.used]
        det = (f"n/a ({self.detectable_reason})" if not np.isfinite(self.detectable)
               else f"{self.detectable:.1g}")
        norm = ", normalised" if self.normalized else ""
        return (f"{head}, measured {self.measured:.2f} (smallest h: {self.tail:.2f}; {n} points, "
                f"h {h.max():.3g} .. {h.min():.3g}) on random non-commuting matrices -> "
                f"{self.verdict.upper()}; coefficient sums: {sums}{norm}; detectable coefficient "
                f"error ~{det}{defect}")


def _declared_text(declared, unsplit: str = "exact") -> str:
    return "-" if declared is None else unsplit if declared >= EXACT_ORDER else str(declared)


def _order_text(x: float) -> str:
    """A measured order: two decimals, ``exact`` (the step is the exact flow), ``-`` (none)."""
    return "-" if math.isnan(x) else "exact" if math.isinf(x) else f"{x:.2f}"


class LayerChecks(tuple):
    """The checks of a trained model's layers (:func:`measure_layers`; ``sn.check_order(model)``):
    a tuple of :class:`OrderCheck`, one per layer, that prints as a table, a verdict for each
    layer. :attr:`ok`: every layer's verdict is ok."""

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self)

    def table(self) -> str:
        """One row per layer: verdict, measured order, the order at the smallest h, the largest
        order condition (when a declared order gives its degree) and, for a layer that is not
        ok, the reason."""
        if not self:
            return "no layers"
        w = max(len("layer"), *(len(c.name) for c in self))
        lines = [f"{len(self)} layer{'s' if len(self) > 1 else ''}: {sum(c.ok for c in self)} "
                 f"ok", f"{'layer':<{w}} {'declared':>8} {'verdict':<13} {'measured':>9} "
                        f"{'smallest h':>11} {'largest condition':>18}"]
        for c in self:
            cond = "-" if math.isnan(c.condition_defect) else f"{c.condition_defect:.1e}"
            why = f"  {c.reason}" if c.verdict in ("inconsistent", "undetermined") else ""
            lines.append(f"{c.name:<{w}} {_declared_text(c.declared):>8} "
                         f"{c.verdict.upper():<13} {_order_text(c.measured):>9} "
                         f"{_order_text(c.tail):>11} {cond:>18}{why}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    __repr__ = __str__


def random_matrices(dim: int = 6, seed: int = 0, n: int = 2) -> tuple[np.ndarray, ...]:
    """``n`` random dense matrices of spectral norm 1 (they do not commute); the first two are
    the same whatever ``n``. ``dim`` an int in [1, 4096], ``seed`` an int >= 0, ``n`` an int
    >= 1: ValueError naming the one that is not (numpy would say only 'negative dimensions' or
    run out of memory)."""
    for name, v, lo, hi in (("dim", dim, 1, 4096), ("seed", seed, 0, 2**63 - 1),
                            ("n", n, 1, 4096)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not lo <= v <= hi:
            raise ValueError(f"{name} must be an int in [{lo}, {hi}], got {v!r}")
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        m = rng.standard_normal((dim, dim))
        out.append(m / np.linalg.norm(m, 2))
    return tuple(out)


def field_matrices(fields, dim: int = 6, seed: int = 0) -> dict[str, np.ndarray]:
    """A random matrix per field: diffusion, convection and cross always get the 1st, 2nd and
    3rd of :func:`random_matrices` (so a two-field check sees the matrices it always saw), other
    fields the next ones in the order given."""
    others = [f for f in fields if f not in BUILTIN]
    slots = {**{f: i for i, f in enumerate(BUILTIN)},
             **{f: len(BUILTIN) + i for i, f in enumerate(others)}}
    mats = random_matrices(dim, seed, 1 + max(slots[f] for f in fields))
    return {f: mats[slots[f]] for f in fields}


def _matrices(a, b=None, h=None) -> tuple[dict, float]:
    """``(mapping, h)`` from ``(mapping, h)`` or the two-field form ``(A, B, h)``."""
    if isinstance(a, dict):
        return a, b
    return {DIFFUSION: a, CONVECTION: b}, h


def expm(m: np.ndarray) -> np.ndarray:
    """Matrix exponential in float64 for the small matrices used here: scale by 2^-s so that
    ``||m / 2^s||_1 <= 1/2``, sum the Taylor series to degree 20 (Horner; truncation < 1e-25),
    square s times. Agrees with ``scipy.linalg.expm`` to a few ulps on these matrices (see
    tests/test_check.py). Used instead of scipy's because scipy's Pade routine goes through a
    multithreaded BLAS that makes each 6x6 call ~100x slower on a busy 2-core machine, and
    instead of ``torch.linalg.matrix_exp``, which is off by ~1e-14 for small arguments: too much
    for measuring order 8."""
    m = np.asarray(m, dtype=np.float64)
    norm = np.abs(m).sum(axis=0).max()
    if not np.isfinite(norm) or norm > 1e6:    # overflow: no finite answer worth computing
        return np.full(m.shape, np.nan)
    s = max(0, int(np.ceil(np.log2(norm / 0.5)))) if norm > 0.5 else 0
    x = m / 2.0 ** s
    eye = np.eye(m.shape[0])
    p = eye
    for k in range(20, 0, -1):
        p = eye + (x @ p) / k
    for _ in range(s):
        p = p @ p
    return p


def matrix_step(stages, a, b=None, h=None) -> np.ndarray:
    """One step of the scheme on ``x' = (sum_f M_f) x`` with exact sub-flows: the product
    ``expm(c_s h X_s) ... expm(c_1 h X_1)``, first stage rightmost (a sum stage's X is the sum
    of its fields' matrices). Called ``(stages, {field: matrix}, h)`` or, for two fields,
    ``(stages, A, B, h)`` with A the diffusion matrix."""
    mats, h = _matrices(a, b, h)
    m = np.eye(next(iter(mats.values())).shape[0])
    cache: dict = {}
    for st in stages:
        key = (st.field, st.coeff)
        if key not in cache:       # compositions repeat coefficients (palindromes, patterns)
            cache[key] = expm(st.coeff * h * sum(mats[f] for f in st.components))
        m = cache[key] @ m
    return m


def local_error(stages, a, b=None, h=None) -> float:
    """``||step(h) - expm(h sum_f M_f)||_2``: the local error for a unit initial state (the
    largest over all of them); arguments as :func:`matrix_step`."""
    mats, h = _matrices(a, b, h)
    exact = expm(h * sum(mats.values()))
    diff = matrix_step(stages, mats, h) - exact
    return float(np.linalg.norm(diff, 2)) if np.isfinite(diff).all() else float("nan")


def consistency(stages, tol: float = SUM_TOL) -> tuple[dict, str]:
    """Per-field coefficient sums (a sum stage counts for each of its fields) and, when they are
    not all 1 (to ``tol``) or fewer than two fields appear, the reason, e.g. ``"not consistent:
    convection sums to 2.0"``; ``""`` when consistent."""
    present = coefficient_sums(stages)
    order = [f for f in BUILTIN if f in present] + [f for f in present if f not in BUILTIN]
    sums = {f: present[f] for f in order}       # built-in fields first, as they were always shown
    if len(sums) < 2:
        return sums, (f"not a splitting: only the field {', '.join(sums) or '(none)'} appears; "
                      f"at least two fields are needed")
    bad = [f"{f} sums to {s:.15g}" for f, s in sums.items() if not abs(s - 1.0) <= tol]
    return sums, ("not consistent: " + " and ".join(bad)) if bad else ""


def _normalized(stages, sums: dict) -> tuple[tuple[Stage, ...] | None, str]:
    """Every coefficient divided by the fields' common sum, allowed only when the sums agree
    and are not zero (a common time scale); otherwise (None, reason)."""
    lo, hi = min(sums.values()), max(sums.values())
    if not (min(abs(lo), abs(hi)) >= SUM_TOL and abs(hi - lo) <= 1e-9 * max(abs(lo), abs(hi))):
        listed = ", ".join(f"{f} to {v:.15g}" for f, v in sums.items())
        return None, (f"not consistent: the fields sum to different totals ({listed}); no "
                      f"common rescaling makes them all 1")
    return tuple(Stage(s.field, s.coeff / (sum(sums[f] for f in s.components)
                                           / len(s.components))) for s in stages), ""


def perturbation_direction(stages, seed: int = 0, keep_symmetry: bool = True) -> np.ndarray | None:
    """A random coefficient direction (max-norm 1) that keeps each field's sum and, when the
    stage list is a palindrome and ``keep_symmetry``, the symmetry; None when there is no such
    direction (e.g. one stage per field: no move keeps the sums)."""
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(len(stages))
    if keep_symmetry and is_mirrored(stages):
        v = (v + v[::-1]) / 2
    # keep every field's sum: project onto the null space of the field-by-stage incidence
    # matrix (for one field per stage this subtracts each field's mean)
    inc = np.array([[float(f in st.components) for st in stages]
                    for f in coefficient_sums(stages)])
    v -= inc.T @ np.linalg.lstsq(inc @ inc.T, inc @ v, rcond=None)[0]
    v[np.abs(v) < 1e-12] = 0.0
    scale = np.abs(v).max()
    return None if scale < 1e-12 else v / scale


def is_mirrored(stages) -> bool:
    """The stage list reads the same backwards (as written, not merged)."""
    return all(a.field == b.field and abs(a.coeff - b.coeff) <= 1e-12 * max(1.0, abs(a.coeff))
               for a, b in zip(stages, reversed(stages)))


def detectable_error(stages, mats: dict, h: float, err: float,
                     order: int | None = None) -> tuple[float, str]:
    """Coefficient error ``delta`` whose effect on the local error at ``h`` equals ``err`` (the
    scheme's own error there): ``err / s`` with ``s`` the sensitivity along
    :func:`perturbation_direction`, measured by finite differences (``delta0 = 1e-5``: linear
    regime, far above round-off). Larger coefficient errors change the tail slope.

    The direction must be one that can lower the order: a symmetric perturbation of a
    symmetric list keeps it symmetric, and a consistent symmetric method is of even order, so
    for a symmetric list of ``order`` <= 2 no symmetric move lowers it -- there the direction
    breaks the symmetry (to order 1). Returns ``(delta, reason)``; ``delta`` is NaN, with the
    reason, when no coefficient can move without breaking consistency."""
    keep = not (order is not None and order <= 2)
    v = perturbation_direction(stages, keep_symmetry=keep)
    if v is None:
        return float("nan"), ("no coefficient can move with every field's sum kept (one stage "
                              "per field): any coefficient error is an inconsistency")
    d0 = 1e-5
    moved = tuple(Stage(s.field, s.coeff + d0 * x) for s, x in zip(stages, v))
    diff = np.linalg.norm(matrix_step(moved, mats, h) - matrix_step(stages, mats, h), 2)
    if not diff > 0:
        return float("nan"), "the local error does not depend on the coefficients at this h"
    return float(err * d0 / diff), ""


def _verdict(declared, measured: float, tail: float, tolerance: float) -> str:
    target = declared if declared is not None else round(tail)
    good = (np.isfinite(measured) and np.isfinite(tail) and abs(tail - target) <= tolerance
            and abs(measured - target) <= 2 * tolerance)
    return "ok" if good else "mismatch"


def _tail(hs: np.ndarray, errs: np.ndarray, used: np.ndarray) -> float:
    idx = np.flatnonzero(used)
    last = idx[np.argsort(hs[idx])[:3]]
    return float(np.polyfit(np.log(hs[last]), np.log(errs[last]), 1)[0]) - 1.0


def _undetermined_reason(errs: np.ndarray, used: np.ndarray, floor: float,
                         ceiling: float) -> str:
    n, k = len(errs), int(used.sum())
    under, over = int((errs < floor).sum()), int((errs > ceiling).sum())
    where = []
    if under:
        where.append(f"{under} under the {floor:.0e} round-off floor")
    if over:
        where.append(f"{over} above {ceiling:.0e}")
    rest = n - k - under - over
    if rest > 0:
        where.append(f"{rest} not decreasing with h")
    return (f"undetermined: only {k} of {n} errors usable (at least 3 needed; "
            f"{', '.join(where) or 'none measured'}); choose step sizes whose errors lie between "
            f"{floor:.0e} and {ceiling:.0e}")


def _is_exact_flow(stages, mats: dict, floor: float) -> bool:
    """The step equals ``expm(h sum M)`` to round-off at h = 1/2 and 1 (relative to the flow's
    size: at large h the exponential's own growth would swamp an absolute floor)."""
    total = sum(mats.values())
    return all(local_error(stages, mats, h) < floor * max(1.0, np.linalg.norm(expm(h * total), 2))
               for h in (0.5, 1.0))


def round_off_floor(stages, floor: float = FLOOR) -> float:
    """The error under which round-off decides, for this stage list: ``floor`` (1e-13, right
    for up to ~100 exponentials of norm-1 matrices) grown with the number of stages beyond 100
    (each product adds ~1e-16 relative) and with the size of the coefficients beyond the zoo's
    largest (sum |c| ~ 60; large coefficients of both signs cancel, losing digits)."""
    n = len(stages)
    size = math.fsum(abs(st.coeff) for st in stages)
    return floor * max(1.0, n / 100.0) * max(1.0, size / 60.0)


def _one_field_exact(sums: dict, declared) -> bool:
    """A layer of one field whose coefficients sum to 1, with a declared order: what every
    scheme means over one field (:class:`~splitnet.integrators.splitting.OneField`, declared
    exact; a network without a feed-forward), whose step is the field's exact flow, of any
    order. A bare stage list of one field with no declared order is taken for a splitting
    that lost a field: inconsistent."""
    return (len(sums) == 1 and declared is not None
            and abs(next(iter(sums.values())) - 1.0) <= SUM_TOL)


def measure_order(stages, declared: int | None = None, name: str = "custom", dim: int = 6,
                  seed: int = 0, step_sizes=None, floor: float | None = None,
                  ceiling: float = CEILING, tolerance: float = 0.3,
                  normalize: bool = False) -> OrderCheck:
    """Measure the classical order of a stage sequence and compare it with ``declared``.

    Consistency first (each field's coefficients sum to 1 to 1e-12, else the verdict is
    "inconsistent" unless ``normalize`` rescales them); then local errors on random 6x6
    matrices of norm 1, one per field, with exact exponentials, float64, at adaptive step sizes
    (:func:`adaptive_errors`) or the given ``step_sizes`` (then every error above ``floor``
    counts: the caller chose the range; unusable step sizes count as missing). ``floor``
    defaults to :func:`round_off_floor`. The verdict needs the slope over the three smallest h
    (``tail``) within ``tolerance`` of the declared order and the slope over the window within
    twice that; fewer than 3 usable errors give "undetermined". A list whose step is the exact
    flow (e.g. one stage advancing the sum of all fields) is "ok" with infinite order.
    :func:`splitnet.check_order` is the front door (it also takes names and schemes)."""
    declared = check_declared(declared)
    check_fit(floor, ceiling, tolerance)
    stages = as_stages(stages)
    if not stages:
        raise ValueError("no stages: give at least one (field, coeff) stage")
    sums, reason = consistency(stages)
    rescaled = bool(reason and normalize)
    floor = round_off_floor(stages) if floor is None else floor
    if not ceiling > floor:
        raise ValueError(f"ceiling must be above the floor ({floor:g}), got {ceiling!r}")

    def result(verdict, measured=float("nan"), tail=float("nan"), hs=None, errs=None,
               used=None, why="", det=float("nan"), det_why=""):
        hs = np.zeros(0) if hs is None else hs
        errs = np.zeros(0) if errs is None else errs
        used = np.zeros(0, dtype=bool) if used is None else used
        return OrderCheck(name, declared, verdict, measured, tail, hs, errs, used, sums, why,
                          det, rescaled, tolerance, floor, ceiling, det_why)

    if rescaled and len(sums) >= 2:
        stages, reason = _normalized(stages, sums)
    if reason and _one_field_exact(sums, declared):
        return result("ok", math.inf, math.inf, why=f"one field, {next(iter(sums))}: nothing "
                      f"to split; with exact sub-flows the step is that field's exact flow")
    if reason:
        return result("inconsistent", why=reason)
    mats = field_matrices(tuple(sums), dim, seed)
    if _is_exact_flow(stages, mats, floor):
        return result("ok", math.inf, math.inf, why="the step is the exact flow of the sum of "
                      "the fields (its local error is round-off at every h)")
    if step_sizes is None:
        hs, errs = adaptive_errors(lambda h: local_error(stages, mats, h), floor, ceiling)
    else:
        ceiling = math.inf
        hs = usable_steps(step_sizes)
        errs = np.array([local_error(stages, mats, h) if np.isfinite(h) else np.nan
                         for h in hs])
    slope, used = window_fit(hs, errs, floor, ceiling)
    if used.sum() < 3:
        return result("undetermined", hs=hs, errs=errs, used=used,
                      why=_undetermined_reason(errs, used, floor, ceiling))
    tail = _tail(hs, errs, used)
    h_min = hs[used].min()
    target = declared if declared is not None else round(tail)
    det, det_why = detectable_error(stages, mats, h_min, errs[hs == h_min][0], target)
    return result(_verdict(declared, slope - 1.0, tail, tolerance), slope - 1.0, tail, hs, errs,
                  used, det=det, det_why=det_why)


def measure_layers(layers, declared: int | None = None, normalize: bool = False,
                   prefix: str = "layer", **options) -> LayerChecks:
    """:func:`measure_order` of each layer's stage list (a trained model's coefficients,
    ``model.coefficients()``), named ``layer 0``, ``layer 1``, ...: a verdict for each layer
    (:class:`LayerChecks`, a tuple that prints as a table).
    ``declared`` applies to every layer. Each check also carries the layer's largest order
    condition of degree <= ``declared`` (``condition_defect``; up to degree 8, 1 for an exact
    scheme; NaN without a declared order)."""
    from .algebra import lie_defects
    from .conditions import MAX_DEGREE

    degree = None if declared is None else 1 if declared >= EXACT_ORDER else \
        min(declared, MAX_DEGREE)
    out = []
    for k, stages in enumerate(layers):
        check = measure_order(stages, declared, name=f"{prefix} {k}", normalize=normalize,
                              **options)
        if degree is not None:
            # over the layer's own fields (ConvS2S's decoder: diffusion and cross; one field):
            # a field it does not have is no condition it fails
            present = tuple(check.sums) or None
            check = dataclasses.replace(check, condition_defect=float(max(
                lie_defects(stages, degree, fields=present))))
        out.append(check)
    return LayerChecks(out)


__all__ = ["CEILING", "FLOOR", "SUM_TOL", "VERDICTS", "LayerChecks", "OrderCheck", "consistency",
           "detectable_error", "expm", "field_matrices", "is_mirrored", "local_error",
           "matrix_step", "measure_layers", "measure_order", "perturbation_direction",
           "random_matrices", "round_off_floor"]
