"""check_order: measured orders of every registry scheme on random non-commuting matrices, and
wrong coefficient sets caught."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

import splitnet as sn
from splitnet.check import expm, fit_slope, matrix_step, random_matrices
from splitnet.schemes import BlanesMoan4, StrangComposition

REGISTRY = sn.schemes.available()      # a new scheme is tested without editing this file


@pytest.mark.parametrize("name", REGISTRY)
@pytest.mark.parametrize("seed", [0, 1])
def test_every_registry_scheme_has_its_declared_order(name, seed):
    s = sn.schemes.get(name)
    r = sn.check_order(s, seed=seed)
    assert r.declared == s.order
    assert abs(r.measured - s.order) <= 0.3, r.summary()
    assert abs(r.tail - s.order) <= 0.3, r.summary()
    assert r.ok and "OK" in r.summary()
    assert r.used.sum() >= 4


@pytest.mark.parametrize("name", REGISTRY)
def test_orders_with_scipy_expm_sub_flows(name):
    """Independent of the library's stepping and exponential: products of
    ``scipy.linalg.expm`` over the stage list, local error against expm(h (A + B))."""
    s = sn.schemes.get(name)
    a, b = random_matrices(7, seed=11)
    p = s.order
    # Step sizes whose errors stay well above round-off for this order.
    hs = np.array({1: [.2, .1, .05, .025], 2: [.2, .1, .05, .025], 4: [.4, .2, .1, .05],
                   6: [.8, .56, .4, .28], 8: [1.2, 1.0, .8, .6]}[p])
    errs = []
    for h in hs:
        m = np.eye(7)
        for st in s.stages:
            m = scipy.linalg.expm(st.coeff * h * (a if st.field == "diffusion" else b)) @ m
        errs.append(np.linalg.norm(m - scipy.linalg.expm(h * (a + b)), 2))
    slope, used = fit_slope(hs, errs, 1e-13)
    assert used.all()
    assert abs(slope - (p + 1)) <= 0.3, (name, slope, errs)


def test_fast_expm_matches_scipy():
    for seed in range(4):
        a, b = random_matrices(6, seed)
        for t in (1e-3, 0.05, 0.7, 2.0, -1.3):
            ref = scipy.linalg.expm(t * (a + b))
            assert np.abs(expm(t * (a + b)) - ref).max() < 2e-14


def test_matrix_step_is_the_product_of_exponentials():
    a, b = random_matrices(5, 2)
    s = sn.schemes.get("strang")
    h = 0.3
    want = scipy.linalg.expm(h / 2 * b) @ scipy.linalg.expm(h * a) @ scipy.linalg.expm(h / 2 * b)
    np.testing.assert_allclose(matrix_step(s.stages, a, b, h), want, atol=1e-14)


def test_random_matrices_do_not_commute():
    a, b = random_matrices(6, 0)
    assert np.linalg.norm(a @ b - b @ a) > 0.1
    assert np.linalg.norm(a, 2) == pytest.approx(1.0)


class _TypoBlanesMoan(BlanesMoan4):
    """S6 with two digits of a1 swapped: 0.0792... -> 0.0729..."""

    name = "blanes-moan4-typo"
    a = (0.0729036964311957, 0.353172906049774, -0.0420650803577195)


class _TruncatedTripleJump(StrangComposition):
    """The triple jump with its weight truncated to 5 digits: right at large h, second order
    once the sum g^3 defect (~1e-4) dominates; the fit over all h alone calls it 3.6."""

    name, order, weights = "yoshida4-5digits", 4, (1.3512,)


@pytest.mark.parametrize("factory,asymptotic", [(_TypoBlanesMoan, 2), (_TruncatedTripleJump, 2)])
def test_wrong_coefficients_are_caught(factory, asymptotic):
    r = sn.check_order(factory())
    assert not r.ok and "MISMATCH" in r.summary()
    assert abs(r.tail - asymptotic) <= 0.3, r.summary()


def test_perturbed_stage_list_is_caught():
    """A user's list: Strang's stages with the first convection weight off by 1 %; sums are
    rebalanced so validation passes, and the order drops to 1."""
    st = [("convection", 0.505), ("diffusion", 1.0), ("convection", 0.495)]
    r = sn.check_order(st, order=2)
    assert not r.ok
    assert abs(r.tail - 1) <= 0.3, r.summary()       # asymptotically first order


def test_declared_order_defaults_and_overrides():
    r = sn.check_order([("convection", .5), ("diffusion", 1), ("convection", .5)])
    assert r.declared is None and r.ok and round(r.measured) == 2       # nearest integer
    assert not sn.check_order(sn.schemes.get("strang"), order=3).ok
    assert sn.check_order(sn.schemes.get("strang"), order=2, seed=5, dim=9).ok


def test_fit_slope_uses_points_above_the_floor_that_decrease():
    h = np.array([0.4, 0.2, 0.1, 0.05, 0.025, 0.0125])
    e = 3.0 * h ** 4
    e[-2:] = [1e-16, 2e-16]                          # round-off plateau
    slope, used = fit_slope(h, e, floor=1e-14)
    assert slope == pytest.approx(4.0) and used.tolist() == [True] * 4 + [False] * 2
    e2 = 3.0 * h ** 4
    e2[3] = e2[2] * 1.5                              # stops at the first increase
    slope2, used2 = fit_slope(h, e2, floor=0)
    assert used2.sum() == 3 and slope2 == pytest.approx(4.0)
    assert np.isnan(fit_slope(h, np.full(6, 1e-20), floor=1e-14)[0])
    # order of the inputs does not matter
    assert fit_slope(h[::-1], (3.0 * h ** 4)[::-1], 0)[0] == pytest.approx(4.0)
