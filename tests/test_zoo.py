"""The zoo of published methods: every entry registered with its citation, order and symmetry;
every entry measures its declared order (random matrices, the particle system, and for the
Runge–Kutta–Nyström ones their class order on a nonlinear q'' = f(q)); coefficients exact to
double precision (40-digit order conditions, closed forms); registry-driven, so a new entry in
splitnet/stagelists/zoo.py is tested without editing this file."""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import splitnet as sn
from splitnet import zoo
from splitnet.analyses.problems import NystromProblem, local_errors, particle_problem
from splitnet.dev import zoocache
from splitnet.order.fit import adaptive_errors, window_fit

ROOT = Path(__file__).resolve().parents[1]
NAMES = [m.name for m in zoo.PUBLISHED]
GENERAL = [m.name for m in zoo.PUBLISHED if m.problem_class == zoo.GENERAL]
RESTRICTED = [m.name for m in zoo.PUBLISHED if m.problem_class != zoo.GENERAL]


def _get(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sn.schemes.get(name)


def test_the_zoo_is_large_and_the_core_stays():
    # every general method is a core scheme or a general zoo set, once; the restricted ones
    # are the zoo's RKN sets (docs/zoo.md counts them from these lists)
    core = sn.schemes.available("core")
    assert sorted(sn.schemes.available()) == sorted(core + GENERAL)
    assert len(set(core + GENERAL)) == len(core) + len(GENERAL) and GENERAL and RESTRICTED
    assert all(m.problem_class == zoo.RKN for m in zoo.PUBLISHED if m.name in RESTRICTED)
    # docs/theory.md and README say how many published sets the zoo holds: a count generated
    # by the zoo target (issue 59: a new method edits no doc by hand)
    root = Path(__file__).resolve().parents[1]
    for doc in ("docs/theory.md", "README.md"):
        text = (root / doc).read_text()
        count = f"<!-- zoo:methods -->{len(NAMES)}<!-- /zoo:methods -->"
        assert count in text, f"{doc}: the zoo's count is stale: python3 -m splitnet.dev regen zoo"
    assert sn.schemes.available("core") == ["lie-trotter", "strang", "yoshida4", "suzuki4",
                                            "yoshida6", "yoshida8", "blanes-moan4"]
    assert set(sn.schemes.available("core")) <= set(sn.schemes.available())
    assert sn.schemes.available("restricted") == RESTRICTED
    assert set(sn.schemes.available()) | set(RESTRICTED) == set(sn.schemes.available("splitting"))
    assert set(sn.schemes.available("all")) == set(sn.schemes.available("splitting")) | {"parallel"}
    assert not set(sn.schemes.available()) & set(RESTRICTED)
    orders = {_get(n).order for n in sn.schemes.available()}
    assert {1, 2, 3, 4, 6, 8, 10} <= orders


@pytest.mark.parametrize("name", NAMES)
def test_every_entry_is_registered_with_its_data(name):
    m = zoo.BY_NAME[name]
    if m.problem_class == zoo.GENERAL:
        s = sn.schemes.get(name)                       # no warning for a general method
    else:
        with pytest.warns(UserWarning, match=rf"order {m.class_order} only for second-order"):
            s = sn.schemes.get(name)
    assert isinstance(s, sn.schemes.ZooScheme) and s.method is m
    assert s.name == name and s.order == m.order and s.is_symmetric == m.symmetric
    assert s.problem_class == m.problem_class and s.class_order == m.class_order
    assert np.allclose([st.coeff for st in s.stages], [st.coeff for st in m.stages], atol=1e-14)
    assert [st.field for st in s.stages] == [st.field for st in m.stages]
    doc = type(s).__doc__
    assert m.citation in doc and re.search(r"\((19|20)\d\d\)", m.citation)
    assert f"order {m.order}" in doc
    assert (m.class_order is None) == (m.problem_class == zoo.GENERAL)
    if m.class_order is not None:
        assert m.class_order > m.order and name.endswith("-rkn")
        assert f"order {m.class_order} for second-order systems" in doc


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", [2, 3])
def test_every_entry_measures_its_declared_order_on_matrices(name, seed):
    """check_order at the declared (general) order; tests/test_check.py runs seeds 0 and 1."""
    r = sn.check_order(_get(name), seed=seed)
    assert r.ok, r.summary()


def _defects(m: zoo.Published, values, degree: int):
    mp = pytest.importorskip("mpmath")
    from splitnet.order.algebra import condition_defects

    with mp.workdps(40):
        return condition_defects(m.build(*values), degree, mp.mpf(1))


def _mp_params(m: zoo.Published, which=None):
    mp = pytest.importorskip("mpmath")
    with mp.workdps(40):
        return [zoo.number(p, mp.mpf(1)) for p in (which or m.params)]


@pytest.mark.parametrize("name", [
    n if zoo.BY_NAME[n].order <= 6 else pytest.param(n, marks=pytest.mark.slow) for n in NAMES])
def test_coefficients_satisfy_the_order_conditions_to_double_precision(name):
    """The stored strings, in 40-digit arithmetic: every word coefficient of the scheme up to
    the declared order equals that of exp(D + C) to ``accuracy`` (1e-15: the coefficients are
    right to double precision), and the next degree does not (the order is not higher)."""
    m = zoo.BY_NAME[name]
    d = _defects(m, _mp_params(m), m.order + 1)
    assert max(d[:m.order]) <= m.accuracy, (name, [float(x) for x in d])
    assert d[m.order] > 1e-9


@pytest.mark.parametrize("name", [m.name for m in zoo.PUBLISHED if m.closed_form is not None])
def test_closed_forms_re_derived_at_40_digits(name):
    """The stored strings (30 digits) are the closed forms evaluated at 40 digits."""
    mp = pytest.importorskip("mpmath")
    m = zoo.BY_NAME[name]
    with mp.workdps(40):
        exact = m.closed_form(mp.mpf(1))
        assert len(exact) == len(m.params)
        for x, text in zip(exact, m.params):
            assert abs(x - mp.mpf(text)) < mp.mpf(10) ** -28, (name, text, x)


@pytest.mark.parametrize("name", [
    n if zoo.BY_NAME[n].order <= 6 else pytest.param(n, marks=pytest.mark.slow)
    for n in NAMES if zoo.BY_NAME[n].published])
def test_refined_sets_are_the_published_methods_to_more_digits(name):
    """Where the source printed 15 digits, the stored strings are the nearby root of the order
    conditions: within 1e-10 of the printed values, with a far smaller defect."""
    m = zoo.BY_NAME[name]
    printed, stored = _mp_params(m, m.published), _mp_params(m)
    assert len(printed) == len(stored)
    assert max(abs(a - b) for a, b in zip(printed, stored)) < 1e-10
    d_printed = max(_defects(m, printed, m.order))
    d_stored = max(_defects(m, stored, m.order))
    # 25 stored digits; the Yoshida-8 conditions amplify their rounding up to ~1e3 times
    assert d_printed > 1e-16 and d_stored < 1e-20


def test_yoshida8_core_weights_are_the_refined_root():
    """The core yoshida8 (solution D) uses the root re-derived like the zoo's Yoshida sets."""
    mp = pytest.importorskip("mpmath")
    from splitnet.order.algebra import condition_defects

    w = sn.schemes.get("yoshida8").weights
    with mp.workdps(40):
        pairs = zoo.composition(*[mp.mpf(repr(x)) for x in w])
        assert max(condition_defects(pairs, 8, mp.mpf(1))) < 1e-15


# ---------------------------------------------------------------------------------------------
# Runge–Kutta–Nyström methods: their class order on q'' = f(q), their general order elsewhere

def _nystrom_order(stages, problem) -> tuple[float, int]:
    hs, errs = adaptive_errors(lambda h: problem.local_error(stages, h), floor=1e-13,
                               ceiling=1e-5, h_start=2.0)
    _, used = window_fit(hs, errs, 1e-13, 1e-5)
    idx = np.flatnonzero(used)[np.argsort(hs[used])[:3]]
    return float(np.polyfit(np.log(hs[idx]), np.log(errs[idx]), 1)[0]) - 1, int(used.sum())


@pytest.mark.parametrize("name", RESTRICTED)
def test_rkn_methods_reach_their_class_order_only_in_their_class(name):
    m = zoo.BY_NAME[name]
    tail, n = _nystrom_order(m.stages, NystromProblem())
    assert n >= 5 and abs(tail - m.class_order) <= 0.35, (name, tail)
    assert sn.check_order(m.stages, order=m.order).ok             # general: lower order
    assert not sn.check_order(m.stages, order=m.class_order).ok


def test_the_nystrom_problem_tells_kick_from_drift():
    """McLachlan-Atela's 4th-order set with the a/b roles swapped (drift with b first, kick
    with a, as a widely used library has it): third order on q'' = f(q) too, which a harmonic
    oscillator cannot show. The general order is 3 either way."""
    a = [float(x) for x in zoo._MCATE4[:4]]
    b = [float(x) for x in zoo._MCATE4[4:]]
    swapped = zoo.alternating(zoo.D, *[x for pair in zip(b, a) for x in pair])
    stages = tuple(sn.Stage(f, c) for f, c in swapped)
    tail, _ = _nystrom_order(stages, NystromProblem())
    assert abs(tail - 3) <= 0.6 and tail < 3.6, tail
    assert sn.check_order(stages, order=3).ok


# ---------------------------------------------------------------------------------------------
# The nonlinear attention + feed-forward particle system, exact sub-flows

CORE_PARTICLE = ["ruth3", "mclachlan-atela4-rkn"]   # ~5 s each: heavy (CI); the rest slow


def _particle_order(scheme) -> tuple[float, float, int]:
    """(window order, tail order, points): local errors of one step with exact (torchdiffeq)
    sub-flows against the coupled reference, relative to |x0|, in [3e-12, 1e-5] (the
    reference's floor is ~3e-13), the grid refined to 6 points; the scheme merged (identical
    with exact sub-flows). As experiments/zoo.py measures it for docs/zoo.md."""
    prob = particle_problem()
    merged = scheme.merged()
    norm = float(prob.x0.norm())

    def err(h):
        with torch.no_grad():
            return local_errors(merged, prob, [h])[0] / norm

    hs, errs = adaptive_errors(err, floor=3e-12, ceiling=1e-5, h_start=2.0, min_points=6)
    slope, used = window_fit(hs, errs, 3e-12, 1e-5)
    idx = np.flatnonzero(used)[np.argsort(hs[used])[:3]]
    tail = float(np.polyfit(np.log(hs[idx]), np.log(errs[idx]), 1)[0]) - 1
    return slope - 1, tail, int(used.sum())


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.heavy if n in CORE_PARTICLE else pytest.mark.slow)
    for n in NAMES])
def test_every_entry_on_the_particle_system(name):
    """Up to the order float64 can show (docs/zoo.md): orders up to 4 within 0.35 (tail);
    order 6 within 0.6, its asymptotic range starting near the reference's floor; orders 8 and
    10 reach the floor before their asymptotic range, and the error falls at least as fast as
    order 7.5 there. Restricted-class methods show their general order: the particle system is
    not a second-order system."""
    s = _get(name)
    measured, tail, n = _particle_order(s)
    assert n >= 3, (name, measured, tail, n)
    if s.order <= 4:
        assert abs(tail - s.order) <= 0.35 and abs(measured - s.order) <= 0.5, (name, tail)
    elif s.order == 6:
        assert abs(tail - s.order) <= 0.6 and abs(measured - s.order) <= 1.0, (name, tail)
    else:
        assert min(measured, tail) >= 7.5, (name, measured, tail)


# ---------------------------------------------------------------------------------------------
# The room: zoo.py is data that imports only splitnet.stagelists.stages; docs/zoo.md covers the
# registry

def test_zoo_module_imports_only_stages():
    tree = ast.parse((ROOT / "splitnet" / "stagelists" / "zoo.py").read_text())
    local = {(n.module, n.level) for n in ast.walk(tree)
             if isinstance(n, ast.ImportFrom) and n.level > 0}
    assert local == {("stages", 1)}


def test_docs_zoo_lists_every_method():
    text = (ROOT / "docs" / "zoo.md").read_text()
    for name in sn.schemes.available("splitting"):
        assert f"`{name}`" in text, (f"docs/zoo.md does not list {name!r}: run "
                                     f"{zoocache.regen_command([name])}")
    fix = "docs/zoo.md lost a section: run python3 -m splitnet.dev regen zoo"
    assert "![" in text and "figures/zoo_" in text, fix
    assert "do not have their claimed order as general splittings" in text, fix
