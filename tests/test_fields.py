"""Fields: attention (causal, padding, dropout, leading dims), feed-forward, SDU gate."""

import math

import pytest
import torch

from splitnet.fields import SDU, Attention, FeedForward, Gated

D = 16
dt = torch.float64


def _x(*shape, seed=0):
    return torch.randn(*shape, dtype=dt, generator=torch.Generator().manual_seed(seed))


def test_causal_attention_ignores_the_future():
    torch.manual_seed(0)
    a = Attention(D, 4, causal=True).double()
    x = _x(2, 7, D)
    y = x.clone()
    y[:, 4:] += _x(2, 3, D, seed=1)                  # change the future of token 3
    fa, fb = a(0.0, x), a(0.0, y)
    assert torch.allclose(fa[:, :4], fb[:, :4], atol=1e-13)
    assert not torch.allclose(fa[:, 4:], fb[:, 4:], atol=1e-3)
    a.causal = False                                 # without the mask the past sees it
    assert not torch.allclose(a(0.0, x)[:, :4], a(0.0, y)[:, :4], atol=1e-3)


def test_attention_accepts_any_leading_dims():
    torch.manual_seed(0)
    a = Attention(D, 4).double()
    x = _x(3, 2, 5, D)
    want = torch.stack([a(0.0, x[i]) for i in range(3)])
    assert torch.allclose(a(0.0, x), want, atol=1e-13)
    assert torch.allclose(a(0.0, x[0, 0]), want[0, 0], atol=1e-13)   # unbatched (n, d)


def test_attention_dropout_only_in_training():
    torch.manual_seed(0)
    a = Attention(D, 4, dropout=0.5).double()
    x = _x(2, 5, D)
    a.eval()
    assert torch.equal(a(0.0, x), a(0.0, x))
    a.train()
    assert not torch.allclose(a(0.0, x), a(0.0, x))


def test_attention_rejects_bad_heads():
    with pytest.raises(ValueError, match="divisible"):
        Attention(10, 4)


def test_feedforward_formula_and_activation():
    torch.manual_seed(0)
    f = FeedForward(D, 24, activation="relu").double()
    x = _x(2, 3, D)
    h = torch.nn.functional.layer_norm(x, (D,), f.norm.weight, f.norm.bias, f.norm.eps)
    want = f.fc2(torch.relu(f.fc1(h)))
    assert torch.allclose(f(0.0, x), want, atol=1e-13)
    with pytest.raises(ValueError, match="unknown activation"):
        FeedForward(D, 24, activation="swish9")


@pytest.mark.parametrize("gate", ["sigmoid", "tanh"])
def test_sdu_formula_and_gated_sum(gate):
    torch.manual_seed(0)
    s = SDU(D, gate).double()
    x = _x(2, 3, D)
    psi = torch.sigmoid if gate == "sigmoid" else torch.tanh
    want = psi(x @ s.w1.weight.T + s.w1.bias) * (x @ s.w2.weight.T + s.w2.bias)
    assert torch.allclose(s(x), want, atol=1e-13)
    f = FeedForward(D, 8).double()
    g = Gated(f, D, gate).double()
    assert torch.allclose(g(0.0, x), g.field(0.0, x) + g.sdu(x), atol=1e-13)
    with pytest.raises(ValueError, match="gate"):
        SDU(D, "relu")


def test_attention_is_scaled_dot_product():
    # one head, identity projections: F(x) = softmax(h h^T / sqrt(d)) h with h = LN(x)
    a = Attention(4, 1).double()
    with torch.no_grad():
        a.qkv.weight.copy_(torch.cat([torch.eye(4)] * 3).double())
        a.qkv.bias.zero_()
        a.proj.weight.copy_(torch.eye(4).double())
        a.proj.bias.zero_()
    x = _x(5, 4)
    h = torch.nn.functional.layer_norm(x, (4,))
    want = torch.softmax(h @ h.T / math.sqrt(4), -1) @ h
    assert torch.allclose(a(0.0, x), want, atol=1e-13)


@pytest.mark.parametrize("rotary", [0, 4])
def test_causal_attention_with_padding_is_the_unpadded_computation(rotary):
    """Right-padded rows of lengths 7, 4 and 5 with a padding mask: on each row's tokens the
    output equals the row computed alone without padding, and no token reads a later one (a
    later token, real or padding, perturbed leaves every earlier output as it was)."""
    torch.manual_seed(0)
    a = Attention(D, 4, causal=True, rotary_dims=rotary).double()
    lengths = (7, 4, 5)
    x = _x(3, 7, D)
    pad = torch.arange(7)[None, :] >= torch.tensor(lengths)[:, None]     # True at padding
    out = a(0.0, x, padding_mask=pad)
    for i, n in enumerate(lengths):
        torch.testing.assert_close(out[i, :n], a(0.0, x[i:i + 1, :n])[0], rtol=0, atol=1e-13)
    for j in range(1, 7):                            # perturb token j and everything after it
        y = x.clone()
        y[:, j:] += _x(3, 7 - j, D, seed=j)
        moved = a(0.0, y, padding_mask=pad)
        torch.testing.assert_close(moved[:, :j], out[:, :j], rtol=0, atol=1e-13)
        real = ~pad[:, j]
        assert (moved[real, j] - out[real, j]).abs().amax(-1).min() > 1e-3   # it does see j
