"""Attention (splitnet.fields.attention), stated where mutation testing found it unstated
(``python3 -m splitnet.dev mutate splitnet/fields/attention.py``): the field equals a written-out
softmax attention (causal or not, padded or not, leading axes, rotary), a key/value cache gives
the rows of the full computation, a padded causal row never reads a later token. docs/testing.md
lists the mutants each test catches."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from splitnet.fields.attention import Attention
from splitnet.fields.rotary import Rotary

D, H = 8, 2


def _att(causal, rotary_dims=0, dropout=0.0, **kw):
    torch.manual_seed(0)
    return Attention(D, H, causal=causal, dropout=dropout, rotary_dims=rotary_dims,
                     **kw).double().eval()


def _x(*shape):
    return torch.randn(*shape, D, generator=torch.Generator().manual_seed(1),
                       dtype=torch.float64)


def _reference(att, x, padding=None, eps=1e-5, rotary_dims=0):
    """Softmax attention written out: pre-norm (LayerNorm with ``eps``), per-head scores /
    sqrt(d_h) (rotary on ``rotary_dims`` channels, base 10000), the future (when causal) and
    padded keys at -inf, the output projection."""
    *lead, n, d = x.shape
    hd = d // att.n_heads
    h = F.layer_norm(x.reshape(-1, n, d), (d,), att.norm.weight, att.norm.bias, eps)
    q, k, v = att.qkv(h).split(d, dim=-1)
    q, k, v = (z.reshape(-1, n, att.n_heads, hd).transpose(1, 2) for z in (q, k, v))
    if rotary_dims:
        q, k = Rotary(rotary_dims, 10000.0)(q, k)
    scores = q @ k.transpose(-1, -2) / math.sqrt(hd)
    blocked = torch.zeros(n, n, dtype=torch.bool)
    if att.causal:
        blocked = blocked | torch.ones(n, n, dtype=torch.bool).triu(1)
    if padding is not None:
        blocked = blocked | padding.reshape(-1, 1, 1, n)
    scores = scores.masked_fill(blocked, -math.inf)
    y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(*lead, n, d)
    return att.proj(y)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("rotary_dims", [0, 2, 4])   # 4: a frequency set by the base
@pytest.mark.parametrize("shape", [(2, 5), (3, 2, 5)])
def test_attention_is_softmax_attention_written_out(causal, rotary_dims, shape):
    att, x = _att(causal, rotary_dims), _x(*shape)
    with torch.no_grad():
        torch.testing.assert_close(att(0.0, x), _reference(att, x, rotary_dims=rotary_dims),
                                   rtol=0, atol=1e-12)


def test_the_norm_eps_and_the_bias_options_are_the_ones_given():
    att, x = _att(True, norm_eps=0.5, bias=False), _x(2, 5)
    assert att.qkv.bias is None and att.proj.bias is None and att.norm.eps == 0.5
    with torch.no_grad():
        torch.testing.assert_close(att(0.0, x), _reference(att, x, eps=0.5), rtol=0, atol=1e-12)
    assert _att(True).qkv.bias is not None


@pytest.mark.parametrize("causal", [False, True])
def test_padded_keys_are_not_attended_and_real_rows_equal_the_unpadded_computation(causal):
    att, x = _att(causal), _x(2, 6)
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[0, 4:] = True                                     # row 0: 4 tokens and 2 of padding
    with torch.no_grad():
        y = att(0.0, x, padding_mask=pad)
        torch.testing.assert_close(y, _reference(att, x, pad), rtol=0, atol=1e-12)
        torch.testing.assert_close(y[0, :4], att(0.0, x[:1, :4])[0], rtol=0, atol=1e-12)
        torch.testing.assert_close(y[1], att(0.0, x[1:])[0], rtol=0, atol=1e-12)
        x2 = x.clone()
        x2[0, 4:] += 10.0                                 # padding changed: real rows are not
        torch.testing.assert_close(att(0.0, x2, padding_mask=pad)[0, :4], y[0, :4], rtol=0,
                                   atol=1e-12)
        if causal:                                        # a later token is never read
            x3 = x.clone()
            x3[:, 3] += 10.0
            y3 = att(0.0, x3, padding_mask=pad)
            torch.testing.assert_close(y3[:, :3], y[:, :3], rtol=0, atol=1e-12)


class _Cache:
    """The key/value cache protocol: ``length`` and ``append(k, v) -> (k_all, v_all)``."""

    def __init__(self):
        self.k = self.v = None

    @property
    def length(self):
        return 0 if self.k is None else self.k.shape[2]

    def append(self, k, v):
        self.k = k if self.k is None else torch.cat([self.k, k], dim=2)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=2)
        return self.k, self.v


@pytest.mark.parametrize("rotary_dims", [0, 2])
@pytest.mark.parametrize("chunks", [(1, 1, 1, 1, 1, 1), (3, 1, 2), (1, 3, 2), (2, 4), (6,)])
def test_a_cached_forward_gives_the_rows_of_the_full_causal_attention(chunks, rotary_dims):
    att, x = _att(True, rotary_dims), _x(2, 6)
    cache, rows, start = _Cache(), [], 0
    with torch.no_grad():
        full = att(0.0, x)
        for n in chunks:
            rows.append(att(0.0, x[:, start:start + n], cache))
            start += n
    assert cache.length == 6
    torch.testing.assert_close(torch.cat(rows, dim=1), full, rtol=0, atol=1e-12)


def test_a_cache_needs_causal_attention_and_dropout_acts_in_training_only():
    assert _att(True).supports_cache is True and _att(False).supports_cache is False
    assert _att(True).extra_repr() == f"d_model={D}, n_heads={H}, causal=True"
    att, x = _att(True, dropout=0.5), _x(2, 5)
    with torch.no_grad():
        torch.testing.assert_close(att(0.0, x), _reference(att, x), rtol=0, atol=1e-12)
        att.train()
        torch.manual_seed(3)
        a = att(0.0, x)
    assert not torch.allclose(a, _reference(att, x))
