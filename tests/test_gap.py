"""discretization_gap: the network against the exact flow of its own fields."""

import itertools

import numpy as np
import pytest
import torch

import splitnet as sn
from splitnet.analyses.gap import discretization_gap

HS = [0.4, 0.2, 0.1, 0.05]


def _model(scheme, h, weights="shared", method="euler", n_layers=1, seed=0):
    torch.manual_seed(seed)
    m = sn.models.SplitTransformer(11, 16, 2, n_layers, scheme=scheme, weights=weights,
                                   step_size=h, method=method)
    with torch.no_grad():
        # unit-scale token states: GPT-2's 0.02 embedding makes LayerNorm's Jacobian ~50 and
        # puts h in [0.05, 0.4] outside the asymptotic range.
        m.tok_emb.weight.mul_(50)
    return m


def _idx():
    return torch.randint(0, 11, (1, 5), generator=torch.Generator().manual_seed(0))


def _slope(scheme, weights="shared", method="euler"):
    errs = [discretization_gap(_model(scheme, h, weights, method), _idx()).local[0] for h in HS]
    assert all(a > b for a, b in itertools.pairwise(errs)), errs
    return np.polyfit(np.log(HS), np.log(errs), 1)[0]


@pytest.mark.parametrize("scheme,weights,method,order", [
    ("lie-trotter", "shared", "euler", 2),     # local error O(h^2): the Transformer layer
    ("strang", "per-stage", "euler", 2),       # Macaron with Euler: still O(h^2) locally, and
                                               # consistent with the coefficient-weighted ODE
    ("strang", "shared", "rk4", 3),            # Strang with accurate sub-flows: O(h^3)
])
def test_local_gap_has_the_expected_order(scheme, weights, method, order):
    assert _slope(scheme, weights, method) == pytest.approx(order, abs=0.15)


def test_per_stage_ode_is_the_coefficient_weighted_sum():
    m = _model("strang", 0.3, weights="per-stage")
    layer = m.layers[0]
    D, C = layer.field("diffusion"), layer.field("convection")
    x = torch.randn(1, 5, 16)
    c1, c2 = layer.convection
    assert torch.allclose(C(0.0, x), 0.5 * c1(0.0, x) + 0.5 * c2(0.0, x), atol=1e-6)
    assert torch.allclose(D(0.0, x), layer.diffusion[0](0.0, x))
    assert torch.allclose(layer.ode_field()(0.0, x), D(0.0, x) + C(0.0, x), atol=1e-6)


def test_cumulative_starts_at_local_and_model_untouched():
    m = _model("yoshida4", 0.5, n_layers=3)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    r = discretization_gap(m, _idx(), rtol=1e-10, atol=1e-12)
    assert r.local.shape == r.cumulative.shape == (3,)
    assert r.cumulative[0] == pytest.approx(r.local[0], rel=1e-12)
    assert np.all(r.local_rel > 0) and np.all(r.update > 0)
    assert next(m.parameters()).dtype == torch.float32 and m.training
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())
    assert "cumulative" in r.table()
    # forwarded from the analysis module, as the design names it
    r2 = sn.analysis.discretization_gap(m, _idx(), rtol=1e-10, atol=1e-12)
    assert np.allclose(r2.local, r.local, rtol=1e-9)


def test_plot_gaps_writes_png(tmp_path):
    from splitnet.plots import plot_gaps

    r = discretization_gap(_model("strang", 0.5, n_layers=2), _idx(), rtol=1e-8, atol=1e-10)
    out = tmp_path / "g.png"
    plot_gaps([r], out, title="t")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_inputs():
    with pytest.raises(TypeError, match="SplitTransformer"):
        discretization_gap(torch.nn.Linear(2, 2), _idx())
    with pytest.raises(ValueError, match="option"):
        discretization_gap(_model("strang", 1.0), _idx(), tolerance=1e-3)
