"""SplitLayer: one scheme step as a module, with each field on its own clock."""

import pytest
import torch

import splitnet as sn
from splitnet.integrators.layers import SplitLayer

dt = torch.float64


def _fields(seed=0):
    F, G, x0 = sn.particle_system(n_tokens=5, d_model=8, seed=seed, batch=2)
    return F, G, x0


@pytest.mark.parametrize("method", ["euler", "midpoint", "rk4"])
@pytest.mark.parametrize("name", ["lie-trotter", "strang", "yoshida4", "blanes-moan4"])
def test_layer_equals_scheme_step(name, method):
    F, G, x0 = _fields()
    s = sn.schemes.get(name)
    lay = s.layer(F, G, step_size=0.3, method=method)
    got = lay(x0, 0.6)
    want = s.step(F, G, x0, t=0.6, step_size=0.3, method=method)
    assert (got - want).abs().max().item() < 1e-13


def test_euler_fast_path_is_x_plus_c_h_f():
    F, G, x0 = _fields()
    s = sn.schemes.get("strang")
    lay = SplitLayer(s, F, G, step_size=0.5)
    x = x0 + 0.25 * G(0.0, x0)
    x = x + 0.5 * F(0.0, x)
    x = x + 0.25 * G(0.25, x)
    assert torch.allclose(lay(x0, 0.0), x, atol=1e-14)


def test_each_field_keeps_its_own_clock():
    calls = []

    def rec(name):
        def f(t, x):
            calls.append((name, round(float(t), 12)))
            return 0.1 * x
        return f

    s = sn.schemes.get("strang")
    lay = SplitLayer(s, rec("s"), rec("f"), step_size=2.0)
    lay(torch.ones(3, 2, dtype=dt), 10.0)
    # G(t) for h/2, F(t) for h, G(t + h/2) for h/2  (Macaron paper's G(x, t + h/2))
    assert calls == [("f", 10.0), ("s", 10.0), ("f", 11.0)]


def test_return_states_one_per_stage():
    F, G, x0 = _fields()
    s = sn.schemes.get("yoshida4")
    lay = s.layer(F, G, step_size=0.2)
    out, states = lay(x0, 0.0, return_states=True)
    assert len(states) == 9 and torch.equal(states[-1], out)
    want = []
    s.step(F, G, x0, 0.0, 0.2, "euler", states=want)
    for a, b in zip(states, want):
        assert torch.allclose(a, b, atol=1e-14)


def test_per_stage_fields_used_in_order():
    s = sn.schemes.get("strang")
    seen = []
    conv = [lambda t, x, i=i: (seen.append(i), x)[1] for i in range(2)]
    lay = SplitLayer(s, lambda t, x: x, conv, step_size=1.0)
    lay(torch.ones(2, 2))
    assert seen == [0, 1]


def test_parameters_registered():
    F, G, _ = _fields()
    shared = sn.schemes.get("yoshida4").layer(F, G)
    assert len(list(shared.parameters())) == len(list(F.parameters())) + len(list(G.parameters()))
    per = SplitLayer(sn.schemes.get("strang"), F, [G, G.__class__(8, 16)])
    assert isinstance(per.convection, torch.nn.ModuleList)


def test_bad_inputs():
    F, G, _ = _fields()
    s = sn.schemes.get("strang")
    with pytest.raises(ValueError, match="convection"):
        SplitLayer(s, F, [G])
    with pytest.raises(TypeError, match="callable"):
        SplitLayer(s, F, 3)
    with pytest.raises(ValueError, match="step_size"):
        SplitLayer(s, F, G, step_size=-1.0)
    with pytest.raises(ValueError, match="unknown method"):
        SplitLayer(s, F, G, method="leapfrog")
