"""Vector fields of the particle system, as ``torch.nn.Module``s with signature ``f(t, x)``.

``x`` has shape ``(..., n_tokens, d_model)``; every field returns dx/dt of the same shape.

* :class:`Attention` -- the diffusion field ``F(x_i, [x_1..x_n])``: particles interact.
  ``F(x) = W_o softmax(Q K^T / sqrt(d_h)) V`` on ``LN(x)`` (pre-norm inside).
* :class:`FeedForward` -- the convection field ``G(x_i)``: each particle alone.
  ``G(x) = W_2 act(W_1 LN(x) + b_1) + b_2``.
* :class:`SDU` / :class:`Gated` -- the Highway Transformer's self-dependency unit (Chai et al.
  2020), ``SDU(x) = T(x) * (x W_2 + b_2)``, ``T = sigmoid or tanh(x W_1 + b_1)``, added to a
  field: ``f(x) + SDU(x)``.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import nn

from .config import ACTIVATIONS, GATES


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU with the tanh approximation (GPT-2's ``gelu_new``)."""
    return F.gelu(x, approximate="tanh")


def activation_function(name: str):
    """The activation function ``name`` of :data:`splitnet.config.ACTIVATIONS` (the one list)."""
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; available: {', '.join(ACTIVATIONS)}")
    fn, keywords = ACTIVATIONS[name]
    f = getattr(F, fn)
    return functools.partial(f, **dict(keywords)) if keywords else f


class Attention(nn.Module):
    """Multi-head self-attention with pre-norm inside (diffusion field).

    Uses ``F.scaled_dot_product_attention`` (flash / memory-efficient kernels on CUDA).
    ``causal=True`` masks the future.

    ``forward(t, x, cache)`` with a key/value cache (generation, causal only): ``x`` (B, n, d)
    holds the *new* tokens only; their keys and values are appended to ``cache`` and their
    queries attend to every cached position and, causally, to each other -- the last n rows of
    the attention over the whole sequence. ``cache`` is any object with ``length`` (positions
    held) and ``append(k, v) -> (k_all, v_all)`` on (B, H, n, d_h) tensors
    (:class:`splitnet.generation.KVCache`). Without a cache, ``forward`` is the training path,
    unchanged.
    """

    uses_memory = False

    @property
    def supports_cache(self) -> bool:
        """A key/value cache is exact for causal attention only."""
        return self.causal

    def __init__(self, d_model: int, n_heads: int, causal: bool = False, dropout: float = 0.0,
                 bias: bool = True, norm_eps: float = 1e-5):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model, self.n_heads, self.causal, self.dropout = d_model, n_heads, causal, dropout
        self.norm = nn.LayerNorm(d_model, eps=norm_eps)
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.proj = nn.Linear(d_model, d_model, bias=bias)
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, t, x: torch.Tensor, cache=None) -> torch.Tensor:
        if cache is not None:
            return self._forward_cached(x, cache)
        if x.dim() < 2:
            raise ValueError(f"Attention needs states of shape (..., n_tokens, d_model), got "
                             f"shape {tuple(x.shape)}")
        *lead, n, d = x.shape                                   # (..., n, d)
        if d != self.d_model:
            raise ValueError(f"Attention expects states of width d_model={self.d_model}, got "
                             f"shape {tuple(x.shape)}")
        h = self.norm(x)
        if x.dim() != 3:   # only then: a no-op reshape still costs a view op in fwd and bwd
            h = h.reshape(-1, n, d)                             # (B, n, d)
        q, k, v = self.qkv(h).split(d, dim=-1)
        hd = d // self.n_heads
        q, k, v = (z.view(-1, n, self.n_heads, hd).transpose(1, 2) for z in (q, k, v))  # (B,H,n,hd)
        y = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=self.causal)
        y = y.transpose(1, 2).reshape(*lead, n, d)              # (..., n, d)
        return self.resid_dropout(self.proj(y))

    def _forward_cached(self, x: torch.Tensor, cache) -> torch.Tensor:
        """New tokens ``x`` (B, n, d) at positions ``cache.length ..``: query i attends to every
        cached key and to the new keys up to its own position."""
        if not self.causal:
            raise ValueError("a key/value cache needs causal attention: with causal=False the "
                             "earlier tokens' outputs change when a token is added")
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"cached Attention expects new tokens of shape (batch, n, "
                             f"{self.d_model}), got shape {tuple(x.shape)}")
        b, n, d = x.shape
        hd = d // self.n_heads
        q, k, v = self.qkv(self.norm(x)).split(d, dim=-1)
        q, k, v = (z.view(b, n, self.n_heads, hd).transpose(1, 2) for z in (q, k, v))  # (B,H,n,hd)
        past = cache.length
        k, v = cache.append(k, v)                               # (B, H, past + n, hd)
        mask = None
        if n > 1 and past > 0:   # new token i sees positions 0 .. past + i
            mask = torch.ones(n, past + n, dtype=torch.bool, device=x.device).tril(past)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                           is_causal=past == 0 and n > 1)
        return self.resid_dropout(self.proj(y.transpose(1, 2).reshape(b, n, d)))

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, causal={self.causal}"


class CrossAttention(nn.Module):
    """Attention of the particles to a fixed set of memory particles (the cross field X):
    ``X(x; m) = W_o softmax(Q(LN x) K(m)^T / sqrt(d_h)) V(m)`` -- decoder tokens pulled by the
    encoder's tokens. Pre-norm on ``x`` only: the memory is the encoder's output, already
    normalised (as in ``torch.nn.Transformer`` with ``norm_first=True``).

    The memory is given per call, ``forward(t, x, memory=m, memory_mask=mask)`` (a network
    passes its encoder output through :meth:`SplitLayer.forward`'s context), or fixed at
    construction, ``CrossAttention(d, h, memory=m)`` (a vector field of the numerical API:
    ``X(t, x)``). ``memory`` (B, M, d) or (M, d); ``memory_mask`` (B, M) bool, True = padding
    (torch's convention). ``memory_cache`` (generation): the memory's keys and values, computed
    once per module by :meth:`memory_keys_values`."""

    uses_memory = True

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True,
                 norm_eps: float = 1e-5, memory: torch.Tensor | None = None):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model, self.n_heads, self.dropout = d_model, n_heads, dropout
        self.norm = nn.LayerNorm(d_model, eps=norm_eps)
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
        k, v = self.kv(memory).split(d, dim=-1)
        hd = d // self.n_heads
        return tuple(z.view(b, m, self.n_heads, hd).transpose(1, 2) for z in (k, v))

    def forward(self, t, x: torch.Tensor, memory: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None, memory_cache=None) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(f"CrossAttention expects states of width d_model={self.d_model}, "
                             f"got shape {tuple(x.shape)}")
        if memory_cache is None:
            memory = self.memory if memory is None else memory
            if memory is None:
                raise ValueError("CrossAttention needs a memory: pass memory= (B, M, d_model) "
                                 "or build it with memory=")
            memory_cache = self.memory_keys_values(memory)
        k, v = memory_cache
        *lead, n, d = x.shape
        hd = d // self.n_heads
        q = self.q(self.norm(x)).reshape(-1, n, self.n_heads, hd).transpose(1, 2)
        if k.shape[0] != q.shape[0]:
            k, v = k.expand(q.shape[0], -1, -1, -1), v.expand(q.shape[0], -1, -1, -1)
        mask = None
        if memory_mask is not None:        # True = padding -> not attended
            mask = ~memory_mask.bool()[:, None, None, :]
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0)
        y = y.transpose(1, 2).reshape(*lead, n, d)
        return self.resid_dropout(self.proj(y))

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}"


class FeedForward(nn.Module):
    """Position-wise feed-forward network with pre-norm inside (convection field)."""

    def __init__(self, d_model: int, d_ff: int, activation: str = "gelu", dropout: float = 0.0,
                 norm_eps: float = 1e-5):
        super().__init__()
        self.act = activation_function(activation)
        self.activation = activation
        self.norm = nn.LayerNorm(d_model, eps=norm_eps)
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, t, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.fc1.in_features:
            raise ValueError(f"FeedForward expects states of width d_model="
                             f"{self.fc1.in_features}, got shape {tuple(x.shape)}")
        return self.dropout(self.fc2(self.act(self.fc1(self.norm(x)))))   # (..., n, d)


class SDU(nn.Module):
    """Self-dependency unit: ``T(x) * (x W2 + b2)`` with ``T = sigmoid|tanh(x W1 + b1)``."""

    def __init__(self, d_model: int, gate: str = "sigmoid"):
        super().__init__()
        if gate not in GATES:
            raise ValueError(f"gate must be one of {', '.join(GATES)}, got {gate!r}")
        self.gate = gate
        self.w1 = nn.Linear(d_model, d_model)
        self.w2 = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = torch.sigmoid(self.w1(x)) if self.gate == "sigmoid" else torch.tanh(self.w1(x))
        return g * self.w2(x)


class Gated(nn.Module):
    """A field plus a self-dependency gate: ``f(t, x) + SDU(x)`` (Highway Transformer).

    ``cache`` (generation) is handed to the wrapped field (an :class:`Attention`); the gate is
    position-wise and needs none."""

    def __init__(self, field: nn.Module, d_model: int, gate: str = "sigmoid"):
        super().__init__()
        self.field = field
        self.sdu = SDU(d_model, gate)

    @property
    def supports_cache(self) -> bool:
        return getattr(self.field, "supports_cache", False)

    @property
    def uses_memory(self) -> bool:
        return getattr(self.field, "uses_memory", False)

    def forward(self, t, x: torch.Tensor, cache=None, **context) -> torch.Tensor:
        if cache is not None:
            context["cache"] = cache
        return self.field(t, x, **context) + self.sdu(x)


__all__ = ["SDU", "Attention", "CrossAttention", "FeedForward", "Gated", "activation_function",
           "gelu_tanh"]
