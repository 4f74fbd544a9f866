"""Proof against an independent implementation: x-transformers (the optional extra ``peers``).

x-transformers builds a pre-norm ``Decoder``, a Macaron stack (``macaron=True``), a Sandwich
stack (``sandwich_coef=k``) and any sublayer string (``custom_layers``). Each one's weights are
loaded into a SplitTransformer of the matching scheme and both run in float64: every
intermediate state (the input of every sublayer, x-transformers' ``layer_hiddens``) and the
logits agree to rounding. So the seed architectures are proven equal to an implementation that
is not ours, not only to our own reference.

The map (``load_into_splitnet``) is test scaffolding, on purpose: x-transformers has about a
hundred options that change the maths (rotary positions, gates, residual variants, ...) and a
library importer would have to detect each one; here both sides are built from the few options
the map handles, so nothing unsupported can slip through. Each difference is mapped explicitly:

* **LayerNorm**: x-transformers' has no bias and, with ``norm_add_unit_offset=True`` (its
  default), stores ``gamma - 1`` (the weight is ``stored + 1``): ours gets weight
  ``stored + 1`` and bias 0. Both use torch's LayerNorm, eps 1e-5.
* **Attention**: ``to_q``, ``to_k``, ``to_v``, ``to_out`` have no biases: our fused ``qkv`` is the
  three stacked, its bias and ``proj``'s bias are 0. ``attn_dim_head = d_model / heads`` so the
  head layout is ours; scale ``dim_head^-1/2`` in both.
* **Feed-forward**: Linear (bias) -> exact GELU -> Linear (bias): ours with ``activation="gelu"``.
* **Residuals and coefficients**: x-transformers computes ``x + s_i f_i(norm(x))`` with
  ``s_i = 0.5`` for a Macaron feed-forward (``Scale(0.5, ff)``, full width) and 1 otherwise; ours
  ``x + c_i h f'_i(x)``. So ``f'_i = (s_i / (c_i h)) f_i``: the output projection (weight and
  bias) is multiplied by ``s_i / (c_i h)``, which is exactly 1 in every standard case
  (Lie–Trotter and Strang at h = 1; a pattern with n letters of each field at h = n) and a
  genuine rescaling only for a ``custom_layers`` string with unequal counts.
* **Widths**: a per-stage feed-forward is ``d_ff * n_diffusion / n_convection`` wide, so
  ``d_ff = inner * n_convection / n_diffusion`` (Macaron: twice x-transformers' inner width).
* **Precision** (not maths): x-transformers computes its softmax in float32 whatever the input
  dtype (``F.softmax(sim, dtype=torch.float32)``, a ~1e-7 difference); the peer here runs it in
  float64 so that agreement to 1e-12 means the same maths. A control keeps the float32 softmax
  and sees agreement only to float32 rounding.
* **Embeddings and head**: x-transformers scales its learned positions by ``d_model^-1/2`` (ours:
  the scaled table) and a tied head by ``d_model^-1/2`` (folded into our final LayerNorm's
  weight, whose bias is 0: ``s (LN(x) g) E^T = (LN(x) (s g)) E^T``).
"""

from __future__ import annotations

from functools import partial

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import splitnet as sn

xt = pytest.importorskip("x_transformers")
from x_transformers.attend import Attend  # noqa: E402

D, H, V, T = 16, 2, 61, 12


def _peer(seed=0, ff_mult=4, float32_softmax=False, **layers) -> nn.Module:
    """An x-transformers language model (learned positions, tied head) with every parameter
    moved off its initial value (so zero-initialised norms and biases are mapped too), its
    softmax in float64 unless ``float32_softmax`` (its default, whatever the input dtype)."""
    torch.manual_seed(seed)
    dec = xt.Decoder(dim=D, heads=H, attn_dim_head=D // H, ff_mult=ff_mult, **layers)
    model = xt.TransformerWrapper(num_tokens=V, max_seq_len=T, attn_layers=dec,
                                  tie_embedding=True).double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    for m in model.modules():
        if isinstance(m, Attend) and not float32_softmax:
            m.attn_fn = partial(F.softmax, dim=-1)       # was F.softmax(..., dtype=float32)
    return model


def _norm(ours: nn.LayerNorm, theirs, scale: float = 1.0) -> None:
    """x-transformers' bias-free LayerNorm (weight stored minus its unit offset) into ours."""
    assert isinstance(theirs, xt.x_transformers.LayerNorm)
    ours.weight.copy_((theirs.gamma + float(theirs.unit_offset)) * scale)
    ours.bias.zero_()
    assert ours.eps == theirs.ln.eps


def _sublayer(ours: nn.Module, norm, block, factor: float) -> None:
    """One x-transformers sublayer (pre-norm + attention or feed-forward) into a field."""
    _norm(ours.norm, norm)
    if isinstance(block, xt.x_transformers.Scale):        # Macaron's 0.5 * ff
        factor *= block.scale
        block = block.fn
    if isinstance(block, xt.x_transformers.Attention):
        assert isinstance(ours, sn.fields.Attention)
        ours.qkv.weight.copy_(torch.cat([block.to_q.weight, block.to_k.weight,
                                         block.to_v.weight]))
        ours.qkv.bias.zero_()
        ours.proj.weight.copy_(block.to_out.weight * factor)
        ours.proj.bias.zero_()
        return
    assert isinstance(ours, sn.fields.FeedForward) and ours.activation == "gelu"
    fc1, fc2 = (m for m in block.modules() if isinstance(m, nn.Linear))
    assert (fc1.weight.shape, fc2.weight.shape) == (ours.fc1.weight.shape, ours.fc2.weight.shape)
    ours.fc1.weight.copy_(fc1.weight)
    ours.fc1.bias.copy_(fc1.bias)
    ours.fc2.weight.copy_(fc2.weight * factor)
    ours.fc2.bias.copy_(fc2.bias * factor)


@torch.no_grad()
def load_into_splitnet(peer: nn.Module, scheme, n_layers: int, step_size: float,
                       weights: str = "per-stage") -> sn.SplitTransformer:
    """The SplitTransformer of ``scheme`` (n_layers steps of size h) holding ``peer``'s
    weights; its sublayers, taken in order, must be the scheme's stages in order."""
    dec = peer.attn_layers
    sch = sn.schemes.resolve(scheme)
    n_d, n_c = sch.n_stages("diffusion"), sch.n_stages("convection")
    inner = next(m for m in dec.modules() if isinstance(m, xt.x_transformers.FeedForward)
                 ).ff[-1].in_features
    d_ff = inner * n_c // n_d if weights == "per-stage" else inner
    model = sn.SplitTransformer(vocab_size=V, d_model=D, n_heads=H, n_layers=n_layers,
                                scheme=sch, weights=weights, step_size=step_size, d_ff=d_ff,
                                max_len=T, activation="gelu").double().eval()
    plan = [(layer, st.field, i) for layer in model.layers for i, st in enumerate(sch.stages)]
    assert [{"a": "diffusion", "f": "convection"}[t] for t in dec.layer_types] == \
        [f for _, f, _ in plan], "the peer's sublayers are not the scheme's stages"
    for (layer, field, i), (norms, block, _) in zip(plan, dec.layers):
        k = [j for j, st in enumerate(sch.stages) if st.field == field].index(i)
        ours = layer.field_modules(field)[k]
        _sublayer(ours, norms[0], block, 1.0 / (sch.stages[i].coeff * step_size))
    model.tok_emb.weight.copy_(peer.token_emb.emb.weight)
    model.pos_emb.weight.copy_(peer.pos_emb.emb.weight * peer.pos_emb.scale)
    _norm(model.norm, dec.final_norm, scale=peer.tie_embedding_scale)
    return model


CASES = {   # name: (x-transformers Decoder options, scheme, n_layers, h, ff_mult)
    "pre-LN Decoder = Lie–Trotter": ({"depth": 3}, "lie-trotter", 3, 1.0, 4),
    "macaron = Strang per-stage": ({"depth": 3, "macaron": True}, "strang", 3, 1.0, 4),
    "sandwich_coef=2 = pattern sssfsfff": ({"depth": 4, "sandwich_coef": 2}, "sssfsfff", 1,
                                           4.0, 4),
    "custom_layers sfssffsf": ({"custom_layers": tuple("afaaffaf")}, "sfssffsf", 1, 4.0, 4),
    "custom_layers ssfsf (3 s, 2 f)": ({"custom_layers": tuple("aafaf")}, "ssfsf", 1, 1.0, 3),
}


@pytest.mark.parametrize("name", CASES)
def test_x_transformers_stacks_are_splitnet_schemes(name):
    layers, scheme, n_layers, h, ff_mult = CASES[name]
    peer = _peer(ff_mult=ff_mult, **layers)
    ours = load_into_splitnet(peer, scheme, n_layers, h)
    idx = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref, inter = peer(idx, return_intermediates=True)
        logits, states = ours(idx, return_states=True)
    theirs = torch.stack(inter.layer_hiddens)          # input of every sublayer, then output
    assert theirs.shape == states.shape
    scale = states.abs().max()
    assert (states - theirs).abs().max() < 1e-12 * scale
    assert (logits - ref).abs().max() < 1e-12 * ref.abs().max()


def test_lie_trotter_shared_is_the_same_decoder():
    """With one stage per field, shared and per-stage weights are the same network."""
    peer = _peer(depth=2)
    idx = torch.randint(0, V, (1, T))
    with torch.no_grad():
        ref = peer(idx)
        assert (load_into_splitnet(peer, "lie-trotter", 2, 1.0, weights="shared")(idx)
                - ref).abs().max() < 1e-12 * ref.abs().max()


def test_the_map_would_notice_a_wrong_coefficient():
    """Control: the same weights under Strang with h = 0.5 (feed-forwards at 0.25, attention
    at 0.5) are a different network, and the comparison sees it."""
    peer = _peer(depth=3, macaron=True)
    ours = load_into_splitnet(peer, "strang", 3, 1.0)
    ours_h = sn.SplitTransformer.from_config(ours.config.replace(step_size=0.5)).double()
    ours_h.load_state_dict(ours.state_dict())
    idx = torch.randint(0, V, (1, T))
    with torch.no_grad():
        assert (ours_h(idx) - peer(idx)).abs().max() > 1e-3
    with pytest.raises(AssertionError, match="not the scheme's stages"):
        load_into_splitnet(peer, "lie-trotter", 3, 1.0)


def test_with_its_own_float32_softmax_the_peer_agrees_to_float32_rounding():
    peer = _peer(depth=3, float32_softmax=True)
    ours = load_into_splitnet(peer, "lie-trotter", 3, 1.0)
    idx = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = peer(idx)
        diff = (ours(idx) - ref).abs().max() / ref.abs().max()
    assert 1e-12 < diff < 1e-5
