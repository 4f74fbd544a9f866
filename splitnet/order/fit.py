"""Fitting an order from errors: the slope of log(error) against log(h) over the step sizes
where the expansion in h holds (:func:`window_fit`: inside ``[FLOOR, CEILING]``, errors
increasing with h), the grid that puts enough points there (:func:`adaptive_errors`), and the
plain least-squares slope of the points above a floor (:func:`fit_slope`). Used by
:mod:`splitnet.order.check` and by every convergence study.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import numpy as np

FLOOR = 1e-13        # round-off floor of 6x6 float64 products of up to ~100 exponentials
CEILING = 1e-6       # largest error fitted: above it the expansion in h is not yet asymptotic


def fit_slope(step_sizes, errors, floor: float) -> tuple[float, np.ndarray]:
    """Least-squares slope of log(error) against log(h) over the points above ``floor`` whose
    errors decrease strictly with h (largest h first). Returns (slope, mask of points used)."""
    h = np.asarray(step_sizes, dtype=float)
    e = np.asarray(errors, dtype=float)
    order = np.argsort(-h)
    used = np.zeros(len(h), dtype=bool)
    prev = np.inf
    for i in order:
        if not (np.isfinite(e[i]) and e[i] > floor and e[i] < prev):
            break
        used[i] = True
        prev = e[i]
    if used.sum() < 2:
        return float("nan"), used
    slope = np.polyfit(np.log(h[used]), np.log(e[used]), 1)[0]
    return float(slope), used


def window_fit(step_sizes, errors, floor: float = FLOOR,
               ceiling: float = CEILING) -> tuple[float, np.ndarray]:
    """Slope of log(error) against log(h) over the longest run of consecutive step sizes (in
    increasing h) whose errors lie in [floor, ceiling] and increase strictly with h. Read from
    small h up: the asymptotic range is at small h, and round-off noise under ``floor`` or a
    pre-asymptotic wobble above ``ceiling`` cannot cut the run short. (slope, mask used)."""
    h = np.asarray(step_sizes, dtype=float)
    e = np.asarray(errors, dtype=float)
    idx = np.argsort(h)
    best: list[int] = []
    run: list[int] = []
    for i in idx:
        inside = np.isfinite(e[i]) and floor <= e[i] <= ceiling
        if inside and run and e[i] > e[run[-1]]:
            run.append(i)
        else:
            run = [i] if inside else []
        if len(run) > len(best):
            best = list(run)
    used = np.zeros(len(h), dtype=bool)
    used[best] = True
    if len(best) < 2:
        return float("nan"), used
    return float(np.polyfit(np.log(h[used]), np.log(e[used]), 1)[0]), used


def adaptive_errors(error: Callable[[float], float], floor: float = FLOOR,
                    ceiling: float = CEILING, h_start: float = 8.0, h_min: float = 2.0 ** -40,
                    min_points: int = 5, max_refine: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Errors ``error(h)`` on a grid chosen for the window [floor, ceiling]: ``h_start`` halved
    until the error is under ``floor``; then, while fewer than ``min_points`` errors lie in the
    window, the grid is refined around it (ratios 2^(-1/2), 2^(-1/4), ...; every level contains
    the previous one). Returns (step sizes, errors), largest h first."""
    cache: dict[float, float] = {}

    def e(h: float) -> float:
        if h not in cache:
            cache[h] = float(error(h))
        return cache[h]

    h = h_start
    while h >= h_min and not e(h) < floor:
        h /= 2
    for level in range(1, max_refine + 1):
        hs = np.array(sorted(cache, reverse=True))
        es = np.array([cache[x] for x in hs])
        if window_fit(hs, es, floor, ceiling)[1].sum() >= min_points:
            break
        below = hs[es < floor]
        above = hs[(es > ceiling) & (hs > (below.max() if below.size else 0.0))]
        lo = below.max() if below.size else hs.min()
        hi = above.min() if above.size else h_start
        m = 2 ** level
        k = np.arange(0, int(np.ceil(m * np.log2(h_start / lo))) + 1)
        for x in h_start * 2.0 ** (-k / m):
            if lo < x < hi:
                e(float(x))
    hs = np.array(sorted(cache, reverse=True))
    return hs, np.array([cache[x] for x in hs])


def check_declared(declared) -> int | None:
    if declared is None:
        return None
    if isinstance(declared, bool) or not isinstance(declared, numbers.Integral) or declared < 1:
        raise ValueError(f"order must be a positive integer (the classical order p), got "
                         f"{declared!r}")
    return int(declared)

def check_fit(floor, ceiling, tolerance) -> None:
    """The fit's window and tolerance: finite, ``0 <= floor < ceiling`` (``ceiling`` may be
    inf), ``tolerance > 0``. A NaN floor fitted nothing after computing every error; a negative
    one fitted round-off; a negative or NaN tolerance made every verdict a mismatch."""
    def real(name, v):
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or math.isnan(v):
            raise ValueError(f"{name} must be a number, got {v!r}")
        return float(v)

    if floor is not None and not (math.isfinite(real("floor", floor)) and floor >= 0):
        raise ValueError(f"floor must be a finite number >= 0, got {floor!r}")
    if not real("ceiling", ceiling) > (floor or 0.0):
        raise ValueError(f"ceiling must be above the floor ({floor or 0:g}), got {ceiling!r}")
    if not (math.isfinite(real("tolerance", tolerance)) and tolerance > 0):
        raise ValueError(f"tolerance must be a finite number > 0, got {tolerance!r}")

def usable_steps(step_sizes) -> np.ndarray:
    """Given step sizes as floats; non-finite, non-positive or subnormal ones become NaN (the
    check reports them unusable, never a slope from them). A string or a mapping is no list
    of step sizes (TypeError)."""
    if isinstance(step_sizes, (str, bytes, dict)):
        raise TypeError(f"step_sizes must be a list of numbers, got {step_sizes!r}")
    hs = np.asarray(step_sizes, dtype=float).ravel()
    bad = ~np.isfinite(hs) | (hs < np.finfo(float).tiny)
    return np.where(bad, np.nan, hs)


__all__ = ["CEILING", "FLOOR", "adaptive_errors", "check_declared", "check_fit", "fit_slope",
           "usable_steps", "window_fit"]
