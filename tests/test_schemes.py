"""Schemes as data: registry, coefficients, validation-free properties (errors: test_errors.py),
normalisation, immutability, merging, symmetry, clocks, patterns, effective orders."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import splitnet as sn
from splitnet.integrators.schemes import CONVECTION, DIFFUSION, StrangComposition

REGISTRY = ["lie-trotter", "strang", "yoshida4", "suzuki4", "yoshida6", "yoshida8",
            "blanes-moan4"]
DECLARED = {"lie-trotter": 1, "strang": 2, "yoshida4": 4, "suzuki4": 4, "yoshida6": 6,
            "yoshida8": 8, "blanes-moan4": 4}


def test_registry_has_the_contract_names():
    assert set(REGISTRY) <= set(sn.schemes.available())
    for name in REGISTRY:
        s = sn.schemes.get(name)
        assert s.name == name and s.order == DECLARED[name]
        assert all(isinstance(x, sn.Stage) for x in s.stages)
        assert {x.field for x in s.stages} == {DIFFUSION, CONVECTION}


def test_aliases_resolve_to_the_same_scheme():
    assert sn.schemes.get("macaron") == sn.schemes.get("strang")
    assert sn.schemes.get("transformer") == sn.schemes.get("lie-trotter")
    assert sn.schemes.resolve("triple-jump") == sn.schemes.get("yoshida4")
    assert sn.schemes.resolve("sf") == sn.schemes.from_pattern("sf")
    s = sn.schemes.get("strang")
    assert sn.schemes.resolve(s) is s


def test_no_alias_shadows_a_registered_name_and_each_reaches_its_target():
    aliases, names = sn.schemes._ALIASES, set(sn.schemes.available("all"))
    assert not set(aliases) & names
    for alias, target in aliases.items():
        assert sn.schemes.get(alias) == sn.schemes.get(target), alias
        assert sn.schemes.get(alias.upper()) == sn.schemes.get(target), alias


@pytest.mark.parametrize("aliases,msg", [
    ({"strang": "lie-trotter"}, r"scheme alias 'strang' \(for 'lie-trotter'\) is also a "
                                r"registered scheme name: it would shadow that scheme"),
    ({"mine": "nope"}, r"scheme alias 'mine' points to 'nope', which is not a registered"),
    ({"Macaron": "strang"}, r"scheme alias 'Macaron' must be lower case"),
])
def test_an_alias_table_that_could_mislead_is_refused(aliases, msg):
    with pytest.raises(ValueError, match=msg):
        sn.schemes.check_aliases(aliases, sn.schemes.available("all"))


def test_a_zoo_entry_named_like_an_alias_fails_at_import(monkeypatch):
    """The check runs when the module is imported: a published method named ``macaron``
    (an alias of strang) would be shadowed, and importing the registry says so."""
    import dataclasses
    import importlib.util

    from splitnet.integrators import schemes as mod
    from splitnet.stagelists import zoo

    clash = dataclasses.replace(zoo.PUBLISHED[0], name="macaron")
    monkeypatch.setattr(zoo, "PUBLISHED", (*zoo.PUBLISHED, clash))
    spec = importlib.util.spec_from_file_location("splitnet.integrators._schemes_probe",
                                                  mod.__file__)
    with pytest.raises(ValueError, match=r"scheme alias 'macaron' \(for 'strang'\) is also a "
                                         r"registered scheme name"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


@pytest.mark.parametrize("name", ["macaron", "Transformer", "GPT-J"])
def test_registering_an_alias_is_refused(monkeypatch, name):
    monkeypatch.setattr(sn.schemes, "_REGISTRY", dict(sn.schemes._REGISTRY))
    with pytest.raises(ValueError, match=rf"scheme name '{name.lower()}' is an alias of "
                                         rf"'[a-z-]+'; choose another name"):
        sn.schemes.register(name, sn.schemes.Strang)
    assert name.lower() not in sn.schemes._REGISTRY


def test_the_listings_of_available_are_not_called_kinds():
    """``available(kind)`` groups are LISTINGS; ``KINDS`` is the field kinds' registry only."""
    assert sn.schemes.LISTINGS == ("general", "core", "restricted", "splitting", "unsplit",
                                   "all")
    assert not hasattr(sn.schemes, "KINDS")
    for kind in sn.schemes.LISTINGS:
        assert set(sn.schemes.available(kind)) <= set(sn.schemes.available("all"))


@pytest.mark.parametrize("name", REGISTRY)
def test_each_field_sums_to_one(name):
    s = sn.schemes.get(name)
    for f in (DIFFUSION, CONVECTION):
        assert math.isclose(sum(s.field_coeffs(f)), 1.0, abs_tol=1e-14)


def test_lie_trotter_and_strang_stages():
    lt, st_ = sn.schemes.get("lie-trotter"), sn.schemes.get("strang")
    assert lt.stages == (sn.Stage(DIFFUSION, 1.0), sn.Stage(CONVECTION, 1.0))
    assert st_.stages == (sn.Stage(CONVECTION, 0.5), sn.Stage(DIFFUSION, 1.0),
                          sn.Stage(CONVECTION, 0.5))
    assert st_.diagram() == "f/2 s f/2"
    assert sn.schemes.resolve(st_.stage_string()) == st_          # the string parses back
    assert lt.diagram() == "s f"


def test_triple_jump_and_suzuki_weights_from_their_formulas():
    c = 2 ** (1 / 3)
    g = sn.schemes.get("yoshida4").gammas()
    assert g[0] == pytest.approx(1 / (2 - c), abs=1e-15)
    assert g[1] == pytest.approx(-c / (2 - c), abs=1e-15)
    p = 1 / (4 - 4 ** (1 / 3))
    gs = sn.schemes.get("suzuki4").gammas()
    assert gs == pytest.approx((p, p, 1 - 4 * p, p, p), abs=1e-15)
    assert len(sn.schemes.get("yoshida4").stages) == 9      # unmerged: 3 Strang steps
    assert len(sn.schemes.get("suzuki4").stages) == 15


@pytest.mark.parametrize("name,conditions", [
    ("yoshida4", (3,)), ("suzuki4", (3,)), ("yoshida6", (3, 5)), ("yoshida8", (3, 5, 7))])
def test_composition_weights_satisfy_the_odd_power_conditions(name, conditions):
    """Symmetric compositions of the (symmetric, order 2) Strang step: order 2k+2 needs
    sum g = 1 and sum g^(2j+1) = 0 for j = 1..k (necessary conditions; HLW II.4, V.3).
    A 15-digit printed Yoshida-8 set leaves ~1e-11 in sum g^7; the re-derived one ~1e-14."""
    g = np.array(sn.schemes.get(name).gammas())
    assert abs(g.sum() - 1) < 1e-14
    for k in conditions:
        assert abs(np.sum(g ** k)) < 1e-13, (k, np.sum(g ** k))


def test_yoshida6_and_yoshida8_are_the_published_solutions():
    y6 = sn.schemes.get("yoshida6").gammas()
    assert y6[3] == pytest.approx(1.31518632068391121888425, abs=1e-14)   # solution A centre
    y8 = sn.schemes.get("yoshida8")
    assert len(y8.gammas()) == 15 and len(y8.stages) == 45
    # Yoshida's solution D starts w7 = 0.914844..., not McLachlan's order-8 set. The weights are
    # the root of the order conditions (experiments/zoo_coefficients.py, 40 digits); Yoshida
    # printed 0.914844246229740, 1e-13 away (tests/test_zoo.py checks the conditions).
    assert y8.gammas()[0] == pytest.approx(0.9148442462297915667487935, abs=1e-16)
    assert y8.gammas()[0] == pytest.approx(0.914844246229740, abs=1e-13)


def test_blanes_moan_s6_structure():
    s = sn.schemes.get("blanes-moan4")
    assert len(s.stages) == 13 and s.stages[0].field == CONVECTION
    a = s.field_coeffs(CONVECTION)
    b = s.field_coeffs(DIFFUSION)
    assert a[3] == pytest.approx(1 - 2 * (0.0792036964311957 + 0.353172906049774
                                         - 0.0420650803577195), abs=1e-15)
    assert b[2] == pytest.approx(0.5 - (0.209515106613362 - 0.143851773179818), abs=1e-15)
    assert a == tuple(reversed(a)) and b == tuple(reversed(b))


@pytest.mark.parametrize("name", REGISTRY)
def test_symmetry_flag(name):
    assert sn.schemes.get(name).is_symmetric == (name != "lie-trotter")


def test_symmetry_is_judged_after_merging():
    s = sn.SplittingScheme.from_stages([(CONVECTION, .25), (CONVECTION, .25), (DIFFUSION, 1),
                                        (CONVECTION, .5)], order=2)
    assert s.is_symmetric
    assert not sn.SplittingScheme.from_stages([(CONVECTION, .3), (DIFFUSION, 1),
                                               (CONVECTION, .7)]).is_symmetric


def test_normalisation_to_unit_sums():
    with pytest.warns(UserWarning, match="diffusion sums to 2 and convection sums to 2"):
        s = sn.SplittingScheme.from_stages([(DIFFUSION, 2.0), (CONVECTION, 1.0),
                                            (CONVECTION, 1.0)])
    assert s.stages == (sn.Stage(DIFFUSION, 1.0), sn.Stage(CONVECTION, .5),
                        sn.Stage(CONVECTION, .5))
    with pytest.warns(UserWarning, match="sums to -2"):
        neg = sn.SplittingScheme.from_stages([(DIFFUSION, -2.0), (CONVECTION, -2.0)])
    assert neg.stages == sn.schemes.get("lie-trotter").stages


def test_immutability():
    s = sn.schemes.get("strang")
    with pytest.raises(AttributeError, match="immutable"):
        s.order = 4
    with pytest.raises(AttributeError):
        s.stages = ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.stages[0].coeff = 2.0
    assert isinstance(s.stages, tuple)
    # The registry hands out a fresh object each time: even a scheme changed behind the
    # immutability guard leaves the next get() untouched.
    object.__setattr__(s, "_stage_tuple", (sn.Stage("diffusion", 1.0),
                                           sn.Stage("convection", 1.0)))
    assert sn.schemes.get("strang") is not s
    assert sn.schemes.get("strang").stages[1].coeff == 1.0


def test_equality_and_hash():
    a = sn.SplittingScheme.from_stages([(CONVECTION, .5), (DIFFUSION, 1), (CONVECTION, .5)],
                                       order=2, name="mine")
    assert a == sn.schemes.get("strang") and hash(a) == hash(sn.schemes.get("strang"))
    assert a != sn.schemes.get("lie-trotter")


def test_abstract_base_and_a_subclass_that_only_supplies_stages():
    with pytest.raises(TypeError):
        sn.SplittingScheme()

    class CDC(sn.SplittingScheme):
        name, order = "cdc", 2

        def _stages(self):
            return [(DIFFUSION, .5), (CONVECTION, 1.0), (DIFFUSION, .5)]

    s = CDC()
    assert s.is_symmetric and s.effective_order("euler") == 1
    assert sn.check_order(s).ok


def test_merging():
    y = sn.schemes.get("yoshida4")
    m = y.merged()
    assert len(m.stages) == 7 and m.name == "yoshida4-merged" and m.order == 4
    assert [s.field for s in m.stages] == [CONVECTION, DIFFUSION] * 3 + [CONVECTION]
    g1, g0 = y.gammas()[:2]
    assert m.stages[2].coeff == pytest.approx((g1 + g0) / 2, abs=1e-15)
    # Merging stages that cancel removes them.
    z = sn.SplittingScheme.from_stages([(DIFFUSION, 1), (CONVECTION, .5), (CONVECTION, -.5),
                                        (CONVECTION, 1)]).merged()
    assert z.stages == sn.schemes.get("lie-trotter").stages
    # Blanes-Moan alternates fields already: nothing to merge.
    assert sn.schemes.get("blanes-moan4").merged().stages == sn.schemes.get("blanes-moan4").stages


def test_merging_changes_nothing_with_exact_flows():
    a, b = sn.check.random_matrices(6, 1)
    y = sn.schemes.get("yoshida4")
    for h in (0.5, 0.1):
        np.testing.assert_allclose(sn.check.matrix_step(y.stages, a, b, h),
                                   sn.check.matrix_step(y.merged().stages, a, b, h), atol=1e-13)


def test_clocks_and_stage_times():
    st_ = sn.schemes.get("strang")
    assert st_.clocks() == (0.0, 0.0, 0.5)
    assert st_.stage_times() == (0.25, 0.75, 1.0)
    lt = sn.schemes.get("lie-trotter")
    assert lt.clocks() == (0.0, 0.0) and lt.stage_times() == (0.5, 1.0)
    y = sn.schemes.get("yoshida4")
    g1, g0 = y.gammas()[:2]
    # The diffusion clock of the middle (negative) stage starts at g1 and runs back to g1 + g0.
    assert y.clocks()[4] == pytest.approx(g1)
    assert y.clocks()[3] == pytest.approx(g1)       # convection: g1/2 + g1/2 before it
    assert y.clocks()[5] == pytest.approx(g1 + g0 / 2)
    assert y.stage_times()[-1] == pytest.approx(1.0)


@pytest.mark.parametrize("pattern,order,stages", [
    ("sf", 1, "s f"), ("fsf", 2, "f/2 s f/2"), ("sfs", 2, "s/2 f s/2"),
    ("sssfsfff", 1, None), ("sfsf", 1, None), ("sffs", 2, None)])
def test_from_pattern(pattern, order, stages):
    s = sn.schemes.from_pattern(pattern)
    assert s.order == order and s.name == pattern
    assert len(s.stages) == len(pattern)          # adjacent letters stay separate stages
    assert all(math.isclose(x.coeff, 1 / pattern.count("s" if x.field == DIFFUSION else "f"))
               for x in s.stages)
    if stages is not None:
        assert s.diagram() == stages
    r = sn.check_order(s)
    assert r.ok, r.summary()


@settings(max_examples=25, deadline=None)
@given(st.text(alphabet="sf", min_size=2, max_size=10).filter(lambda p: "s" in p and "f" in p))
def test_from_pattern_declared_order_is_the_measured_order(pattern):
    s = sn.schemes.from_pattern(pattern)
    r = sn.check_order(s, step_sizes=[2.0 ** (-k / 2) for k in range(4, 13)])
    assert r.ok, r.summary()


# Effective orders: the rule min(p, q) unless sum c^(q+1) = 0 for both fields (then q + 1).
EFFECTIVE = {
    #               exact euler midpoint rk4
    "lie-trotter": (1, 1, 1, 1),
    "strang": (2, 1, 2, 2),
    "yoshida4": (4, 1, 3, 4),        # unmerged triple jump: sum c^3 = 0 per field
    "suzuki4": (4, 1, 3, 4),
    "yoshida6": (6, 1, 3, 5),        # rk4: sum c^5 = 0 per field
    "yoshida8": (8, 1, 3, 5),
    "blanes-moan4": (4, 1, 2, 4),    # sum c^3 != 0
}


@pytest.mark.parametrize("name", REGISTRY)
def test_effective_order_table(name):
    s = sn.schemes.get(name)
    got = tuple(s.effective_order(m) for m in ("exact", "euler", "midpoint", "rk4"))
    assert got == EFFECTIVE[name]


def test_merged_triple_jump_loses_the_midpoint_gain():
    y = sn.schemes.get("yoshida4")
    assert y.effective_order("midpoint") == 3
    assert y.merged().effective_order("midpoint") == 2
    for f in (DIFFUSION, CONVECTION):
        assert abs(sum(c ** 3 for c in y.field_coeffs(f))) < 1e-14
    assert abs(sum(c ** 3 for c in y.merged().field_coeffs(CONVECTION))) > 0.1


def test_register_a_new_scheme(monkeypatch):
    monkeypatch.setattr(sn.schemes, "_REGISTRY", dict(sn.schemes._REGISTRY))

    class Mine(StrangComposition):
        name, order, weights = "mine4", 4, (1.35120719195965763404768780897,)

    sn.schemes.register("mine4", Mine)
    assert "mine4" in sn.schemes.available()
    assert sn.schemes.get("mine4") == sn.schemes.get("yoshida4")


def test_repr_mentions_name_and_order():
    r = repr(sn.schemes.get("yoshida4"))
    assert "yoshida4" in r and "order=4" in r and "stages=9" in r
    assert repr(sn.Stage(DIFFUSION, 0.5)) == "Stage('diffusion', 0.5)"
