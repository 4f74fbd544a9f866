"""Sub-flow methods as data: every registered Butcher tableau's derived order is the order its
stepper measures, the derivation can fail, the generic stepper is bit for bit the hand-written
Euler / midpoint / RK4 it replaced, and everything that reads the registry takes every method.

Nothing here names the registered explicit methods one by one: a method added to
``subflows.TABLEAUX`` is measured by these tests with no edit.
"""

from __future__ import annotations

import math
import pickle
from fractions import Fraction as Fr

import numpy as np
import pytest
import torch

import splitnet as sn
from splitnet.integrators import subflows as S

EXPLICIT = sorted(S.TABLEAUX)


# ---------------------------------------------------------------------------------------------
# The test ODE: x' = cos(t) x^2 (componentwise), nonlinear and non-autonomous, so every rooted
# tree's elementary differential is present (a linear autonomous ODE sees only the tall trees
# b A^k c and would pass a method that fails sum b c^2 = 1/3). Exact: x(t) = 1 / (1/x0 - sin t).

X0 = torch.tensor([0.5, -0.3, 0.2, 0.7], dtype=torch.float64)
T = 1.0
STEPS = (32, 64, 128, 256)     # asymptotic for orders 1..4 here: errors 5e-2 .. 2e-11


def _field(t, x):
    return math.cos(t) * x * x


def _exact(t):
    return 1.0 / (1.0 / X0 - math.sin(t))


def _global_error(method, n: int) -> float:
    h, x, t = T / n, X0.clone(), 0.0
    for k in range(n):
        x = method(_field, t, x, h)
        t = (k + 1) * h
    return float((x - _exact(T)).abs().max())


def measured_order(method) -> float:
    """The fitted log-log slope of the global error at t = 1 against the step size."""
    errs = [_global_error(method, n) for n in STEPS]
    return float(np.polyfit(np.log([T / n for n in STEPS]), np.log(errs), 1)[0])


def _method(tab: S.ButcherTableau) -> S.SubflowMethod:
    cls = type("Probe", (S.ExplicitRungeKutta,), {"tableau": tab})
    return cls()


@pytest.mark.parametrize("name", EXPLICIT)
def test_every_explicit_method_measures_its_derived_order(name):
    m = S.get_method(name)
    assert m.order == S.TABLEAUX[name].order and m.evals == S.TABLEAUX[name].stages
    assert measured_order(m) == pytest.approx(m.order, abs=0.2)


@pytest.mark.parametrize("name", EXPLICIT)
def test_no_explicit_method_beats_the_stage_barrier(name):
    """An explicit s-stage method has order <= s (Butcher): a derivation giving more is wrong."""
    assert 1 <= S.TABLEAUX[name].order <= S.TABLEAUX[name].stages


# A 3-stage tableau that meets sum b = 1, sum b c = 1/2 and sum b A c = 1/6 (so every linear
# autonomous ODE sees order 3) but fails sum b c^2 = 1/3 (3/8): order 2.
TALL_ONLY = {"a": ((), (1,), (Fr(1, 6), Fr(1, 3))), "b": (Fr(1, 4), Fr(1, 4), Fr(1, 2)),
             "c": (0, 1, Fr(1, 2))}


def test_a_tableau_that_fails_a_bushy_tree_is_order_2_and_measures_2():
    tab = S.ButcherTableau("tall-only", **TALL_ONLY)
    assert tab.order == 2
    assert measured_order(_method(tab)) == pytest.approx(2, abs=0.2)
    with pytest.raises(ValueError, match=r"declares order 3 but its tableau meets the order "
                                         r"conditions up to order 2 \(fails sum b c\^2 = 1/3 "
                                         r"\(gets 0\.375\)\)"):
        S.ButcherTableau("tall-only", **TALL_ONLY, declared=3)
    # the control: on a linear autonomous ODE the same tableau measures 3, so only the
    # nonlinear test ODE (and the derivation) tell the bushy tree's failure
    m = torch.tensor([[-0.3, 1.0], [-1.0, -0.2]], dtype=torch.float64)
    y0 = torch.tensor([1.0, 0.5], dtype=torch.float64)
    errs = []
    for n in STEPS:
        y = y0
        for _ in range(n):
            y = _method(tab)(lambda t, v: m @ v, 0.0, y, T / n)
        errs.append(float((y - torch.linalg.matrix_exp(T * m) @ y0).abs().max()))
    slope = np.polyfit(np.log([T / n for n in STEPS]), np.log(errs), 1)[0]
    assert slope == pytest.approx(3, abs=0.2)


def _rk4(**change):
    t = S.TABLEAUX["rk4"]
    return {"a": t.a, "b": t.b, "c": t.c, **change}


@pytest.mark.parametrize("change,order", [
    ({"a": ((), (Fr(1, 2),), (0, Fr(1, 2)), (0, Fr(1, 2), Fr(1, 2)))}, 3),   # A(Ac) breaks
    ({"b": (Fr(1, 4), Fr(1, 4), Fr(1, 4), Fr(1, 4))}, 2),                     # b c^2 = 3/8
    ({"b": (Fr(1, 2), Fr(1, 4), Fr(1, 4), 0)}, 1),                            # sum b c = 1/4
    ({"a": ((), (Fr(1, 3),), (0, Fr(1, 2)), (0, 0, 1)), "c": (0, Fr(1, 3), Fr(1, 2), 1)},
     1),                                                                      # sum b c = 4/9
])
def test_a_broken_rk4_derives_a_lower_order_and_its_declared_4_is_refused(change, order):
    tab = S.ButcherTableau("broken", **_rk4(**change))
    assert tab.order == order < 4
    assert measured_order(_method(tab)) == pytest.approx(order, abs=0.2)
    with pytest.raises(ValueError, match=rf"declares order 4 .* up to order {order} \(fails "):
        S.ButcherTableau("broken", **_rk4(**change), declared=4)


def test_float_tableaux_are_checked_to_a_tolerance():
    t = S.TABLEAUX["rk4"]
    floats = {"a": tuple(tuple(float(v) for v in r) for r in t.a),
              "b": tuple(float(v) for v in t.b), "c": tuple(float(v) for v in t.c)}
    assert S.ButcherTableau("rk4-float", **floats, declared=4).order == 4
    off = dict(floats, b=(1 / 6 + 1e-6, 1 / 3 - 1e-6, 1 / 3, 1 / 6))
    assert S.ButcherTableau("rk4-off", **off).order == 1      # sum b c = 1/2 - 5e-7


def test_the_trees_and_their_conditions():
    assert [len(S.trees(n)) for n in range(1, 7)] == [1, 1, 2, 4, 9, 20]      # OEIS A000081
    assert sorted(S.condition_text(t) for t in S.trees(4)) == [
        "sum b A(A c) = 1/24", "sum b A(c^2) = 1/12", "sum b c A c = 1/8", "sum b c^3 = 1/4"]
    assert S.condition_text(S.trees(1)[0]) == "sum b = 1"
    # sum over trees of order n of n! / (gamma(t) sigma(t)) = n^(n-1) would need sigma; the
    # densities alone: the tall tree has gamma = n!, the bushy one gamma = n
    assert {S.density(t) for t in S.trees(5)} >= {math.factorial(5), 5}


def _abc(a, b, c) -> dict:
    return {"a": a, "b": b, "c": c}


@pytest.mark.parametrize("kw,exc,msg", [
    (_abc(((), (1,)), (1,), (0, 1)), ValueError, r"one entry per stage"),
    (_abc(((), (1, 0)), (0, 1), (0, 1)), ValueError,
     r"row 1 of A must have 1 entries \(explicit"),
    (_abc(((), (Fr(1, 2),)), (0, 1), (0, 1)), ValueError,
     r"c\[1\] = 1 is not the sum of row 1 of A \(1/2\)"),
    (_abc(((), (True,)), (0, 1), (0, 1)), TypeError, r"a\[1\]\[0\] must be a real number"),
    (_abc(((),), (float("nan"),), (0,)), ValueError, r"b\[0\] must be finite, got nan"),
    (_abc(((),), (Fr(1, 2),), (0,)), ValueError,
     r"tableau 'bad' is not consistent: sum b = 1 \(gets 0\.5\)"),
])
def test_malformed_tableaux_are_refused_naming_the_problem(kw, exc, msg):
    with pytest.raises(exc, match=msg):
        S.ButcherTableau("bad", **kw)


# ---------------------------------------------------------------------------------------------
# Bit for bit the hand-written steppers of splitnet 0.2

def _old_euler(f, t, x, dt):
    return x + dt * f(t, x)


def _old_midpoint(f, t, x, dt):
    k1 = f(t, x)
    return x + dt * f(t + dt / 2, x + (dt / 2) * k1)


def _old_rk4(f, t, x, dt):
    k1 = f(t, x)
    k2 = f(t + dt / 2, x + (dt / 2) * k1)
    k3 = f(t + dt / 2, x + (dt / 2) * k2)
    k4 = f(t + dt, x + dt * k3)
    return x + (dt / 6) * (k1 + 2 * k2 + 2 * k3 + k4)


@pytest.mark.parametrize("name,old", [("euler", _old_euler), ("midpoint", _old_midpoint),
                                      ("rk4", _old_rk4)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_generic_stepper_is_bit_identical_to_the_hand_written_one(name, old, dtype):
    g = torch.Generator().manual_seed(0)
    w = torch.randn(6, 6, generator=g, dtype=dtype)
    x = torch.randn(3, 5, 6, generator=g, dtype=dtype)

    def f(t, y):       # nonlinear, time-dependent: every stage's time and state matter
        return torch.tanh(y @ w) * (1.0 + t) + torch.sin(torch.as_tensor(3.0 * t, dtype=dtype)) * y

    new = S.get_method(name)
    for t, dt in ((0.0, 0.1), (0.37, 0.013), (1.3, -0.21), (0.2, 1 / 3)):
        assert torch.equal(new(f, t, x, dt), old(f, t, x, dt)), (name, t, dt)
    dt = torch.tensor(0.173, dtype=dtype, requires_grad=True)      # learned coefficients
    assert torch.equal(new(f, 0.4, x, dt), old(f, 0.4, x, dt))


# ---------------------------------------------------------------------------------------------
# The registry

def test_the_sub_flow_table_in_the_docstring_is_rendered_from_the_registry():
    assert S.method_table() in S.__doc__, (
        "update the table in splitnet/integrators/subflows.py's docstring to:\n"
        + S.method_table())
    assert len(S.method_table().splitlines()) == len(S.METHODS) + 4


@pytest.mark.parametrize("name", EXPLICIT)
def test_explicit_methods_are_named_classes_that_pickle_by_name(name):
    m = S.get_method(name)
    assert isinstance(m, S.ExplicitRungeKutta) and type(m) is S.METHODS[name]
    assert type(pickle.loads(pickle.dumps(m))) is type(m)
    with pytest.raises(ValueError, match=rf"option\(s\) \['rtol'\] do not apply to method "
                                         rf"'{name}'"):
        S.get_method(name, rtol=1e-3)


def test_the_old_class_names_are_the_registered_classes():
    assert (S.Euler, S.Midpoint, S.RK4) == tuple(S.METHODS[n] for n in
                                                 ("euler", "midpoint", "rk4"))
    assert repr(S.get_method("rk4")) == "RK4()"


@pytest.mark.parametrize("name", list(S.METHODS))
def test_every_registered_method_runs_a_scheme_a_network_and_its_cost(name):
    """What reads METHODS (schemes, configs, networks, cost) takes every entry."""
    a = torch.tensor([[0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64)
    b = torch.tensor([[0.5, 0.0], [0.2, -0.3]], dtype=torch.float64)
    x0 = torch.tensor([1.0, 0.5], dtype=torch.float64)
    s = sn.schemes.get("strang")
    x1 = s.step(diffusion=lambda t, x: x @ a.T, convection=lambda t, x: x @ b.T, x=x0,
                step_size=0.1, method=name)
    assert torch.isfinite(x1).all() and not torch.equal(x1, x0)
    assert s.effective_order(name) == (2 if S.METHODS[name].order is None
                                       else min(2, S.METHODS[name].order))
    cfg = sn.models.SplitConfig(vocab_size=32, d_model=8, n_heads=2, n_layers=1, max_len=8,
                                method=name)
    torch.manual_seed(0)
    model = sn.models.SplitTransformer.from_config(cfg)
    assert torch.isfinite(model(torch.zeros(1, 4, dtype=torch.long))).all()
    if S.METHODS[name].evals is not None:
        from splitnet.nets.cost import _evals

        assert _evals(cfg) == S.METHODS[name].evals
