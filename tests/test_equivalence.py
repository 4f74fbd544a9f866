"""The networks are exactly the integrators: float64, weights copied, tolerance 1e-6 (seen: ~1e-15).

* Lie–Trotter + Euler + h = 1 + shared weights == a hand-written pre-LN GPT block stack, and ==
  a stack of ``torch.nn.TransformerEncoderLayer(norm_first=True, batch_first=True, "gelu")``.
* Strang + Euler + h = 1 + per-stage weights == the Macaron layer (1/2 FFN, attention, 1/2 FFN,
  each FFN of half width).
* a sandwich pattern == the Sandwich Transformer's reordered sublayer stack.
* ``model.layers[k](x, t)`` == ``scheme.step(..., method="euler")`` on the layer's own fields.

The references below do their own arithmetic (explicit softmax with a mask, F.layer_norm,
F.linear) rather than calling splitnet's fields, so a shared bug cannot cancel.
"""

import math

import pytest
import torch
import torch.nn.functional as F

import splitnet as sn
from splitnet.nets.models import SplitTransformer

V, D, H, L, DFF, T, B = 37, 32, 4, 3, 64, 9, 2
TOL = 1e-6


def _model(scheme="lie-trotter", weights="shared", n_layers=L, causal=True, seed=0, **kw):
    torch.manual_seed(seed)
    m = SplitTransformer(V, D, H, n_layers, scheme=scheme, causal=causal, weights=weights,
                         d_ff=DFF, max_len=16, **kw).double().eval()
    # GPT-2 init zeroes biases and sets LayerNorm to identity: perturb every parameter so
    # a reference that forgot a bias or a norm's affine part would fail.
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return m


def _idx(seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, V, (B, T), generator=g)


# ------------------------------------------------------------------------------------------
# Hand-written reference sub-layers (explicit math, no splitnet code).

def ref_ln(x, ln):
    return F.layer_norm(x, (x.shape[-1],), ln.weight, ln.bias, ln.eps)


def ref_attn(x, a, causal=True):
    """Pre-LN multi-head attention with explicit softmax; ``a`` is a splitnet Attention (read
    for its tensors only)."""
    b, n, d = x.shape
    h = ref_ln(x, a.norm)
    q, k, v = F.linear(h, a.qkv.weight, a.qkv.bias).split(d, dim=-1)
    hd = d // a.n_heads
    q, k, v = (z.reshape(b, n, a.n_heads, hd).permute(0, 2, 1, 3) for z in (q, k, v))
    s = q @ k.transpose(-1, -2) / math.sqrt(hd)
    if causal:
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    y = (s.softmax(-1) @ v).permute(0, 2, 1, 3).reshape(b, n, d)
    return F.linear(y, a.proj.weight, a.proj.bias)


def ref_ffn(x, f):
    h = ref_ln(x, f.norm)
    return F.linear(F.gelu(F.linear(h, f.fc1.weight, f.fc1.bias)), f.fc2.weight, f.fc2.bias)


def ref_gpt_logits(m, idx, blocks):
    """nanoGPT-style forward: embeddings, ``blocks(x)``, final LN, tied head."""
    x = m.tok_emb.weight[idx] + m.pos_emb.weight[: idx.shape[1]]
    x = blocks(x)
    return F.linear(ref_ln(x, m.norm), m.tok_emb.weight)


# ------------------------------------------------------------------------------------------

def test_lie_trotter_equals_pre_ln_block_stack():
    m = _model("lie-trotter")
    idx = _idx()

    def blocks(x):
        for layer in m.layers:
            x = x + ref_attn(x, layer.diffusion)   # x = x + attn(ln_1(x))
            x = x + ref_ffn(x, layer.convection)   # x = x + mlp(ln_2(x))
        return x

    with torch.no_grad():
        got, want = m(idx), ref_gpt_logits(m, idx, blocks)
    assert got.dtype == torch.float64
    assert (got - want).abs().max().item() < TOL


@pytest.mark.parametrize("causal", [True, False])
def test_lie_trotter_equals_torch_transformer_encoder_layers(causal):
    m = _model("lie-trotter", causal=causal)
    enc = []
    for layer in m.layers:
        a, f = layer.diffusion, layer.convection
        e = torch.nn.TransformerEncoderLayer(D, H, dim_feedforward=DFF, dropout=0.0,
                                             activation="gelu", batch_first=True,
                                             norm_first=True).double().eval()
        with torch.no_grad():
            # torch keeps two LayerNorms in the block; ours live inside each field.
            e.norm1.weight.copy_(a.norm.weight), e.norm1.bias.copy_(a.norm.bias)
            e.norm2.weight.copy_(f.norm.weight), e.norm2.bias.copy_(f.norm.bias)
            # in_proj_weight rows are [W_q; W_k; W_v], as our fused qkv.
            e.self_attn.in_proj_weight.copy_(a.qkv.weight)
            e.self_attn.in_proj_bias.copy_(a.qkv.bias)
            e.self_attn.out_proj.weight.copy_(a.proj.weight)
            e.self_attn.out_proj.bias.copy_(a.proj.bias)
            e.linear1.weight.copy_(f.fc1.weight), e.linear1.bias.copy_(f.fc1.bias)
            e.linear2.weight.copy_(f.fc2.weight), e.linear2.bias.copy_(f.fc2.bias)
        enc.append(e)
    x0 = torch.randn(B, T, D, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    # torch's causal handling: a float -inf upper-triangular mask, with is_causal as a hint.
    mask = torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64) \
        if causal else None
    with torch.no_grad():
        want = x0
        for e in enc:
            want = e(want, src_mask=mask, is_causal=causal)
        got = x0
        for k, layer in enumerate(m.layers):
            got = layer(got, float(k))
    assert (got - want).abs().max().item() < TOL
    # The test has teeth: dropping the causal mask on one side changes the answer.
    if causal:
        with torch.no_grad():
            other = x0
            for e in enc:
                other = e(other)
        assert (other - want).abs().max().item() > 1e-3


def test_strang_per_stage_equals_macaron():
    m = _model("strang", weights="per-stage")
    idx = _idx()
    for layer in m.layers:
        assert [f.fc1.out_features for f in layer.convection] == [DFF // 2, DFF // 2]

    def blocks(x):
        for layer in m.layers:
            f1, f2 = layer.convection
            x = x + 0.5 * ref_ffn(x, f1)          # half-step FFN (half width)
            x = x + ref_attn(x, layer.diffusion[0])
            x = x + 0.5 * ref_ffn(x, f2)          # second half-step FFN
        return x

    with torch.no_grad():
        got, want = m(idx), ref_gpt_logits(m, idx, blocks)
    assert (got - want).abs().max().item() < TOL

    def no_half(x):  # without the 1/2 factors it is a different network
        for layer in m.layers:
            f1, f2 = layer.convection
            x = x + ref_ffn(x, f1)
            x = x + ref_attn(x, layer.diffusion[0])
            x = x + ref_ffn(x, f2)
        return x

    with torch.no_grad():
        assert (ref_gpt_logits(m, idx, no_half) - want).abs().max().item() > 1e-3


@pytest.mark.parametrize("pattern", ["sssfsfsfff", "ssfsff", "sffs"])
def test_sandwich_pattern_equals_reordered_stack(pattern):
    # A pattern is one step over the whole network with coefficient 1/n per letter: with
    # h = n (letters per field) and per-stage weights every sublayer is x + f(x).
    n = pattern.count("s")
    m = _model(pattern, weights="per-stage", n_layers=1, step_size=float(n))
    idx = _idx()
    layer = m.layers[0]
    assert [f.fc1.out_features for f in layer.convection] == [DFF] * pattern.count("f")

    def blocks(x):
        attn, ffn = iter(layer.diffusion), iter(layer.convection)
        for ch in pattern:   # Press et al. 2020: the sublayers in the order of the string
            x = x + (ref_attn(x, next(attn)) if ch == "s" else ref_ffn(x, next(ffn)))
        return x

    with torch.no_grad():
        got, want = m(idx), ref_gpt_logits(m, idx, blocks)
    assert (got - want).abs().max().item() < TOL


@pytest.mark.parametrize("name", sn.schemes.available())
@pytest.mark.parametrize("weights", ["shared", "per-stage"])
def test_layer_forward_equals_scheme_step_euler(name, weights):
    m = _model(name, weights=weights, n_layers=2, step_size=0.7)
    x = torch.randn(B, T, D, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    layer = m.layers[1]
    with torch.no_grad():
        got = layer(x, 0.7)
        want = m.scheme.step(layer.diffusion, layer.convection, x, t=0.7, step_size=0.7,
                             method="euler")
        got2, states = layer(x, 0.7, return_states=True)
    assert (got - want).abs().max().item() < 1e-12
    assert torch.equal(got, got2) and len(states) == len(m.scheme.stages)
    assert torch.equal(states[-1], got)
