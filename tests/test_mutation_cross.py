"""Cross-attention (splitnet.fields.cross) against a hand-written float64 reference, for the
mutants the translation tests let through (issue 33): every head count, with and without
biases, padding in the memory, a memory of one batch row or fixed at construction, the memory
cache as keys and values or as a per-module dict, and dropout only in training."""

import math

import pytest
import torch
import torch.nn.functional as F

from splitnet.fields.cross import CrossAttention

D = 8


def _reference(m: CrossAttention, x, memory, pad=None):
    """``W_o softmax(Q(LN x) K(m)^T / sqrt(d_h) + mask) V(m)`` written out."""
    b, _, d = x.shape
    h, hd = m.n_heads, d // m.n_heads
    if memory.dim() == 2:
        memory = memory.expand(b, -1, -1)
    q = F.linear(F.layer_norm(x, (d,), m.norm.weight, m.norm.bias, m.norm.eps),
                 m.q.weight, m.q.bias)
    kv = F.linear(memory, m.kv.weight, m.kv.bias)
    k, v = kv[..., :d], kv[..., d:]
    out = torch.zeros_like(x)
    for i in range(h):
        cols = slice(i * hd, (i + 1) * hd)
        s = q[..., cols] @ k[..., cols].transpose(1, 2) / math.sqrt(hd)     # (b, n, M)
        if pad is not None:
            s = s.masked_fill(pad[:, None, :], float("-inf"))
        out[..., cols] = s.softmax(-1) @ v[..., cols]
    return F.linear(out, m.proj.weight, m.proj.bias)


def _module(h, bias=True, **kw):
    torch.manual_seed(h)
    m = CrossAttention(D, h, bias=bias, **kw).double().eval()
    with torch.no_grad():                    # LayerNorm's affine parameters off their defaults
        m.norm.weight.uniform_(0.5, 1.5)
        m.norm.bias.uniform_(-0.5, 0.5)
    return m


@pytest.mark.parametrize("h", [1, 2, 4, 8])
@pytest.mark.parametrize("bias", [True, False])
def test_equals_the_reference_with_padding(h, bias):
    m = _module(h, bias)
    assert all((lin.bias is not None) == bias for lin in (m.q, m.kv, m.proj))
    assert m.norm.eps == 1e-5                                  # torch.nn.Transformer's
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, D, generator=g, dtype=torch.float64)
    mem = torch.randn(3, 7, D, generator=g, dtype=torch.float64)
    pad = torch.zeros(3, 7, dtype=torch.bool)
    pad[1, 4:] = True
    pad[2, 1:] = True
    got = m(0.0, x, memory=mem, memory_mask=pad)
    torch.testing.assert_close(got, _reference(m, x, mem, pad), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(m(0.0, x, memory=mem), _reference(m, x, mem), rtol=1e-12,
                               atol=1e-12)
    # a padded memory position is never read: changing it changes nothing
    mem2 = mem.clone()
    mem2[2, 1:] = 100.0
    torch.testing.assert_close(m(0.0, x, memory=mem2, memory_mask=pad), got, rtol=0, atol=0)


def test_a_shared_memory_row_and_a_memory_fixed_at_construction():
    m = _module(2)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 4, D, generator=g, dtype=torch.float64)
    mem = torch.randn(6, D, generator=g, dtype=torch.float64)
    want = _reference(m, x, mem)
    torch.testing.assert_close(m(0.0, x, memory=mem), want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(m(0.0, x, memory=mem[None]), want, rtol=1e-12, atol=1e-12)
    fixed = _module(2, memory=mem)
    torch.testing.assert_close(fixed(0.0, x), want, rtol=1e-12, atol=1e-12)
    # the memory is an input, not a weight: not saved with the module
    assert "memory" not in fixed.state_dict() and "memory" in dict(fixed.named_buffers())
    other = torch.randn(6, D, generator=g, dtype=torch.float64)   # a given memory wins
    torch.testing.assert_close(fixed(0.0, x, memory=other), _reference(m, x, other),
                               rtol=1e-12, atol=1e-12)


def test_memory_keys_values_are_the_projections_per_head():
    m = _module(4)
    mem = torch.randn(2, 5, D, dtype=torch.float64)
    k, v = m.memory_keys_values(mem)
    kv = F.linear(mem, m.kv.weight, m.kv.bias)
    assert k.shape == v.shape == (2, 4, 5, 2)
    torch.testing.assert_close(k, kv[..., :D].view(2, 5, 4, 2).transpose(1, 2))
    torch.testing.assert_close(v, kv[..., D:].view(2, 5, 4, 2).transpose(1, 2))
    k1, _ = m.memory_keys_values(mem[0])          # (M, d): one batch row
    assert k1.shape == (1, 4, 5, 2)
    torch.testing.assert_close(k1[0], k[0])


def test_the_memory_cache_as_keys_and_values_or_a_dict():
    m = _module(2)
    x = torch.randn(2, 3, D, dtype=torch.float64)
    mem = torch.randn(2, 4, D, dtype=torch.float64)
    want = m(0.0, x, memory=mem)
    torch.testing.assert_close(m(0.0, x, memory_cache=m.memory_keys_values(mem)), want,
                               rtol=0, atol=0)
    store: dict = {}
    torch.testing.assert_close(m(0.0, x, memory=mem, memory_cache=store), want, rtol=0, atol=0)
    assert list(store) == [m] and len(store[m]) == 2
    # later calls read the entry (the memory is projected once per forward or generation)
    torch.testing.assert_close(m(0.0, x, memory=torch.zeros_like(mem), memory_cache=store),
                               want, rtol=0, atol=0)
    with pytest.raises(ValueError, match="needs a memory"):
        m(0.0, x, memory_cache={})


def test_the_defaults_no_dropout_and_the_given_norm_eps():
    m = CrossAttention(D, 2).double().train()          # training mode, default dropout: none
    x, mem = torch.randn(2, 3, D, dtype=torch.float64), torch.randn(2, 4, D, dtype=torch.float64)
    torch.testing.assert_close(m(0.0, x, memory=mem), m(0.0, x, memory=mem), rtol=0, atol=0)
    assert m.dropout == 0.0 and CrossAttention(D, 2, norm_eps=1e-3).norm.eps == 1e-3


def test_dropout_only_in_training():
    m = _module(2, dropout=0.5)
    x = torch.randn(2, 3, D, dtype=torch.float64)
    mem = torch.randn(2, 4, D, dtype=torch.float64)
    torch.testing.assert_close(m(0.0, x, memory=mem), _reference(m, x, mem), rtol=1e-12,
                               atol=1e-12)
    m.train()
    torch.manual_seed(0)
    assert not torch.allclose(m(0.0, x, memory=mem), _reference(m, x, mem))
    assert m.resid_dropout.p == 0.5 and m.dropout == 0.5
    m.resid_dropout.p = 0.0          # the attention weights' own dropout, alone
    torch.manual_seed(0)
    assert not torch.allclose(m(0.0, x, memory=mem), _reference(m, x, mem))
