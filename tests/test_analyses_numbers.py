"""Bad numbers to the analyses (issue 62, D2 and D3), a class per module: NaN, inf, negative or
fractional counts, wrong types, empty lists and overflow are a ValueError (or a TypeError for a
wrong type) naming the argument, within seconds; never a hang, never a silently wrong number.

Every call runs under :func:`within` (SIGALRM): a regression that hangs fails the test instead
of stopping the suite. The seeds module used to loop forever on a NaN score."""

from __future__ import annotations

import math
import signal
from contextlib import contextmanager

import numpy as np
import pytest
import torch

import splitnet as sn
from splitnet.analyses import blocks as B
from splitnet.analyses import convergence as C
from splitnet.analyses import depth as DP
from splitnet.analyses import gap as G
from splitnet.analyses import problems as P
from splitnet.analyses import refine as R
from splitnet.analyses import seeds as S
from splitnet.analyses import sources as SRC
from splitnet.analyses import trajectories as T

NAN, INF = float("nan"), float("inf")


@contextmanager
def within(seconds: float = 20.0):
    """Fail (TimeoutError) if the block has not finished after ``seconds``."""
    def hang(*_):
        raise TimeoutError(f"no answer within {seconds} s: the call hangs")

    old = signal.signal(signal.SIGALRM, hang)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def refused(fn, *words, exc=ValueError, seconds: float = 20.0) -> str:
    """``fn()`` raises ``exc`` (in time) and its message holds every one of ``words``."""
    with within(seconds), pytest.raises(exc) as info:
        fn()
    msg = str(info.value)
    assert all(w in msg for w in words), msg
    return msg


# ---------------------------------------------------------------------------------------------
# seeds (D3; D2's hangs)

POWER_CASES = [            # (arguments of power_of, the argument the message names)
    ((1, -1, 3), "sd"), ((1, -1e-300, 3), "sd"), ((1, NAN, 3), "sd"), ((1, INF, 3), "sd"),
    ((NAN, 1, 3), "delta"), ((-INF, 1, 3), "delta"), (("1", 1, 3), "delta"),
    ((None, 1, 3), "delta"), ((1, 1, 2.5), "n"), ((1, 1, 3.0), "n"), ((1, 1, 1), "n"),
    ((1, 1, True), "n"), ((1, 1, "3"), "n"), ((1, 1, 10**30), "n"),
    ((1, 1, 3, NAN), "alpha"), ((1, 1, 3, 0.0), "alpha"), ((1, 1, 3, 1.0), "alpha"),
]


@pytest.mark.parametrize("args,name", POWER_CASES, ids=[repr(c[0]) for c in POWER_CASES])
def test_power_of_refuses_every_bad_argument_by_name(args, name):
    assert refused(lambda: S.power_of(*args)).startswith(name)


@pytest.mark.parametrize("call,name", [
    (lambda: S.detectable(-1, 3), "sd"), (lambda: S.detectable(NAN, 3), "sd"),
    (lambda: S.detectable(INF, 3), "sd"), (lambda: S.detectable(1, 2.5), "n"),
    (lambda: S.detectable(1, 1), "n"), (lambda: S.detectable(1, 3, power=NAN), "power"),
    (lambda: S.detectable(1, 3, alpha=0.9, power=0.8), "power"),
    (lambda: S.detectable(1e308, 3), "overflows"),
    (lambda: S.seeds_for(1, NAN), "sd"), (lambda: S.seeds_for(1, -1), "sd"),
    (lambda: S.seeds_for(INF, 1), "delta"), (lambda: S.seeds_for(1, 1, most=2.5), "most"),
    (lambda: S.seeds_for(1, 1, most=1), "most"), (lambda: S.seeds_for(1, 1, power=1.0),
                                                  "power"),
])
def test_detectable_and_seeds_for_refuse_bad_numbers_in_time(call, name):
    """``detectable(nan, n)`` looped forever, ``detectable(-1, 3)`` returned 0.0 and
    ``seeds_for(1, nan)`` None ('not reachable')."""
    assert name in refused(call)


@pytest.mark.parametrize("a,b,words", [
    ([1.0, NAN, 2.0], [0, 0, 0], ("a[1]", "nan")), ([1.0, 2.0], [0, INF], ("b[1]", "inf")),
    ([-INF, 1.0], [0, 0], ("a[0]",)), ([1e308, -1e308], [-1e308, 1e308], ("overflows",)),
    ([1e308, 1e308, -1e308], [0, 0, 0], ("overflow",)), (["x", "y"], [1, 2], ("a must be",)),
    ([True, False], [1, 2], ("a must be",)), ([1, 2], [1, None], ("b must be",)),
    ([[1, 2]], [[1, 2]], ("flat",)), (1.0, 2.0, ("flat",)), ([1, 2], [1, 2, 3], ("equal",)),
    ([], [], ("at least 2",)), ([1.0], [2.0], ("at least 2",)),
])
def test_paired_refuses_non_finite_overflowing_and_malformed_scores(a, b, words):
    """D2: a NaN, an inf or an overflowing score made ``paired`` hang (its detectable
    difference bracketed a NaN forever)."""
    refused(lambda: S.paired(a, b), *words)


def test_verdict_refuses_a_claim_it_cannot_judge():
    c = S.paired([1.0, 2.0, 3.0], [0.0, 1.0, 1.5])
    for claim in (NAN, -1.0, INF, "1"):
        refused(lambda claim=claim: c.verdict(claim), "claim")
    for better in (0, 2, True, "1"):
        refused(lambda better=better: c.verdict(0.0, better), "better")


def test_seeds_for_by_bisection_is_the_first_count_with_enough_power():
    """The count comes from doubling and bisection (a NaN or a tiny difference cannot stall
    it); it is the first count whose power reaches 80 %, as a scan finds it."""
    for delta, sd in ((0.3, 1.0), (0.5, 1.0), (1.0, 1.9), (2.0, 0.7), (-0.8, 1.0)):
        n = S.seeds_for(delta, sd, most=400)
        scan = next(k for k in range(2, 401) if S.power_of(delta, sd, k) >= S.POWER)
        assert n == scan, (delta, sd)
    with within(5):
        assert S.seeds_for(1e-6, 1.0) is None          # 10,000 seeds are not enough
        assert S.seeds_for(0.0, 1.0) is None


def test_detectable_is_proportional_to_the_spread_at_every_scale():
    base = S.detectable(1.0, 4)
    for sd in (1e-300, 1e-6, 3.0, 1e6, 1e300):
        with within(5):
            assert S.detectable(sd, 4) == pytest.approx(sd * base, rel=1e-9)
    assert S.detectable(0.0, 4) == 0.0


# ---------------------------------------------------------------------------------------------
# convergence: tolerances, solvers, times, steps

@pytest.fixture(scope="module")
def system():
    F, Gf, x0 = sn.particle_system(n_tokens=3, d_model=4, n_heads=2, d_ff=8)
    return {"diffusion": F, "convection": Gf}, x0


def _times(*t):
    return torch.tensor(t, dtype=torch.float64)


@pytest.mark.parametrize("opt", ["rtol", "atol"])
@pytest.mark.parametrize("bad", [NAN, INF, -1.0, 0.0, "1e-3", True])
def test_reference_solution_refuses_a_tolerance_that_is_not_a_positive_number(system, opt, bad):
    """A zero tolerance silently became the default (``rtol or 1e-13``), a negative or infinite
    one was passed on to the solver."""
    fields, x0 = system
    refused(lambda: C.reference_solution(x0=x0, times=_times(0.0, 0.1), fields=fields,
                                         **{opt: bad}), opt)


@pytest.mark.parametrize("solver", ["nope", "rk4", 3, None])
def test_reference_solution_takes_adaptive_solvers_only(system, solver):
    fields, x0 = system
    refused(lambda: C.reference_solution(x0=x0, times=_times(0.0, 0.1), fields=fields,
                                         solver=solver), "solver")


@pytest.mark.parametrize("times", [(0.0, NAN), (0.0, INF), (-INF, 0.0), (NAN, 1.0)])
def test_reference_solution_refuses_times_that_are_not_finite(system, times):
    fields, x0 = system
    refused(lambda: C.reference_solution(x0=x0, times=_times(*times), fields=fields),
            "times must be finite")


def test_the_reference_solver_stops_at_its_step_budget(system, monkeypatch):
    """An interval the adaptive solver would need too many steps for is a ValueError saying so,
    not an endless wait (the budget lowered here so that it is reached in a second)."""
    fields, x0 = system
    monkeypatch.setattr(C, "MAX_SOLVER_STEPS", 20)
    refused(lambda: C.reference_solution(x0=x0, times=_times(0.0, 50.0), fields=fields),
            "needs more than 20 steps over [0, 50]", seconds=10)


@pytest.mark.parametrize("kw,name", [
    ({"t0": NAN}, "t0"), ({"t0": INF}, "t0"), ({"t0": "0"}, "t0"),
    ({"kind": "global", "t_final": NAN}, "t_final"), ({"floor": NAN}, "floor"),
    ({"floor": -1.0}, "floor"), ({"step_sizes": [NAN, 0.1]}, "step_size"),
    ({"step_sizes": [0.1, 0.1]}, "step_sizes"), ({"step_sizes": "0.1"}, "step_sizes"),
    ({"step_sizes": 0.1}, "step_sizes"), ({"progress": "no"}, "progress"),
    ({"kind": "global", "t_final": 1e9, "step_sizes": [0.5, 0.25]}, "2,000,000,000 steps"),
    ({"kind": "global", "step_sizes": [1e-7, 2e-7]}, "steps, more than"),
])
def test_convergence_study_refuses_bad_times_floors_and_step_lists(system, kw, name):
    """A global study of 2e9 steps ran for ever; a NaN floor or t0 was used as given."""
    fields, x0 = system
    args = {"step_sizes": [0.2, 0.1], **kw}
    exc = TypeError if kw in ({"t0": "0"}, {"step_sizes": "0.1"}, {"step_sizes": 0.1}) else \
        ValueError
    refused(lambda: C.convergence_study("strang", x0=x0, fields=fields, **args), name, exc=exc,
            seconds=10)


def test_work_precision_and_leading_term_refuse_empty_and_bad_inputs(system):
    fields, x0 = system
    F, Gf = fields["diffusion"], fields["convection"]
    refused(lambda: C.work_precision([], ["rk4"], F, Gf, x0, [0.5, 0.25], progress=False),
            "schemes is empty")
    refused(lambda: C.work_precision(["strang"], [], F, Gf, x0, [0.5, 0.25], progress=False),
            "methods is empty")
    refused(lambda: C.leading_term("lie-trotter", [1.0, 2.0], fields=fields), "x must be",
            exc=TypeError)
    refused(lambda: C.leading_term("lie-trotter", x0 * NAN, fields=fields), "NaN")
    refused(lambda: C.leading_term("lie-trotter", x0, t=NAN, fields=fields), "t must be finite")


# ---------------------------------------------------------------------------------------------
# problems

@pytest.mark.parametrize("call,name", [
    (lambda: P.matrix_problem(dim=0), "dim"), (lambda: P.matrix_problem(dim=-1), "dim"),
    (lambda: P.matrix_problem(dim=2.5), "dim"), (lambda: P.matrix_problem(dim=10**6), "dim"),
    (lambda: P.matrix_problem(seed=-1), "seed"), (lambda: P.matrix_problem(seed=NAN), "seed"),
    (lambda: P.time_dependent_linear(t0=NAN), "t0"),
    (lambda: P.time_dependent_linear(dim=0), "dim"),
    (lambda: P.time_dependent_particle(t0=INF), "t0"),
    (lambda: P.NystromProblem(dim=0), "dim"), (lambda: P.NystromProblem(seed=-1), "seed"),
    (lambda: B.matrix_fields(dim=0), "dim"), (lambda: B.matrix_order(B.BLOCKS["rk4-parallel"],
                                                                     seed=2.5), "seed"),
    (lambda: P.LinearField(np.eye(2), amp=NAN), "amp"),
    (lambda: P.LinearField(np.eye(2) * NAN), "NaN"),
    (lambda: P.LinearField(np.ones(3)), "square"), (lambda: P.LinearField(np.ones((2, 3))),
                                                    "square"),
    (lambda: P.Modulated(lambda t, x: x, freq=INF), "freq"),
    (lambda: P.WrongClock(sn.schemes.get("strang"), "nope"), "mode"),
])
def test_problem_builders_refuse_bad_sizes_seeds_times_and_coefficients(call, name):
    """A dimension of 0 built an empty problem, a NaN amplitude or matrix a field of NaNs, a
    NaN start time a problem whose every error is NaN."""
    refused(call, name)


@pytest.mark.parametrize("dtype", [torch.int64, "float64", None])
def test_particle_systems_refuse_a_dtype_that_is_not_floating(dtype):
    for build in (sn.particle_system, P.decoder_system, P.partitioned_system):
        refused(lambda build=build: build(dtype=dtype), "dtype", exc=TypeError)


@pytest.mark.parametrize("args,name", [((NAN,), "step_size"), ((INF,), "step_size"),
                                       ((0.0,), "step_size"), ((0.1, None, 0), "substeps"),
                                       ((0.1, None, -1), "substeps"),
                                       ((0.1, None, 2.5), "substeps")])
def test_nystrom_local_error_refuses_bad_steps(args, name):
    """Zero substeps made the reference the starting point (a silently wrong error)."""
    nyp = P.NystromProblem()
    refused(lambda: nyp.local_error(sn.schemes.get("strang").stages, *args), name,
            exc=(ValueError, TypeError))


@pytest.mark.parametrize("args,words", [
    (([0.1, 0.05], [1e-2], 1e-12), ("one error per step size",)),
    (([-0.1, 0.05], [1e-2, 1e-3], 1e-12), ("step_size must be positive",)),
    (([0.1, 0.05], [1e-2, 1e-3], NAN), ("floor",)),
    (([0.1, 0.05], [1e-2, 1e-3], -1.0), ("floor",)),
    (([0.1, 0.05], [-1e-2, 1e-3], 1e-12), ("errors must be >= 0",)),
    (([0.1, 0.05], ["a", "b"], 1e-12), ("errors must be numbers",)),
    (([], [], 1e-12), ("at least one",)),
])
def test_slope_and_local_errors_refuse_malformed_lists(args, words):
    refused(lambda: P.slope(*args), *words)
    if len(args[0]) and args[0][0] < 0:
        refused(lambda: P.local_errors(sn.schemes.get("strang"), P.matrix_problem(), args[0]),
                *words)
    assert P.slope([0.1, 0.05], [1e-2, 5e-3], 1e-12) == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------
# blocks

@pytest.mark.parametrize("kw,name", [
    ({"step_sizes": []}, "step_sizes"), ({"step_sizes": [NAN, 0.1]}, "step_size"),
    ({"step_sizes": [0.1, -0.1]}, "step_size"), ({"floor": NAN}, "floor"),
    ({"floor": -1.0}, "floor"),
])
def test_local_order_refuses_bad_step_sizes_and_floors(system, kw, name):
    fields, x0 = system
    refused(lambda: B.local_order(B.BLOCKS["rk4-parallel"], fields, x0, **kw), name)


@pytest.mark.parametrize("kw,name", [
    ({"steps": (0, 4)}, "steps"), ({"steps": (2.5, 5)}, "steps"), ({"steps": ()}, "steps"),
    ({"steps": (4, 4)}, "two distinct"), ({"steps": (-4, -8)}, "steps"),
    ({"steps": (10**9, 2 * 10**9)}, "<= 100,000"), ({"t_final": NAN}, "t_final"),
    ({"t_final": -1.0}, "t_final"), ({"t_final": INF}, "t_final"), ({"floor": NAN}, "floor"),
])
def test_global_order_refuses_bad_step_counts_and_times(system, kw, name):
    """Steps (0, 4) divided by zero, (-4, -8) reached a failing least-squares fit, 1e9 steps
    would not end."""
    fields, x0 = system
    refused(lambda: B.global_order(B.BLOCKS["rk4-parallel"], fields, x0, **kw), name)


def test_a_gate_refuses_non_finite_weights():
    for kw, name in (({"bias": NAN}, "bias"), ({"scale": INF}, "scale"), ({"seed": -1}, "seed")):
        refused(lambda kw=kw: B.Gate(**kw), name)


# ---------------------------------------------------------------------------------------------
# depth, refine, trajectories, gap, sources: networks

@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return sn.models.SplitTransformer(256, 8, 2, 2, max_len=8).eval()


@pytest.mark.parametrize("kw,name", [
    ({"coarsen_factors": (0,)}, "coarsen_factors"), ({"coarsen_factors": (2.5,)},
                                                     "coarsen_factors"),
    ({"coarsen_factors": "2"}, "coarsen_factors"), ({"coarsen_factors": (1,)},
                                                    "coarsen_factors"),
    ({"coarsen_factors": (65,)}, "coarsen_factors"), ({"prolong_factors": (-1,)},
                                                      "prolong_factors"),
    ({"prolong_factors": (10**6,)}, "prolong_factors"),
])
def test_depth_study_refuses_bad_factors_instead_of_reporting_rows(model, kw, name):
    """A factor of 0, 2.5 or the string '2' became a table row saying it could not be built."""
    refused(lambda: DP.depth_study(model, lambda m: 1.0, progress=False, **kw), name)


def test_depth_and_refinement_studies_refuse_what_evaluate_must_be(model):
    refused(lambda: DP.depth_study(model, lambda m: "x", progress=False, coarsen_factors=(),
                                   prolong_factors=()), "must return a number", exc=TypeError)
    refused(lambda: DP.depth_study(model, 3.0, progress=False), "evaluate", exc=TypeError)
    kw = {"methods": ["euler"], "substeps": [1], "ode": False, "progress": False}
    refused(lambda: R.refinement_study(model, lambda m: "x", **kw), "must return a number",
            exc=TypeError)
    for scale in (NAN, INF, 0.0, -1.0):
        refused(lambda scale=scale: R.refinement_study(model, lambda m: 1.0, scale=scale, **kw),
                "scale")
    refused(lambda: R.refinement_study(model, lambda m: 1.0, unit=3, **kw), "unit",
            exc=TypeError)
    # a NaN loss is a measurement (a network that diverges): kept, not refused
    res = R.refinement_study(model, lambda m: NAN, **kw)
    assert math.isnan(res.own.loss)


def test_depth_table_refuses_no_points_and_bad_scales(model):
    pts = DP.depth_study(model, lambda m: 1.0, progress=False, coarsen_factors=(2,),
                         prolong_factors=())
    refused(lambda: DP.depth_table([]), "none")
    for scale in (NAN, INF, 0.0, -2.0):
        refused(lambda scale=scale: DP.depth_table(pts, "bpb", scale), "scale")


def test_prolongation_errors_needs_doubling_factors_and_says_nan_for_no_rate(model):
    m = sn.models.SplitTransformer(256, 8, 2, 2, max_len=8).double().eval()
    x = m.embed(torch.tensor([[1, 2, 3]]))
    for factors in ((1, 3), (1,), (), (0, 1), (1.5, 3), (2, 2)):
        refused(lambda f=factors: DP.prolongation_errors(m, x, f), "factors")
    refused(lambda: DP.prolongation_errors(m, x * NAN, (1, 2)), "NaN")
    for p in m.parameters():           # zero fields: every depth gives the same state
        p.data.zero_()
    diffs, rates = DP.prolongation_errors(m, x, (1, 2, 4))
    assert diffs == [0.0, 0.0] and all(math.isnan(r) for r in rates)


@pytest.mark.parametrize("substeps", [0, -1, 2.5, NAN, True, "2", 10**9])
def test_rediscretize_refuses_substeps_at_once(model, substeps):
    """A billion substeps built a billion stages before anything was evaluated."""
    refused(lambda: R.rediscretize(model, None, substeps), "substeps", seconds=5)


@pytest.mark.parametrize("args,name", [
    ((0, 1, NAN, (1, 2)), "prob"), ((0, 1, 1.5, (1, 2)), "prob"), ((0, 1, -0.1, (1,)), "prob"),
    ((0, 1, "0.5", (1,)), "prob"), ((0, 1, 0.5, ()), "substeps"), ((0, 1, 0.5, (0,)),
                                                                    "substeps"),
    ((0, 1, 0.5, (2.5,)), "substeps"), ((0, 1, 0.5, "12"), "substeps"),
    ((NAN, 1, 0.5, (1,)), "seed"), ((0, -1, 0.5, (1,)), "step"),
])
def test_refinement_at_refuses_what_would_silently_refine_every_step(args, name):
    """A NaN probability refined every step; substeps (0,) returned 0, () an IndexError."""
    refused(lambda: R.refinement_at(*args), name)
    assert R.refinement_at(0, 1, 0.0, (1, 2)) is None
    assert R.refinement_at(0, 1, 1.0, (4,)) == 4


@pytest.mark.parametrize("kw,name", [
    ({"rtol": NAN}, "rtol"), ({"rtol": -1.0}, "rtol"), ({"rtol": 0.0}, "rtol"),
    ({"atol": INF}, "atol"), ({"solver": "nope"}, "solver"),
    ({"points_per_layer": 0}, "points_per_layer"), ({"points_per_layer": 2.5},
                                                    "points_per_layer"),
    ({"points_per_layer": 10**9}, "points_per_layer"),
])
def test_collect_refuses_bad_tolerances_solvers_and_path_sizes(model, kw, name):
    """A NaN rtol ended in torchdiffeq's AssertionError, a negative one was used, 1e9 path
    points per layer ran for ever."""
    refused(lambda: T.collect(model, "abc", continuous=True, **kw), name, seconds=10)


@pytest.mark.parametrize("kw,name", [({"per_stage": "no"}, "per_stage"),
                                     ({"continuous": "yes"}, "continuous"),
                                     ({"restart": 1}, "restart")])
def test_collect_refuses_strings_for_its_switches(model, kw, name):
    refused(lambda: T.collect(model, "abc", **kw), name)


@pytest.mark.parametrize("idx", [None, b"abc", 3.5, object(), {"a": 1}])
def test_collect_and_gap_refuse_token_ids_of_the_wrong_type(model, idx):
    refused(lambda: T.collect(model, idx), exc=TypeError)
    refused(lambda: G.discretization_gap(model, idx, progress=False), "idx", exc=TypeError)


def test_fresh_models_token_labels_and_memory_estimates_refuse_bad_numbers(model):
    for seed in (-1, 2.5, NAN):
        refused(lambda seed=seed: T.fresh_model(seed=seed, d_model=8, n_heads=2, n_layers=1),
                "seed")
    for token in (2.5, NAN, "a", None):
        refused(lambda token=token: T.token_label(token), "token id", exc=TypeError)
    assert T.token_label(np.int64(97)) == "a" and T.token_label(torch.tensor(32)) == "\u2423"
    for kw in ({"windows": 0}, {"windows": -1}, {"context": 2.5}, {"batch_size": NAN}):
        args = {"windows": 4, "context": 16, "batch_size": 4, **kw}
        refused(lambda args=args: SRC.study_memory(model.config, **args), next(iter(kw)))
