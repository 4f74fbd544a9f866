"""The order check and the order conditions, stated where mutation testing found them unstated
(``python3 -m splitnet.dev mutate splitnet/order/check.py``, ``.../conditions.py``; each test
names the behaviour, docs/testing.md the mutants it catches)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import splitnet as sn
from splitnet.order import algebra, check, conditions, fit
from splitnet.stagelists.stages import EXACT_ORDER, Stage, parse


def _torch_conditions(stages, degree, fields=None):
    letters, k = conditions.structure(stages, fields)
    c = torch.tensor([st.coeff for st in stages], dtype=torch.float64)
    return conditions.lie_conditions(c, letters, k, degree)


def test_an_explicit_field_list_is_the_alphabet_of_the_conditions():
    """``fields`` sets the letters and their order, even a field no stage advances; its
    consistency condition is then -1 (coefficients summing to 0, not 1)."""
    stages = parse("c:0.5,d:1,c:0.5")
    assert conditions.structure(stages) == (((1,), (0,), (1,)), 2)
    fields = ("convection", "diffusion", "cross")
    assert conditions.structure(stages, fields) == (((0,), (1,), (0,)), 3)
    got = _torch_conditions(stages, 2, fields)
    want = algebra.lie_conditions([(st.field, st.coeff) for st in stages], 2, fields=fields)
    assert [g.shape for g in got] == [(3,), (3,)]
    np.testing.assert_allclose(got[0].numpy(), want[1], rtol=0, atol=1e-15)
    assert got[0].tolist() == [0.0, 0.0, -1.0]


@pytest.mark.parametrize("spec", ["strang", "yoshida4", "c:0.25,d:0.5,d+c:0.5,c:0.25"])
def test_the_log_of_a_step_equals_the_free_algebra_one_at_every_degree(spec):
    """``log_series`` of the torch ``word_series`` is the exact algebra's, degree 0 (no
    constant term: one zero) included."""
    stages = sn.schemes.resolve(spec).stages
    letters, k = conditions.structure(stages)
    c = torch.tensor([st.coeff for st in stages], dtype=torch.float64)
    got = conditions.log_series(conditions.word_series(c, letters, k, 4))
    want = algebra.log_series(algebra.word_series([(st.field, st.coeff) for st in stages], 4))
    assert len(got) == len(want) == 5
    for d, (g, w) in enumerate(zip(got, want)):
        assert g.shape == (k ** d,), d
        np.testing.assert_allclose(g.numpy(), w, rtol=0, atol=1e-13, err_msg=f"degree {d}")


def test_conditions_reach_max_degree_and_no_further():
    """Degree MAX_DEGREE is computed (and equals the exact algebra's); one more is refused."""
    stages = sn.schemes.get("yoshida4").stages
    top = conditions.MAX_DEGREE
    got = _torch_conditions(stages, top)
    want = algebra.lie_conditions([(st.field, st.coeff) for st in stages], top)
    np.testing.assert_allclose(got[top - 1].numpy(), want[top], rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match=f"max_degree must be in 1..{top}, got {top + 1}"):
        _torch_conditions(stages, top + 1)


# --- the order check (splitnet/order/check.py) ---------------------------------------------

def test_the_verdict_thresholds_are_inclusive_and_exactly_the_documented_ones():
    """ok needs the tail within ``tolerance`` of the target and the window within twice that,
    both inclusive; the target is the declared order, else the tail's nearest integer."""
    v = check._verdict
    assert v(2, 2.0, 2.25, 0.25) == "ok" and v(2, 2.0, 2.25 + 1e-9, 0.25) == "mismatch"
    assert v(2, 2.5, 2.0, 0.25) == "ok" and v(2, 2.5 + 1e-9, 2.0, 0.25) == "mismatch"
    assert v(2, 2.0, 2.2, 0.3) == "ok" and v(2, 2.0, 2.4, 0.3) == "mismatch"   # issue 33
    assert v(2, 2.55, 2.0, 0.3) == "ok" and v(2, 2.65, 2.0, 0.3) == "mismatch"
    assert v(None, 3.0, 2.8, 0.3) == "ok" and v(None, 3.7, 3.0, 0.3) == "mismatch"
    assert v(2, float("nan"), 2.0, 0.3) == "mismatch" == v(2, 2.0, float("nan"), 0.3)


def test_fit_slope_uses_the_strictly_decreasing_errors_above_the_floor_from_the_largest_h():
    h = np.array([1.0, 0.5, 0.25, 0.125])
    slope, used = fit.fit_slope(h, h ** 3, floor=1e-6)
    assert slope == pytest.approx(3.0, abs=1e-12) and used.all()
    e = h ** 3
    e[2] = e[1]                                           # not strictly decreasing: stop there
    assert fit.fit_slope(h, e, floor=1e-6)[1].tolist() == [True, True, False, False]
    slope, used = fit.fit_slope(h, h ** 3, floor=0.125 ** 3)   # an error at the floor: out
    assert used.tolist() == [True, True, True, False] and slope == pytest.approx(3.0)
    slope, used = fit.fit_slope(h, h ** 3, floor=0.25 ** 3)    # two points are enough
    assert used.sum() == 2 and slope == pytest.approx(3.0)
    slope, used = fit.fit_slope(h, h ** 3, floor=0.5 ** 3)
    assert used.sum() == 1 and np.isnan(slope)


def test_window_fit_is_the_longest_increasing_run_inside_floor_and_ceiling_inclusive():
    h = 2.0 ** -np.arange(8.0)                            # 1 .. 1/128
    e = h ** 2
    slope, used = fit.window_fit(h, e, floor=e[6], ceiling=e[1])
    assert used.tolist() == [False, True, True, True, True, True, True, False]
    assert slope == pytest.approx(2.0, abs=1e-12)
    e2 = e.copy()
    e2[3] = e2[4]                                         # a tie breaks the run in two
    _, used = fit.window_fit(h, e2, floor=e[7], ceiling=e[0])
    assert used.tolist() == [False, False, False, False, True, True, True, True]
    e3 = e.copy()
    e3[4] = 1.0                                           # runs 3 | 3 of equal length: smallest h
    _, used = fit.window_fit(h[1:], e3[1:], floor=e[7], ceiling=e[1])
    assert used.tolist() == [False, False, False, False, True, True, True]
    slope, used = fit.window_fit(h[:2], e[:2], floor=e[7], ceiling=e[0])
    assert used.sum() == 2 and slope == pytest.approx(2.0)
    assert np.isnan(fit.window_fit(h[:1], e[:1], floor=e[7], ceiling=e[0])[0])


def test_the_exact_flow_of_the_fields_sum_is_ok_with_infinite_order():
    r = check.measure_order(parse("d+c:1"), 2)
    assert (r.verdict, r.measured, r.tail) == ("ok", math.inf, math.inf)
    assert r.reason == ("the step is the exact flow of the sum of the fields (its local error "
                        "is round-off at every h)")
    assert r.summary().startswith("custom: declared order 2: the step is the exact flow")
    assert r.summary().endswith("-> OK")


def test_an_explicit_floor_is_the_one_the_fit_uses_and_the_default_is_the_round_off_one():
    stages = sn.schemes.get("strang").stages
    hs = 2.0 ** -np.arange(0, 14, 1.0)
    r = check.measure_order(stages, 2, step_sizes=hs)
    assert r.floor == check.round_off_floor(stages)
    floor = float(np.sort(r.errors)[6])
    r2 = check.measure_order(stages, 2, step_sizes=hs, floor=floor)
    assert r2.floor == floor
    assert r2.used.sum() < r.used.sum() and (r2.errors[r2.used] >= floor).all()


def test_an_inconsistent_list_is_inconsistent_unless_normalize_rescales_it():
    """``normalize`` defaults to False; with it, sums that are all equal are divided out."""
    stages = parse("c:0.55,d:1.1,c:0.55")                 # every field sums to 1.1
    r = check.measure_order(stages, 2)
    assert (r.verdict, r.normalized) == ("inconsistent", False)
    r = check.measure_order(stages, 2, normalize=True)
    assert (r.verdict, r.normalized) == ("ok", True)
    assert ", normalised;" in r.summary() and ", normalised" not in (
        check.measure_order(parse("c:0.5,d:1,c:0.5"), 2).summary())


@pytest.mark.parametrize("declared,shown", [(None, "-"), (2, "2"),
                                            (EXACT_ORDER, "exact (unsplit)")])
def test_the_summary_names_the_declared_order(declared, shown):
    s = check.measure_order(parse("c:0.5,d:1,c:0.5"), declared, name="strang").summary()
    assert s.startswith(f"strang: declared order {shown}, measured ")


@pytest.mark.parametrize("spec,mirrored", [
    ("c:0.5,d:1,c:0.5", True),
    ("c:0.5,d:1,d:0.5", False),                           # the same numbers, other fields
    ("c:0.5,d:1,c:-0.5", False),
    ("c:0.5,d:1,c:0.5000000000009", True),                # within 1e-12
    ("c:0.5,d:1,c:0.5000000000015", False),
    ("c:3,d:1,c:3.000000000002", True),                   # relative above 1
    ("c:3,d:1,c:3.000000000004", False),
])
def test_a_list_is_mirrored_when_it_reads_the_same_backwards_to_1e_12(spec, mirrored):
    assert check.is_mirrored(parse(spec)) is mirrored


def test_expm_is_scipys_and_nan_past_overflow():
    scipy_linalg = pytest.importorskip("scipy.linalg")
    m = check.random_matrices(6, seed=3, n=1)[0]
    for scale in (0.05, 0.5, 3.0, 40.0):
        want = scipy_linalg.expm(scale * m)
        got = check.expm(scale * m)
        assert np.linalg.norm(got - want, 2) <= 1e-11 * np.linalg.norm(want, 2), scale
    big = check.expm(2e6 * m / np.abs(m).sum(axis=0).max())
    assert big.shape == (6, 6) and np.isnan(big).all()


def test_unusable_step_sizes_become_nan_and_the_smallest_normal_one_stays():
    tiny = np.finfo(float).tiny
    got = check.usable_steps([[0.5, 0.0], [-1.0, math.inf], [math.nan, tiny / 4], [tiny, 2]])
    assert got.shape == (8,)
    np.testing.assert_array_equal(np.isnan(got), [0, 1, 1, 1, 1, 1, 0, 0])
    assert got[6] == tiny and got[7] == 2.0


def test_the_round_off_floor_grows_past_100_stages_and_a_coefficient_size_of_60():
    assert check.round_off_floor(parse("c:0.5,d:1,c:0.5")) == check.FLOOR
    long = parse(",".join(["c:0.6,d:0.6"] * 125))         # 250 stages, sum |c| = 150
    assert check.round_off_floor(long) == pytest.approx(check.FLOOR * 2.5 * 2.5, rel=1e-12)
    assert check.round_off_floor(long, floor=1.0) == pytest.approx(6.25, rel=1e-12)


@pytest.mark.parametrize("errs,used,counts", [
    ([2e-14, 1e-13, 1e-10, 1e-9, 1e-6, 1e-3], [0, 0, 1, 1, 0, 0],
     "only 2 of 6 errors usable (at least 3 needed; 1 under the 1e-13 round-off floor, "
     "1 above 1e-06, 2 not decreasing with h)"),
    ([2e-14, 1e-10, 1e-9, 1e-3, 1e-8], [0, 1, 1, 0, 0],
     "only 2 of 5 errors usable (at least 3 needed; 1 under the 1e-13 round-off floor, "
     "1 above 1e-06, 1 not decreasing with h)"),
    ([2e-14, 1e-10, 1e-9, 1e-3], [0, 1, 1, 0],
     "only 2 of 4 errors usable (at least 3 needed; 1 under the 1e-13 round-off floor, "
     "1 above 1e-06)"),
    ([], [], "only 0 of 0 errors usable (at least 3 needed; none measured)"),
])
def test_undetermined_counts_each_reason_an_error_is_unusable(errs, used, counts):
    why = check._undetermined_reason(np.array(errs), np.array(used, dtype=bool), 1e-13, 1e-6)
    assert why.startswith(f"undetermined: {counts}; choose step sizes"), why


def test_measure_layers_checks_each_layer_with_the_options_given():
    layers = [parse("c:0.5,d:1,c:0.5"), parse("c:0.55,d:1.1,c:0.55")]
    plain = check.measure_layers(layers, 2)
    assert [(r.name, r.verdict) for r in plain] == [("layer 0", "ok"),
                                                     ("layer 1", "inconsistent")]
    hs = 2.0 ** -np.arange(2, 12, 1.0)
    scaled = check.measure_layers(layers, 2, normalize=True, step_sizes=hs)
    assert [(r.verdict, r.normalized, r.declared) for r in scaled] == [("ok", False, 2),
                                                                      ("ok", True, 2)]
    assert all(np.array_equal(r.step_sizes, hs) for r in scaled)


def test_a_result_carries_its_settings_and_empty_arrays_when_nothing_was_measured():
    stages = parse("c:0.5,d:1,c:0.5")
    r = check.measure_order(stages, 2, ceiling=1e-8)
    assert (r.name, r.reason, r.detectable_reason) == ("custom", "", "")
    assert r.ceiling == 1e-8 and r.floor == check.round_off_floor(stages)
    assert (r.errors[r.used] <= 1e-8).all() and r.used.sum() >= 3
    bad = check.measure_order(parse("c:0.5,d:1,c:0.6"), 2)
    assert bad.verdict == "inconsistent"
    for arr in (bad.step_sizes, bad.errors, bad.used):
        assert arr.shape == (0,)
    assert bad.used.dtype == bool and bad.floor == check.FLOOR and bad.ceiling == check.CEILING
    assert bad.detectable_reason == "" and np.isnan(bad.detectable)
    # the adaptive grid is chosen for the window asked for
    mats = check.field_matrices(("diffusion", "convection"))
    hs, _ = fit.adaptive_errors(lambda h: check.local_error(stages, mats, h), r.floor, 1e-8)
    assert np.array_equal(r.step_sizes, hs)


def test_three_usable_errors_are_enough_for_a_verdict_and_two_are_not():
    stages = sn.schemes.get("strang").stages
    h3 = [0.02, 0.01, 0.005]
    r = check.measure_order(stages, 2, step_sizes=h3)
    assert r.used.sum() == 3 and r.verdict == "ok"
    r = check.measure_order(stages, 2, step_sizes=h3[:2] + [math.nan])
    assert r.verdict == "undetermined" and r.used.sum() == 2
    assert r.step_sizes.shape == r.errors.shape == r.used.shape == (3,)
    assert np.isnan(r.step_sizes[2]) and r.errors[0] > r.errors[1] > 0


def test_consistency_lists_every_field_and_allows_exactly_tol():
    sums, why = check.consistency(parse("a:0.5,b:1,a:0.5"))       # fields by any name
    assert sums == {"a": 1.0, "b": 1.0} and why == ""
    assert check.consistency([]) == ({}, "not a splitting: only the field (none) appears; at "
                                         "least two fields are needed")
    sums, why = check.consistency(parse("c:1"))
    assert why == "not a splitting: only the field convection appears; at least two fields " \
                  "are needed"
    assert check.consistency(parse("c:0.75,d:1.5,c:0.75"), tol=0.5)[1] == ""
    assert check.consistency(parse("c:0.75,d:1.5,c:0.75"), tol=0.25)[1] == (
        "not consistent: diffusion sums to 1.5 and convection sums to 1.5")


def test_normalize_divides_by_the_common_sum_even_of_a_sum_stage():
    r = check.measure_order(parse("d+c:1.1"), 2, normalize=True)
    assert (r.verdict, r.measured, r.normalized) == ("ok", math.inf, True)
    near = 5.0 * (1 + 5e-10)                                      # equal to 1e-9, relatively
    r = check.measure_order(parse(f"c:2.5,d:{near!r},c:2.5"), 2, normalize=True)
    assert r.verdict == "ok"
    r = check.measure_order(parse("c:0.5,d:1.2,c:0.5"), 2, normalize=True)
    assert r.reason == ("not consistent: the fields sum to different totals (diffusion to 1.2, "
                        "convection to 1); no common rescaling makes them all 1")


@pytest.mark.parametrize("declared", [0, -1, 2.5, True])
def test_a_declared_order_is_a_positive_integer(declared):
    with pytest.raises(ValueError, match="order must be a positive integer"):
        check.measure_order(parse("c:0.5,d:1,c:0.5"), declared)


def test_fields_beyond_the_built_in_ones_get_their_own_matrices_after_them():
    three = check.field_matrices(("diffusion", "convection", "cross"))
    more = check.field_matrices(("a", "cross", "b", "diffusion"))
    assert np.array_equal(more["cross"], three["cross"])
    assert np.array_equal(more["diffusion"], three["diffusion"])
    mats = list(more.values())
    assert all(not np.array_equal(mats[i], mats[j]) for i in range(4) for j in range(i))
    every = check.random_matrices(6, 0, 5)
    assert np.array_equal(more["a"], every[3]) and np.array_equal(more["b"], every[4])


def test_the_summary_states_the_measurement():
    r = check.measure_order(parse("c:0.5,d:1,c:0.5"), 2, name="strang")
    h = r.step_sizes[r.used]
    s = r.summary()
    assert s.startswith(f"strang: declared order 2, measured {r.measured:.2f} (smallest h: "
                        f"{r.tail:.2f}; {int(r.used.sum())} points, h {h.max():.3g} .. "
                        f"{h.min():.3g}) on random non-commuting matrices -> OK; coefficient "
                        f"sums: diffusion 1, convection 1; detectable coefficient error ~")
    assert s.endswith(f"~{r.detectable:.1g}") and ", normalised" not in s
    lie = check.measure_order(parse("c:1,d:1"), 1)                # one stage per field
    assert np.isnan(lie.detectable)
    assert lie.summary().endswith(f"detectable coefficient error ~n/a "
                                  f"({lie.detectable_reason})")
    assert lie.detectable_reason.startswith("no coefficient can move")
    bad = check.measure_order(parse("c:0.5,d:1,c:0.6"), 2).summary()
    assert bad == ("custom: declared order 2: not consistent: convection sums to 1.1 "
                   "(coefficient sums: diffusion 1, convection 1.1) -> INCONSISTENT")


def test_the_detectable_error_is_the_coefficient_move_that_changes_the_step_by_err():
    """``delta`` moves the coefficients along :func:`perturbation_direction` (symmetric for a
    symmetric list of order > 2) by as much as the scheme's own error ``err`` at ``h``."""
    stages = sn.schemes.get("yoshida4").stages
    mats = check.field_matrices(("diffusion", "convection"))
    h = 0.05
    err = check.local_error(stages, mats, h)
    for order, keep in ((4, True), (3, True), (2, False)):
        delta, why = check.detectable_error(stages, mats, h, err, order)
        v = check.perturbation_direction(stages, keep_symmetry=keep)
        moved = tuple(Stage(s.field, s.coeff + delta * x) for s, x in zip(stages, v))
        change = np.linalg.norm(check.matrix_step(moved, mats, h)
                                - check.matrix_step(stages, mats, h), 2)
        assert why == "" and change == pytest.approx(err, rel=1e-3), order
    delta, why = check.detectable_error(stages, mats, 0.0, err, 4)
    assert np.isnan(delta) and why == ("the local error does not depend on the coefficients "
                                       "at this h")


def test_the_perturbation_direction_keeps_the_sums_and_the_symmetry_at_max_norm_one():
    stages = sn.schemes.get("yoshida4").stages
    v = check.perturbation_direction(stages)
    assert np.array_equal(v, check.perturbation_direction(stages, seed=0))
    assert not np.array_equal(v, check.perturbation_direction(stages, seed=1))
    assert np.abs(v).max() == 1.0 and np.allclose(v, v[::-1], atol=1e-15)
    for f in ("diffusion", "convection"):
        assert abs(sum(x for s, x in zip(stages, v) if s.field == f)) < 1e-14, f
    w = check.perturbation_direction(stages, keep_symmetry=False)
    assert np.abs(w).max() == 1.0 and not np.allclose(w, w[::-1])
    assert check.perturbation_direction(parse("c:1,d:1")) is None
    summed = parse("c:0.25,d:0.5,d+c:0.5,c:0.25")         # a sum stage counts for both fields
    v = check.perturbation_direction(summed)
    for f in ("diffusion", "convection"):
        assert abs(sum(x for s, x in zip(summed, v) if f in s.components)) < 1e-14, f


def test_the_detectable_error_moves_along_a_direction_chosen_by_the_declared_order():
    """The target order is the declared one (else the measured one): Strang declared 4 keeps
    its symmetry, and no symmetric move keeps its sums; measured (2), it breaks it."""
    stages = sn.schemes.get("strang").stages
    r = check.measure_order(stages, 4)
    assert r.verdict == "mismatch" and np.isnan(r.detectable)
    assert r.detectable_reason.startswith("no coefficient can move with every field's sum kept")
    r = check.measure_order(stages)
    assert r.verdict == "ok" and np.isfinite(r.detectable) and r.detectable_reason == ""


def _adaptive(error, **kw):
    return fit.adaptive_errors(error, floor=1e-13, ceiling=1e-6, **kw)


def test_adaptive_errors_halve_from_h_start_until_under_the_floor():
    hs, errs = _adaptive(lambda h: h ** 3)
    assert hs[0] == 8.0 and (np.diff(hs) < 0).all()
    assert np.array_equal(errs, hs ** 3)
    assert errs[-1] < 1e-13 <= errs[-2]
    assert np.array_equal(np.log2(hs), np.round(np.log2(hs)))    # no refinement was needed
    hs, _ = _adaptive(lambda h: 1.0, h_min=2.0 ** -10, max_refine=0)   # never under: h_min
    assert hs.min() == 2.0 ** -10
    hs, _ = _adaptive(lambda h: 1e-13 if h <= 1 else 1.0, max_refine=0)   # at it: not under
    assert hs.min() == 2.0 ** -40


def test_adaptive_errors_refine_around_the_window_until_min_points_lie_in_it():
    """``e = h^12`` crosses [1e-13, 1e-6] in under two halvings: the grid is refined, each
    level halving the ratio, only between the last error under the floor and the first above
    the ceiling, and no further than ``min_points`` needs."""
    hs, errs = _adaptive(lambda h: h ** 12)
    inside = (errs >= 1e-13) & (errs <= 1e-6)
    assert inside.sum() >= 5 and (np.diff(hs) < 0).all()
    levels = np.log2(8.0 / hs)
    finest = next(m for m in (1, 2, 4, 8) if np.allclose(levels * m, np.round(levels * m)))
    assert finest == 4
    coarse = np.isclose(levels * 2, np.round(levels * 2))
    assert (inside & coarse).sum() < 5                            # level 1 was not enough
    new = ~np.isclose(levels, np.round(levels))
    lo = hs[~new & (errs < 1e-13)].max()                          # on the first, halving grid
    hi = hs[~new & (errs > 1e-6) & (hs > lo)].min()
    assert new.sum() > 0 and ((hs[new] > lo) & (hs[new] < hi)).all()


# ---------------------------------------------------------------------------------------------
# issue 62: the checks' own arguments, one-field layers, and how results print

def test_random_matrices_bounds_are_exact_and_named():
    assert len(check.random_matrices(1, 0, 1)) == 1 and check.random_matrices(1)[0].shape == (1, 1)
    assert check.random_matrices(dim=2, seed=2**63 - 1, n=1)[0].shape == (2, 2)
    assert len(check.random_matrices(2, 0, 4096)) == 4096     # the bounds are inclusive
    a, _ = check.random_matrices()
    assert a.shape == (6, 6)
    assert np.array_equal(a, check.random_matrices(6, 0)[0])
    for kw, msg in (({"dim": 0}, "dim must be an int in [1, 4096], got 0"),
                    ({"dim": 4097}, "dim must be an int in [1, 4096], got 4097"),
                    ({"dim": 2.0}, "dim must be an int in [1, 4096], got 2.0"),
                    ({"dim": True}, "dim must be an int in [1, 4096], got True"),
                    ({"seed": -1}, "seed must be an int in [0, 9223372036854775807], got -1"),
                    ({"seed": 2**63}, "seed must be an int in [0, 9223372036854775807], got "
                                      "9223372036854775808"),
                    ({"n": 0}, "n must be an int in [1, 4096], got 0"),
                    ({"n": 4097}, "n must be an int in [1, 4096], got 4097")):
        with pytest.raises(ValueError) as info:
            check.random_matrices(**kw)
        assert str(info.value) == msg


def test_check_fit_bounds_and_messages():
    check.check_fit(0.0, math.inf, 1e-9)            # a zero floor, no ceiling: allowed
    check.check_fit(None, 1e-300, 0.3)
    for args, msg in (((math.nan, 1e-6, 0.3), "floor must be a number, got nan"),
                      ((-1e-300, 1e-6, 0.3), "floor must be a finite number >= 0, got -1e-300"),
                      ((math.inf, 1e-6, 0.3), "floor must be a finite number >= 0, got inf"),
                      (("0", 1e-6, 0.3), "floor must be a number, got '0'"),
                      ((1e-6, 1e-6, 0.3), "ceiling must be above the floor (1e-06), got 1e-06"),
                      ((None, 0.0, 0.3), "ceiling must be above the floor (0), got 0.0"),
                      ((None, math.nan, 0.3), "ceiling must be a number, got nan"),
                      ((None, 1e-6, 0.0), "tolerance must be a finite number > 0, got 0.0"),
                      ((None, 1e-6, math.inf), "tolerance must be a finite number > 0, got inf"),
                      ((None, 1e-6, True), "tolerance must be a number, got True")):
        with pytest.raises(ValueError) as info:
            check.check_fit(*args)
        assert str(info.value) == msg
    for bad in ("0.1", b"0.1", {0.1: 1}):
        with pytest.raises(TypeError, match="step_sizes must be a list of numbers"):
            check.usable_steps(bad)
    got = check.usable_steps(np.array([1, 2], dtype=np.int64))     # ints are step sizes too
    assert got.dtype == np.float64 and got.tolist() == [1.0, 2.0]
    tiny = np.finfo(float).tiny
    assert np.isnan(check.usable_steps([tiny / 2])[0]) and check.usable_steps([tiny])[0] == tiny


def test_a_one_field_layer_declared_is_its_exact_flow():
    r = check.measure_order(parse("d:0.25,d:0.75"), EXACT_ORDER)
    assert (r.verdict, r.measured, r.tail) == ("ok", math.inf, math.inf)
    assert r.reason == ("one field, diffusion: nothing to split; with exact sub-flows the step "
                        "is that field's exact flow")
    assert check.measure_order(parse("c:1"), 3).verdict == "ok"
    assert check.measure_order(parse("c:1"), None).verdict == "inconsistent"
    assert check.measure_order(parse("c:0.5,c:0.6"), 3).verdict == "inconsistent"
    with pytest.raises(ValueError, match="no stages"):
        check.measure_order([], 2)
    with pytest.raises(ValueError, match=r"ceiling must be above the floor \(1e-06\)"):
        check.measure_order(parse("c:0.5,d:1,c:0.5"), 2, floor=1e-6, ceiling=1e-6)


def test_layer_checks_print_exactly():
    layers = [parse("c:0.5,d:1,c:0.5"), parse("d:1,c:1"), parse("d:1,c:1.5")]
    got = check.measure_layers(layers, 2, prefix="decoder layer")
    assert [c.name for c in got] == ["decoder layer 0", "decoder layer 1", "decoder layer 2"]
    assert got[0].condition_defect == 0.0 and got[1].condition_defect == 0.5
    assert str(got) == repr(got) == got.table() == "\n".join([
        "3 layers: 1 ok",
        "layer           declared verdict        measured  smallest h  largest condition",
        "decoder layer 0        2 OK                 2.00        2.00            0.0e+00",
        "decoder layer 1        2 MISMATCH           1.00        1.00            5.0e-01",
        "decoder layer 2        2 INCONSISTENT          -           -            7.5e-01  not "
        "consistent: convection sums to 1.5"])
    one = check.measure_layers([parse("d:1")], EXACT_ORDER)
    assert one.table() == "\n".join([
        "1 layer: 1 ok",
        "layer   declared verdict        measured  smallest h  largest condition",
        "layer 0    exact OK                exact       exact            0.0e+00"])
    assert check.measure_layers([parse("d:1,x:1")], 1)[0].condition_defect == 0.0  # no convection
    assert check.LayerChecks([]).table() == "no layers" and check.LayerChecks([]).ok
    assert not got.ok and one.ok
    nodecl = check.measure_layers([parse("c:0.5,d:1,c:0.5")], None)
    assert nodecl.table().splitlines()[2].split()[:5] == ["layer", "0", "-", "OK", "2.00"]
    assert math.isnan(nodecl[0].condition_defect)


def test_a_checks_repr_and_str():
    r = check.measure_order(parse("c:0.5,d:1,c:0.5"), 2, name="strang")
    n = int(r.used.sum())
    assert repr(r) == (f"OrderCheck('strang': ok, declared 2, measured {r.measured:.2f}, "
                       f"smallest h {r.tail:.2f}, {n} of {len(r.step_sizes)} points fitted)")
    assert str(r) == r.summary()
    e = check.measure_order(parse("d+c:1"), EXACT_ORDER, name="parallel")
    assert repr(e) == ("OrderCheck('parallel': ok, declared exact, measured exact, smallest h "
                       "exact, 0 of 0 points fitted)")
    i = check.measure_order(parse("d:1,c:2"), None)
    assert repr(i) == ("OrderCheck('custom': inconsistent, declared -, measured -, smallest h -, "
                       "0 of 0 points fitted)")
    assert e.summary().startswith("parallel: declared order exact (unsplit): ")


def test_layer_checks_print_reasons_plurals_and_missing_conditions():
    two = check.measure_layers([parse("c:0.5,d:1,c:0.5")] * 2, 2)
    assert two.table().splitlines()[0] == "2 layers: 2 ok"
    nodecl = check.measure_layers([parse("c:0.5,d:1,c:0.5")], None)
    row = nodecl.table().splitlines()[2]
    assert row.endswith("2.00                  -")          # no condition without an order
    tiny = check.measure_layers([parse("c:0.5,d:1,c:0.5")], 2, step_sizes=[1e-9, 2e-9])
    assert tiny[0].verdict == "undetermined" and tiny.table().splitlines()[2].endswith(
        "  " + tiny[0].reason)
    assert "largest order condition 0.0e+00" in two[0].summary()
    assert "largest order condition" not in nodecl[0].summary()
    stages = parse("c:0.5,d:1,c:0.5")
    with pytest.raises(ValueError, match="ceiling must be above the floor"):
        check.measure_order(stages, 2, ceiling=check.round_off_floor(stages))
