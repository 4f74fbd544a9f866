"""ConvS2S's multi-step attention, a cross field (Gehring et al. 2017, section 3.3): every
decoder layer attends to the encoder, its query built from the decoder state *and the target
embedding*, its values from the encoder output *and the source embedding*::

    q_i = sqrt(1/2) (W_d LN(x_i) + b_d + g_i)        # g: the target token's embedding
    a_ij = softmax_j(q_i . z_j)                      # z: the encoder's output (no 1/sqrt(d))
    c_i = sqrt(m) sum_j a_ij sqrt(1/2) (z_j + e_j)   # e: the source embedding, m real tokens
    X(x_i) = W_o c_i + b_o

(``sqrt(m) = m sqrt(1/m)``: the paper's correction of a weighted sum of m vectors; the
``sqrt(1/2)`` of queries and values are those of the authors' fairseq ``fconv``.) With
``residual_scale`` s (``init="convs2s"``: sqrt(1/2)) the field is ``s X(x) - (1 - s) x``, a unit
step of which is ConvS2S's ``sqrt(1/2) (x + X(x))``.

The memory is the encoder's output and the source embedding side by side, ``[z | e]`` (B, M,
2 d): :meth:`splitnet.nets.seq2seq.SplitSeq2Seq.encode` gives it so when the decoder's cross
field is this kind (its ``memory_parts`` is 2). The target embedding comes as context,
``target_embedding=`` (B, n, d), the embedded decoder inputs the decoder started from (the
network passes it to every field that ``reads_embedding``). Its kind:
:class:`splitnet.configs.kinds.MultiStepKind` (``cross_field="multistep"``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .conv import HALF
from .dropout import drop
from .norms import make_norm


class MultiStepAttention(nn.Module):
    """``X(x; [z | e], g) = W_o sqrt(m) softmax(q z^T) sqrt(1/2)(z + e)``, one head, ``q =
    sqrt(1/2)(W_d LN(x) + g)`` (module docstring); ``residual_scale`` s gives
    ``s X - (1 - s) x``. ``memory`` (B, M, 2 d_model) or (M, 2 d_model); ``memory_mask``
    (B, M) bool, True = padding."""

    uses_memory = True
    reads_embedding = True     # the query adds the target token's embedding
    mixes_tokens = False       # a token's update depends on the memory, not on other tokens
    supports_cache = False     # nothing to cache per token: the memory's parts are memory_cache
    memory_parts = 2           # the memory is [encoder output | source embedding]

    def __init__(self, d_model: int, dropout: float = 0.0, norm_eps: float = 1e-5,
                 norm: str = "layer", residual_scale: float = 1.0):
        super().__init__()
        if not 0.0 < residual_scale <= 1.0:
            raise ValueError(f"residual_scale must lie in (0, 1], got {residual_scale!r}")
        self.d_model, self.residual_scale = d_model, float(residual_scale)
        self.norm = make_norm(norm, d_model, norm_eps)
        self.q = nn.Linear(d_model, d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.resid_dropout = nn.Dropout(dropout)

    def memory_keys_values(self, memory: torch.Tensor, memory_mask=None):
        """Keys ``z``, values ``sqrt(1/2)(z + e)`` (B, 1, M, d) and the factor ``sqrt(m)``
        (B, 1, 1, 1) of the memory ``[z | e]``: the same for every evaluation, computed once."""
        if memory.dim() == 2:
            memory = memory.unsqueeze(0)
        if memory.shape[-1] != 2 * self.d_model:
            raise ValueError(f"MultiStepAttention reads a memory [encoder output | source "
                             f"embedding] of width 2 d_model = {2 * self.d_model}, got shape "
                             f"{tuple(memory.shape)}")
        z, e = memory.chunk(2, dim=-1)
        m = memory.new_full((memory.shape[0], 1, 1, 1), float(memory.shape[1]))
        if memory_mask is not None:
            m = (~memory_mask.bool()).sum(dim=1).to(memory.dtype).reshape(-1, 1, 1, 1)
        return z[:, None], (HALF * (z + e))[:, None], m.sqrt()

    def forward(self, t, x: torch.Tensor, memory: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None, memory_cache=None,
                target_embedding: torch.Tensor | None = None) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(f"MultiStepAttention expects states of width d_model="
                             f"{self.d_model}, got shape {tuple(x.shape)}")
        if target_embedding is None or target_embedding.shape != x.shape:
            got = None if target_embedding is None else tuple(target_embedding.shape)
            raise ValueError(f"MultiStepAttention needs target_embedding= of the states' shape "
                             f"{tuple(x.shape)} (the decoder's embedded inputs), got {got}")
        store = memory_cache if isinstance(memory_cache, dict) else None
        kv = store.get(self) if store is not None else None
        if kv is None:
            if memory is None:
                raise ValueError("MultiStepAttention needs a memory: pass memory= (B, M, "
                                 "2 d_model)")
            kv = self.memory_keys_values(memory, memory_mask)
            if store is not None:
                store[self] = kv
        k, v, root_m = kv
        *lead, n, d = x.shape
        q = HALF * (self.q(self.norm(x)) + target_embedding)
        q = q.reshape(-1, 1, n, d)
        if k.shape[0] != q.shape[0]:
            k, v, root_m = (a.expand(q.shape[0], *a.shape[1:]) for a in (k, v, root_m))
        mask = None if memory_mask is None else ~memory_mask.bool()[:, None, None, :]
        c = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0)
        y = drop(self.resid_dropout, self.proj(c * root_m).reshape(*lead, n, d))
        s = self.residual_scale
        return y if s == 1.0 else s * y - (1.0 - s) * x

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, residual_scale={self.residual_scale:g}"


__all__ = ["MultiStepAttention"]
