"""Learned coefficients (splitnet.nets.learned), stated where mutation testing found them
unstated (``python3 -m splitnet.dev mutate splitnet/nets/learned.py``): one learned layer is the
plain layer at its initial coefficients, time-dependent fields, sum stages and the exact method
included; its field and ODE follow the coefficients as they move; the penalty goes to the degree
asked for. docs/testing.md lists the mutants each test catches."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import splitnet as sn
from splitnet.integrators.layers import SplitLayer
from splitnet.nets.learned import (
    EXACT_PENALTY_DEGREE,
    LearnedSplitLayer,
    learned_layers,
    order_penalty,
    penalty_degree,
    whole,
)
from splitnet.order import conditions
from splitnet.stagelists.stages import EXACT_ORDER


class _TimeField(nn.Module):
    """``f(t, x) = (1 + t) x A^T + sin(x)``: nonlinear and time-dependent, so clocks matter."""

    def __init__(self, seed: int, d: int = 4):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.a = nn.Parameter(torch.randn(d, d, generator=g, dtype=torch.float64) / d)

    def forward(self, t, x, **context):
        return (1 + t) * x @ self.a.T + torch.sin(x)


def _learned(*args, **kw) -> LearnedSplitLayer:
    """Built with float64 as the default dtype: its coefficients are the scheme's exactly."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return LearnedSplitLayer(*args, **kw)
    finally:
        torch.set_default_dtype(old)


def _x():
    return torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)


@pytest.mark.parametrize("spec,method", [("strang", "euler"), ("yoshida4", "rk4"),
                                         ("c:0.25,d:0.5,d+c:0.5,c:0.25", "midpoint"),
                                         pytest.param("c:0.25,d:0.5,d+c:0.5,c:0.25", "exact",
                                                      marks=pytest.mark.heavy)])
def test_a_learned_layer_is_the_plain_layer_at_its_initial_coefficients(spec, method):
    scheme = sn.schemes.resolve(spec)
    d, c = _TimeField(0), _TimeField(1)
    plain = SplitLayer(scheme, d, c, step_size=0.5, method=method)
    learned = _learned(scheme, d, c, step_size=0.5, method=method)
    x = _x()
    with torch.no_grad():
        torch.testing.assert_close(learned(x, 0.3), plain(x, 0.3), rtol=0, atol=1e-12)
        torch.testing.assert_close(learned(x), plain(x, 0.0), rtol=0, atol=1e-12)
        y, states = learned(x, 0.3, return_states=True)
        y0, states0 = plain(x, 0.3, return_states=True)
    assert len(states) == len(states0) == len(scheme.stages)
    for a, b in zip(states, states0):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    torch.testing.assert_close(y, y0, rtol=0, atol=1e-12)
    assert learned.extra_repr() == plain.extra_repr() + ", learned coefficients"


def test_a_learned_layer_takes_the_plain_layers_defaults():
    scheme = sn.schemes.get("strang")
    d, c = _TimeField(0), _TimeField(1)
    plain, learned = SplitLayer(scheme, d, c), _learned(scheme, d, c)
    assert learned.step_size == plain.step_size == 1.0
    assert type(learned.method) is type(plain.method)
    with torch.no_grad():
        torch.testing.assert_close(learned(_x()), plain(_x()), rtol=0, atol=1e-12)


def _at(layer, x, t=0.3):
    with torch.no_grad():
        return layer(t, x)


def test_a_learned_layers_fields_follow_its_coefficients():
    """Per-stage modules: ``field`` is the coefficient-weighted mean of the stage modules (the
    raw coefficients when they sum to ~0), ``ode_field`` is ``sum_i c_i X_i`` (each part of a sum
    stage with the stage's coefficient); a shared module is the field itself."""
    d, c1, c2 = _TimeField(0), _TimeField(1), _TimeField(2)
    layer = _learned(sn.schemes.get("strang"), d, [c1, c2])
    x = _x()
    with torch.no_grad():
        layer.stage_coeffs.copy_(torch.tensor([0.2, 1.5, 0.6], dtype=torch.float64))
    assert layer.field("diffusion") is d
    want = (0.2 * _at(c1, x) + 0.6 * _at(c2, x)) / 0.8
    torch.testing.assert_close(_at(layer.field("convection"), x), want, rtol=0, atol=1e-12)
    want = 0.2 * _at(c1, x) + 1.5 * _at(d, x) + 0.6 * _at(c2, x)
    torch.testing.assert_close(_at(layer.ode_field(), x), want, rtol=0, atol=1e-12)
    with torch.no_grad():
        layer.stage_coeffs.copy_(torch.tensor([0.5, 1.0, -0.5], dtype=torch.float64))
    want = 0.5 * _at(c1, x) - 0.5 * _at(c2, x)
    torch.testing.assert_close(_at(layer.field("convection"), x), want, rtol=0, atol=1e-12)

    summed = _learned(sn.schemes.resolve("c:0.25,d:0.5,d+c:0.5,c:0.25"), d, c1)
    with torch.no_grad():
        summed.stage_coeffs.copy_(torch.tensor([0.25, 0.5, 0.75, 0.25], dtype=torch.float64))
    want = 1.25 * _at(c1, x) + 1.25 * _at(d, x)
    torch.testing.assert_close(_at(summed.ode_field(), x), want, rtol=0, atol=1e-12)


def _learned_model(layers: int, scheme: str = "strang"):
    """A float32 model: the penalty is computed in the coefficients' dtype."""
    torch.manual_seed(0)
    return sn.models.SplitTransformer(32, 16, 2, layers, scheme=scheme, max_len=8,
                                      learn_coefficients=True)


def test_the_order_penalty_goes_to_the_degree_asked_for():
    """Strang's coefficients satisfy the conditions to degree 2 and not 3: the penalty at its
    declared order is 0 and at an explicit order 3 it is not; one layer is enough."""
    for layers in (1, 2):
        model = _learned_model(layers)
        assert len(model.layers) == layers
        with torch.no_grad():
            assert float(order_penalty(model)) < 1e-24
            assert float(order_penalty(model, 2)) < 1e-24
            assert float(order_penalty(model, 3)) > 1e-4
    assert learned_layers(nn.Linear(2, 2)) == []          # a module with no layers learns none


def test_the_penalty_degree_is_the_order_up_to_max_degree_and_1_for_the_exact_flow():
    assert penalty_degree(EXACT_ORDER) == EXACT_PENALTY_DEGREE == 1
    assert penalty_degree(EXACT_ORDER + 1) == 1
    top = conditions.MAX_DEGREE
    assert penalty_degree(top) == top and penalty_degree(1) == 1
    with pytest.raises(ValueError, match=f"up to degree {top}; the scheme declares order "
                                         f"{top + 1}"):
        penalty_degree(top + 1)


def test_a_learned_layer_saves_the_plain_layers_weights_and_its_coefficients_only():
    """The clock matrix is derived from the scheme, not saved: a learned checkpoint is the
    plain one plus ``stage_coeffs``."""
    scheme = sn.schemes.get("yoshida4")
    d, c = _TimeField(0), _TimeField(1)
    plain, learned = SplitLayer(scheme, d, c), _learned(scheme, d, c)
    assert set(learned.state_dict()) == set(plain.state_dict()) | {"stage_coeffs"}


def test_whole_gathers_a_sharded_parameter_and_returns_a_plain_one_as_is():
    class Sharded:                                        # FSDP's DTensor, as whole() sees it
        def full_tensor(self):
            return "gathered"

    p = torch.zeros(3)
    assert whole(Sharded()) == "gathered" and whole(p) is p
