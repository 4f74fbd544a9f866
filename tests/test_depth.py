"""Depth is a step size (issue 43): prolong and coarsen a network by its scheme.

The convergence test is the table of docs/depth.md: successive prolongations of a network
converge to the exact flow of its piecewise-constant ODE at the network's order (reversible:
the scheme's; plain Euler sub-layers: 1), measured in float64 on small fields (inside the
asymptotic range, far above round-off)."""

import numpy as np
import pytest
import torch

import splitnet as sn
from splitnet.analyses.depth import prolongation_errors
from splitnet.nets.depth import coarsen, prolong
from splitnet.nets.models import SplitTransformer
from splitnet.nets.seq2seq import SplitSeq2Seq

SMALL = {"vocab_size": 64, "d_model": 16, "n_heads": 2, "max_len": 16}
FACTORS = (1, 2, 4, 8, 16, 32)
# (scheme, reversible, declared order of the prolongation limit)
CASES = [("lie-trotter", True, 1), ("strang", True, 2), ("yoshida4", True, 4),
         ("strang", False, 1), ("lie-trotter", False, 1)]


def convergence_rates(scheme: str, reversible: bool, seed: int = 0):
    """Differences ``|y_f - y_2f|`` of the final states of ``prolong(m, f)`` for f in
    FACTORS, and the observed rates (:func:`splitnet.analyses.depth.prolongation_errors`)."""
    torch.manual_seed(seed)
    m = SplitTransformer(**SMALL, n_layers=2, scheme=scheme,
                         reversible=reversible).double().eval()
    x = m.embed(torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(seed)))
    return prolongation_errors(m, x, FACTORS)


@pytest.mark.parametrize("scheme,reversible,order", CASES)
def test_prolongations_converge_at_the_networks_order(scheme, reversible, order):
    diffs, rates = convergence_rates(scheme, reversible)
    assert min(diffs) > 1e-13                    # above round-off: the rates mean something
    slope = np.polyfit(np.log2(FACTORS[:-1]), np.log2(diffs), 1)[0]
    assert abs(-slope - order) < 0.1, (diffs, rates)
    assert abs(rates[-1] - order) < 0.1, rates


def _variants():
    return {
        "plain": SplitTransformer(**SMALL, n_layers=4),
        "reversible": SplitTransformer(**SMALL, n_layers=4, reversible=True, reversible_grid=12),
        "per-stage": SplitTransformer(**SMALL, n_layers=4, weights="per-stage"),
        "learned": SplitTransformer(**SMALL, n_layers=4, learn_coefficients=True),
        "projected": SplitTransformer(**SMALL, n_layers=4, learn_coefficients=True,
                                      project_coefficients=True),
        "gated": SplitTransformer(**SMALL, n_layers=4, gate="sigmoid", gate_layers=[2, 3]),
        "seq2seq": SplitSeq2Seq(300, 300, 16, 2, n_encoder_layers=2, n_decoder_layers=4),
        "seq2seq-rev": SplitSeq2Seq(300, 300, 16, 2, n_encoder_layers=2, n_decoder_layers=2,
                                    reversible=True),
    }


@pytest.mark.parametrize("name", list(_variants()))
@pytest.mark.parametrize("restriction", ["mean", "first"])
def test_coarsen_undoes_prolong_and_the_model_given_is_untouched(name, restriction):
    m = _variants()[name]
    before = {k: v.clone() for k, v in m.state_dict().items()}
    big = prolong(m, 2)
    c, b = m.config, big.config
    depth = "n_layers" if hasattr(c, "n_layers") else "n_decoder_layers"
    assert getattr(b, depth) == 2 * getattr(c, depth) and b.step_size == c.step_size / 2
    assert type(big.layers if hasattr(big, "layers") else big.decoder_layers) is \
        type(m.layers if hasattr(m, "layers") else m.decoder_layers)
    back = coarsen(big, 2, restriction)
    assert back.config == c
    for k, v in m.state_dict().items():
        assert torch.equal(back.state_dict()[k], v), k
        assert torch.equal(before[k], v), k                         # left as it was
    ptrs = {v.data_ptr() for v in m.state_dict().values()}
    assert not ptrs & {v.data_ptr() for v in big.state_dict().values()}   # new tensors


def test_the_restrictions_are_the_mean_and_the_first_of_the_merged_layers():
    torch.manual_seed(0)
    m = SplitTransformer(**SMALL, n_layers=4)
    key = "layers.{}.convection.fc1.weight"
    w = [m.state_dict()[key.format(k)] for k in range(4)]
    mean, first = coarsen(m, 2, "mean"), coarsen(m, 2, "first")
    assert mean.config.n_layers == 2 and mean.config.step_size == 2.0
    torch.testing.assert_close(mean.state_dict()[key.format(1)], (w[2] + w[3]) / 2)
    assert torch.equal(first.state_dict()[key.format(1)], w[2])


def test_a_prolonged_network_keeps_dtype_mode_and_gates():
    m = SplitTransformer(**SMALL, n_layers=4, gate="tanh", gate_layers=[1]).double().train()
    big = prolong(m, 3)
    assert big.tok_emb.weight.dtype == torch.float64 and big.training
    assert big.config.gate_layers == (3, 4, 5) and big.config.n_layers == 12
    idx = torch.randint(0, 64, (1, 8))
    assert torch.isfinite(big.eval()(idx)).all()
    with pytest.raises(ValueError, match="gated and not gated"):
        coarsen(SplitTransformer(**SMALL, n_layers=4, gate="tanh", gate_layers=[1]), 2)


def test_projected_coefficients_stay_exact_after_a_mean():
    """The mean of two exact layers is off the (nonlinear) order conditions; coarsen projects
    it back, as the trainer does after every step."""
    from splitnet.nets.learned import learned_layers, order_penalty

    torch.manual_seed(0)
    m = SplitTransformer(**SMALL, n_layers=4, learn_coefficients=True, project_coefficients=True,
                         scheme="c:0.3,d:0.5,c:0.4,d:0.5,c:0.3")
    with torch.no_grad():
        for layer in learned_layers(m):
            layer.stage_coeffs.add_(0.05 * torch.randn_like(layer.stage_coeffs))
    m.project_coefficients()
    assert float(order_penalty(m).detach()) < 1e-24
    raw = SplitTransformer(**SMALL, n_layers=2, learn_coefficients=True,
                           project_coefficients=True, scheme="c:0.3,d:0.5,c:0.4,d:0.5,c:0.3")
    with torch.no_grad():
        for k, layer in enumerate(learned_layers(raw)):
            layer.stage_coeffs.copy_((m.layers[2 * k].stage_coeffs
                                      + m.layers[2 * k + 1].stage_coeffs) / 2)
    assert float(order_penalty(raw).detach()) > 1e-12                # the plain mean is not exact
    small = coarsen(m, 2)
    assert small.layers[0].stage_coeffs.dtype == torch.float64
    assert float(order_penalty(small).detach()) < 1e-24


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2", None])
def test_a_factor_that_is_not_an_int_at_least_one_is_a_value_error(bad):
    m = SplitTransformer(**SMALL, n_layers=2)
    for f in (prolong, coarsen):
        with pytest.raises(ValueError, match="int >= 1"):
            f(m, bad)


def test_bad_depths_restrictions_and_models_are_clear_errors():
    from splitnet.analyses.refine import rediscretize

    m = SplitTransformer(**SMALL, n_layers=3)
    with pytest.raises(ValueError, match="n_layers=3 is not divisible by the factor 2"):
        coarsen(m, 2)
    with pytest.raises(ValueError, match="restriction must be one of mean, first"):
        coarsen(m, 3, "median")
    with pytest.raises(TypeError, match="SplitTransformer or a SplitSeq2Seq"):
        prolong(torch.nn.Linear(2, 2), 2)
    with pytest.raises(ValueError, match="re-discretised view"):
        prolong(rediscretize(m, substeps=2), 2)
    assert coarsen(m, 1).config == m.config and coarsen(m, 3).config.n_layers == 1


def test_depth_study_rows_and_the_refine_options():
    from splitnet.analyses.depth import depth_study, depth_table
    from splitnet.cli.commands.cmd_refine import factor_list

    torch.manual_seed(0)
    m = SplitTransformer(**SMALL, n_layers=4, reversible=True, scheme="strang").double()
    idx = torch.randint(0, 64, (2, 12))
    calls = []

    def evaluate(model):
        calls.append(len(model.layers))
        return float(model(idx).logsumexp(-1).mean())
    pts = depth_study(m, evaluate, coarsen_factors=(2, 3), prolong_factors=(2,), progress=False)
    assert [p.label() for p in pts] == ["as trained", "coarsen 2 (mean)", "coarsen 2 (first)",
                                       "coarsen 3 (mean)", "coarsen 3 (first)", "prolong 2"]
    assert calls == [4, 2, 2, 8] and pts[3].loss is None and "not divisible" in pts[3].note
    assert abs(pts[-1].loss - pts[0].loss) < 1e-3 and pts[-1].step_size == 0.5
    assert "coarsen 3 (mean)" in depth_table(pts) and len(m.layers) == 4
    assert factor_list("none") == [] and factor_list("2,4") == [2, 4]
    with pytest.raises(Exception, match=r"depth factors lie in 2\.\.64"):
        factor_list("1")


@pytest.mark.heavy
def test_the_convergence_table_of_docs_depth_md_is_what_the_code_measures():
    """docs/depth.md's table is experiments/depth_study.py's rendering of these measurements
    (regen depth): every rate there equals the one measured now, to its two decimals."""
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "depth.md").read_text()
    doc = doc.split("## Prolongation converges")[1].split("\n## ")[0]     # its section
    rows = [ln for ln in doc.splitlines() if ln.startswith("| reversible ") or
            ln.startswith("| plain (Euler sub-layers) ")]
    assert len(rows) == 5, rows
    for ln in rows:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        rev = cells[0].startswith("reversible")
        scheme = cells[0].split()[-1]
        _, rates = convergence_rates(scheme, rev)
        assert cells[3] == ", ".join(f"{r:.2f}" for r in rates), (ln, rates)
        assert all(abs(float(r) - int(cells[1])) < 0.1 for r in re.findall(r"[\d.]+", cells[3]))


def test_the_reading_of_docs_depth_md_holds_for_the_recorded_runs():
    """The words of the study's reading, checked against experiments/cache/depth (the runs the
    tables come from): a higher order makes doubling the depth cheap, halving a network trained
    at full depth costs every arm more than 0.3 bpb, grown networks are the ones that halve
    well (best with the mean), and the grown reversible networks never reach their twins."""
    import json
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "experiments"))
    try:
        import depth_study as S
    finally:
        sys.path.pop(0)
    runs = [json.loads(p.read_text()) for p in sorted((root / "experiments" / "cache" /
                                                         "depth").glob("*.json"))]
    assert len(runs) == 36 and {r["seed"] for r in runs} == {0, 1, 2}
    assert {r["regime"] for r in runs} == {"full", "grown", "grown-h1"}

    def mean(arm, regime, key):
        return S._stat(runs, arm, regime, key)
    prolong = [mean(a, "full", "prolong 2") for a in ("rev-strang", "rev-lt", "transformer")]
    assert prolong == sorted(prolong) and prolong[0] < 0.02 < 0.25 < prolong[1]
    for arm in S.ARMS:
        assert min(mean(arm, "full", "coarsen 2 (mean)"), mean(arm, "full", "coarsen 2 (first)")) \
            > 0.3
        assert mean(arm, "grown", "coarsen 2 (mean)") < mean(arm, "grown", "coarsen 2 (first)")
        assert mean(arm, "full", "coarsen 2 (first)") < mean(arm, "full", "coarsen 2 (mean)")
        assert mean(arm, "grown", "coarsen 2 (mean)") < mean(arm, "full", "coarsen 2 (first)")
    for arm in ("rev-lt", "rev-strang"):
        d, t = S._grown_minus_full(runs, arm)
        assert d > 0.03 and t > 3
        assert all(S.to_target(f, S._by(runs, arm, "grown")[s])[0] is None
                   for s, f in S._by(runs, arm, "full").items())
    # started at h = 1, the Transformer reaches its twin's loss on every seed with >= 40 %
    # fewer FLOPs and ends better; the reversible deficit stays
    d, t = S._grown_minus_full(runs, "transformer", "grown-h1")
    assert d < 0 and t < -3
    hits = [S.to_target(f, S._by(runs, "transformer", "grown-h1")[s])
            for s, f in S._by(runs, "transformer", "full").items()]
    assert all(h is not None and h / total <= 0.6 for h, total in hits)
    assert all(S._grown_minus_full(runs, a, "grown-h1")[0] > 0.03 for a in ("rev-lt", "rev-strang"))
    doc = (root / "docs" / "depth.md").read_text()
    assert S.reading(runs) in doc


@pytest.mark.parametrize("call", [
    lambda m: sn.depth.at_depth(m, 4, view="no"),
    lambda m: sn.depth.at_depth(m, 1, view=1),
    lambda m: sn.depth.to_basis(m, "legendre:2", return_residual="no"),
    lambda m: sn.depth.to_basis(m, "legendre:2", return_residual=None),
], ids=["at_depth view 'no'", "at_depth view 1", "to_basis residual 'no'",
        "to_basis residual None"])
def test_the_yes_no_arguments_of_sn_depth_take_only_bools(call):
    """Issue 62's hostile pass: view='no' gave a view ('no' is truthy), return_residual='no' a
    pair; each is a ValueError naming the argument, as every yes/no argument of the library."""
    torch.manual_seed(0)
    m = sn.SplitTransformer(vocab_size=16, d_model=8, n_heads=2, n_layers=2, max_len=8)
    with pytest.raises(ValueError, match=r"(view|return_residual) must be True or False, got"):
        call(m)
    assert isinstance(sn.depth.at_depth(m, 4, view=False), sn.SplitTransformer)
