"""check_order: measured orders of every registry scheme on random non-commuting matrices
(adaptive step sizes, orders 1 to 10), consistency first, wrong coefficient sets caught, and the
size of coefficient error the check can see."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg

import splitnet as sn
from splitnet.integrators.schemes import BlanesMoan4, StrangComposition, Yoshida6
from splitnet.order.check import expm, local_error, matrix_step, random_matrices
from splitnet.order.fit import CEILING, FLOOR, adaptive_errors, fit_slope, window_fit

# Every registered scheme, restricted-class ones included (they are checked at their general
# order): a new scheme or zoo entry is tested without editing this file. Matrix checks are cheap
# (~0.05 s a scheme), so all of them run by default.
REGISTRY = sn.schemes.available("splitting")


def _get(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # restricted-class methods warn on get()
        return sn.schemes.get(name)


@pytest.mark.parametrize("name", REGISTRY)
@pytest.mark.parametrize("seed", [0, 1])
def test_every_registry_scheme_has_its_declared_order(name, seed):
    s = _get(name)
    r = sn.check_order(s, seed=seed)
    assert r.declared == s.order and r.verdict == "ok", r.summary()
    assert abs(r.tail - s.order) <= 0.3, r.summary()
    assert abs(r.measured - s.order) <= 0.6, r.summary()
    assert r.ok and "OK" in r.summary()
    assert r.used.sum() >= 5                    # at least 5 points in the window
    fitted = r.errors[r.used]
    assert fitted.min() >= FLOOR and fitted.max() <= CEILING
    assert r.sums == pytest.approx({"diffusion": 1.0, "convection": 1.0}, abs=1e-12)


@pytest.mark.parametrize("name", ["strang", "ruth3", "yoshida4", "yoshida6", "yoshida8",
                                  "kahan-li10"])
def test_orders_with_scipy_expm_sub_flows(name):
    """Independent of the library's stepping and exponential: products of
    ``scipy.linalg.expm`` over the stage list at the step sizes the check chose, local error
    against expm(h (A + B)); the same order comes out."""
    s = _get(name)
    r = sn.check_order(s, seed=11, dim=7)
    a, b = random_matrices(7, seed=11)
    hs = r.step_sizes[r.used]
    errs = []
    for h in hs:
        m = np.eye(7)
        for st in s.stages:
            m = scipy.linalg.expm(st.coeff * h * (a if st.field == "diffusion" else b)) @ m
        errs.append(np.linalg.norm(m - scipy.linalg.expm(h * (a + b)), 2))
    slope = np.polyfit(np.log(hs), np.log(errs), 1)[0]
    assert abs(slope - 1 - r.measured) < 0.05
    assert abs(slope - 1 - s.order) <= 0.6


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


# ---------------------------------------------------------------------------------------------
# Adaptive step sizes

@pytest.mark.parametrize("name,order", [("lie-trotter", 1), ("strang", 2), ("ruth3", 3),
                                        ("yoshida4", 4), ("yoshida6", 6), ("yoshida8", 8),
                                        ("sofroniou-spaletta10", 10)])
def test_adaptive_step_sizes_put_five_points_in_the_window(name, order):
    """Start at h = 8, halve until under the floor, refine where fewer than 5 errors lie in
    the window: orders 1 to 10 all get at least 5 usable points."""
    s = _get(name)
    a, b = random_matrices(6, 3)
    hs, errs = adaptive_errors(lambda h: local_error(s.stages, a, b, h))
    assert hs[0] == 8.0 and np.all(np.diff(hs) < 0)
    assert errs[-1] < FLOOR                         # went down to the floor
    slope, used = window_fit(hs, errs)
    assert used.sum() >= 5
    assert abs(slope - 1 - order) <= 0.6
    ratios = hs[:-1] / hs[1:]
    assert ratios.min() >= 2 ** (1 / 8) - 1e-12     # refined at most to 2^(1/8)
    if order <= 2:
        assert ratios.min() > 1.99                  # halving alone gives enough points
    if order >= 8:
        assert ratios.min() < 1.99                  # an error ~h^9 or steeper needs a finer grid


def test_window_fit_takes_the_longest_increasing_run_inside_the_window():
    h = np.array([1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625])
    e = 1e-3 * h ** 3
    e[0] = 5e-3                                      # above the ceiling
    e[-1] = 1e-20                                    # under the floor
    slope, used = window_fit(h, e, floor=1e-13, ceiling=1e-3)
    assert used.tolist() == [False, True, True, True, True, True, False]
    assert slope == pytest.approx(3.0)
    e2 = e.copy()
    e2[3] = e2[2] * 2                               # a bump: the longer run below it wins
    _, used2 = window_fit(h, e2, floor=1e-13, ceiling=1e-3)
    assert used2.tolist() == [False, False, False, True, True, True, False]


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


# ---------------------------------------------------------------------------------------------
# Order 10, undetermined, and what the old fixed grid got wrong

def test_a_tenth_order_set_is_ok_and_rebuilds_from_its_dict():
    """Sofroniou-Spaletta's and Kahan-Li's 10th-order sets: the adaptive grid finds the window
    and the verdict is OK (Sofroniou-Spaletta's errors at the old fixed grid, h <= 0.5, are all
    under the floor: "measured nan -> MISMATCH" before). A scheme built with
    ``from_stages(..., order=10)`` (what a model config stores) comes back from its dict."""
    ss10 = _get("sofroniou-spaletta10")
    old_grid = [2.0 ** (-k / 2) for k in range(2, 17)]              # h <= 0.5
    assert max(local_error(ss10.stages, *random_matrices(6, 0), h) for h in old_grid) < FLOOR
    for name in ("sofroniou-spaletta10", "kahan-li10"):
        s = _get(name)
        r = sn.check_order(s)
        assert r.ok, r.summary()
        mine = sn.SplittingScheme.from_stages(s.stages, order=10, name=f"{name}-copy")
        back = sn.schemes.resolve(mine.to_dict())
        assert back == mine and back.order == 10


def test_errors_all_under_the_floor_give_undetermined_never_mismatch():
    r = sn.check_order("yoshida8", step_sizes=[0.05, 0.025, 0.0125])
    assert r.verdict == "undetermined" and not r.ok
    assert np.all(r.errors < FLOOR)
    assert "3 under the 1e-13 round-off floor" in r.reason
    assert "UNDETERMINED" in r.summary() and "MISMATCH" not in r.summary()
    assert np.isnan(r.measured)
    # from_stages refuses to confirm what it cannot measure... only with such step sizes;
    # the default adaptive grid confirms it
    assert sn.check_order("yoshida8").ok


def test_declared_order_defaults_and_overrides():
    r = sn.check_order([("convection", .5), ("diffusion", 1), ("convection", .5)])
    assert r.declared is None and r.ok and round(r.tail) == 2       # nearest integer
    assert not sn.check_order(sn.schemes.get("strang"), order=3).ok
    assert sn.check_order(sn.schemes.get("strang"), order=2, seed=5, dim=9).ok
    assert sn.check_order("c:0.5,d:1,c:0.5", order=2).ok            # a stage string


# ---------------------------------------------------------------------------------------------
# Consistency first

DOUBLED = [(f, 2 * c) for f, c in ((x.field, x.coeff) for x in Yoshida6().stages)]


def test_doubled_coefficients_fail_as_not_consistent():
    """Every coefficient of Yoshida 6 doubled: as written the method advances each field by
    2h, an inconsistent method; it used to pass as 'order 6 OK' after silent normalisation."""
    r = sn.check_order(DOUBLED, order=6)
    assert r.verdict == "inconsistent" and not r.ok
    assert r.reason.startswith("not consistent: diffusion sums to 2 and convection sums to 2")
    assert r.sums["convection"] == pytest.approx(2.0)
    assert "INCONSISTENT" in r.summary() and np.isnan(r.measured)


def test_normalize_rescales_explicitly():
    r = sn.check_order(DOUBLED, order=6, normalize=True)
    assert r.ok and r.normalized, r.summary()
    assert r.sums["diffusion"] == pytest.approx(2.0)                 # the sums as written
    assert "normalised" in r.summary()
    # sums that differ cannot be fixed by a common rescaling
    r2 = sn.check_order([("diffusion", 1.0), ("convection", 2.0)], normalize=True)
    assert r2.verdict == "inconsistent" and "no common rescaling" in r2.reason


def test_inconsistent_stage_string_on_the_command_line(capsys):
    from splitnet import cli

    rc = cli.main(["schemes", "--check", "c:1,d:2,c:1", "--order", "2"])
    out = capsys.readouterr().out
    assert rc == 1 and "not consistent: diffusion sums to 2 and convection sums to 2" in out


def test_from_stages_normalises_but_warns():
    with pytest.warns(UserWarning, match="convection sums to 2"):
        s = sn.SplittingScheme.from_stages([("convection", 1.0), ("diffusion", 2.0),
                                            ("convection", 1.0)], order=2, name="twice")
    assert s.stages == sn.schemes.get("strang").stages
    with warnings.catch_warnings():
        warnings.simplefilter("error")                       # sums of 1 to 1e-12: no warning
        sn.SplittingScheme.from_stages(sn.schemes.get("yoshida8").stages, order=8)


@pytest.mark.parametrize("name", ["yoshida6", "kahan-li6"])
def test_from_stages_order_is_a_lower_bound_with_one_meaning(name):
    """A declared order means "at least": a sixth-order set declared as order 2 or 4 is
    accepted (keeping the declared order) with a warning naming the measured order, declared 6
    is silent, declared 8 is refused -- the same rule for p = 2 as for p >= 3."""
    stages = _get(name).stages
    for p in (2, 4):
        with pytest.warns(UserWarning, match="higher than the declared"):
            s = sn.SplittingScheme.from_stages(stages, order=p, name="low")
        assert s.order == p
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sn.SplittingScheme.from_stages(stages, order=6).order == 6
    with pytest.raises(ValueError, match="declares order 8"):
        sn.SplittingScheme.from_stages(stages, order=8)


def test_a_stage_string_declares_the_order_its_stages_measure():
    assert sn.schemes.resolve("c:0.5,d:1,c:0.5").order == 2
    assert sn.schemes.resolve("d:1,c:1").order == 1
    assert sn.schemes.resolve(sn.schemes.get("yoshida4").stage_string()).order == 4


# ---------------------------------------------------------------------------------------------
# Wrong coefficients: caught, and the size the check can see

class _TypoBlanesMoan(BlanesMoan4):
    """S6 with two digits of a1 swapped: 0.0792... -> 0.0729..."""

    name = "blanes-moan4-typo"
    a = (0.0729036964311957, 0.353172906049774, -0.0420650803577195)


class _TruncatedTripleJump(StrangComposition):
    """The triple jump with its weight truncated to 5 digits: right at large h, second order
    once the sum g^3 defect (~1e-4) dominates."""

    name, order, weights = "yoshida4-5digits", 4, (1.3512,)


@pytest.mark.parametrize("factory,tail", [(_TypoBlanesMoan, (1.7, 2.3)),
                                          (_TruncatedTripleJump, (1.7, 3.0))])
def test_wrong_coefficients_are_caught(factory, tail):
    """The typo's defect dominates the whole window (second order); the truncated weight's
    defect takes over inside it: the tail is on its way from 4 down to 2 at the floor."""
    r = sn.check_order(factory())
    assert r.verdict == "mismatch" and "MISMATCH" in r.summary()
    assert tail[0] <= r.tail <= tail[1], r.summary()


def test_a_truncated_digit_in_a_sixth_order_set_is_caught():
    """Yoshida 6 (solution A) with its first weight cut after 6 decimals (an error of 6e-7,
    well above the detectable size the check reports, 2e-8) fails; the same set to 15 digits,
    as Yoshida printed it, passes."""
    w = Yoshida6.weights

    class Cut(StrangComposition):
        name, order, weights = "yoshida6-cut", 6, (0.784513,) + w[1:]

    class Printed(StrangComposition):
        name, order = "yoshida6-printed", 6
        weights = (0.784513610477560, 0.235573213359357, -1.17767998417887)

    good = sn.check_order(Yoshida6())
    assert abs(w[0] - 0.784513) > 5 * good.detectable              # the check can see it
    r = sn.check_order(Cut())
    assert r.verdict == "mismatch", r.summary()
    assert r.tail < 5.0
    assert sn.check_order(Printed()).ok


def test_perturbed_stage_list_is_caught():
    """A user's list: Strang's stages with the first convection weight off by 1 %; sums are
    rebalanced, so the list is consistent, and the order drops to 1."""
    st = [("convection", 0.505), ("diffusion", 1.0), ("convection", 0.495)]
    r = sn.check_order(st, order=2)
    assert r.verdict == "mismatch"
    assert abs(r.tail - 1) <= 0.3, r.summary()       # asymptotically first order


@pytest.mark.parametrize("name", ["yoshida6", "ruth3", "kahan-li8"])
def test_detectable_coefficient_error_is_what_the_check_sees(name):
    """``detectable``: a random coefficient error (sums kept, palindrome kept) 30 times larger
    is caught, one 30 times smaller is not."""
    from splitnet.order.check import perturbation_direction

    s = _get(name)
    r = sn.check_order(s)
    assert 1e-14 < r.detectable < 1e-5, r.summary()
    v = perturbation_direction(s.stages)
    for factor, caught in ((30.0, True), (1 / 30, False)):
        moved = [(st.field, st.coeff + factor * r.detectable * x) for st, x in zip(s.stages, v)]
        assert sn.check_order(moved, order=s.order).verdict == ("mismatch" if caught else "ok")


@pytest.mark.parametrize("name", ["strang", "omelyan2"])
def test_detectable_for_symmetric_second_order_lists_breaks_the_symmetry(name):
    """No symmetric move lowers a symmetric order-2 list (a consistent symmetric method has
    even order), so ``detectable`` is measured along a direction that breaks the symmetry:
    30 times larger is caught (order 1), 30 times smaller is not."""
    from splitnet.order.check import perturbation_direction

    s = _get(name)
    r = sn.check_order(s)
    assert 1e-9 < r.detectable < 1e-3, r.summary()
    v = perturbation_direction(s.stages, keep_symmetry=False)
    for factor, caught in ((30.0, True), (1 / 30, False)):
        moved = [(st.field, st.coeff + factor * r.detectable * x) for st, x in zip(s.stages, v)]
        assert sn.check_order(moved, order=2).verdict == ("mismatch" if caught else "ok")
    # a symmetric perturbation of any size keeps order 2: measuring along it would be meaningless
    big = [(st.field, st.coeff + 0.3 * x) for st, x in zip(s.stages, (v + v[::-1]) / 2)]
    assert sn.check_order(big, order=2).ok


def test_nothing_detectable_when_no_coefficient_can_move():
    """Lie-Trotter has one stage per field: no consistent perturbation exists."""
    r = sn.check_order("lie-trotter")
    assert r.ok and np.isnan(r.detectable) and "n/a" in r.summary()
    assert "one stage per field" in r.summary()


# ---------------------------------------------------------------------------------------------
# The verdict's thresholds: the tail within 0.3 of the declared order, the window within 0.6

def _synthetic_check(monkeypatch, tail_off: float, window_off: float, order: int = 2):
    """check_order of Strang's stages (declared ``order``) on a made-up local-error curve: the
    three smallest h follow slope ``order + 1 + tail_off``; above them the slope steepens by
    ``s`` (the curve stays continuous), ``s`` chosen so that the window's fitted order is
    ``order + window_off`` (the fitted slope is linear in ``s``). The stage list is irrelevant:
    only the thresholds decide."""
    import splitnet.order.check as check

    hs = 2.0 ** -np.arange(9.0)                                  # 1 .. 1/256, errors >= 6e-8
    log_h, kink = np.log(hs), np.log(hs[-3])                     # the tail: 3 smallest h
    steep = np.maximum(0.0, log_h - kink)
    s = (window_off - tail_off) / np.polyfit(log_h, steep, 1)[0]

    def curve(stages, mats, h):
        x = np.log(h)
        return float(np.exp((order + 1 + tail_off) * x + s * max(0.0, x - kink)))

    monkeypatch.setattr(check, "local_error", curve)
    r = sn.check_order("strang", order=order, step_sizes=hs)
    assert r.tail == pytest.approx(order + tail_off, abs=1e-9)
    assert r.measured == pytest.approx(order + window_off, abs=1e-9)
    return r


@pytest.mark.parametrize("off,verdict", [(0.2, "ok"), (-0.2, "ok"), (0.4, "mismatch"),
                                         (-0.4, "mismatch")])
def test_a_tail_off_by_more_than_the_tolerance_is_a_mismatch(monkeypatch, off, verdict):
    """Tail and window both ``off`` from the declared order: 0.2 passes, 0.4 fails (the tail's
    tolerance is 0.3; the window's, 0.6, would let 0.4 pass)."""
    r = _synthetic_check(monkeypatch, off, off)
    assert r.verdict == verdict and r.tolerance == 0.3, r.summary()


@pytest.mark.parametrize("off,verdict", [(0.5, "ok"), (-0.5, "ok"), (0.7, "mismatch"),
                                         (-0.7, "mismatch")])
def test_a_window_off_by_more_than_twice_the_tolerance_is_a_mismatch(monkeypatch, off, verdict):
    """The tail exactly at the declared order, the window ``off``: 0.5 passes, 0.7 fails."""
    r = _synthetic_check(monkeypatch, 0.0, off)
    assert r.verdict == verdict, r.summary()


# ---------------------------------------------------------------------------------------------
# What check_order returns, printed (issue 62): a verdict for each layer, a short table

def test_a_check_prints_its_verdict_in_words_and_keeps_every_attribute():
    import dataclasses

    c = sn.check_order("yoshida4")
    assert str(c) == c.summary() and "-> OK" in str(c)
    r = repr(c)
    assert "\n" not in r and "array(" not in r and len(r) < 200, r
    assert r.startswith("OrderCheck('yoshida4': ok, declared 4, measured 4.00")
    for f in dataclasses.fields(c):                 # the arrays are still there, whole
        assert hasattr(c, f.name)
    assert c.step_sizes.shape == c.errors.shape == c.used.shape and c.used.sum() >= 3
    assert "exact" in repr(sn.check_order("parallel"))


def test_per_layer_checks_print_as_a_table_one_row_per_layer():
    """``sn.check_order(model)``: a tuple of checks (indexing, length, equality unchanged)
    that prints a row per layer with its verdict, not a wall of arrays."""
    from splitnet.order.check import LayerChecks

    strang = sn.schemes.get("strang").stages
    layers = [strang, sn.schemes.get("lie-trotter").stages, [("diffusion", 1.0),
                                                             ("convection", 1.5)]]
    got = sn.check_order(layers, order=2)
    assert isinstance(got, LayerChecks) and isinstance(got, tuple) and len(got) == 3
    assert got == tuple(got) and [c.verdict for c in got] == ["ok", "mismatch", "inconsistent"]
    assert not got.ok
    rows = str(got).splitlines()
    assert rows[0] == "3 layers: 1 ok" and "verdict" in rows[1] and len(rows) == 5
    assert rows[2].split()[:5] == ["layer", "0", "2", "OK", "2.00"]
    assert rows[3].split()[:4] == ["layer", "1", "2", "MISMATCH"]
    assert "INCONSISTENT" in rows[4] and "convection sums to 1.5" in rows[4]
    assert repr(got) == str(got) and "array(" not in str(got)
    # pairs work as well as Stage objects
    pairs = [[(s.field, s.coeff) for s in strang]] * 2
    assert [c.verdict for c in sn.check_order(pairs, order=2)] == ["ok", "ok"]


def test_check_order_of_models_lm_one_field_and_encoder_decoder():
    """A model: its layers against its scheme's order. A layer of one field is that field's
    exact flow (``OneField`` declares it so; was 'INCONSISTENT: not a splitting'); a
    translation model gives its encoder's and its decoder's layers, each against its own
    scheme (was a TypeError), and ConvS2S's decoder (diffusion and cross, no convection) has no
    failed degree-1 condition for the field it lacks."""
    from splitnet.integrators.splitting import OneField

    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    lm = sn.models.SplitTransformer(256, 8, 2, 3, scheme="strang")
    got = sn.check_order(lm)
    assert len(got) == 3 and got.ok and "layer 2" in str(got)
    one = sn.check_order(sn.models.SplitTransformer(256, 8, 2, 2, convection_field="none"))
    assert one.ok and all(c.measured == float("inf") for c in one)
    assert sn.check_order(OneField("diffusion")).ok
    assert sn.check_order([("diffusion", 1.0)]).verdict == "inconsistent"   # no declared order
    mt = sn.models.SplitSeq2Seq(40, 40, 16, 2, n_encoder_layers=1, n_decoder_layers=2, pad_id=0,
                                bos_id=1, eos_id=2, decoder_scheme="strang")
    got = sn.check_order(mt)
    assert [c.name for c in got] == ["encoder layer 0", "decoder layer 0", "decoder layer 1"]
    assert [c.declared for c in got] == [1, 2, 2] and got.ok
    conv = sn.models.SplitSeq2Seq(40, 40, 16, 2, n_encoder_layers=1, n_decoder_layers=1,
                                  pad_id=0, bos_id=1, eos_id=2, diffusion_field="conv",
                                  convection_field="none", cross_field="multistep",
                                  init="convs2s", norm="none")
    enc, dec = sn.check_order(conv)
    assert enc.ok and enc.measured == float("inf") and dec.ok
    assert dec.condition_defect == 0.0      # lie-trotter is consistent: degree 1 holds


@pytest.mark.parametrize("kw,exc,words", [
    ({"floor": float("nan")}, ValueError, "floor"), ({"floor": -1.0}, ValueError, "floor"),
    ({"floor": float("inf")}, ValueError, "floor"), ({"ceiling": float("nan")}, ValueError,
                                                     "ceiling"),
    ({"ceiling": 1e-20}, ValueError, "ceiling must be above the floor"),
    ({"floor": 1e-10, "ceiling": 1e-12}, ValueError, "ceiling must be above the floor"),
    ({"tolerance": -1.0}, ValueError, "tolerance"), ({"tolerance": float("nan")}, ValueError,
                                                     "tolerance"),
    ({"tolerance": 0.0}, ValueError, "tolerance"), ({"step_sizes": "0.1"}, TypeError,
                                                    "step_sizes"),
    ({"unknown": 3}, TypeError, "unknown option(s) ['unknown']"),
])
def test_check_order_refuses_fit_options_that_would_give_a_wrong_verdict(kw, exc, words):
    """A negative or NaN tolerance made a correct scheme a 'mismatch'; a negative floor fitted
    round-off (Strang 'ok' at 1.98 over 44 points), a NaN one computed every error to fit
    none."""
    with pytest.raises(exc) as info:
        sn.check_order("strang", **kw)
    assert words in str(info.value)


@pytest.mark.parametrize("scheme", [None, 3, 2.5, True, object(), []])
def test_check_order_refuses_what_is_no_scheme(scheme):
    with pytest.raises((TypeError, ValueError)) as info:
        sn.check_order(scheme)
    assert "check_order takes" in str(info.value) or "no stages" in str(info.value)
