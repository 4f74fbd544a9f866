"""What the mutation run of ``integrators/subflows.py`` showed unstated (issue 33): the stage
times of fraction and float nodes, the float tableaux' arithmetic, the exact flow's accuracy,
interval and options, a tableau's stored entries, the classes made from tableaux at run time
(their name, docstring and module), and the checks' one-line messages.

Classes and tableaux are built inside the tests: the registry is made at import, before a
mutant is switched on, so only what a test calls again is checked (docs/testing.md).
"""

from __future__ import annotations

import math
from fractions import Fraction as Fr

import pytest
import torch

from splitnet.integrators import subflows as S

# x' = cos(t) x^2: nonlinear, non-autonomous; x(t) = 1 / (1/x0 - sin t)
X0 = torch.tensor([0.5, -0.3, 0.2, 0.7], dtype=torch.float64)


def _field(t, x):
    return math.cos(t) * x * x


def _exact(t0, x0, t1):
    return 1.0 / (1.0 / x0 - math.sin(t1) + math.sin(t0))


def _times_seen(tab, t=1.0, dt=0.3):
    seen = []

    def f(s, x):
        seen.append(s)
        return x

    S._explicit_class(tab)()(f, t, torch.ones(2, dtype=torch.float64), dt)
    return seen


def test_stage_times_of_fraction_and_float_nodes():
    """``t + c_i dt`` for every node: 0, a unit fraction (1/3), another fraction (2/3) and a
    float node (0.3); each the one rounding the module docstring promises."""
    heun3 = S.ButcherTableau("heun3", a=((), (Fr(1, 3),), (0, Fr(2, 3))),
                             b=(Fr(1, 4), 0, Fr(3, 4)), c=(0, Fr(1, 3), Fr(2, 3)), declared=3)
    assert _times_seen(heun3) == [1.0, 1.0 + 0.3 / 3, 1.0 + 0.3 * 2 / 3]
    alpha = 0.3
    ralston_like = S.ButcherTableau("alpha", a=((), (alpha,)),
                                    b=(1 - 1 / (2 * alpha), 1 / (2 * alpha)), c=(0, alpha))
    assert ralston_like.order == 2
    assert _times_seen(ralston_like) == [1.0, 1.0 + 0.3 * alpha]


def test_a_float_tableau_steps_with_its_own_weights():
    """A float tableau (the second-order family with node 0.3) advances ``x + dt (b1 k1 + b2
    k2)`` with its float weights, no common denominator: one step equals the formula to
    rounding, and the method converges at order 2."""
    alpha = 0.3
    tab = S.ButcherTableau("alpha", a=((), (alpha,)), b=(1 - 1 / (2 * alpha), 1 / (2 * alpha)),
                           c=(0, alpha), declared=2)
    step = S._explicit_class(tab)()
    t, dt = 0.2, 0.1
    k1 = _field(t, X0)
    k2 = _field(t + alpha * dt, X0 + alpha * dt * k1)
    want = X0 + dt * ((1 - 1 / (2 * alpha)) * k1 + 1 / (2 * alpha) * k2)
    torch.testing.assert_close(step(_field, t, X0, dt), want, rtol=0, atol=1e-15)
    errs = [float((step(_field, 0.0, X0, h) - _exact(0.0, X0, h)).abs().max())
            for h in (0.04, 0.02)]
    assert 2.6 < math.log2(errs[0] / errs[1]) < 3.4       # local error O(h^3)


def test_classes_made_from_a_tableau_at_run_time():
    """``_explicit_class``: named from the tableau (digits: upper case; else capitalised), the
    docstring its text (or its name) with order and evaluations, this module's, holding the
    tableau, an ExplicitRungeKutta."""
    tab = S.ButcherTableau("ssprk3", a=((), (1,), (Fr(1, 4), Fr(1, 4))),
                           b=(Fr(1, 6), Fr(1, 6), Fr(2, 3)), c=(0, 1, Fr(1, 2)), declared=3,
                           text="Shu–Osher SSP RK3")
    cls = S._explicit_class(tab)
    assert cls.__name__ == "SSPRK3" and issubclass(cls, S.ExplicitRungeKutta)
    assert cls.__doc__ == "Shu–Osher SSP RK3: order 3, 3 field evaluation(s)."
    assert cls.__module__ == "splitnet.integrators.subflows"
    assert cls.tableau is tab and (cls.order, cls.evals, cls.name) == (3, 3, "ssprk3")
    plain = S._explicit_class(S.ButcherTableau("ralston", a=((), (Fr(2, 3),)),
                                               b=(Fr(1, 4), Fr(3, 4)), c=(0, Fr(2, 3))))
    assert plain.__name__ == "Ralston"
    assert plain.__doc__ == "ralston: order 2, 2 field evaluation(s)."


def test_a_tableau_stores_exact_fractions_and_floats():
    """Integers become Fractions (exact order conditions), floats stay floats: a, b and c."""
    t = S.ButcherTableau("t", a=((), (1,)), b=(0.5, 0.5), c=(0, 1))
    assert t.a == ((), (Fr(1),)) and type(t.a[1][0]) is Fr
    assert t.b == (0.5, 0.5) and all(type(v) is float for v in t.b)
    assert t.c == (Fr(0), Fr(1)) and all(type(v) is Fr for v in t.c)
    mid = S.ButcherTableau("mid", a=((), (0.5,)), b=(0, 1), c=(0, 0.5))
    assert all(type(v) is Fr for v in mid.b) and type(mid.a[1][0]) is float


def test_fraction_conditions_are_checked_exactly():
    """A fraction weight 1e-14 off its condition fails it (no float tolerance for exact
    entries): Euler with b = 1 + 1e-14 is not consistent."""
    with pytest.raises(ValueError, match="not consistent: sum b = 1"):
        S.ButcherTableau("off", a=((),), b=(1 + Fr(1, 10 ** 14),), c=(0,))
    assert S.failed_conditions(((),), (1.0 + 1e-14,), 1) == []     # a float: to 1e-12


@pytest.mark.parametrize("kw,msg", [
    ({"a": ((),), "b": (1,), "c": (0, 1)}, r"one entry per stage .* 1 rows, 1 weights, 2 nodes"),
    ({"a": ((), (1,)), "b": (1,), "c": (0,)}, r"one entry per stage .* 2 rows, 1 weights, 1 nodes"),
    ({"a": ((), (1,)), "b": (0, 1), "c": (0, float("inf"))}, r"c\[1\] must be finite"),
])
def test_a_tableau_with_a_wrong_part_is_refused(kw, msg):
    with pytest.raises(ValueError, match=msg):
        S.ButcherTableau("bad", **kw)


def test_the_derivation_stops_at_the_largest_tree_checked(monkeypatch):
    """With trees up to 2 vertices checked, the midpoint method meets every one: order 2, and
    a declared 3 is refused as meeting every condition checked (not as failing a tree)."""
    monkeypatch.setattr(S, "MAX_TREE_ORDER", 2)
    mid = {"a": ((), (Fr(1, 2),)), "b": (0, 1), "c": (0, Fr(1, 2))}
    assert S.ButcherTableau("mid", **mid).order == 2
    with pytest.raises(ValueError, match=r"declares order 3 .* up to order 2 "
                                         r"\(meets every condition checked\)$"):
        S.ButcherTableau("mid", declared=3, **mid)


# ---------------------------------------------------------------------------------------------
# exact: torchdiffeq at tight tolerances

def test_exact_solves_forward_over_the_step_in_float64():
    """From t = 0.4 over dt = 0.6 the exact sub-flow matches the closed form to 1e-12 (float64
    tolerances 1e-13 / 1e-15; the times in float64)."""
    got = S.Exact()(_field, 0.4, X0, 0.6)
    assert got.dtype == torch.float64
    assert float((got - _exact(0.4, X0, 1.0)).abs().max()) < 1e-12
    assert S.default_tolerances(torch.float64) == (1e-13, 1e-15)


def test_exact_in_float32_uses_its_looser_tolerances():
    x = X0.float()
    got = S.Exact()(_field, 0.4, x, 0.6)
    assert got.dtype == torch.float32
    assert float((got.double() - _exact(0.4, X0, 1.0)).abs().max()) < 1e-5
    assert S.default_tolerances(torch.float32) == (1e-6, 1e-8)


def test_exact_passes_its_solver_and_tolerances_to_odeint():
    """``solver="euler"`` on the grid [t, t + dt] is one Euler step; loose tolerances given are
    used (the error grows)."""
    one = S.Exact(solver="euler")(_field, 0.4, X0, 0.6)
    torch.testing.assert_close(one, X0 + 0.6 * _field(0.4, X0), rtol=0, atol=1e-15)
    want = _exact(0.4, X0, 1.0)
    tight = float((S.Exact()(_field, 0.4, X0, 0.6) - want).abs().max())
    loose_r = float((S.Exact(rtol=1e-3, atol=1e-15)(_field, 0.4, X0, 0.6) - want).abs().max())
    loose_a = float((S.Exact(rtol=1e-13, atol=1e-3)(_field, 0.4, X0, 0.6) - want).abs().max())
    assert loose_r > 100 * tight and loose_a > 100 * tight


@pytest.mark.parametrize("kw,msg", [
    ({"rtol": 0}, r"^rtol must be a positive number, got 0$"),
    ({"atol": -1e-9}, r"^atol must be a positive number, got -1e-09$"),
    ({"rtol": True}, r"^rtol must be a positive number, got True$"),
    ({"atol": float("inf")}, r"^atol must be a positive number, got inf$"),
    ({"rtol": float("nan")}, r"^rtol must be a positive number, got nan$"),
    ({"rtol": "1e-9"}, r"^rtol must be a positive number, got '1e-9'$"),
])
def test_exact_refuses_bad_tolerances(kw, msg):
    with pytest.raises(ValueError, match=msg):
        S.Exact(**kw)


def test_exact_takes_any_positive_tolerance():
    e = S.Exact(rtol=0.5, atol=2.0)
    assert (e.rtol, e.atol, e.solver) == (0.5, 2.0, "dopri5")


@pytest.mark.parametrize("name,opts,allowed", [
    ("rk4", {"rtol": 1e-9}, "none"), ("exact", {"steps": 3}, "rtol, atol, solver")])
def test_an_option_a_method_does_not_take_names_its_options(name, opts, allowed):
    with pytest.raises(ValueError, match=rf"do not apply to method '{name}' \(its options: "
                                         rf"{allowed}\)$"):
        S.get_method(name, **opts)


def test_an_unknown_method_name_is_a_value_error():
    with pytest.raises(ValueError, match="rk5"):
        S.get_method("rk5")
