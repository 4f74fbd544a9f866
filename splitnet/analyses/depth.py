"""Depth at inference: a trained network's loss with fewer or more layers, by its scheme.

A network of L layers at step h is coarsened to L / f layers at step f h or prolonged to f L
layers at step h / f (:mod:`splitnet.nets.depth`) and evaluated as it is, without training::

    depth_study(model, evaluate)      # as trained; coarsen 2 and 4 (mean, first); prolong 2

A network that is an ODE solver of its fields keeps its loss when its depth changes by a small
factor, at a cost that falls at its order; one that is not loses what its own discretisation
learnt. ``splitnet refine`` prints the table beside its re-discretisation study.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math
import numbers
import sys
from typing import Callable

import torch

from ..configs.options import check_real
from ..nets.depth import RESTRICTIONS, at_depth, coarsen, prolong

DEFAULT_COARSEN = (2, 4)
DEFAULT_PROLONG = (2,)


@dataclasses.dataclass
class DepthPoint:
    """One network of the study: ``change`` ``"trained"``, ``"coarsen"`` or ``"prolong"`` by
    ``factor``; ``layers`` (all stacks) at step ``step_size``; ``loss`` None when the depth is
    not divisible by the factor (``note`` says so)."""

    change: str
    factor: int
    restriction: str | None
    layers: int
    step_size: float
    loss: float | None
    note: str = ""

    def label(self) -> str:
        if self.change == "trained":
            return "as trained"
        how = f" ({self.restriction})" if self.restriction else ""
        return f"{self.change} {self.factor}{how}"


def _layers(model) -> int:
    c = model.config
    return c.n_layers if hasattr(c, "n_layers") else c.n_encoder_layers + c.n_decoder_layers


MAX_FACTOR = 64     # splitnet refine's --coarsen / --prolong take 2..64 too


def factor_list(what: str, factors, lo: int = 2, hi: int = MAX_FACTOR) -> tuple[int, ...]:
    """Depth factors: a list or tuple (not a string) of ints in [lo, hi] (1 is the model as
    trained, already the study's first row); ValueError naming ``what`` otherwise. Without
    this check a bad factor became a row saying it could not be built."""
    if isinstance(factors, (str, bytes)) or not isinstance(factors, (list, tuple, range)):
        raise ValueError(f"{what} must be a list of ints in [{lo}, {hi}], got {factors!r}")
    for f in factors:
        if isinstance(f, bool) or not isinstance(f, numbers.Integral) or not lo <= f <= hi:
            raise ValueError(f"{what} must be ints in [{lo}, {hi}], got {f!r}")
    return tuple(int(f) for f in factors)


def loss_of(evaluate: Callable, m) -> float:
    """``evaluate(m)`` as a float; NaN and inf are measurements (a network that diverges at
    that depth), anything but a number is a TypeError."""
    v = evaluate(m)
    if isinstance(v, torch.Tensor) and v.numel() == 1:
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"evaluate(model) must return a number (the mean loss), got {v!r:.80}")
    return float(v)


def _plan(coarsen_factors, prolong_factors, restrictions) -> list:
    out = [("trained", 1, None)]
    out += [("coarsen", f, r) for f in coarsen_factors for r in restrictions]
    return out + [("prolong", f, None) for f in prolong_factors]


def depth_study(model, evaluate: Callable, coarsen_factors=DEFAULT_COARSEN,
                prolong_factors=DEFAULT_PROLONG, restrictions=RESTRICTIONS,
                progress: bool = True) -> list[DepthPoint]:
    """``evaluate(m) -> mean loss`` of ``model`` as trained, coarsened by each of
    ``coarsen_factors`` under each restriction, and prolonged by each of ``prolong_factors``.
    Eval mode, no gradients; ``model`` is left as it was."""
    coarsen_factors = factor_list("coarsen_factors", coarsen_factors)
    prolong_factors = factor_list("prolong_factors", prolong_factors)
    if isinstance(restrictions, str):
        restrictions = (restrictions,)
    if not callable(evaluate):
        raise TypeError(f"evaluate must be a function model -> mean loss, got "
                        f"{type(evaluate).__name__}")
    for r in restrictions:
        if r not in RESTRICTIONS:
            raise ValueError(f"restriction must be one of {', '.join(RESTRICTIONS)}, got {r!r}")
    model.eval()
    h = model.config.step_size
    todo = _plan(coarsen_factors, prolong_factors, restrictions)
    it = todo
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(todo, desc="depth", unit="model", file=sys.stderr)
    points = []
    for change, f, r in it:
        try:
            m = model if change == "trained" else \
                coarsen(model, f, r) if change == "coarsen" else prolong(model, f)
        except ValueError as e:      # a depth f does not divide (its stack): a row says so
            points.append(DepthPoint(change, f, r, 0, h, None, str(e)))
            continue
        with torch.no_grad():
            loss = loss_of(evaluate, m.eval())
        points.append(DepthPoint(change, f, r, _layers(m), m.config.step_size, loss))
        del m
    return points


def depth_table(points: list[DepthPoint], unit: str = "bpb", scale: float = 1.0) -> str:
    """The study as a text table: each network's layers, step, loss and its change against
    the model as trained (losses times ``scale``, a finite number > 0, in ``unit``)."""
    if not points:
        raise ValueError("depth_table needs the points of a depth study, got none")
    scale = check_real("scale", scale, lo=0.0, lo_open=True)
    base = points[0].loss
    lines = [f"depth at inference ({unit}; coarsen: L / f layers at step f h, prolong: f L at "
             f"h / f)", f"{'network':<22} {'layers':>6} {'h':>8} {unit:>9} {'change':>9}"]
    for p in points:
        if p.loss is None:
            lines.append(f"{p.label():<22} {'-':>6} {'-':>8} {'-':>9} {'-':>9}  {p.note}")
            continue
        d = "" if p.change == "trained" else f"{(p.loss - base) * scale:+9.4f}"
        lines.append(f"{p.label():<22} {p.layers:>6} {p.step_size:>8.4g} "
                     f"{p.loss * scale:>9.4f} {d:>9}")
    return "\n".join(lines)


def prolongation_errors(model, x: torch.Tensor, factors=(1, 2, 4, 8, 16)):
    """How ``prolong(model, f)`` converges as ``f`` grows: the final states ``y_f`` of the
    stack from the embedded input ``x`` for each of ``factors`` (each twice the one before),
    their successive differences ``|y_f - y_2f|`` and the observed rates ``log2`` of successive
    ratios -- the network's order (reversible: its scheme's; plain Euler sub-layers: 1) while
    the differences lie in the asymptotic range and above round-off (use float64). A rate
    between two differences one of which is exactly 0 is NaN (no rate to observe)."""
    from ..integrators.validate import check_state

    check_state(x, "x")
    factors = factor_list("factors", factors, lo=1, hi=2**10)
    if len(factors) < 2 or any(b != 2 * a for a, b in itertools.pairwise(factors)):
        raise ValueError(f"factors must be at least two, each twice the one before (1, 2, 4, "
                         f"...: the rates are log2 of successive ratios), got {factors}")
    with torch.no_grad():
        ys = [prolong(model, f).layers.run(x) for f in factors]
    diffs = [float((a - b).norm()) for a, b in itertools.pairwise(ys)]
    return diffs, [math.log2(a / b) if a > 0 and b > 0 else math.nan
                   for a, b in itertools.pairwise(diffs)]


def with_quadrature(model, points: int):
    """``model`` (a view, modules shared) with every reversible layer integrating a stage of a
    time-dependent field with ``points`` Gauss points (0: one evaluation at the stage's clock
    start): the controls of the convergence tables."""
    from ..reversible.layer import ReversibleLayer

    layers = [ReversibleLayer(model.scheme, step_size=la.step_size, grid=la.grid,
                              fields={f: getattr(la, f) for f in la.field_names},
                              quadrature=points) for la in model.layers]
    view = copy.copy(model)
    view.__dict__["_modules"] = dict(model.__dict__["_modules"])
    view.layers = model.layers.like(layers)
    return view


def depth_errors(model, x: torch.Tensor, depths=(1, 2, 4, 8, 16, 32), quadrature=None):
    """How ``at_depth(model, n)`` converges as ``n`` doubles: the final states ``y_n`` of the
    stack from the embedded input ``x`` at each of ``depths`` (each twice the one before), their
    successive differences ``|y_n - y_2n|`` and the observed rates ``log2`` of successive ratios
    (for a network with ``depth_basis`` the same weights at every depth; layered: prolonged or
    coarsened by :func:`~splitnet.nets.depth.at_depth`). ``quadrature``: a reversible
    network's Gauss points per stage instead of its own (:func:`with_quadrature`)."""
    def run(n):
        m = at_depth(model, n)
        return (m if quadrature is None else with_quadrature(m, quadrature)).layers.run(x)
    with torch.no_grad():
        ys = [run(n) for n in depths]
    diffs = [float((a - b).norm()) for a, b in itertools.pairwise(ys)]
    return diffs, [math.log2(a / b) for a, b in itertools.pairwise(diffs)]


def vary_in_depth(model, scale: float = 0.5, seed: int = 0) -> None:
    """Make ``model``'s depth fields change with depth, in place: each coefficient but the
    first (for Legendre, those beyond the constant; for Bernstein and hat functions, which
    start all equal, their differences from the first) drawn ``N(0, (scale s)^2)``, ``s`` the
    spread of the first coefficient (0.02, GPT-2's scale of a weight, where that is 0: biases
    and norms). The convergence tables' non-trivial time-dependent weights (float64, fixed
    ``seed``)."""
    from ..fields.depthfield import DepthField

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if not isinstance(m, DepthField) or m.basis.K < 2:
                continue
            for p in m.inner.parameters():
                s = float(p[0].std()) if p[0].numel() > 1 else 0.0
                s = s if s > 0 else 0.02
                noise = torch.randn(p[1:].shape, generator=g, dtype=torch.float64)
                p[1:] += (scale * s * noise).to(p)


def steps_study(model, evaluate: Callable) -> list[tuple[int, float]]:
    """``(n, evaluate(at_depth(model, n)))`` for n = 1, 2, 4, ... up to twice the model's depth
    (its first stack's), the depths it can run at (any with ``depth_basis``; a layered network
    its depth's divisors and multiples). Eval mode, no gradients."""
    from ..nets.depth import at_depth, depths

    if not callable(evaluate):
        raise TypeError(f"evaluate must be a function model -> mean loss, got "
                        f"{type(evaluate).__name__}")
    L = next(iter(depths(model.config).values()))
    layered = model.config.depth_basis is None
    model.eval()
    out, n = [], 1
    with torch.no_grad():
        while n <= 2 * L:
            if not layered or L % n == 0 or n % L == 0:
                out.append((n, float(evaluate(at_depth(model, n).eval()))))
            n *= 2
    return out


def gap_rates(points) -> tuple[list, list, float | None]:
    """The gaps ``|loss(n) - loss(2n)|`` of successive points, the observed rates ``log2`` of
    successive gaps' ratios, and the fitted rate: the least-squares slope of ``-log2 gap``
    against ``log2 n`` over every positive gap (None with fewer than two)."""
    gaps = [(a[0], abs(a[1] - b[1])) for a, b in itertools.pairwise(points) if b[0] == 2 * a[0]]
    rates = [math.log2(g0 / g1) if g0 > 0 and g1 > 0 else float("nan")
             for (_, g0), (_, g1) in itertools.pairwise(gaps)]
    pos = [(math.log2(n), -math.log2(g)) for n, g in gaps if g > 0]
    if len(pos) < 2:
        return gaps, rates, None
    mx, my = sum(x for x, _ in pos) / len(pos), sum(y for _, y in pos) / len(pos)
    fit = sum((x - mx) * (y - my) for x, y in pos) / sum((x - mx) ** 2 for x, _ in pos)
    return gaps, rates, fit


def steps_table(points, unit: str = "bpb", scale: float = 1.0) -> str:
    """:func:`steps_study` as a text table: the loss at each n, the gap to 2n and its rate."""
    scale = check_real("scale", scale, lo=0.0, lo_open=True)
    gaps, rates, fit = gap_rates(points)
    gap = dict(gaps)
    rate = {n: r for (n, _), r in zip(gaps[1:], rates)}
    lines = [f"loss at n steps over the same time ({unit}; gap: |loss(n) - loss(2n)|, rate: "
             f"log2 of the gap's fall)", f"{'steps':>6} {unit:>9} {'gap to 2n':>10} {'rate':>6}"]
    for n, loss in points:
        g = f"{gap[n] * scale:10.4f}" if n in gap else f"{'':>10}"
        r = f"{rate[n]:6.2f}" if n in rate else ""
        lines.append(f"{n:>6} {loss * scale:9.4f} {g} {r}".rstrip())
    lines.append(f"fitted rate of the gap: {fit:.2f}" if fit is not None else
                 "fitted rate of the gap: - (fewer than two gaps)")
    return "\n".join(lines)


__all__ = ["DEFAULT_COARSEN", "DEFAULT_PROLONG", "MAX_FACTOR", "DepthPoint", "depth_errors",
           "depth_study", "depth_table", "factor_list", "gap_rates", "loss_of",
           "prolongation_errors", "steps_study", "steps_table", "vary_in_depth", "with_quadrature"]
