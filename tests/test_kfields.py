"""More than two fields: named fields, sum stages, k-field schemes, their orders (measured and
exact), the three-field particle system, and the verbs with ``fields=``.

Float64 throughout; every order test uses non-commuting fields (random dense matrices, or the
decoder particle system with self-attention, cross-attention and feed-forward)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg
import torch

import splitnet as sn
from splitnet import stages as S
from splitnet.analyses.convergence import leading_term
from splitnet.analyses.problems import ClosedFormFlow, LinearField, decoder_system
from splitnet.order.algebra import (
    condition_defects,
    lie_conditions,
    lie_defects,
    lyndon_words,
    witt,
    word_index,
    word_series,
)
from splitnet.order.check import field_matrices, matrix_step
from splitnet.stagelists.zoo import PUBLISHED

C, D, X = S.CONVECTION, S.DIFFUSION, S.CROSS
THREE = (C, D, X)
COMPOSITIONS = ["yoshida4", "suzuki4", "yoshida6", "yoshida8",
                *(m.name for m in PUBLISHED if m.family == "composition")]


def _get(name, fields=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # restricted-class warnings
        return sn.schemes.get(name, fields=fields)


# ---------------------------------------------------------------------------------------------
# names

def test_field_names_letters_identifiers_and_sums():
    assert S.field_name("d") == D and S.field_name("F") == C and S.field_name("x") == X
    assert S.field_name("gravity") == "gravity"
    assert S.field_name("d+c") == "diffusion+convection"
    assert sn.Stage("diffusion+convection", 1.0).components == (D, C)
    for bad in ("self attention", "3d", "", "d+d", "d+"):
        with pytest.raises(ValueError):
            S.field_name(bad)


def test_stage_strings_know_every_letter_and_round_trip():
    st = S.parse("c:0.5,d:1,x:1,c:0.5")
    assert [s.field for s in st] == [C, D, X, C]
    for text in ("c:0.5,d+x:1,c:0.5", "a:0.5,b:1,a:0.5", "d+c:1"):
        st = S.parse(text)
        assert S.parse(S.format_stages(st)) == st
    assert S.diagram(S.parse("c:0.5,d+x:1,c:0.5")) == "f/2 s+x f/2"


def test_fields_clocks_and_sums_of_sum_stages():
    st = S.parse("c:0.5,d+c:0.5,d:0.5")
    assert S.field_names(st) == (C, D)
    assert S.coefficient_sums(st) == {C: 1.0, D: 1.0}
    assert S.component_clocks(st) == ((0.0,), (0.0, 0.5), (0.5,))


# ---------------------------------------------------------------------------------------------
# schemes over k fields

def test_get_over_three_fields_gives_the_generalised_methods():
    assert _get("lie-trotter", (D, X, C)).stages == S.parse("d:1,x:1,c:1")
    assert _get("strang", THREE).stages == S.parse("c:.5,d:.5,x:1,d:.5,c:.5")
    s = _get("yoshida4", THREE)
    g1 = sn.schemes.Yoshida4.weights[0]
    g0 = 1 - 2 * g1
    want = [st for g in (g1, g0, g1) for st in
            ((C, g / 2), (D, g / 2), (X, g), (D, g / 2), (C, g / 2))]
    assert s.stages == S.as_stages(want) and s.order == 4 and s.fields == THREE
    assert _get("strang", (C, D)) == _get("strang")           # the default order: unchanged
    strang = _get("strang")
    assert strang.over((C, D)) is strang                      # nothing changes: itself
    assert strang.over((D, C)).stages == S.parse("d:.5,c:1,d:.5")   # the first name outermost


def test_two_field_methods_refuse_other_field_counts_with_one_line():
    with pytest.raises(ValueError, match=r"two-field splitting.*use lie-trotter, strang"):
        _get("blanes-moan4", THREE)
    swapped = _get("blanes-moan4", (D, C))            # relabelled: first name = first stage
    assert swapped.stages[0].field == D and sn.check_order(swapped).ok


@pytest.mark.parametrize("name", COMPOSITIONS)
def test_composition_methods_keep_their_order_over_three_and_four_fields(name):
    """Exactly, in the free algebra: every condition up to the declared order vanishes over
    three letters and the next degree does not; measured on random matrices for orders <= 8
    (at order 10 the measured tail over three fields lies within 0.4 of 10, seed-dependent)."""
    base = _get(name)
    for fields in (THREE, (C, D, X, "q")):
        s = base.over(fields)
        assert s.order == base.order and len(s.fields) == len(fields)
        if len(fields) == 3:
            defects = condition_defects(s.stages, base.order + 1)
            assert max(defects[:base.order]) < 1e-12, defects
            assert defects[base.order] > 1e-10         # round-off is ~1e-16
        if base.order <= 8:
            assert sn.check_order(s).ok, sn.check_order(s).summary()


@pytest.mark.parametrize("stages,order", [
    ("d:1,x:1,c:1", 1),                        # the Transformer decoder layer
    ("c:0.5,d:1,x:1,c:0.5", 1),                # the seed's Macaron decoder: not Strang
    ("c:0.5,d:0.5,x:1,d:0.5,c:0.5", 2),        # the symmetric generalisation
    ("c:0.5,x:0.5,d:1,x:0.5,c:0.5", 2),
    ("c:0.5,d+x:1,c:0.5", 2),                  # self- and cross-attention merged (one sum)
    ("a:0.5,b:0.5,c:0.5,d:1,c:0.5,b:0.5,a:0.5", 2),   # four fields, names of any kind
])
def test_check_order_on_three_and_four_field_lists(stages, order):
    r = sn.check_order(stages, order=order)
    assert r.ok, r.summary()
    assert not sn.check_order(stages, order=order + 1).ok


def test_a_sum_of_all_fields_is_the_exact_flow_not_a_failure():
    r = sn.check_order("d+x+c:1", order=4)
    assert r.ok and r.measured == float("inf") and "exact flow" in r.summary()


def test_inconsistent_third_field_is_named():
    r = sn.check_order("c:0.5,d:1,x:0.5,c:0.5", order=1)
    assert r.verdict == "inconsistent" and "cross sums to 0.5" in r.reason
    r = sn.check_order("c:0.5,d:1,x:0.5,c:0.5", order=1, normalize=True)
    assert r.verdict == "inconsistent"          # sums 1, 1, 0.5: no common rescaling
    with pytest.raises(ValueError, match=r"different totals.*cross to 0.5"):
        sn.SplittingScheme.from_stages(S.parse("c:0.5,d:1,x:0.5,c:0.5"))


# ---------------------------------------------------------------------------------------------
# the exact order conditions over k letters

@pytest.mark.parametrize("k", [2, 3, 4])
def test_lyndon_words_per_degree_are_counted_by_witts_formula(k):
    assert [len(lyndon_words(k, d)) for d in range(1, 7)] == [witt(k, d) for d in range(1, 7)]
    assert [witt(3, d) for d in range(1, 6)] == [3, 3, 8, 18, 48]


def _bracket_polynomial(word, k):
    """The Lyndon bracketing of ``word`` (standard factorisation) as a dict word -> coeff."""
    if len(word) == 1:
        return {word: 1}
    # standard factorisation: v the longest proper suffix that is a Lyndon word
    best = min(i for i in range(1, len(word)) if word[i:] in set(lyndon_words(k, len(word) - i)))
    u, v = _bracket_polynomial(word[:best], k), _bracket_polynomial(word[best:], k)
    out: dict = {}
    for a, ca in u.items():
        for b, cb in v.items():
            out[a + b] = out.get(a + b, 0) + ca * cb
            out[b + a] = out.get(b + a, 0) - ca * cb
    return out


@pytest.mark.parametrize("k,d", [(2, 5), (3, 4), (4, 3)])
def test_the_conditions_on_lyndon_words_are_independent(k, d):
    """Each Lyndon bracketing P_w is w plus larger words: the matrix of P_w's coefficients on
    the Lyndon words is unit upper triangular, so the conditions are a basis (none redundant,
    none missing)."""
    words = lyndon_words(k, d)
    m = np.array([[_bracket_polynomial(w, k).get(u, 0) for u in words] for w in words])
    assert np.allclose(np.diag(m), 1) and np.allclose(np.tril(m, -1), 0)


@pytest.mark.parametrize("name,fields", [("strang", THREE), ("yoshida4", THREE),
                                         ("lie-trotter", (D, X, C)), ("blanes-moan4", None),
                                         ("yoshida6", (C, D, X, "q"))])
def test_lie_conditions_say_the_order_the_word_series_says(name, fields):
    s = _get(name, fields)
    p = s.order
    lie, words = lie_defects(s.stages, p + 1), condition_defects(s.stages, p + 1)
    assert max(lie[:p]) < 1e-12 and max(words[:p]) < 1e-12
    assert lie[p] > 1e-6 and words[p] > 1e-6
    assert all(len(v) == witt(len(s.fields) if fields else 2, d)
               for d, v in lie_conditions(s.stages, 3).items())


def test_a_sum_stage_series_prepends_every_word_of_its_fields():
    v = word_series([("d+c", 1.0)], 3)
    assert np.allclose(v[2], 0.5) and np.allclose(v[3], 1 / 6)      # exp(D + C) itself
    w = word_series([("c", 1.0), ("d", 1.0)], 2)     # exp(D) exp(C): DC gets 1, CD 0
    assert w[2][word_index((0, 1), 2)] == 1.0 and w[2][word_index((1, 0), 2)] == 0.0


# ---------------------------------------------------------------------------------------------
# the verbs with fields=

def _linear(dim=5, seed=4):
    mats = field_matrices(THREE, dim, seed)
    fields = {f: LinearField(2 * m) for f, m in mats.items()}
    x0 = torch.as_tensor(np.random.default_rng(seed).standard_normal(dim))
    return mats, fields, x0


@pytest.mark.parametrize("spec,order", [("strang", 2), ("yoshida4", 4),
                                        ("c:0.5,d:1,x:1,c:0.5", 1)])
def test_step_with_three_fields_against_scipy_expm(spec, order):
    """One step with closed-form sub-flows equals the product of scipy's exponentials, and
    its local error against expm(h (A + B + X)) has slope order + 1."""
    mats, fields, x0 = _linear()
    s = _get(spec, THREE) if ":" not in spec else sn.schemes.resolve(spec)
    total = 2 * sum(mats.values())
    hs, errs = [0.2, 0.1, 0.05, 0.025], []
    for h in hs:
        x1 = s.step(x=x0, step_size=h, method=ClosedFormFlow(), fields=fields)
        prod = np.eye(5)
        for st in s.stages:
            prod = scipy.linalg.expm(st.coeff * h * 2 * sum(mats[f] for f in st.components)) @ prod
        np.testing.assert_allclose(x1.numpy(), prod @ x0.numpy(), atol=1e-12)
        errs.append(float(np.linalg.norm(scipy.linalg.expm(h * total) @ x0.numpy() - x1.numpy())))
    slope = np.polyfit(np.log(hs), np.log(errs), 1)[0]
    assert abs(slope - (order + 1)) < 0.3, slope


def test_a_sum_stage_with_euler_is_the_parallel_update():
    fields, x0 = decoder_system()
    h = 0.1
    x1 = sn.schemes.resolve("d+x+c:1").step(x=x0, step_size=h, method="euler", fields=fields)
    want = x0 + h * sum(f(0.0, x0) for f in fields.values())
    torch.testing.assert_close(x1, want, rtol=0, atol=1e-15)


def test_field_arguments_are_checked_by_name():
    fields, x0 = decoder_system()
    s = _get("strang", THREE)
    with pytest.raises(ValueError, match="no callable given for cross"):
        s.step(x=x0, step_size=0.1, fields={D: fields[D], C: fields[C]})
    with pytest.raises(ValueError, match="given, but scheme 'strang' advances only"):
        _get("strang").step(x=x0, step_size=0.1, fields=fields)
    with pytest.raises(ValueError, match="given twice"):
        s.step(diffusion=fields[D], x=x0, step_size=0.1, fields=fields)


@pytest.mark.parametrize("spec", ["d:1,x:1,c:1", "c:0.5,d:1,x:1,c:0.5", "c:0.5,d+x:1,c:0.5"])
def test_the_leading_error_term_is_the_three_field_brackets(spec):
    """exact - step = h^2 E + O(h^3), E = -1/2 sum w_ab [F_a, F_b]: measured on the decoder
    particle system, the relative gap to E shrinks like h."""
    fields, x0 = decoder_system()
    s = sn.schemes.resolve(spec)
    e = leading_term(s, x0, fields=fields)
    gaps = []
    for h in (0.02, 0.01):
        ref = sn.reference_solution(x0=x0, times=torch.tensor([0.0, h], dtype=torch.float64),
                                    fields=fields)[-1]
        x1 = s.step(x=x0, step_size=h, fields=fields)
        gaps.append(float(((ref - x1) / h ** 2 - e).norm()) / max(float(e.norm()), 1e-300))
    if s.order >= 2:
        assert float(e.norm()) == 0.0
    else:
        assert gaps[1] < 0.01 and 1.7 < gaps[0] / gaps[1] < 2.3, gaps


def test_the_macaron_decoders_leading_error_is_the_self_cross_bracket():
    """README and docs/theory.md: the seed's Macaron decoder (c/2 d x c/2) leaves self- and
    cross-attention a Lie-Trotter pair, local error (h^2/2)[D, X], "measured within 0.2 %" at
    h = 0.005 on the decoder particle system. [D, X] here by lie_bracket (Jacobian-vector
    products), not by the scheme's own leading_term."""
    fields, x0 = decoder_system()
    s = sn.schemes.resolve("c:0.5,d:1,x:1,c:0.5")
    want = 0.5 * sn.lie_bracket(fields[D], fields[X], x0)
    torch.testing.assert_close(leading_term(s, x0, fields=fields), want, rtol=1e-12, atol=0)
    h = 0.005
    ref = sn.reference_solution(x0=x0, times=torch.tensor([0.0, h], dtype=torch.float64),
                                fields=fields)[-1]
    measured = (ref - s.step(x=x0, step_size=h, fields=fields)) / h ** 2
    assert float((measured - want).norm() / want.norm()) < 0.002


def test_the_euler_constants_theory_md_states_for_the_decoder():
    """docs/theory.md: with Euler sub-steps "the Macaron decoder's constant is 0.40 of the
    Transformer decoder's" and the symmetric nesting has "the smallest Euler constant, 0.34":
    the median of error / h^2 over the study's step sizes (experiments/decoder_study.py)."""
    from pathlib import Path

    fields, x0 = decoder_system()
    hs = [0.2, 0.1, 0.05, 0.025]

    def constant(scheme):
        r = sn.convergence_study(scheme, x0=x0, step_sizes=hs, method="euler", fields=fields)
        return float(np.median(r.errors / np.asarray(hs) ** 2))

    base = constant(_get("lie-trotter", (D, X, C)))
    macaron = constant(sn.schemes.resolve("c:0.5,d:1,x:1,c:0.5")) / base
    nested = constant(_get("strang", (C, D, X))) / base
    doc = " ".join((Path(__file__).resolve().parents[1] / "docs" / "theory.md").read_text()
                   .split())
    assert f"the Macaron decoder's constant is {macaron:.2f} of the Transformer decoder's" in doc
    assert f"the smallest Euler constant, {nested:.2f})" in doc


def test_convergence_study_counts_every_field_and_the_decoder_slopes():
    fields, x0 = decoder_system()
    r = sn.convergence_study("c:0.5,d:1,x:1,c:0.5", x0=x0, step_sizes=[.2, .1, .05, .025],
                             method="euler", fields=fields)
    assert r.ok and set(r.evaluations) == {D, X, C}
    assert list(r.evaluations[C]) == [2] * 4 and "evals(" in r.table()
    r = sn.convergence_study(_get("strang", THREE), x0=x0, step_sizes=[.2, .1, .05, .025],
                             fields=fields)
    assert r.ok and r.expected_order == 3


def test_the_decoder_systems_fields_do_not_commute():
    fields, x0 = decoder_system()
    for a, b in ((D, X), (D, C), (X, C)):
        assert float(sn.lie_bracket(fields[a], fields[b], x0).norm()) > 1e-2
    causal, _ = decoder_system(causal=True)
    assert causal[D].causal


def test_a_layer_over_three_fields_with_a_memory_is_its_euler_step():
    torch.manual_seed(0)
    fields, x0 = decoder_system()
    s = sn.schemes.resolve("c:0.5,d:1,x:1,c:0.5")
    memory = fields[X].memory
    bound = dict(fields)
    layer = s.layer(fields=bound, step_size=0.3)
    torch.testing.assert_close(layer(x0), s.step(x=x0, step_size=0.3, method="euler",
                                                 fields=fields))
    fields[X].memory = None                       # the memory given per call instead
    torch.testing.assert_close(layer(x0, memory=memory),
                               s.step(x=x0, step_size=0.3, method="euler",
                                      fields={**fields, X: lambda t, x: bound[X](t, x,
                                                                                 memory=memory)}))
    with pytest.raises(ValueError, match="needs a memory"):
        layer(x0)


def test_matrix_step_takes_a_field_mapping():
    mats = field_matrices(THREE, 4, 0)
    s = _get("strang", THREE)
    want = np.eye(4)
    for st in s.stages:
        want = scipy.linalg.expm(st.coeff * 0.1 * mats[st.field]) @ want
    np.testing.assert_allclose(matrix_step(s.stages, mats, 0.1), want, atol=1e-14)


@pytest.mark.heavy
def test_order_command_with_three_fields(tmp_path, capsys):
    from splitnet.cli import main

    out = tmp_path / "o3.png"
    rc = main(["order", "--fields", "3", "--schemes", "c:0.5,d:1,x:1,c:0.5;strang",
               "--method", "exact", "--out", str(out), "--strict"])
    text = capsys.readouterr().out
    assert rc == 0 and out.stat().st_size > 0
    assert "decoder layer" in text and "f/2 s x f/2" in text and "strang" in text
    rc = main(["order", "--fields", "3", "--schemes", "strang;c:1,d:1", "--out", str(out)])
    assert rc == 2 and "every scheme needs diffusion, cross and convection" in \
        capsys.readouterr().err


@pytest.mark.parametrize("text,want", [
    ("strang,yoshida4", ["strang", "yoshida4"]),
    ("c:0.5,d:1,c:0.5", ["c:0.5,d:1,c:0.5"]),
    ("c:0.5,d:1,c:0.5; strang", ["c:0.5,d:1,c:0.5", "strang"]),
])
def test_scheme_lists_keep_stage_strings_whole(text, want):
    from splitnet.cli._args import scheme_list

    assert scheme_list(text) == want
