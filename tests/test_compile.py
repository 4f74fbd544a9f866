"""``torch.compile(fullgraph=True)`` traces every scheme's network without a graph break.

The default run checks the trace (dynamo, ``backend="eager"``: a graph break raises under
``fullgraph=True``) for four schemes (the rest, up to 45 stages a layer, under ``-m slow``); the
slow run also compiles every registry scheme and a pattern with inductor, runs forward and backward and compares with eager (about 30-60 s per scheme on 2 CPU
cores, hence ``-m slow``).
"""

import pytest
import torch

import splitnet as sn
from splitnet.models import SplitTransformer

SCHEMES = sn.schemes.available() + ["sssfsfff"]
QUICK = ["lie-trotter", "strang", "yoshida4", "sssfsfff"]


def _model(scheme, weights):
    torch.manual_seed(0)
    return SplitTransformer(17, 16, 2, 2, scheme=scheme, weights=weights, gate="sigmoid",
                            gate_layers=[1], max_len=8)


def _idx():
    return torch.randint(0, 17, (2, 6), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("scheme", [
    s if s in QUICK else pytest.param(s, marks=pytest.mark.slow) for s in SCHEMES])
def test_fullgraph_trace_every_scheme(scheme):
    torch._dynamo.reset()
    m = _model(scheme, "per-stage" if scheme in ("strang", "yoshida4") else "shared")
    cm = torch.compile(m, fullgraph=True, backend="eager")
    out, states = cm(_idx(), return_states=True)
    ref, ref_states = m(_idx(), return_states=True)
    assert torch.allclose(out, ref, atol=1e-6)
    assert torch.allclose(states, ref_states, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("weights", ["shared", "per-stage"])
def test_inductor_forward_backward_every_scheme(scheme, weights):
    torch._dynamo.reset()
    m = _model(scheme, weights)
    cm = torch.compile(m, fullgraph=True)
    out = cm(_idx())
    out.square().mean().backward()
    g = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    ref = m(_idx())
    ref.square().mean().backward()
    assert torch.allclose(out, ref, atol=1e-5)
    for a, p in zip(g, m.parameters()):
        assert torch.allclose(a, p.grad, atol=1e-5)
