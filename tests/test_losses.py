"""splitnet.tasks.losses: the chunked linear + cross-entropy equals the plain one (value and both
gradients, float64), with any chunk size, under no_grad, traced by dynamo, and inside LMLoss on
real networks; ``features`` is what ``forward`` feeds the head."""

import pytest
import torch
import torch.nn.functional as F

from splitnet.nets.models import SplitTransformer
from splitnet.nets.reference import RefGPT
from splitnet.tasks.losses import LMLoss, linear_cross_entropy, plain_cross_entropy


def _data(n=37, d=8, v=11, seed=0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(n, d, dtype=torch.float64, generator=g).requires_grad_()
    w = torch.randn(v, d, dtype=torch.float64, generator=g).requires_grad_()
    y = torch.randint(0, v, (n,), generator=g)
    return h, w, y


def _plain(h, w, y):
    return F.cross_entropy(h @ w.t(), y)


@pytest.mark.parametrize("chunk", [1, 5, 36, 37, 1000])
def test_chunked_equals_plain_value_and_gradients(chunk):
    h, w, y = _data()
    ref = _plain(h, w, y)
    g_ref = torch.autograd.grad(2.5 * ref, (h, w))
    out = linear_cross_entropy(h, w, y, chunk_size=chunk)
    g_out = torch.autograd.grad(2.5 * out, (h, w))      # a non-unit incoming gradient
    assert out.dtype == torch.float64
    assert torch.allclose(out, ref, rtol=0, atol=1e-13)
    for a, b in zip(g_out, g_ref):
        assert torch.allclose(a, b, rtol=0, atol=1e-13)


def test_chunked_gradient_of_one_input_only_and_no_grad():
    h, w, y = _data()
    hd = h.detach()
    (gw,) = torch.autograd.grad(linear_cross_entropy(hd, w, y, 4), (w,))
    assert torch.allclose(gw, torch.autograd.grad(_plain(hd, w, y), (w,))[0], atol=1e-13)
    with torch.no_grad():
        v = linear_cross_entropy(h, w, y, 4)
    assert not v.requires_grad and torch.allclose(v, _plain(h, w, y).detach(), atol=1e-13)


def test_chunked_accumulates_into_a_tied_weight():
    # the head is the embedding: the loss's weight gradient adds to the embedding's
    h, w, y = _data()
    idx = torch.tensor([0, 3, 3, 7])

    def total(loss_fn):
        emb = w[idx].sum()
        return torch.autograd.grad(loss_fn(h, w, y) + emb, (w,))[0]

    assert torch.allclose(total(lambda *a: linear_cross_entropy(*a, chunk_size=6)),
                          total(_plain), atol=1e-13)


def test_chunked_under_dynamo_fullgraph():
    torch._dynamo.reset()
    h, w, y = _data()
    f = torch.compile(lambda h, w, y: linear_cross_entropy(h, w, y, chunk_size=16),
                      fullgraph=True, backend="aot_eager")
    out = f(h, w, y)
    g = torch.autograd.grad(out, (h, w))
    ref = _plain(h, w, y)
    assert torch.allclose(out, ref, atol=1e-13)
    for a, b in zip(g, torch.autograd.grad(ref, (h, w))):
        assert torch.allclose(a, b, atol=1e-13)


def test_chunked_bf16_under_autocast_matches_plain_within_bf16():
    h, w, y = _data(n=64, d=32, v=50)
    h32, w32 = h.detach().float().requires_grad_(), w.detach().float().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = plain_cross_entropy(F.linear(h32, w32), y)
        out = linear_cross_entropy(h32, w32, y, chunk_size=16)
    assert out.dtype == torch.float32
    assert abs(float(out.detach() - ref.detach())) < 2e-2 * float(ref.detach())
    g_ref = torch.autograd.grad(ref, (h32, w32))
    g_out = torch.autograd.grad(out, (h32, w32))
    for a, b in zip(g_out, g_ref):
        assert a.dtype == torch.float32
        assert (a - b).norm() < 0.05 * b.norm()


def test_bad_inputs():
    h, w, y = _data()
    with pytest.raises(ValueError, match="chunk_size"):
        linear_cross_entropy(h, w, y, chunk_size=0)
    with pytest.raises(ValueError, match="targets"):
        linear_cross_entropy(h, w, y[:-1])
    with pytest.raises(ValueError, match="weight"):
        linear_cross_entropy(h, w[:, :-1], y)
    with pytest.raises(ValueError, match="loss must be one of"):
        LMLoss(torch.nn.Linear(2, 2), impl="fused")


MODELS = [("lie-trotter", "shared"), ("strang", "per-stage"), ("yoshida4", "shared"),
          ("sssfsfff", "per-stage")]


@pytest.mark.parametrize("scheme,weights", MODELS)
def test_features_then_head_is_forward(scheme, weights):
    torch.manual_seed(0)
    m = SplitTransformer(17, 16, 2, 2, scheme=scheme, weights=weights, gate="sigmoid",
                         gate_layers=[1], max_len=8).double()
    idx = torch.randint(0, 17, (2, 6))
    assert torch.equal(m.head(m.features(idx)), m(idx))


def test_reference_features_then_head_is_forward():
    torch.manual_seed(0)
    ref = RefGPT(17, 16, 2, 2, 8).double()
    idx = torch.randint(0, 17, (2, 6))
    assert ref.head is ref.lm_head and torch.equal(ref.head(ref.features(idx)), ref(idx))


@pytest.mark.parametrize("scheme,weights", MODELS[:2])
def test_lmloss_chunked_equals_plain_on_a_network(scheme, weights):
    torch.manual_seed(0)
    m = SplitTransformer(17, 16, 2, 2, scheme=scheme, weights=weights, max_len=8).double()
    idx, y = torch.randint(0, 17, (3, 8)), torch.randint(0, 17, (3, 8))

    def run(impl, head_fn=None):
        m.zero_grad()
        loss = LMLoss(m, impl, chunk_size=5, head_fn=head_fn)(idx, y)
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in m.parameters()]

    ref, g_ref = run("plain")
    assert torch.allclose(ref, plain_cross_entropy(m(idx), y).detach(), atol=0)
    regional = LMLoss(m, "plain").head_loss            # the regional path: features + head
    for loss, grads in (run("chunked"), run("plain", regional)):
        assert torch.allclose(loss, ref, atol=1e-13)
        for a, b in zip(grads, g_ref):
            assert torch.allclose(a, b, atol=1e-12)
