"""Cross-attention, the cross field ``X(x_i; m)``: particles pulled by a fixed memory (an
encoder's output). Its kind: :class:`splitnet.configs.kinds.CrossKind`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .dropout import drop
from .norms import make_norm


class CrossAttention(nn.Module):
    """Attention of the particles to a fixed set of memory particles (the cross field X):
    ``X(x; m) = W_o softmax(Q(LN x) K(m)^T / sqrt(d_h)) V(m)`` -- decoder tokens pulled by the
    encoder's tokens. Pre-norm on ``x`` only: the memory is the encoder's output, already
    normalised (as in ``torch.nn.Transformer`` with ``norm_first=True``).

    The memory is given per call, ``forward(t, x, memory=m, memory_mask=mask)`` (a network
    passes its encoder output through :meth:`SplitLayer.forward`'s context), or fixed at
    construction, ``CrossAttention(d, h, memory=m)`` (a vector field of the numerical API:
    ``X(t, x)``). ``memory`` (B, M, d) or (M, d); ``memory_mask`` (B, M) bool, True = padding
    (torch's convention). ``memory_cache``: the memory's keys and values
    (:meth:`memory_keys_values`), or a dict that holds them per module: the first call of a
    module fills its entry, later calls (other stages, other decoding steps) read it, so each
    module projects the memory once per forward or per generation."""

    uses_memory = True
    mixes_tokens = False       # a token's update depends on the memory, not on other tokens
    supports_cache = False     # nothing to cache per token: the memory's keys are memory_cache

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True,
                 norm_eps: float = 1e-5, memory: torch.Tensor | None = None,
                 norm: str = "layer"):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model, self.n_heads, self.dropout = d_model, n_heads, dropout
        self.norm = make_norm(norm, d_model, norm_eps)
        self.q = nn.Linear(d_model, d_model, bias=bias)
        self.kv = nn.Linear(d_model, 2 * d_model, bias=bias)
        self.proj = nn.Linear(d_model, d_model, bias=bias)
        self.resid_dropout = nn.Dropout(dropout)
        self.register_buffer("memory", memory, persistent=False)

    def memory_keys_values(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of the memory (B, H, M, d_h): the same for every evaluation of this
        module, so generation computes them once."""
        if memory.dim() == 2:
            memory = memory.unsqueeze(0)
        b, m, d = memory.shape
        k, v = self.kv(memory).chunk(2, dim=-1)    # (B, M, d') each: d' = d / tp under --tp
        hd = d // self.n_heads
        return tuple(z.view(b, m, -1, hd).transpose(1, 2) for z in (k, v))

    def forward(self, t, x: torch.Tensor, memory: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None, memory_cache=None) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(f"CrossAttention expects states of width d_model={self.d_model}, "
                             f"got shape {tuple(x.shape)}")
        store = memory_cache if isinstance(memory_cache, dict) else None
        if store is not None:
            memory_cache = store.get(self)
        if memory_cache is None:
            memory = self.memory if memory is None else memory
            if memory is None:
                raise ValueError("CrossAttention needs a memory: pass memory= (B, M, d_model) "
                                 "or build it with memory=")
            memory_cache = self.memory_keys_values(memory)
            if store is not None:
                store[self] = memory_cache
        k, v = memory_cache
        *lead, n, d = x.shape
        hd = d // self.n_heads
        q = self.q(self.norm(x)).reshape(-1, n, k.shape[1], hd).transpose(1, 2)   # (B,H',n,hd)
        if k.shape[0] != q.shape[0]:
            k, v = k.expand(q.shape[0], -1, -1, -1), v.expand(q.shape[0], -1, -1, -1)
        mask = None
        if memory_mask is not None:        # True = padding -> not attended
            mask = ~memory_mask.bool()[:, None, None, :]
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0)
        y = y.transpose(1, 2).reshape(*lead, n, k.shape[1] * hd)
        return drop(self.resid_dropout, self.proj(y))

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}"


__all__ = ["CrossAttention"]
