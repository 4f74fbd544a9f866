"""splitnet.training.accel: each speed lever computes what the plain model computes.

Regional compilation traces one graph per kind of field module whatever the scheme (dynamo with
the eager backend here; the inductor compile-time comparison is in tests/test_compile.py under
``-m slow``); an SDPA backend choice, an AdamW implementation and bf16-style master weights
change rounding only.
"""

import pytest
import torch
from torch._dynamo.utils import counters

from splitnet import accel
from splitnet.nets.models import SplitTransformer
from splitnet.training.config import TrainConfig
from splitnet.training.train import build_optimizer


def _model(scheme="lie-trotter", weights="shared", dtype=torch.float64, **kw):
    torch.manual_seed(0)
    return SplitTransformer(17, 16, 2, 3, scheme=scheme, weights=weights, max_len=8,
                            **kw).to(dtype)


def _idx(b=2):
    return torch.randint(0, 17, (b, 6), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("scheme,weights,graphs", [
    ("lie-trotter", "shared", 2), ("yoshida4", "shared", 2), ("strang", "per-stage", 2),
    ("lie-trotter", "shared", 4)])
def test_regional_compile_one_graph_per_kind_of_field(scheme, weights, graphs):
    """Lie–Trotter (2 stages) and Yoshida4 (9 stages) compile the same two graphs, attention
    and feed-forward; gates on one layer add the two gated variants (last case)."""
    torch._dynamo.reset()
    counters.clear()
    gated = {"gate": "sigmoid", "gate_layers": [1]} if graphs == 4 else {}
    m = _model(scheme, weights, **gated)
    ref = m(_idx())
    ref.square().mean().backward()
    g_ref = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    n = accel.compile_regions(accel.field_regions(m), backend="eager")
    assert n == len(accel.field_regions(m)) >= m.n_layers * 2
    out = m(_idx())
    out.square().mean().backward()
    assert counters["stats"]["unique_graphs"] == graphs
    assert torch.allclose(out, ref, atol=1e-12)
    for a, p in zip(g_ref, m.parameters()):
        assert torch.allclose(a, p.grad, atol=1e-12)
    with accel.eager():                 # evaluation: no new graph for another batch shape
        m(_idx(b=5))
    assert counters["stats"]["unique_graphs"] == graphs


def test_regional_default_only_for_long_layers():
    assert not accel.regional_default(_model("lie-trotter"))
    assert not accel.regional_default(_model("strang"))
    assert accel.regional_default(_model("yoshida4"))
    one_layer = SplitTransformer(17, 16, 2, 1, scheme="sssfsfff", weights="per-stage", max_len=8)
    assert not accel.regional_default(one_layer)


@pytest.mark.parametrize("backend", ["math", "flash"])
def test_sdpa_backend_choice_computes_the_same(backend):
    m = _model()
    ref = m(_idx())
    with accel.sdpa_backend(backend):
        out = m(_idx())
    assert torch.allclose(out, ref, atol=1e-12)


def test_sdpa_backend_refuses_what_cannot_run_and_bad_names():
    m = _model()
    with pytest.raises(RuntimeError), accel.sdpa_backend("cudnn"):    # no cuDNN on the CPU
        m(_idx())
    with pytest.raises(ValueError, match="sdpa backend"):
        accel.sdpa_backend("fast")
    with pytest.raises(ValueError, match="compile mode"):
        accel.compile_kwargs("fastest")


def _train(model, opt, steps=3):
    for _ in range(steps):
        model(_idx()).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


@pytest.mark.parametrize("impl", ["fused", "foreach", "for-loop"])
def test_adamw_implementations_agree(impl):
    cfg = TrainConfig(adamw="auto", lr=1e-2)
    a, b = _model(dtype=torch.float32), _model(dtype=torch.float32)
    _train(a, build_optimizer(a, cfg))
    _train(b, build_optimizer(b, cfg.replace(adamw=impl)))
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.allclose(p, q, atol=1e-6)


@pytest.mark.parametrize("accum", [1, 2])
def test_master_weights_step_equals_plain_training(accum):
    """With a float64 compute copy of a float32 master, training must equal plain float32
    training up to float32 rounding: the gradients reach the master (accumulated over
    micro-batches), the optimiser updates it, the copy follows."""
    cfg = TrainConfig(lr=1e-2)
    plain, master = _model(dtype=torch.float32), _model(dtype=torch.float32)
    opt_p, opt_m = build_optimizer(plain, cfg), build_optimizer(master, cfg)
    mw = accel.MasterWeights(master, torch.float64, opt_m)
    assert all(p.dtype == torch.float64 for p in mw.copy.parameters())
    for _ in range(3):
        for model in (plain, mw.copy):
            for _ in range(accum):
                (model(_idx()).square().mean() / accum).backward()
        assert all(q.grad is None for q in mw.copy.parameters())
        for p, q in zip(plain.parameters(), master.parameters()):
            assert q.grad.dtype == torch.float32 and torch.allclose(p.grad, q.grad, atol=1e-6)
        for opt in (opt_p, opt_m):
            opt.step()
            opt.zero_grad(set_to_none=True)
    for p, q, c in zip(plain.parameters(), master.parameters(), mw.copy.parameters()):
        assert torch.allclose(p, q, atol=1e-5) and torch.equal(c, q.double())


def test_master_weights_bf16_copy_is_tied_and_rounded():
    cfg = TrainConfig(lr=1e-2)
    m = _model(dtype=torch.float32)
    opt = build_optimizer(m, cfg)
    mw = accel.MasterWeights(m, torch.bfloat16, opt)
    assert mw.copy.head.weight is mw.copy.tok_emb.weight
    _train(mw.copy, opt, steps=2)
    for p, c in zip(m.parameters(), mw.copy.parameters()):
        assert p.dtype == torch.float32 and c.dtype == torch.bfloat16
        assert torch.equal(c, p.to(torch.bfloat16))
