"""Elastic depth (issue 60): weights as functions of ODE time (``depth_basis``), one network run
at any number of steps, its error shrinking at its order.

The convergence tests are the tables of docs/elastic.md (experiments/elastic_tables.py, the one
list of cases): float64, small fields, the final state after n = 1, 2, 4, ... steps of the same
network, the fitted slope of ``|y_n - y_2n|`` over the finest pairs against the order theory
gives (reversible: the scheme's, with constant and with time-dependent weights; plain Euler: 1;
the controls: what goes wrong with one evaluation per stage, with a merged composition's
midpoint, with per-stage weights and with the kinks of hat functions)."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from splitnet import cost
from splitnet.analyses.depth import vary_in_depth
from splitnet.configs.config import SplitConfig
from splitnet.configs.depth import parse_depth_basis, quadrature_points
from splitnet.configs.seq2seq import Seq2SeqConfig
from splitnet.fields.depthfield import Basis, DepthField, MeanField
from splitnet.interop.convert import gpt2_mismatch
from splitnet.nets.depth import at_depth, coarsen, prolong, to_basis
from splitnet.nets.models import SplitTransformer
from splitnet.nets.seq2seq import SplitSeq2Seq
from splitnet.reversible import plain_autograd
from splitnet.runs.checkpoint import VERSION, load_model, save

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))
try:
    import elastic_tables as E
finally:
    sys.path.pop(0)

SMALL = {"vocab_size": 64, "d_model": 16, "n_heads": 2, "max_len": 32}


def _ids(seed=0, shape=(2, 8)):
    return torch.randint(0, 64, shape, generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------------------------------------
# the option


@pytest.mark.parametrize("spec,parsed", [("legendre:4", ("legendre", 4)),
                                         ("linear:2", ("linear", 2)),
                                         ("bernstein:5", ("bernstein", 5)),
                                         (" Legendre:1 ", ("legendre", 1)), (None, None)])
def test_depth_basis_parses(spec, parsed):
    assert parse_depth_basis(spec) == parsed
    c = SplitConfig(depth_basis=spec)
    assert c.depth_basis == (None if parsed is None else f"{parsed[0]}:{parsed[1]}")


@pytest.mark.parametrize("bad", ["legendre", "legendre:0", "legendre:-1", "chebyshev:3", "linear:x",
                                 "legendre:1025", 4, ("legendre", 4), ""])
def test_a_bad_depth_basis_is_one_line_naming_it(bad):
    for build in (lambda: SplitConfig(depth_basis=bad), lambda: Seq2SeqConfig(depth_basis=bad)):
        with pytest.raises(ValueError, match="depth_basis must be") as e:
            build()
        assert "\n" not in str(e.value)


def test_what_depth_basis_refuses_and_what_it_normalises():
    with pytest.raises(ValueError, match="learned coefficients is not supported"):
        SplitConfig(depth_basis="legendre:2", learn_coefficients=True)
    with pytest.raises(ValueError, match="gates on some layers only"):
        SplitConfig(depth_basis="legendre:2", n_layers=4, gate="tanh", gate_layers=[1, 2])
    c = SplitConfig(depth_basis="legendre:2", n_layers=3, gate="tanh", gate_layers=[0, 1, 2])
    assert c.gate_layers is None and c.gated_layers == (0, 1, 2)
    c = Seq2SeqConfig(depth_basis="LINEAR:3")
    assert c.depth_basis == "linear:3" and c.stack_config("decoder").depth_basis == "linear:3"
    assert Seq2SeqConfig.from_dict(c.to_dict()) == c
    assert SplitConfig.from_dict(SplitConfig(depth_basis="legendre:3").to_dict()).depth_basis \
        == "legendre:3"
    old = SplitConfig().to_dict()
    del old["depth_basis"]                                # a checkpoint written before the option
    assert SplitConfig.from_dict(old).depth_basis is None


# ---------------------------------------------------------------------------------------------
# the bases


def test_legendre_is_orthonormal_on_the_unit_interval_and_a_polynomial_beyond():
    b = Basis("legendre:5")
    assert np.allclose(b.integrals([0.0, 1.0], b)[0], np.eye(5), atol=1e-13)
    s = np.linspace(-0.4, 1.4, 7)
    for x in s:                                           # numpy's Legendre series, shifted
        ref = [math.sqrt(2 * j + 1) * np.polynomial.legendre.Legendre.basis(j)(2 * x - 1)
               for j in range(5)]
        assert np.allclose(b.values(x), ref, atol=1e-12)


def test_hat_functions_interpolate_their_nodes_and_continue_linearly():
    b = Basis("linear:4")
    for i in range(4):
        assert b.values(i / 3) == pytest.approx([float(j == i) for j in range(4)])
    for s in (-0.3, 0.1, 0.5, 0.95, 1.2):
        assert sum(b.values(s)) == pytest.approx(1.0)     # a partition of unity, extrapolated
    assert b.values(-0.5) == pytest.approx([2.5, -1.5, 0, 0])   # the first segment's line
    assert Basis("linear:1").values(0.7) == [1.0]
    v = b.integrals([0.0, 0.5, 1.0])                     # exact across the nodes' kinks
    assert np.allclose(v.sum(0), [1 / 6, 1 / 3, 1 / 3, 1 / 6])


def test_bernstein_is_a_partition_of_unity_spanning_the_polynomials():
    b = Basis("bernstein:4")
    for s in (0.0, 0.3, 1.0, 1.3, -0.2):
        assert sum(b.values(s)) == pytest.approx(1.0)
        assert b.values(s) == pytest.approx([math.comb(3, j) * s ** j * (1 - s) ** (3 - j)
                                             for j in range(4)])
    assert min(min(b.values(s)) for s in np.linspace(0, 1, 11)) >= 0   # convex on [0, 1]
    torch.manual_seed(0)                     # the Legendre polynomials' space: exact change
    m = SplitTransformer(**SMALL, n_layers=2, depth_basis="legendre:4").double()
    vary_in_depth(m)
    c, r = to_basis(m, "bernstein:4", return_residual=True)
    assert r["relative"] < 1e-12
    assert torch.allclose(at_depth(c, 3)(_ids()), at_depth(m, 3)(_ids()), atol=1e-12)


def test_a_depth_field_evaluates_its_module_with_the_weights_at_t():
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 2)
    f = DepthField(_TimeLinear(lin), "legendre:3", T=2.0)
    W = f.inner.lin.weight
    with torch.no_grad():
        W.normal_()
    x = torch.randn(4, 3)
    for t in (0.0, 0.7, -0.3, 2.5):
        phi = Basis("legendre:3").values(t / 2.0)
        w = sum(p * W[j] for j, p in enumerate(phi))
        b = sum(p * f.inner.lin.bias[j] for j, p in enumerate(phi))
        assert torch.allclose(f(t, x), x @ w.T + b, atol=1e-6)
    assert f.inner.lin.weight.shape == (3, 2, 3) and f.time_dependent


class _TimeLinear(torch.nn.Module):
    def __init__(self, lin):
        super().__init__()
        self.lin = lin

    def forward(self, t, x):
        return self.lin(x)


# ---------------------------------------------------------------------------------------------
# networks


@pytest.mark.parametrize("options", [
    {"scheme": "strang"},
    {"scheme": "strang", "weights": "per-stage", "convection_field": "swiglu"},
    {"diffusion_field": "conv", "gate": "sigmoid"},
    {"scheme": "yoshida4", "reversible": True},
])
@pytest.mark.parametrize("basis", ["legendre:3", "linear:2", "bernstein:3"])
def test_a_fresh_network_is_the_layered_one_with_its_weights_shared_by_every_layer(options, basis):
    torch.manual_seed(0)
    m = SplitTransformer(**SMALL, n_layers=3, depth_basis=basis, **options).double()
    layered = SplitTransformer(**SMALL, n_layers=3, **options).double()
    layered.load_state_dict({k: v for k, v in m.state_dict().items()
                             if not k.startswith("layers.")}, strict=False)
    with torch.no_grad():                                 # every layer gets W_0 (= every node)
        for path, df in m.layers[0].named_modules():
            if isinstance(df, DepthField):
                for layer in layered.layers:
                    for name, p in layer.get_submodule(path).named_parameters():
                        p.copy_(df.inner.get_parameter(name)[0])
    x = _ids()
    assert torch.allclose(m(x), layered(x), atol=1e-12)
    n_per_layer = sum(p.numel() for p in layered.layers[0].parameters())
    assert sum(p.numel() for p in m.layers.parameters()) == int(basis[-1]) * n_per_layer


def test_at_depth_is_a_view_over_the_same_weights():
    torch.manual_seed(0)
    m = SplitTransformer(**SMALL, n_layers=4, depth_basis="legendre:3", scheme="strang")
    vary_in_depth(m)
    ptrs = {p.data_ptr() for p in m.parameters()}
    for n in (1, 3, 4, 7):
        v = at_depth(m, n)
        assert len(v.layers) == n and v.config.n_layers == n
        assert v.config.step_size * n == pytest.approx(m.config.step_size * 4)
        assert {p.data_ptr() for p in v.parameters()} == ptrs
    x = _ids()
    assert torch.equal(at_depth(m, 4)(x), m(x))           # its own depth: the model itself
    v = at_depth(m, 7)
    v(x).square().mean().backward()                      # trains the model's weights
    g = m.layers[0].diffusion.inner.qkv.weight.grad
    assert g is not None and g.abs().sum() > 0 and len(m.layers) == 4


def test_at_depth_of_a_layered_network_prolongs_or_coarsens_it():
    torch.manual_seed(0)
    m = SplitTransformer(**SMALL, n_layers=4).double()
    x = _ids()
    assert torch.equal(at_depth(m, 8)(x), prolong(m, 2)(x))
    assert torch.equal(at_depth(m, 2)(x), coarsen(m, 2)(x))
    for bad in (3, 6, 0, 2.0, True):
        with pytest.raises(ValueError):
            at_depth(m, bad)


@pytest.mark.parametrize("n", [1, 2, 8])
@pytest.mark.parametrize("options", [{}, {"reversible": True, "scheme": "strang"},
                                     {"weights": "per-stage", "scheme": "strang"},
                                     {"gate": "tanh"}])
def test_the_view_at_depth_of_a_layered_network_is_differentiable_in_every_layer(n, options):
    torch.manual_seed(0)
    m = SplitTransformer(**SMALL, n_layers=4, **options).double()
    x = _ids()
    v = at_depth(m, n, view=True)
    assert torch.allclose(v(x), at_depth(m, n)(x), atol=1e-12)      # the copies' function
    v(x).square().mean().backward()
    for k, layer in enumerate(m.layers):                # every layer of the model gets one
        assert all(p.grad is not None and p.grad.abs().sum() > 0
                   for p in layer.parameters() if p.dim() >= 2), k
    assert isinstance(at_depth(m, 2, view=True).layers[0].diffusion, MeanField) or \
        options.get("weights") == "per-stage"


def test_seq2seq_runs_both_stacks_at_any_depth():
    torch.manual_seed(0)
    m = SplitSeq2Seq(300, 300, 16, 2, n_encoder_layers=2, n_decoder_layers=2,
                     depth_basis="legendre:2", reversible=True, encoder_scheme="strang",
                     decoder_scheme="strang").double()
    vary_in_depth(m)
    src, tgt = torch.randint(0, 250, (2, 5)), torch.randint(0, 250, (2, 4))
    assert torch.equal(at_depth(m, 2)(src, tgt), m(src, tgt))
    v = at_depth(m, 5)
    assert (len(v.encoder_layers), len(v.decoder_layers)) == (5, 5)
    assert v.encoder_stack.n_layers == 5 and v.config.step_size == pytest.approx(0.4)
    ys = [at_depth(m, n)(src, tgt) for n in (8, 16, 32)]
    assert (ys[1] - ys[2]).norm() < (ys[0] - ys[1]).norm() / 3     # converging (Strang: 4x)
    assert at_depth(m, (4, 4)).config.n_decoder_layers == 4
    with pytest.raises(ValueError, match="one step size"):
        at_depth(SplitSeq2Seq(300, 300, 16, 2, n_encoder_layers=2, n_decoder_layers=4,
                              depth_basis="legendre:2"), 3)


@pytest.mark.parametrize("options", [{"scheme": "strang"}, pytest.param(
    {"scheme": "blanes-moan4", "reversible": True}, marks=pytest.mark.heavy)])
def test_the_analyses_see_the_same_ode(options):
    """Re-discretising every layer into 2 steps is the network at twice its depth; the exact
    flow of its ODE (an adaptive solver, t a tensor) is where its steps converge to; the
    states are one per stage, quadrature or not."""
    import warnings

    from splitnet.analyses.refine import ode_model, rediscretize

    torch.manual_seed(0)
    m = SplitTransformer(**SMALL, n_layers=2, depth_basis="legendre:3", **options).double()
    vary_in_depth(m)
    x = _ids()
    assert torch.allclose(rediscretize(m, substeps=2)(x), at_depth(m, 4)(x), atol=1e-15)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ode = ode_model(m)(x)
    gaps = [float((at_depth(m, n)(x) - ode).abs().max().detach()) for n in (8, 16)]
    order = 4 if options.get("reversible") else 1                 # plain Euler: first order
    assert gaps[1] < 0.6 * gaps[0] * 2.0 ** (1 - order)
    _, states = m(x, return_states=True)
    assert states.shape[0] == 1 + 2 * len(m.scheme.stages)


# ---------------------------------------------------------------------------------------------
# the numerics: convergence at the order (docs/elastic.md)


def _quick(c) -> bool:
    """The quick suite's share of the table: every Lie–Trotter and Strang case (orders 1 and 2,
    plain and reversible, the controls) and Yoshida4 with time-dependent Legendre weights; the
    rest (many stages x 128 steps, seconds each) run in CI as heavy."""
    return c.scheme in ("lie-trotter", "strang") or (
        c.scheme == "yoshida4" and c.basis == "legendre:3" and c.quadrature is None)


@pytest.mark.parametrize("case", [c if _quick(c) else pytest.param(c, marks=pytest.mark.heavy)
                                  for c in E.CASES], ids=[c.label for c in E.CASES])
def test_doubling_the_steps_converges_at_the_order_theory_gives(case):
    diffs, rates = E.measure(case)
    slope, ns = E.fitted(diffs)
    assert len(ns) == E.FIT and ns[-1] >= 16      # above round-off, in the asymptotic range
    assert abs(slope - case.order) < 0.15, (case.label, diffs, rates)
    last = rates[E.DEPTHS.index(ns[-1]) - 1]      # the rate of the finest pair fitted
    assert abs(last - case.order) < 0.15, (case.label, rates)


def test_the_quadrature_rule():
    from splitnet.integrators.schemes import get

    got = {n: quadrature_points(get(n).order, get(n).stages)
           for n in ("lie-trotter", "strang", "yoshida4", "yoshida6", "forest-ruth4",
                     "blanes-moan4", "blanes-moan6")}
    assert got == {"lie-trotter": 1, "strang": 1, "yoshida4": 1, "yoshida6": 1,
                   "forest-ruth4": 2, "blanes-moan4": 2, "blanes-moan6": 3}
    m = SplitTransformer(**SMALL, n_layers=2, scheme="blanes-moan4", reversible=True,
                         depth_basis="legendre:2")
    layer = m.layers[0]
    assert len(layer.stage_callables()) == 2 * len(layer.stages)
    const = SplitTransformer(**SMALL, n_layers=2, scheme="blanes-moan4", reversible=True,
                             depth_basis="legendre:1").layers[0]
    assert len(const.stage_callables()) == len(const.stages)      # constant: one each


@pytest.mark.parametrize("scheme", ["yoshida4", "blanes-moan4"])
def test_quadrature_stages_backpropagate_replay_dropout_and_invert_exactly(scheme):
    torch.manual_seed(0)
    m = SplitTransformer(**SMALL, n_layers=2, scheme=scheme, reversible=True, dropout=0.1,
                         depth_basis="legendre:3").double().train()
    vary_in_depth(m)
    x = _ids()

    def grads(plain):
        m.zero_grad()
        torch.manual_seed(5)
        if plain:
            with plain_autograd(m):
                loss = m(x).square().mean()
        else:
            loss = m(x).square().mean()
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in m.parameters()]

    (la, ga), (lb, gb) = grads(False), grads(True)
    assert torch.equal(la, lb)                           # the same dropout masks replayed
    assert all(torch.allclose(a, b, atol=1e-15, rtol=1e-12) for a, b in zip(ga, gb))
    layer = at_depth(m, 3).eval().layers[1]
    x1, x2 = torch.randn(2, 2, 8, 16, dtype=torch.float64)
    z1, z2 = layer.inverse(*layer(x1, x2, 0.7), 0.7)
    assert torch.allclose(z1, x1, atol=1e-14) and torch.allclose(z2, x2, atol=1e-14)


def test_quadrature_stages_invert_bit_for_bit_on_the_grid():
    from splitnet.reversible.layer import start_pair

    torch.manual_seed(0)
    m = SplitTransformer(**SMALL, n_layers=4, scheme="blanes-moan4", reversible=True,
                         reversible_grid=10, depth_basis="legendre:3")
    vary_in_depth(m)
    with torch.no_grad():
        p = q = start_pair(m.embed(_ids()), 10)
        for k, layer in enumerate(m.layers):
            q = layer(*q, float(k))
        for k in reversed(range(4)):
            q = m.layers[k].inverse(*q, float(k))
    assert torch.equal(q[0], p[0]) and torch.equal(q[1], p[1])


@pytest.mark.parametrize("options", [{}, {"reversible": True, "scheme": "blanes-moan4"},
                                     {"scheme": "strang", "method": "rk4",
                                      "weights": "per-stage"}])
def test_generation_with_caches_is_generation_without(options):
    torch.manual_seed(0)
    m = SplitTransformer(**SMALL, n_layers=2, depth_basis="legendre:3", **options).double()
    vary_in_depth(m, scale=3.0)
    v = at_depth(m, 5)
    p = _ids(1, (2, 4))
    assert torch.equal(v.generate(p, 8, temperature=0, use_cache=True),
                       v.generate(p, 8, temperature=0, use_cache=False))


# ---------------------------------------------------------------------------------------------
# projection onto a basis


def test_to_basis_keeps_a_lie_trotter_network_at_its_own_depth_with_one_function_per_layer():
    torch.manual_seed(0)
    x = _ids()
    for rev in (False, True):
        m = SplitTransformer(**SMALL, n_layers=4, reversible=rev).double()
        for basis in ("legendre:4", "linear:4"):
            c, r = to_basis(m, basis, return_residual=True)
            assert c.config.depth_basis == basis and r["relative"] < 1e-12
            assert torch.allclose(c(x), m(x), atol=1e-12)
        c, r = to_basis(m, "legendre:2", return_residual=True)
        assert 0.01 < r["relative"] < 1 and len(r["per_weight"]) == 12
        c, r = to_basis(m, "legendre:4", return_residual=True, fit="mean")
        assert r["relative"] < 1e-12 and not torch.allclose(c(x), m(x), atol=1e-6)
    with pytest.raises(ValueError, match="cannot be fitted to 4 layers"):
        to_basis(m, "legendre:5")
    with pytest.raises(ValueError, match="fit must be"):
        to_basis(m, "legendre:2", fit="median")


def test_to_basis_of_a_continuous_network_is_its_l2_projection():
    torch.manual_seed(0)
    m = SplitTransformer(**SMALL, n_layers=2, depth_basis="legendre:3").double()
    vary_in_depth(m)
    x = _ids()
    up, r = to_basis(m, "legendre:5", return_residual=True)      # contains it: exact
    assert r["relative"] < 1e-12
    for n in (1, 3, 8):
        assert torch.allclose(at_depth(up, n)(x), at_depth(m, n)(x), atol=1e-12)
    down, r = to_basis(m, "linear:9", return_residual=True)
    assert 1e-4 < r["relative"] < 0.2
    # the residual is the L2 distance of the functions, measured independently on a fine grid
    ts = np.linspace(0.0, 2.0, 801)
    err = norm = 0.0
    with torch.no_grad():
        for a, b in ((m.layers[0].diffusion, down.layers[0].diffusion),
                     (m.layers[0].convection, down.layers[0].convection)):
            wa = [a.weights(t) for t in ts]
            wb = [b.weights(t) for t in ts]
            err += np.trapezoid([sum(float((x[k] - y[k]).square().sum()) for k in x)
                                 for x, y in zip(wa, wb)], ts)
            norm += np.trapezoid([sum(float(x[k].square().sum()) for k in x) for x in wa], ts)
    assert (err / norm) ** 0.5 == pytest.approx(r["relative"], rel=1e-3)


def test_to_basis_of_an_encoder_decoder():
    torch.manual_seed(0)
    m = SplitSeq2Seq(300, 300, 16, 2, n_encoder_layers=2, n_decoder_layers=2).double()
    c = to_basis(m, "legendre:2")
    src, tgt = torch.randint(0, 250, (2, 5)), torch.randint(0, 250, (2, 4))
    assert torch.allclose(c(src, tgt), m(src, tgt), atol=1e-12)


# ---------------------------------------------------------------------------------------------
# around the network: checkpoints, cost, export


def test_a_checkpoint_holds_the_basis(tmp_path):
    torch.manual_seed(0)
    m = SplitTransformer(**SMALL, n_layers=3, depth_basis="linear:3", scheme="strang")
    vary_in_depth(m)
    save({"version": VERSION, "model_config": m.config.to_dict(), "model": m.state_dict()},
         tmp_path / "c.pt")
    back = load_model(tmp_path / "c.pt")
    assert back.config.depth_basis == "linear:3"
    x = _ids()
    assert torch.equal(back(x), m.eval()(x))
    old = SplitTransformer(**SMALL, n_layers=3)
    cfg = old.config.to_dict()
    del cfg["depth_basis"]                               # written before the option existed
    save({"version": VERSION, "model_config": cfg, "model": old.state_dict()}, tmp_path / "old.pt")
    assert load_model(tmp_path / "old.pt").config.depth_basis is None


def _flops(config, seq_len=8):
    with torch.device("meta"):
        model = SplitTransformer.from_config(config)
    fc = FlopCounterMode(display=False)
    with fc:
        model(torch.zeros(2, seq_len, dtype=torch.long, device="meta"))
    return model.n_params(), model.n_params(embeddings=False), fc.get_total_flops() / (2 * seq_len)


@pytest.mark.parametrize("options", [
    {"depth_basis": "legendre:3"},
    {"depth_basis": "linear:4", "weights": "per-stage", "scheme": "strang"},
    {"depth_basis": "legendre:3", "reversible": True, "scheme": "yoshida4"},
    {"depth_basis": "legendre:3", "reversible": True, "scheme": "blanes-moan4"},
    {"depth_basis": "legendre:1", "reversible": True, "scheme": "blanes-moan4"},
    {"depth_basis": "legendre:2", "gate": "sigmoid", "method": "rk4"},
])
def test_the_closed_forms_count_depth_fields(options):
    config = SplitConfig(d_model=16, n_heads=2, n_layers=3, vocab_size=11, max_len=8, **options)
    c = cost.describe(config, seq_len=8)
    assert (c.params, c.params_non_embedding, c.flops_forward) == _flops(config)
    layered = cost.describe(config.replace(depth_basis=None), seq_len=8)
    K = int(options["depth_basis"][-1])
    assert c.params_non_embedding - 2 * 16 == K * (layered.params_non_embedding - 2 * 16) // 3
    assert cost.describe(config.replace(n_layers=6), seq_len=8).params == c.params


def test_seq2seq_costs_count_the_quadrature():
    c = Seq2SeqConfig(d_model=16, n_heads=2, reversible=True, depth_basis="legendre:2",
                      decoder_scheme="yoshida4")
    enc, dec = cost.seq2seq_costs(c, 8)
    plain_enc, plain_dec = cost.seq2seq_costs(c.replace(depth_basis=None), 8)
    assert enc["evals"] == plain_enc["evals"]         # lie-trotter: the midpoint
    # yoshida4 over 3 fields is no sequence of 3-stage Strang steps: ceil(4 / 2) = 2 points
    assert dec["evals"] == {f: 2 * n for f, n in plain_dec["evals"].items()}
    assert dec["flops"] > plain_dec["flops"]


def test_gpt2_export_refuses_weights_that_change_with_depth():
    m = SplitTransformer(**SMALL, n_layers=2, depth_basis="legendre:2")
    assert "depth_basis" in gpt2_mismatch(m)


# ---------------------------------------------------------------------------------------------
# the document


@pytest.mark.heavy
def test_docs_elastic_md_is_the_tables_measured_now():
    """docs/elastic.md's convergence section is experiments/elastic_tables.py's rendering of
    these measurements (regen elastic-convergence)."""
    doc = (ROOT / "docs" / "elastic.md").read_text()
    now = E.render().splitlines()
    assert now[0] in doc
    kept = doc.splitlines()
    kept = kept[kept.index(now[0]):][:len(now)]
    for row_now, row_kept in zip(now, kept, strict=True):
        assert _same_row(row_now, row_kept), (f"docs/elastic.md has\n{row_kept}\n"
                                              f"measured now\n{row_now}")


_NUMBER = r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?"


def _same_row(a: str, b: str) -> bool:
    """The same text and the same numbers to the last printed digit, give or take one: a
    difference of order 1e-14 (the finest step of a fourth/sixth-order case) is round-off and
    moves with the machine's BLAS, so its rate may print 4.00 on one CPU and 4.01 on another."""
    import re

    if re.sub(_NUMBER, "#", a) != re.sub(_NUMBER, "#", b):
        return False
    for x, y in zip(re.findall(_NUMBER, a), re.findall(_NUMBER, b)):
        digit = 10.0 ** (math.floor(math.log10(abs(float(x)))) - 2) if "e" in x else 0.01
        if abs(float(x) - float(y)) > 1.01 * (digit if float(x) else 0.01):
            return False
    return True


def test_docs_elastic_md_start_table_is_the_cache_and_its_reading_holds():
    """The start table is experiments/elastic_start.py's rendering of its cache (regen
    elastic-start), and the claims of its reading hold for the recorded runs."""
    import json

    sys.path.insert(0, str(ROOT / "experiments"))
    try:
        import elastic_start as S
    finally:
        sys.path.pop(0)
    runs = [json.loads(p.read_text()) for p in sorted(S.CACHE.glob("*.json"))]
    assert len(runs) == len(S.NETWORKS) * len(S.BASES) * len(S.SEEDS)
    assert S.table(runs) in (ROOT / "docs" / "elastic.md").read_text()

    def mean(net, basis, n):
        return np.mean([r["bpb"][str(n)] for r in runs if (r["net"], r["basis"]) == (net, basis)])

    for net in S.NETWORKS:
        base = mean(net, "layered", 4)
        assert mean(net, "legendre:4", 4) - base > 0.1
        for basis in ("bernstein:4", "linear:4"):
            assert 0.03 < mean(net, basis, 4) - base < 0.07
    smooth = [mean("rev-strang", "bernstein:4", n) for n in (4, 8, 16)]
    assert max(smooth) - min(smooth) < 0.01                   # keeps its loss when refined
    for n in (1, 2):                                          # loses much less when coarsened
        assert mean("rev-strang", "bernstein:4", n) < mean("rev-strang", "layered", n) - 0.2
