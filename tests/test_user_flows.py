"""Fields given by their own flow ``phi(t, x, dt)`` (design.md, sixth round): measured orders on
a non-commuting problem with exact flows, from numpy and from torch, mixed with vector fields,
and the errors of a flow that cannot be right."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import splitnet as sn
from splitnet.analyses.convergence import convergence_study

# (scheme, step sizes in its asymptotic range over [0, 1]) -- errors stay above the floor
ORDERS = [("lie-trotter", [1 / 16, 1 / 32, 1 / 64, 1 / 128]),
          ("strang", [1 / 8, 1 / 16, 1 / 32, 1 / 64]),
          ("yoshida4", [1 / 4, 1 / 8, 1 / 16, 1 / 32]),
          ("blanes-moan4", [1 / 4, 1 / 8, 1 / 16, 1 / 32]),
          ("yoshida6", [1 / 2, 1 / 4, 1 / 8, 1 / 16]),
          ("blanes-moan6", [1, 1 / 2, 1 / 4, 1 / 8])]


def linear_problem(seed: int = 1, n: int = 6):
    """``x' = (A + B) x`` with symmetric, non-commuting A and B (``||[A, B]|| ~ 1``): each
    part's flow and the whole solution exact through eigendecompositions."""
    rng = np.random.default_rng(seed)

    def sym():
        m = rng.standard_normal((n, n))
        return (m + m.T) / (2 * np.sqrt(n))

    a, b = sym(), sym()
    x0 = rng.standard_normal(n)
    return a, b, x0


def eig_flow(m, like=np.asarray):
    lam, v = np.linalg.eigh(m)
    lam, v = like(lam), like(v)

    def phi(t, x, dt):          # exp(dt M) x
        return v @ (np.exp(dt * lam) * (v.T @ x)) if isinstance(x, np.ndarray) else \
            v @ (torch.exp(dt * lam) * (v.T @ x))
    return phi


def _study(name, hs, backend):
    a, b, x0 = linear_problem()
    like = np.asarray if backend == "numpy" else (lambda y: torch.tensor(y, dtype=torch.float64))
    s = sn.schemes.get(name)
    whole = eig_flow(a + b, like)
    start = like(x0)
    flows = {s.fields[0]: eig_flow(a, like), s.fields[1]: eig_flow(b, like)}
    return convergence_study(s, x0=start, step_sizes=hs, kind="global", flows=flows,
                             reference=lambda t: whole(0.0, start, t))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("name,hs", ORDERS, ids=[n for n, _ in ORDERS])
def test_user_flows_reach_the_declared_order(name, hs, backend):
    r = _study(name, hs, backend)
    order = sn.schemes.get(name).order
    assert r.expected_order == order
    assert abs(r.order - order) < 0.1, r.table()
    assert r.used.sum() >= 3, r.table()
    # every step called each flow once per stage of its field
    s = sn.schemes.get(name)
    for f, ev in r.evaluations.items():
        n = [round(1 / h) for h in hs]
        assert list(ev) == [k * s.n_stages(f) for k in n]


def test_the_torch_and_numpy_paths_agree_and_keep_their_types():
    a, b, x0 = linear_problem()
    s = sn.schemes.get("yoshida4")

    def to(y):
        return torch.tensor(y, dtype=torch.float64)
    xs_np = s.integrate(flows={"convection": eig_flow(a), "diffusion": eig_flow(b)}, x0=x0,
                        t0=0.0, t1=1.0, step_size=0.25)
    xs_t = s.integrate(flows={"convection": eig_flow(a, to), "diffusion": eig_flow(b, to)},
                       x0=to(x0), t1=1.0, step_size=0.25)
    assert isinstance(xs_np, np.ndarray) and xs_np.dtype == np.float64
    assert isinstance(xs_t, torch.Tensor) and xs_t.dtype == torch.float64
    assert xs_np.shape == (5, 6)
    np.testing.assert_allclose(xs_np, xs_t.numpy(), rtol=0, atol=1e-13)
    one = s.step(flows={"convection": eig_flow(a), "diffusion": eig_flow(b)}, x=x0,
                 step_size=0.25)
    assert isinstance(one, np.ndarray)
    np.testing.assert_array_equal(one, xs_np[1])


@pytest.mark.parametrize("name,theory", [("strang", 2), ("yoshida4", 4)])
def test_a_flow_and_a_vector_field_mixed(name, theory):
    """One field by its exact flow, the other by RK4 on its vector field: order min(p, 4)."""
    a, b, x0 = linear_problem()
    s = sn.schemes.get(name)
    whole = eig_flow(a + b)
    r = convergence_study(s, x0=x0, step_sizes=[1 / 4, 1 / 8, 1 / 16, 1 / 32], kind="global",
                          method="rk4", flows={"convection": eig_flow(a)},
                          fields={"diffusion": lambda t, x: b @ x},
                          reference=lambda t: whole(0.0, x0, t))
    assert r.expected_order == theory
    assert abs(r.order - theory) < 0.15, r.table()


def test_a_wrong_flow_is_caught_by_the_study():
    """A flow that is not the field's exact flow (one Euler step) drops Strang to order 1:
    the check can fail."""
    a, b, x0 = linear_problem()
    whole = eig_flow(a + b)
    r = convergence_study("strang", x0=x0, step_sizes=[1 / 8, 1 / 16, 1 / 32, 1 / 64],
                          kind="global",
                          flows={"convection": lambda t, x, dt: x + dt * (a @ x),
                                 "diffusion": eig_flow(b)},
                          reference=lambda t: whole(0.0, x0, t))
    assert r.expected_order == 2 and not r.ok and abs(r.order - 1) < 0.1


def test_flow_errors():
    a, b, x0 = linear_problem()
    s = sn.schemes.get("strang")
    ok = {"convection": eig_flow(a), "diffusion": eig_flow(b)}
    with pytest.raises(ValueError, match="given twice"):
        s.step(flows=ok, fields={"diffusion": lambda t, x: b @ x}, x=x0, step_size=0.1)
    with pytest.raises(ValueError, match="no callable given for diffusion"):
        s.step(flows={"convection": eig_flow(a)}, x=x0, step_size=0.1)
    with pytest.raises(ValueError, match="returned shape"):
        s.step(flows={**ok, "diffusion": lambda t, x, dt: x[:2]}, x=x0, step_size=0.1)
    with pytest.raises(TypeError, match="flow must be callable"):
        s.step(flows={**ok, "diffusion": 3}, x=x0, step_size=0.1)
    with pytest.raises(ValueError, match=r"'exact' .* torch tensors only"):
        s.step(flows={"convection": eig_flow(a)}, fields={"diffusion": lambda t, x: b @ x},
               x=x0, step_size=0.1)
    with pytest.raises(ValueError, match="needs reference="):
        convergence_study(s, x0=x0, step_sizes=[0.1, 0.05], flows=ok)
    with pytest.raises(ValueError, match="give the interval once"):
        s.integrate(flows=ok, x0=x0, t_span=(0, 1), t1=1.0, step_size=0.5)
    sum_scheme = sn.schemes.resolve("d+c:1")
    with pytest.raises(ValueError, match="sum of fields"):
        sum_scheme.step(flows=ok, x=x0, step_size=0.1) if len(sum_scheme.fields) == 2 else \
            pytest.fail("d+c:1 should advance two fields")
