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
import numbers
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

__all__ = ["ALPHA", "MAX_PAIRS", "POWER", "Paired", "detectable", "paired", "power_of", "seeds_for"]

ALPHA = 0.05
POWER = 0.8


def _real(name: str, v, lo: float | None = None) -> float:
    """``v`` as a finite float (>= ``lo``); ValueError naming ``name`` otherwise."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {v!r}")
    if lo is not None and v < lo:
        raise ValueError(f"{name} must be >= {lo:g}, got {v!r}")
    return float(v)


MAX_PAIRS = 2**53        # counts beyond float64's integers (scipy's t takes df as a float)


def _count(name: str, v, lo: int = 2) -> int:
    """``v`` as an int in [lo, :data:`MAX_PAIRS`] (a float such as 2.5 or 3.0 is refused:
    seeds are counted)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    if v > MAX_PAIRS:
        raise ValueError(f"{name} must be <= 2**53, got {v}")
    return int(v)


def _levels(alpha, power=None) -> tuple[float, float | None]:
    """The test's level ``alpha`` in (0, 1) and, when given, ``power`` in (alpha, 1)."""
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be a number in (0, 1), got {alpha!r}")
    if power is None:
        return float(alpha), None
    if isinstance(power, bool) or not isinstance(power, numbers.Real) or \
            not alpha < power < 1:
        raise ValueError(f"need 0 < alpha < power < 1, got alpha {alpha!r}, power {power!r}")
    return float(alpha), float(power)


def power_of(delta: float, sd: float, n: int, alpha: float = ALPHA) -> float:
    """P(a paired two-sided t test of n pairs at level alpha rejects) when the differences have
    mean ``delta`` and standard deviation ``sd`` (``sd = 0``: every nonzero difference is
    detected). Every argument is checked: ``delta`` finite, ``sd`` finite and >= 0, ``n`` an
    int >= 2, ``alpha`` in (0, 1); ValueError naming the one that is not."""
    delta, sd = _real("delta", delta), _real("sd", sd, lo=0.0)
    n = _count("n", n)
    alpha, _ = _levels(alpha)
    if sd == 0:
        return 1.0 if delta != 0 else alpha
    return _power(abs(delta) / sd, n, alpha)


def _power(ratio: float, n: int, alpha: float) -> float:
    """The power at ``delta / sd = ratio`` (>= 0; inf where the ratio overflows: power 1)."""
    df = n - 1
    nc = ratio * math.sqrt(n)
    crit = stats.t.ppf(1 - alpha / 2, df)
    if not math.isfinite(nc):
        return 1.0
    upper, lower = stats.nct.sf(crit, df, nc), stats.nct.cdf(-crit, df, nc)
    # scipy's noncentral t returns NaN far in a tail (df 1, nc ~20): there the far tail is 0
    # and the near one is its complement
    lower = 0.0 if math.isnan(lower) else lower
    if math.isnan(upper):
        upper = 1.0 - stats.nct.cdf(crit, df, nc)
        upper = (1.0 if nc > crit else 0.0) if math.isnan(upper) else upper
    return float(min(1.0, upper + lower))


def detectable(sd: float, n: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest mean difference detected with probability ``power`` (see the module).

    The power depends on ``delta / sd`` alone, so the root is found for ``sd = 1`` (a bracket
    doubled at most 1,100 times, then Brent's method) and scaled by ``sd``: a tiny or huge
    ``sd`` cannot stall the search. Arguments as :func:`power_of`'s, ``power`` in
    (alpha, 1); a difference beyond float64 is a ValueError."""
    sd, n = _real("sd", sd, lo=0.0), _count("n", n)
    alpha, power = _levels(alpha, power)
    if sd == 0:
        return 0.0
    f = lambda r: _power(r, n, alpha) - power   # noqa: E731
    hi = 1.0
    for _ in range(1100):                 # 2**1100 overflows: the bracket is finite or nothing
        if f(hi) >= 0:
            break
        hi *= 2
    else:
        raise ValueError(f"no finite difference reaches power {power:g} with n={n} "
                         f"(alpha {alpha:g})")
    out = sd * float(optimize.brentq(f, 0.0, hi, xtol=1e-12))
    if not math.isfinite(out):
        raise ValueError(f"the detectable difference of sd={sd!r} over n={n} seeds overflows "
                         f"float64: rescale the scores")
    return out


def seeds_for(delta: float, sd: float, alpha: float = ALPHA, power: float = POWER,
              most: int = 10_000) -> int | None:
    """The fewest seeds (pairs) whose paired test detects ``delta`` with probability ``power``;
    None when ``delta`` is 0 or more than ``most`` seeds are needed. The power rises with the
    number of seeds, so the count is found by doubling and bisection (a few dozen power
    evaluations, whatever ``most``). Arguments checked as :func:`power_of`'s; ``most`` an int
    >= 2."""
    delta, sd = _real("delta", delta), _real("sd", sd, lo=0.0)
    alpha, power = _levels(alpha, power)
    most = _count("most", most)
    if delta == 0:
        return None

    def enough(n: int) -> bool:
        return power_of(delta, sd, n, alpha) >= power

    if not enough(most):
        return None
    lo, hi = 1, 2                 # enough(hi); not enough(lo) (one pair is no test)
    while not enough(hi):
        lo, hi = hi, min(2 * hi, most)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return hi


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
        claim = _real("claim", claim, lo=0.0)
        if isinstance(better, bool) or better not in (1, -1):
            raise ValueError(f"better must be 1 (higher is better) or -1 (lower is better, "
                             f"a loss), got {better!r}")
        lo, hi = (self.low, self.high) if better > 0 else (-self.high, -self.low)
        if lo > 0 and hi >= claim:
            return "confirmed"
        if (claim > 0 and hi < claim) or (claim == 0 and hi < 0):
            return "refuted"
        if claim > 0 and self.detectable > claim:
            return "beyond power"
        return "undecided"


def _scores(name: str, v) -> np.ndarray:
    """One list of scores as a 1-D float64 array: numbers only (no strings, bools or None),
    every one finite; ValueError naming the list and the first bad entry."""
    try:
        raw = np.asarray(v)
        if raw.dtype.kind not in "iuf":
            raise TypeError(raw.dtype)
        out = raw.astype(float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a list of numbers (one score per seed), got "
                         f"{v!r:.80}") from None
    if out.ndim != 1:
        raise ValueError(f"{name} must be a flat list of scores, one per seed; got shape "
                         f"{out.shape}")
    bad = np.flatnonzero(~np.isfinite(out))
    if bad.size:
        raise ValueError(f"{name}[{bad[0]}] is {out[bad[0]]}: every score must be finite")
    return out


def paired(a, b, alpha: float = ALPHA, power: float = POWER) -> Paired:
    """The paired comparison of scores ``a`` and ``b`` (one per seed, same seeds, same order).
    Scores must be finite numbers; differences, their spread or the interval beyond float64
    (scores near 1e308) are a ValueError, never an infinite or NaN row."""
    alpha, power = _levels(alpha, power)
    a, b = _scores("a", a), _scores("b", b)
    if a.shape != b.shape:
        raise ValueError(f"paired scores need two equal-length lists, got {a.shape} and "
                         f"{b.shape}")
    n = a.size
    if n < 2:
        raise ValueError(f"a paired comparison needs at least 2 seeds, got {n}")
    with np.errstate(over="ignore", invalid="ignore"):
        d = a - b
        scale = float(np.max(np.abs(d)))
        if not math.isfinite(scale):
            i = int(np.flatnonzero(~np.isfinite(d))[0])
            raise ValueError(f"the difference a[{i}] - b[{i}] = {float(a[i])!r} - "
                             f"{float(b[i])!r} overflows float64: rescale the scores")
        u = d / scale if scale > 0 else d    # mean and spread of d / max|d|: no overflow
        m, s = scale * float(u.mean()), scale * float(u.std(ddof=1))
        half = float(stats.t.ppf(1 - alpha / 2, n - 1)) * s / math.sqrt(n)
    if not (math.isfinite(s) and math.isfinite(half) and math.isfinite(m - half)
            and math.isfinite(m + half)):
        raise ValueError(f"the differences' spread (sd {s:g}) makes the interval overflow "
                         f"float64: rescale the scores")
    t = math.copysign(math.inf, m) if s == 0 and m != 0 else (m / (s / math.sqrt(n)) if s else 0.0)
    p = float(2 * stats.t.sf(abs(t), n - 1)) if math.isfinite(t) else 0.0
    return Paired(n=n, mean=m, sd=s, t=t, p=p, low=m - half, high=m + half,
                  detectable=detectable(s, n, alpha, power))
