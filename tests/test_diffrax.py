"""splitnet's schemes as a diffrax solver (the jax extra): diffrax's own kind of convergence
check, a fitted slope against the declared order, under ``jax.jit``; ``vmap`` over initial
states; skipped cleanly without the extra."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
diffrax = pytest.importorskip("diffrax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from test_user_flows import ORDERS, linear_problem  # noqa: E402

import splitnet as sn  # noqa: E402
from splitnet.interop.diffrax import SplittingSolver  # noqa: E402


def eig_flow(m):
    lam, v = np.linalg.eigh(m)
    lam, v = jnp.asarray(lam), jnp.asarray(v)
    return lambda t, y, dt: v @ (jnp.exp(dt * lam) * (v.T @ y))


def problem():
    a, b, x0 = linear_problem()
    return a, b, jnp.asarray(x0), eig_flow(a + b)


def terms_of(a, b):
    a, b = jnp.asarray(a), jnp.asarray(b)
    return diffrax.MultiTerm(diffrax.ODETerm(lambda t, y, args: a @ y),
                             diffrax.ODETerm(lambda t, y, args: b @ y))


def solve_at(solver, terms):
    @jax.jit
    def solve(y0, dt):
        return diffrax.diffeqsolve(terms, solver, 0.0, 1.0, dt, y0, max_steps=512,
                                   stepsize_controller=diffrax.ConstantStepSize()).ys[-1]
    return solve


def fitted_slope(solver, terms, y0, exact, hs):
    solve = solve_at(solver, terms)
    errs = [float(jnp.linalg.norm(solve(y0, h) - exact)) for h in hs]
    assert all(e > 1e-12 for e in errs), errs       # above round-off: the asymptotic range
    return float(np.polyfit(np.log(hs), np.log(errs), 1)[0]), errs


@pytest.mark.heavy        # a jit compilation of diffeqsolve each (~5 s)
@pytest.mark.parametrize("name,hs", ORDERS, ids=[n for n, _ in ORDERS])
def test_exact_flows_through_diffrax_reach_the_declared_order(name, hs):
    a, b, y0, whole = problem()
    s = sn.schemes.get(name)
    solver = SplittingSolver(s, flows={s.fields[0]: eig_flow(a), s.fields[1]: eig_flow(b)})
    terms = terms_of(a, b)
    assert solver.order(terms) == s.order
    slope, errs = fitted_slope(solver, terms, y0, whole(0.0, y0, 1.0), hs)
    assert abs(slope - s.order) < 0.1, (slope, errs)


@pytest.mark.heavy        # a jit compilation of diffeqsolve each (~5 s)
def test_the_diffrax_solver_equals_splitnets_own_integrate():
    a, b, y0, _ = problem()
    s = sn.schemes.get("blanes-moan4")
    fa, fb = eig_flow(a), eig_flow(b)
    ours = s.integrate(flows={"convection": fa, "diffusion": fb}, x0=y0, t1=1.0,
                       step_size=0.125)[-1]
    theirs = solve_at(SplittingSolver(s, flows={"convection": fa, "diffusion": fb}),
                      terms_of(a, b))(y0, 0.125)
    np.testing.assert_allclose(np.asarray(theirs), np.asarray(ours), rtol=0, atol=1e-14)


@pytest.mark.heavy        # a jit compilation of diffeqsolve each (~5 s)
@pytest.mark.parametrize("name,method,theory", [("strang", "rk4", 2), ("yoshida4", "rk4", 4),
                                                ("strang", "euler", 1)])
def test_vector_fields_by_a_method(name, method, theory):
    a, b, y0, whole = problem()
    solver = SplittingSolver(name, method=method)
    terms = terms_of(a, b)
    assert solver.order(terms) == theory
    hs = [1 / 8, 1 / 16, 1 / 32, 1 / 64] if theory < 4 else [1 / 16, 1 / 32, 1 / 64, 1 / 128]
    slope, errs = fitted_slope(solver, terms, y0, whole(0.0, y0, 1.0), hs)
    assert abs(slope - theory) < 0.1, (slope, errs)


@pytest.mark.heavy        # a jit compilation of diffeqsolve each (~5 s)
def test_vmap_over_initial_states():
    a, b, y0, _ = problem()
    s = sn.schemes.get("yoshida4")
    solve = solve_at(SplittingSolver(s, flows={"convection": eig_flow(a),
                                               "diffusion": eig_flow(b)}), terms_of(a, b))
    batch = jnp.stack([y0, 2 * y0, -y0])
    ys = jax.vmap(lambda y: solve(y, 0.125))(batch)
    assert ys.shape == (3, 6)
    for y, x in zip(ys, batch):
        np.testing.assert_allclose(np.asarray(y), np.asarray(solve(x, 0.125)), atol=1e-14)


def test_solver_errors():
    a, b, y0, _ = problem()
    with pytest.raises(ValueError, match="not an explicit Runge"):
        SplittingSolver("strang", method="exact")
    with pytest.raises(ValueError, match="flows given for kinetic"):
        SplittingSolver("strang", flows={"kinetic": eig_flow(a)})
    three = diffrax.MultiTerm(*terms_of(a, b).terms, diffrax.ODETerm(lambda t, y, args: y))
    with pytest.raises(ValueError, match="the MultiTerm has 3 terms"):
        solve_at(SplittingSolver("strang"), three)(y0, 0.25)
