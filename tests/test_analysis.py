"""Measured orders on the nonlinear attention + feed-forward particle system, the Lie bracket
prediction, reference solutions, convergence results, work–precision, the sandwich fact."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import splitnet as sn
from splitnet.analyses.problems import ClosedFormFlow, local_errors, matrix_problem, slope
from splitnet.stagelists.stages import CONVECTION, DIFFUSION

LOCAL_H = [0.2, 0.1, 0.05, 0.025]
GLOBAL_H = [0.5, 0.25, 0.125, 0.0625]
# Higher orders reach the reference's floor sooner: larger steps for them.
LOCAL_H_BY_ORDER = {6: [0.4, 0.28, 0.2, 0.14], 8: [0.8, 0.56, 0.4, 0.28]}


@pytest.fixture(scope="module")
def system():
    return sn.particle_system()


def _study(system, name, method, kind):
    F, G, x0 = system
    s = sn.schemes.get(name)
    if kind == "local":
        hs = LOCAL_H_BY_ORDER.get(s.order, LOCAL_H) if method in ("exact", "rk4") else LOCAL_H
    else:
        # Yoshida 8, exact sub-flows: the floor of its 720 sub-flow solves comes by h = 1/16.
        hs = [1 / 4, 1 / 5, 1 / 6, 1 / 8] if (s.order == 8 and method == "exact") else GLOBAL_H
    r = sn.convergence_study(s, F, G, x0, hs, kind=kind, method=method)
    eff = s.effective_order(method)
    assert r.expected_order == (eff + 1 if kind == "local" else eff)
    assert r.used.sum() >= 3, r.table()
    assert abs(r.order - r.expected_order) <= 0.3, r.table()
    assert r.ok
    return r


# The default run: the three schemes of design.md with every sub-flow method, local error.
@pytest.mark.parametrize("method", ["exact", "euler", "midpoint", "rk4"])
@pytest.mark.parametrize("name", ["lie-trotter", "strang", "yoshida4"])
def test_local_orders_on_the_particle_system(system, name, method):
    _study(system, name, method, "local")


@pytest.mark.heavy
@pytest.mark.parametrize("name,method", [
    ("lie-trotter", "euler"), ("strang", "exact"), ("strang", "euler"), ("yoshida4", "exact"),
    ("yoshida4", "midpoint"), ("yoshida4", "rk4"), ("blanes-moan4", "midpoint"),
    ("suzuki4", "midpoint")])
def test_global_orders_on_the_particle_system(system, name, method):
    _study(system, name, method, "global")


# Everything else: every core scheme x method x kind (run with -m slow); the zoo's orders on the
# particle system are tests/test_zoo.py's.
_ALL = [(n, m, k) for n in sn.schemes.available("core")
        for m in ("exact", "euler", "midpoint", "rk4")
        for k in ("local", "global")]


@pytest.mark.slow
@pytest.mark.parametrize("name,method,kind", _ALL)
def test_every_scheme_method_and_kind(system, name, method, kind):
    _study(system, name, method, kind)


def test_euler_steps_make_every_splitting_second_order_locally(system):
    """What a residual network computes: Lie–Trotter (Transformer) and Strang (Macaron) with
    Euler sub-steps are both O(h^2) locally; Macaron's constant is smaller."""
    lt = _study(system, "lie-trotter", "euler", "local")
    mac = _study(system, "strang", "euler", "local")
    assert np.all(mac.errors < lt.errors)
    c_lt = np.median(lt.errors / lt.step_sizes ** 2)
    c_mac = np.median(mac.errors / mac.step_sizes ** 2)
    assert c_mac < 0.9 * c_lt


@pytest.mark.parametrize("kind,unmerged,merged", [
    ("local", 4, 3), pytest.param("global", 3, 2, marks=pytest.mark.heavy)])
def test_merged_triple_jump_loses_the_midpoint_gain(system, kind, unmerged, merged):
    F, G, x0 = system
    y = sn.schemes.get("yoshida4")
    # The merged scheme's O(h^(q+1)) term takes over from the O(h^(q+2)) one only below
    # h ~ 0.05: smaller steps than elsewhere.
    hs = [0.05, 0.025, 0.0125, 0.00625] if kind == "local" else [1 / 16, 1 / 32, 1 / 64, 1 / 128]
    ru = sn.convergence_study(y, F, G, x0, hs, kind=kind, method="midpoint")
    rm = sn.convergence_study(y.merged(), F, G, x0, hs, kind=kind, method="midpoint")
    assert (ru.expected_order, rm.expected_order) == (unmerged, merged)
    assert abs(ru.order - unmerged) <= 0.3, ru.table()
    assert abs(rm.order - merged) <= 0.3, rm.table()
    # merged saves 2 sub-layer calls per step and costs an order
    assert rm.evaluations[CONVECTION][0] < ru.evaluations[CONVECTION][0]


# ---------------------------------------------------------------------------------------------
# The Lie bracket

@pytest.mark.parametrize("first", [DIFFUSION, CONVECTION])
def test_lie_bracket_predicts_the_lie_trotter_error(system, first):
    """exact - scheme = (h^2/2) [X, Y](x0) + O(h^3) for X applied first, Y second; the sign
    flips with the order. Within 5 % at h = 1/80."""
    F, G, x0 = system
    other = CONVECTION if first == DIFFUSION else DIFFUSION
    s = sn.SplittingScheme.from_stages([(first, 1.0), (other, 1.0)], name=f"{first}-first")
    h = 1 / 80
    with torch.no_grad():
        err = (sn.reference_solution(F, G, x0, torch.tensor([0.0, h]))[-1]
               - s.step(F, G, x0, step_size=h, method="exact"))
    X, Y = (F, G) if first == DIFFUSION else (G, F)
    pred = h ** 2 / 2 * sn.lie_bracket(X, Y, x0)
    rel = float((err - pred).norm() / pred.norm())
    assert rel < 0.05, rel
    # and the opposite sign would be far off
    assert float((err + pred).norm() / pred.norm()) > 1.9


def test_lie_bracket_of_linear_fields_is_the_commutator():
    p = matrix_problem(5, 2)
    a, b = (torch.as_tensor(m) for m in p._matrix)
    got = sn.lie_bracket(p.diffusion, p.convection, p.x0)
    assert torch.allclose(got, (a @ b - b @ a) @ p.x0, atol=1e-14)
    assert torch.allclose(sn.lie_bracket(p.convection, p.diffusion, p.x0), -got, atol=1e-14)


def test_lie_bracket_of_the_particle_fields_is_not_zero(system):
    F, G, x0 = system
    assert float(sn.lie_bracket(F, G, x0).norm()) > 0.1 * float(F(0.0, x0).norm())
    assert float(sn.lie_bracket(F, F, x0).norm()) < 1e-12


# ---------------------------------------------------------------------------------------------
# Reference solutions and results

def test_reference_solution_matches_the_matrix_exponential():
    p = matrix_problem(6, 0)
    times = torch.tensor([0.0, 0.5, 1.0, 2.0], dtype=torch.float64)
    ref = sn.reference_solution(p.diffusion, p.convection, p.x0, times)
    assert ref.shape == (4, 6)
    for i, t in enumerate(times.tolist()):
        assert float((ref[i] - p.exact(t)).norm()) < 1e-11
    back = sn.reference_solution(p.diffusion, p.convection, ref[-1], times.flip(0))
    assert float((back[-1] - p.x0).norm()) < 1e-10


def test_reference_solution_of_the_particle_system_shape(system):
    F, G, x0 = system
    ref = sn.reference_solution(F, G, x0, torch.tensor([0.0, 0.1, 0.2]))
    assert ref.shape == (3, *x0.shape) and torch.equal(ref[0], x0)


def test_convergence_result_table_and_plot(system, tmp_path):
    F, G, x0 = system
    r = sn.convergence_study("strang", F, G, x0, LOCAL_H, kind="local", method="rk4")
    text = r.table()
    assert "strang" in text and "order p = 2" in text
    assert f"local slope {r.order:.2f}, theory 3" in text
    assert len(text.splitlines()) == 2 + len(LOCAL_H)
    assert r.evaluations[DIFFUSION].tolist() == [4] * 4        # rk4: 4 per stage, 1 stage
    assert r.evaluations[CONVECTION].tolist() == [8] * 4
    out = tmp_path / "conv.png"
    r.plot(out)
    assert out.stat().st_size > 10_000 and out.read_bytes()[:4] == b"\x89PNG"


def test_points_below_the_floor_are_not_fitted():
    """Yoshida 6 with closed-form flows reaches round-off near h = 0.05: those points are
    reported and excluded from the fit."""
    p = matrix_problem(6, 0)
    hs = [0.4, 0.2, 0.1, 0.05, 0.025, 0.0125]
    r = sn.convergence_study("yoshida6", p.diffusion, p.convection, p.x0, hs, kind="local",
                             method=ClosedFormFlow(), floor=1e-13)
    assert not r.used.all() and r.used[:3].all()
    assert abs(r.order - 7) <= 0.3


def test_global_study_uses_the_final_time(system):
    F, G, x0 = system
    r = sn.convergence_study("strang", F, G, x0, [0.25, 0.125], kind="global", method="rk4",
                             t0=0.5, t_final=1.0)
    ref = sn.reference_solution(F, G, x0, torch.tensor([0.5, 1.0]))[-1]
    x = sn.schemes.get("strang").integrate(F, G, x0, (0.5, 1.0), 0.25, method="rk4")[-1]
    assert r.errors[0] == pytest.approx(float((x - ref).norm()), rel=1e-9)


# ---------------------------------------------------------------------------------------------
# Work–precision

def test_work_precision_points_and_plot(system, tmp_path):
    F, G, x0 = system
    pts = sn.work_precision(["lie-trotter", "yoshida4"], ["euler", "rk4"], F, G, x0,
                            [0.5, 0.25], progress=False)
    assert len(pts) == 2 * 2 * 2
    by = {(p.scheme, p.method, p.step_size): p for p in pts}
    # evaluations over [0, 1]: steps x stages x evaluations per sub-step
    assert by[("yoshida4", "rk4", 0.25)].evaluations == 4 * 9 * 4
    assert by[("lie-trotter", "euler", 0.5)].evaluations == 2 * 2 * 1
    assert by[("yoshida4", "rk4", 0.25)].error < by[("lie-trotter", "euler", 0.25)].error
    out = tmp_path / "wp.png"
    sn.plots.plot_work_precision(pts, out)
    assert out.read_bytes()[:4] == b"\x89PNG"


# ---------------------------------------------------------------------------------------------
# The sandwich fact

def sandwich(n: int, k: int) -> str:
    return "s" * k + "sf" * (n - k) + "f" * k


def test_sandwich_with_growing_k_does_not_converge():
    """s^k (sf)^(n-k) f^k as one step of size T = 1 (each stage 1/n): with k = n/4 the first
    quarter of the time runs diffusion alone and the last convection alone, at every depth, so
    the error against the coupled flow does not shrink; interleaved (k = 0) it shrinks like 1/n."""
    p = matrix_problem(6, 0)
    ns = [4, 8, 16, 32]
    sand, inter = [], []
    for n in ns:
        for k, out in ((n // 4, sand), (0, inter)):
            s = sn.schemes.from_pattern(sandwich(n, k))
            out.append(local_errors(s, p, [1.0], ClosedFormFlow())[0])
    assert min(sand) > 0.5 * max(sand)                        # flat in depth
    assert abs(slope(1 / np.array(ns), inter) - 1) <= 0.3     # O(1/n)
    assert sand[-1] > 10 * inter[-1]
