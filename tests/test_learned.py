"""Learned splitting coefficients (splitnet.nets.learned) and the order conditions in torch
(splitnet.conditions): the conditions equal the numpy free-algebra ones, the penalty vanishes at
published methods and its gradient matches finite differences; a learned model starts as the
plain one, its coefficients get finite gradients, train, checkpoint and resume exactly; refine,
check_order and describe read them."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import splitnet as sn
from splitnet import algebra, conditions
from splitnet.cli import main
from splitnet.nets.learned import LearnedSplitLayer, order_penalty


def _conds(stages, degree, shift=0.0):
    letters, k = conditions.structure(stages)
    c = torch.tensor([st.coeff for st in stages], dtype=torch.float64) + torch.as_tensor(shift)
    return c, letters, k, conditions.lie_conditions(c, letters, k, degree)


@pytest.mark.parametrize("spec,degree", [("lie-trotter", 5), ("strang", 5), ("yoshida4", 6),
                                         ("c:0.25,d:0.5,d+c:0.5,c:0.25", 4)])
def test_torch_conditions_equal_the_free_algebra_ones(spec, degree):
    stages = sn.schemes.resolve(spec).stages
    c, *_, got = _conds(stages, degree, shift=0.07 * np.arange(len(stages)))
    want = algebra.lie_conditions([(st.field, float(x)) for st, x in zip(stages, c)], degree)
    for d in range(1, degree + 1):
        np.testing.assert_allclose(got[d - 1].numpy(), want[d], rtol=0, atol=1e-13)


def test_three_fields_and_a_batch_of_layers():
    stages = sn.schemes.get("strang", fields=("convection", "diffusion", "cross")).stages
    letters, k = conditions.structure(stages)
    c = torch.tensor([[st.coeff for st in stages]] * 3, dtype=torch.float64)
    c[1] += 0.1
    got = conditions.lie_conditions(c, letters, k, 3)
    assert [g.shape for g in got] == [(3, 3), (3, 3), (3, 8)]
    want = algebra.lie_conditions([(st.field, float(x)) for st, x in zip(stages, c[1])], 3)
    np.testing.assert_allclose(got[2][1].numpy(), want[3], atol=1e-14)
    assert float(got[1][0].abs().max()) < 1e-15           # Strang: second order


@pytest.mark.parametrize("name,order", [("yoshida4", 4), ("suzuki4", 4), ("strang", 2),
                                        ("yoshida6", 6), ("blanes-moan4", 4)])
def test_the_penalty_vanishes_at_a_published_method_of_its_order(name, order):
    stages = sn.schemes.get(name).stages
    c, letters, k, _ = _conds(stages, 1)
    assert float(conditions.penalty(c, letters, k, order)) < 1e-24
    assert float(conditions.penalty(c, letters, k, order + 1)) > 1e-8   # not one order more


def test_the_penalty_gradient_matches_finite_differences():
    stages = sn.schemes.get("yoshida4").stages
    letters, k = conditions.structure(stages)
    c = torch.tensor([st.coeff for st in stages], dtype=torch.float64)
    c = (c + 0.03 * torch.randn(len(c), dtype=torch.float64,
                                generator=torch.Generator().manual_seed(0))).requires_grad_()
    assert torch.autograd.gradcheck(lambda x: conditions.penalty(x, letters, k, 4), (c,))
    c0 = torch.tensor([st.coeff for st in stages], dtype=torch.float64, requires_grad=True)
    conditions.penalty(c0, letters, k, 4).backward()
    assert float(c0.grad.abs().max()) < 1e-12             # a minimum at the published method


# ---------------------------------------------------------------------------------------------
# networks


def _pair(scheme, method="euler", **kw):
    """A plain model and a learned one with the same weights, float64."""
    torch.manual_seed(0)
    opts = {"scheme": scheme, "method": method, "max_len": 16, **kw}
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        a = sn.models.SplitTransformer(64, 16, 2, 2, **opts).eval()
        b = sn.models.SplitTransformer(64, 16, 2, 2, learn_coefficients=True, **opts).eval()
    finally:
        torch.set_default_dtype(old)
    b.load_state_dict(a.state_dict(), strict=False)
    return a, b


@pytest.mark.parametrize("scheme,method", [("yoshida4", "euler"), ("strang", "rk4"),
                                           ("parallel", "midpoint"),
                                           ("c:0.25,d:0.5,d+c:0.5,c:0.25", "euler")])
def test_a_learned_model_starts_as_the_plain_one(scheme, method):
    a, b = _pair(scheme, method)
    assert all(isinstance(layer, LearnedSplitLayer) for layer in b.layers)
    idx = torch.randint(0, 64, (2, 11))
    torch.testing.assert_close(b(idx), a(idx), rtol=0, atol=1e-13)
    assert b.coefficients() == a.coefficients() == (a.scheme.stages,) * 2
    assert b.n_params() == a.n_params() + 2 * len(a.scheme.stages)
    assert sn.cost.describe(b.config, seq_len=16).params == b.n_params()
    assert torch.equal(b.generate(idx[:, :3], 8, temperature=0),
                       b.generate(idx[:, :3], 8, temperature=0, use_cache=False))
    torch.testing.assert_close(sn.analysis.rediscretize(b, method=method)(idx), b(idx), rtol=0,
                               atol=0)
    assert "learned stage coefficients" in sn.interop.gpt2_mismatch(b)   # never exported as GPT-2


def test_learned_clocks_follow_the_coefficients_for_time_dependent_fields():
    """Non-autonomous fields: each field's clock is the running sum of its own coefficients
    (sum stages included), so at the scheme's values the learned layer is the plain one, and
    with other values it is the plain layer of those values."""
    torch.manual_seed(0)
    a = torch.randn(5, 5, dtype=torch.float64) / 3
    b = torch.randn(5, 5, dtype=torch.float64) / 3
    def sin(t):
        return torch.sin(torch.as_tensor(3 * t, dtype=torch.float64))

    fields = {"diffusion": lambda t, x: sin(t) * x @ a.T,
              "convection": lambda t, x: (1 + t ** 2) * torch.tanh(x @ b.T)}
    x = torch.randn(3, 5, dtype=torch.float64)
    stages = sn.schemes.resolve("c:0.25,d:0.5,d+c:0.5,c:0.25").stages
    for method in ("euler", "rk4"):
        learned = LearnedSplitLayer(stages, step_size=0.7, method=method, fields=fields).double()
        plain = sn.layers.SplitLayer(stages, step_size=0.7, method=method, fields=fields)
        torch.testing.assert_close(learned(x, 0.3), plain(x, 0.3), rtol=0, atol=1e-15)
        with torch.no_grad():
            learned.stage_coeffs.copy_(torch.tensor([0.3, 0.4, 0.6, 0.1]))
        moved = sn.layers.SplitLayer(learned.current_stages(), step_size=0.7, method=method,
                                     fields=fields)
        torch.testing.assert_close(learned(x, 0.3), moved(x, 0.3), rtol=0, atol=1e-15)


def test_coefficients_get_finite_gradients_from_the_loss_and_the_penalty():
    _, m = _pair("yoshida4")
    m.train()
    idx = torch.randint(0, 64, (2, 12))
    loss = torch.nn.functional.cross_entropy(m(idx)[:, :-1].reshape(-1, 64),
                                             idx[:, 1:].reshape(-1))
    loss.backward()
    g = [layer.stage_coeffs.grad for layer in m.layers]
    assert all(x is not None and torch.isfinite(x).all() and x.abs().sum() > 0 for x in g)
    assert float(order_penalty(m).detach()) < 1e-24
    _one_order_short(m.layers[1], 4)                # consistent, order 3: seen at degree 4
    m.zero_grad()
    order_penalty(m).backward()
    assert m.layers[0].stage_coeffs.grad.abs().max() < 1e-10      # layer 0 still a method
    assert m.layers[1].stage_coeffs.grad.abs().max() > 1e-4


def _one_order_short(layer, p: int) -> None:
    """Set a layer's coefficients to a consistent set of order ``p - 1``: its scheme's (order
    p) moved by 0.05 along a direction that keeps every field's sum and breaks the palindrome,
    then Gauss-Newton (minimum-norm steps) on the conditions of degrees 1..p-1 back to
    round-off. Generically the degree-p conditions then fail (the tests check it)."""
    from splitnet.order.check import perturbation_direction

    stages = layer.current_stages()
    letters, k = conditions.structure(stages)
    v = torch.as_tensor(perturbation_direction(stages, keep_symmetry=False))
    c = layer.stage_coeffs.detach() + 0.05 * v

    def conds(x):
        return torch.cat(conditions.lie_conditions(x, letters, k, p - 1))

    for _ in range(30):
        if conds(c).abs().max() < 1e-15:
            break
        c = c - torch.linalg.pinv(torch.autograd.functional.jacobian(conds, c)) @ conds(c)
    assert conds(c).abs().max() < 1e-14
    with torch.no_grad():
        layer.stage_coeffs.copy_(c)


@pytest.mark.parametrize("scheme", ["strang", "yoshida4"])
def test_the_penalty_drives_a_consistent_low_order_set_to_the_declared_order(scheme):
    """``--order-penalty`` on a layer whose coefficients are consistent and of one order less
    than the declared p: the penalty (degrees 1..p) is positive with a gradient that moves only
    that layer, and minimising it alone brings the layer to order p (check_order: ok; Strang's
    only second-order set is c/2 d c/2). A penalty one degree short would be zero here."""
    _, m = _pair(scheme)
    p = m.scheme.order
    _one_order_short(m.layers[1], p)
    checks = sn.check_order(m)
    assert [r.verdict for r in checks] == ["ok", "mismatch"], checks[1].summary()
    assert round(checks[1].tail) == p - 1
    pen = order_penalty(m)
    assert float(pen.detach()) > 1e-6
    pen.backward()
    assert m.layers[0].stage_coeffs.grad.abs().max() < 1e-10
    assert m.layers[1].stage_coeffs.grad.abs().max() > 1e-3
    coeffs = m.layers[1].stage_coeffs
    opt = torch.optim.LBFGS([coeffs], max_iter=200, tolerance_grad=1e-15, tolerance_change=0,
                            line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        pen = order_penalty(m)
        pen.backward()
        return pen

    opt.step(closure)
    assert float(order_penalty(m).detach()) < 1e-18
    # minimised in float64 the sums are 1 to ~1e-11: normalised (explicitly) to be checked
    assert [r.verdict for r in sn.check_order(m, normalize=True)] == ["ok", "ok"]
    if scheme == "strang":
        want = torch.tensor([0.5, 1.0, 0.5], dtype=coeffs.dtype)
        torch.testing.assert_close(coeffs.detach(), want, rtol=0, atol=1e-9)


def _train(tmp_path, corpus, out, steps, *extra):
    return main(["train", "--text", str(corpus), "--d-model", "16", "--n-heads", "2",
                 "--n-layers", "2", "--context", "16", "--batch-size", "4", "--eval-windows",
                 "4", "--eval-every", "2", "--ckpt-every", "2", "--threads", "1",
                 "--no-progress", "--no-plot", "--out", str(out), "--steps", str(steps),
                 *extra])


def test_learned_coefficients_train_checkpoint_resume_and_describe(tmp_path, capsys):
    from splitnet import checkpoint as ck

    corpus = tmp_path / "c.txt"
    corpus.write_text("def f(x):\n    return x + 1\n" * 300)
    opts = ["--scheme", "strang", "--learn-coefficients", "--order-penalty", "0.5"]
    assert _train(tmp_path, corpus, tmp_path / "whole", 4, *opts) == 0
    assert _train(tmp_path, corpus, tmp_path / "cut", 2, *opts) == 0
    assert _train(tmp_path, corpus, tmp_path / "cut", 4, "--resume") == 0
    a, b = ck.load(tmp_path / "whole"), ck.load(tmp_path / "cut")
    for k in ("layers.0.stage_coeffs", "layers.1.stage_coeffs"):
        assert torch.equal(a["model"][k], b["model"][k])
        assert not torch.equal(a["model"][k], torch.tensor([0.5, 1.0, 0.5]))   # they moved
    recs = [json.loads(line) for line in (tmp_path / "whole" / ck.METRICS).open()]
    # the record's defect is the final coefficients' penalty (they moved off Strang: > 0)
    final = ck.load_model(tmp_path / "whole")
    assert recs[-1]["step"] == a["step"] and len(recs[-1]["coefficients"]) == 2
    assert recs[-1]["order_defect"] == pytest.approx(float(order_penalty(final).detach()),
                                                     rel=1e-6)
    assert recs[-1]["order_defect"] > 0
    capsys.readouterr()
    assert main(["describe", "--checkpoint", str(tmp_path / "whole")]) == 0
    out = capsys.readouterr().out
    assert "coefficients (learned; scheme strang, declared order 2)" in out
    assert out.count("check_order: ") == 2
