"""Reference implementations that splitnet is timed against and proven equal to.

:class:`RefGPT` is Karpathy's nanoGPT ``model.py`` trimmed to the pieces a SplitTransformer has
(pre-LN blocks ``x = x + attn(ln_1(x)); x = x + mlp(ln_2(x))``, SDPA attention, GELU MLP, learned
positions, tied head): ``benchmarks/bench_layers.py`` times it beside a Lie–Trotter
SplitTransformer, and ``tests/test_compile.py`` proves the two equal with copied weights.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class RefAttention(nn.Module):
    def __init__(self, d, n_heads):
        super().__init__()
        self.n_head = n_heads
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.resid_dropout = nn.Dropout(0.0)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0,
                                           is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class RefMLP(nn.Module):
    def __init__(self, d, d_ff):
        super().__init__()
        self.c_fc = nn.Linear(d, d_ff)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(d_ff, d)
        self.dropout = nn.Dropout(0.0)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class RefBlock(nn.Module):
    def __init__(self, d, n_heads, d_ff):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = RefAttention(d, n_heads)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = RefMLP(d, d_ff)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class RefGPT(nn.Module):
    def __init__(self, vocab_size, d, n_heads, n_layers, max_len, d_ff=None):
        super().__init__()
        d_ff = 4 * d if d_ff is None else d_ff
        self.wte = nn.Embedding(vocab_size, d)
        self.wpe = nn.Embedding(max_len, d)
        self.drop = nn.Dropout(0.0)
        self.h = nn.ModuleList([RefBlock(d, n_heads, d_ff) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight
        for p in self.parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))

    # The two names splitnet.tasks.losses.LMLoss uses (as SplitTransformer has them), so the
    # benchmark applies the same loss levers to the reference.
    def features(self, idx):
        """``ln_f`` of the last block's output: ``forward(idx) == lm_head(features(idx))``."""
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        return self.ln_f(x)

    @property
    def head(self):
        return self.lm_head


# ---------------------------------------------------------------------------------------------
# Weights of a Lie–Trotter splitnet network, given to the references it is proved equal to


def _copy(dst: torch.Tensor, src: torch.Tensor) -> None:
    with torch.no_grad():
        dst.copy_(src)


def load_into_gpt(ref: RefGPT, ours) -> None:
    """Give ``ref`` the weights of a Lie–Trotter, shared-weight ``SplitTransformer`` ``ours``
    (same maths, other names): then both compute the same logits."""
    _copy(ref.wte.weight, ours.tok_emb.weight)
    _copy(ref.wpe.weight, ours.pos_emb.weight)
    ref.ln_f.load_state_dict(ours.norm.state_dict())
    for blk, lay in zip(ref.h, ours.layers, strict=True):
        a, f = lay.diffusion, lay.convection
        blk.ln_1.load_state_dict(a.norm.state_dict())
        blk.attn.c_attn.load_state_dict(a.qkv.state_dict())
        blk.attn.c_proj.load_state_dict(a.proj.state_dict())
        blk.ln_2.load_state_dict(f.norm.state_dict())
        blk.mlp.c_fc.load_state_dict(f.fc1.state_dict())
        blk.mlp.c_proj.load_state_dict(f.fc2.state_dict())


def load_into_torch_transformer(tt: nn.Transformer, ours) -> None:
    """Give ``torch.nn.Transformer(norm_first=True)`` ``tt`` the sub-layer weights of a
    Lie–Trotter ``SplitSeq2Seq`` ``ours`` (embeddings and head stay outside ``tt``)."""
    for mine, theirs in zip(ours.encoder_layers, tt.encoder.layers, strict=True):
        _self_attention(mine.diffusion, theirs)
        _feedforward(mine.convection, theirs, "norm2")
    for mine, theirs in zip(ours.decoder_layers, tt.decoder.layers, strict=True):
        _self_attention(mine.diffusion, theirs)
        x = mine.cross
        theirs.norm2.load_state_dict(x.norm.state_dict())
        _copy(theirs.multihead_attn.in_proj_weight, torch.cat([x.q.weight, x.kv.weight]))
        _copy(theirs.multihead_attn.in_proj_bias, torch.cat([x.q.bias, x.kv.bias]))
        theirs.multihead_attn.out_proj.load_state_dict(x.proj.state_dict())
        _feedforward(mine.convection, theirs, "norm3")
    tt.encoder.norm.load_state_dict(ours.encoder_norm.state_dict())
    tt.decoder.norm.load_state_dict(ours.decoder_norm.state_dict())


def load_into_torch_encoder(enc: nn.TransformerEncoder, ours) -> None:
    """Give ``torch.nn.TransformerEncoder`` ``enc`` (layers ``norm_first=True``, a final norm)
    the sub-layer weights of a bidirectional Lie–Trotter ``SplitTransformer`` ``ours`` (a
    masked language model; embeddings and head stay outside ``enc``)."""
    def one(f):         # per-stage weights: Lie–Trotter has one stage of each field
        return f[0] if isinstance(f, nn.ModuleList) else f

    for mine, theirs in zip(ours.layers, enc.layers, strict=True):
        _self_attention(one(mine.diffusion), theirs)
        _feedforward(one(mine.convection), theirs, "norm2")
    enc.norm.load_state_dict(ours.norm.state_dict())


def _self_attention(att, layer) -> None:
    layer.norm1.load_state_dict(att.norm.state_dict())
    _copy(layer.self_attn.in_proj_weight, att.qkv.weight)
    _copy(layer.self_attn.in_proj_bias, att.qkv.bias)
    layer.self_attn.out_proj.load_state_dict(att.proj.state_dict())


def _feedforward(ff, layer, norm: str) -> None:
    getattr(layer, norm).load_state_dict(ff.norm.state_dict())
    layer.linear1.load_state_dict(ff.fc1.state_dict())
    layer.linear2.load_state_dict(ff.fc2.state_dict())


__all__ = ["RefAttention", "RefBlock", "RefGPT", "RefMLP", "load_into_gpt",
           "load_into_torch_encoder", "load_into_torch_transformer"]
