"""Measure the order of any stage list on random non-commuting matrices.

For linear fields ``D(x) = A x``, ``C(x) = B x`` the sub-flows are exact matrix exponentials and
one step of a scheme is the product ``expm(c_s h X_s) ... expm(c_1 h X_1)``. Its local error
against ``expm(h (A + B))`` is ``O(h^(p+1))`` for a method of order p. Random dense 6x6 matrices
share no structure (they do not commute and no kick/drift symmetry hides a defect), unlike a
harmonic oscillator, on which wrong higher-order coefficient sets have passed before.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .stages import DIFFUSION, as_stages


@dataclass(frozen=True)
class OrderCheck:
    name: str
    declared: int | None
    measured: float            # fitted local slope - 1: the global order
    step_sizes: np.ndarray
    errors: np.ndarray
    used: np.ndarray = field(repr=False)
    tolerance: float = 0.3
    tail: float = float("nan")   # slope - 1 over the 3 smallest fitted h: the asymptotic order

    @property
    def ok(self) -> bool:
        """Both the fitted order and the tail order (smallest h) within ``tolerance`` of the
        declared order (or of the nearest integer when none is declared). The tail catches
        coefficient sets that are right to a few digits only: their error is the correct
        ``O(h^(p+1))`` at large h and a lower order once the defect term takes over."""
        target = self.declared if self.declared is not None else round(self.measured)
        return bool(all(np.isfinite(v) and abs(v - target) <= self.tolerance
                        for v in (self.measured, self.tail)))

    def summary(self) -> str:
        verdict = "OK" if self.ok else "MISMATCH"
        d = "-" if self.declared is None else str(self.declared)
        return (f"{self.name}: declared order {d}, measured {self.measured:.2f} "
                f"(smallest h: {self.tail:.2f}) on random non-commuting matrices -> {verdict}")


def random_matrices(dim: int = 6, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two random dense matrices of spectral norm 1 (they do not commute)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((dim, dim))
    b = rng.standard_normal((dim, dim))
    return a / np.linalg.norm(a, 2), b / np.linalg.norm(b, 2)


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
    s = max(0, int(np.ceil(np.log2(norm / 0.5)))) if norm > 0.5 else 0
    x = m / 2.0 ** s
    eye = np.eye(m.shape[0])
    p = eye
    for k in range(20, 0, -1):
        p = eye + (x @ p) / k
    for _ in range(s):
        p = p @ p
    return p


def matrix_step(stages, a: np.ndarray, b: np.ndarray, h: float) -> np.ndarray:
    """One step of the scheme on ``x' = (A + B) x`` with exact sub-flows (A = diffusion):
    the product ``expm(c_s h X_s) ... expm(c_1 h X_1)``, first stage rightmost."""
    m = np.eye(a.shape[0])
    cache: dict = {}
    for st in stages:
        key = (st.field, st.coeff)
        if key not in cache:       # compositions repeat coefficients (palindromes, patterns)
            cache[key] = expm(st.coeff * h * (a if st.field == DIFFUSION else b))
        m = cache[key] @ m
    return m


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


def measure_order(stages, declared: int | None = None, name: str = "custom", dim: int = 6,
                  seed: int = 0, step_sizes=None, floor: float = 1e-13,
                  tolerance: float = 0.3) -> OrderCheck:
    """Measure the classical order of a stage sequence and compare it with ``declared``.
    Float64, exact matrix exponentials, h = 2^(-k/2), k = 2..16, points above ``floor``
    only (round-off is ~1e-15 here: the matrices have norm 1). The verdict needs both the slope
    fitted over all points and the slope over the three smallest h (``tail``) to match.
    :func:`splitnet.check_order` is the front door (it also takes names and schemes)."""
    stages = as_stages(stages)
    a, b = random_matrices(dim, seed)
    hs = np.asarray(step_sizes if step_sizes is not None
                    else [2.0 ** (-k / 2) for k in range(2, 17)])
    errs = np.array([np.linalg.norm(matrix_step(stages, a, b, h) - expm(h * (a + b)), 2)
                     for h in hs])
    slope, used = fit_slope(hs, errs, floor)
    tail = float("nan")
    idx = np.flatnonzero(used)
    if len(idx) >= 3:
        last = idx[np.argsort(hs[idx])[:3]]
        tail = float(np.polyfit(np.log(hs[last]), np.log(errs[last]), 1)[0]) - 1.0
    return OrderCheck(name, declared, slope - 1.0, hs, errs, used, tolerance, tail)
