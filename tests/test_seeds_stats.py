"""Paired comparisons over seeds (splitnet.analyses.seeds): the t test and interval against
scipy's, the detectable difference against a simulation of the test it predicts, the verdicts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from splitnet.analyses import seeds as S


def test_t_p_and_interval_equal_scipys_paired_test():
    rng = np.random.default_rng(0)
    a, b = rng.normal(1.0, 0.3, 8), rng.normal(1.1, 0.3, 8)
    got = S.paired(a, b)
    ref = stats.ttest_rel(a, b)
    ci = ref.confidence_interval(0.95)
    assert got.n == 8 and got.t == pytest.approx(ref.statistic, rel=1e-12)
    assert got.p == pytest.approx(ref.pvalue, rel=1e-10)
    assert (got.low, got.high) == (pytest.approx(ci.low, rel=1e-12),
                                   pytest.approx(ci.high, rel=1e-12))
    assert got.mean == pytest.approx(float(np.mean(a - b)), rel=1e-12)


@pytest.mark.parametrize("n", [3, 8])
def test_the_detectable_difference_is_detected_80_percent_of_the_time(n):
    """Simulate 40,000 studies of n seeds whose differences have mean delta = detectable(1, n)
    and sd 1: the paired test at 5 % rejects in 80 % of them (+- 1 point, 5 standard errors)."""
    delta = S.detectable(1.0, n)
    rng = np.random.default_rng(1)
    d = rng.normal(delta, 1.0, (40_000, n))
    t = d.mean(1) / (d.std(1, ddof=1) / math.sqrt(n))
    rejected = np.mean(np.abs(t) > stats.t.ppf(0.975, n - 1))
    assert rejected == pytest.approx(0.80, abs=0.01)
    # the normal approximation would promise far less at three seeds
    normal = (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) / math.sqrt(n)
    assert delta > normal * (1.4 if n == 3 else 1.05)


def test_power_is_finite_and_rises_with_the_difference_even_at_two_seeds():
    """scipy's noncentral t is NaN far in its tails at one degree of freedom (nc ~ 20):
    the power there is still a number, rising to 1 (a toy study of two seeds hit this)."""
    powers = [S.power_of(d, 1.0, 2) for d in (0.0, 1.0, 5.0, 20.0, 100.0, 1e4)]
    assert all(0.0 <= p <= 1.0 for p in powers) and powers == sorted(powers)
    assert powers[0] == pytest.approx(0.05) and powers[-1] > 0.99
    assert 0 < S.detectable(1.0, 2) < 100


def test_seeds_for_is_the_first_count_with_enough_power():
    n = S.seeds_for(0.5, 1.0)
    assert S.power_of(0.5, 1.0, n) >= 0.8 > S.power_of(0.5, 1.0, n - 1)
    assert S.detectable(1.0, n) <= 0.5 < S.detectable(1.0, n - 1)
    assert S.seeds_for(0.0, 1.0) is None and S.seeds_for(1e-4, 1.0, most=50) is None


def test_verdicts():
    def at(low, high, detectable=0.5):
        return S.Paired(n=8, mean=(low + high) / 2, sd=1, t=0, p=0, low=low, high=high,
                        detectable=detectable)
    assert at(0.3, 1.6).verdict(1.0) == "confirmed"       # above 0, the claim inside
    assert at(0.2, 0.6).verdict(1.0) == "refuted"         # the claimed +1 excluded
    assert at(-0.5, 1.6, detectable=2.0).verdict(1.0) == "beyond power"
    assert at(-0.5, 1.6, detectable=0.8).verdict(1.0) == "undecided"
    # losses: lower is better
    assert at(-0.2, -0.05).verdict(0, better=-1) == "confirmed"
    assert at(0.05, 0.2).verdict(0, better=-1) == "refuted"
    assert at(-0.1, 0.1).verdict(0, better=-1) == "undecided"


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="equal-length"):
        S.paired([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="at least 2 seeds"):
        S.paired([1.0], [2.0])
    with pytest.raises(ValueError, match="alpha < power"):
        S.detectable(1.0, 5, alpha=0.5, power=0.4)
