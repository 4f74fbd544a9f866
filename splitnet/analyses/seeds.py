"""Comparisons over seeds: is arrangement A better than B, and could this study have told?

Two arrangements trained on the same seeds (the same batches, masks and initial draws per seed)
give paired scores ``a_i, b_i``; their differences ``d_i = a_i - b_i`` (i = 1..n) carry the
comparison. With ``m`` and ``s`` the mean and sample standard deviation of the ``d_i``:

* the paired t statistic ``t = m / (s / sqrt(n))`` on ``n - 1`` degrees of freedom, and its
  two-sided p value;
* the 95 % interval of the mean difference ``m ± t_{0.975, n-1} s / sqrt(n)``;
* the **detectable difference**: the smallest true mean difference ``delta`` that a paired
  two-sided test at level ``alpha`` rejects with probability ``power`` when the differences
  have standard deviation ``s``: the ``delta`` solving
  ``P(|T'| > t_{1-alpha/2, n-1}) = power`` for ``T'`` noncentral t with ``n - 1`` degrees of
  freedom and noncentrality ``delta sqrt(n) / s`` (exact, not the normal approximation; with
  three seeds the two differ by a factor of about 1.5);
* :func:`seeds_for`: how many seeds that test needs to detect a given ``delta``.

``s`` is itself estimated from the seeds, so the detectable difference of a three-seed study is
rough; it says what a study of this spread can resolve, not what the truth is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

__all__ = ["ALPHA", "POWER", "Paired", "detectable", "paired", "power_of", "seeds_for"]

ALPHA = 0.05
POWER = 0.8


def power_of(delta: float, sd: float, n: int, alpha: float = ALPHA) -> float:
    """P(a paired two-sided t test of n pairs at level alpha rejects) when the differences have
    mean ``delta`` and standard deviation ``sd``."""
    if n < 2:
        raise ValueError(f"a paired t test needs at least 2 pairs, got {n}")
    if sd <= 0:
        return 1.0 if delta != 0 else alpha
    df, nc = n - 1, abs(delta) * math.sqrt(n) / sd
    crit = stats.t.ppf(1 - alpha / 2, df)
    upper, lower = stats.nct.sf(crit, df, nc), stats.nct.cdf(-crit, df, nc)
    # scipy's noncentral t returns NaN far in a tail (df 1, nc ~20): there the far tail is 0
    # and the near one is its complement
    lower = 0.0 if math.isnan(lower) else lower
    if math.isnan(upper):
        upper = 1.0 - stats.nct.cdf(crit, df, nc)
        upper = (1.0 if nc > crit else 0.0) if math.isnan(upper) else upper
    return float(min(1.0, upper + lower))


def detectable(sd: float, n: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest mean difference detected with probability ``power`` (see the module)."""
    if not 0 < power < 1 or not 0 < alpha < power:
        raise ValueError(f"need 0 < alpha < power < 1, got alpha {alpha}, power {power}")
    if sd <= 0:
        return 0.0
    f = lambda delta: power_of(delta, sd, n, alpha) - power   # noqa: E731
    hi = sd
    while f(hi) < 0:
        hi *= 2
    return float(optimize.brentq(f, 0.0, hi, xtol=1e-12 * sd))


def seeds_for(delta: float, sd: float, alpha: float = ALPHA, power: float = POWER,
              most: int = 10_000) -> int | None:
    """The fewest seeds (pairs) whose paired test detects ``delta`` with probability ``power``;
    None beyond ``most``."""
    if delta == 0:
        return None
    for n in range(2, most + 1):
        if power_of(delta, sd, n, alpha) >= power:
            return n
    return None


@dataclass(frozen=True)
class Paired:
    """A paired comparison of ``a`` against ``b`` over ``n`` seeds (differences ``a - b``)."""

    n: int
    mean: float
    sd: float
    t: float
    p: float
    low: float
    high: float
    detectable: float

    def verdict(self, claim: float, better: int = 1) -> str:
        """What the study says of the claim 'a exceeds b by ``claim``' (``better=-1``: 'a is
        below b by ``claim``', for losses); ``claim=0``: 'a is better at all'.

        ``confirmed``: the 95 % interval lies beyond zero on the claimed side (and, for a sized
        claim, reaches the claimed size); ``refuted``: the interval excludes the claimed size
        (or, for ``claim=0``, lies on the other side of zero); ``beyond power``: neither, and
        the detectable difference exceeds the claimed one; ``undecided``: neither, though the
        study could have detected the claimed size."""
        lo, hi = (self.low, self.high) if better > 0 else (-self.high, -self.low)
        if lo > 0 and hi >= claim:
            return "confirmed"
        if (claim > 0 and hi < claim) or (claim == 0 and hi < 0):
            return "refuted"
        if claim > 0 and self.detectable > claim:
            return "beyond power"
        return "undecided"


def paired(a, b, alpha: float = ALPHA, power: float = POWER) -> Paired:
    """The paired comparison of scores ``a`` and ``b`` (one per seed, same seeds, same order)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired scores need two equal-length lists, got {a.shape} and "
                         f"{b.shape}")
    n = a.size
    if n < 2:
        raise ValueError(f"a paired comparison needs at least 2 seeds, got {n}")
    d = a - b
    m, s = float(d.mean()), float(d.std(ddof=1))
    half = float(stats.t.ppf(1 - alpha / 2, n - 1)) * s / math.sqrt(n)
    t = math.copysign(math.inf, m) if s == 0 and m != 0 else (m / (s / math.sqrt(n)) if s else 0.0)
    p = float(2 * stats.t.sf(abs(t), n - 1)) if math.isfinite(t) else 0.0
    return Paired(n=n, mean=m, sd=s, t=t, p=p, low=m - half, high=m + half,
                  detectable=detectable(s, n, alpha, power))
