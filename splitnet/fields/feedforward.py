"""The feed-forward network, the convection field ``G(x_i)``: each particle alone.

``G(x) = W_2 act(W_1 LN(x) + b_1) + b_2``. Its kind:
:class:`splitnet.configs.kinds.FeedForwardKind`.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import nn

from ..configs.options import ACTIVATIONS
from .dropout import drop
from .norms import make_norms, post


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU with the tanh approximation (GPT-2's ``gelu_new``)."""
    return F.gelu(x, approximate="tanh")


def activation_function(name: str):
    """The activation function ``name`` of :data:`splitnet.configs.config.ACTIVATIONS` (the one
    list)."""
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; available: {', '.join(ACTIVATIONS)}")
    fn, keywords = ACTIVATIONS[name]
    f = getattr(F, fn)
    return functools.partial(f, **dict(keywords)) if keywords else f


class FeedForward(nn.Module):
    """Position-wise feed-forward network with pre-norm inside (convection field)."""

    uses_memory = False
    mixes_tokens = False       # each particle alone
    supports_cache = False

    def __init__(self, d_model: int, d_ff: int, activation: str = "gelu", dropout: float = 0.0,
                 norm_eps: float = 1e-5, norm: str = "layer", norm_position: str = "pre"):
        super().__init__()
        self.act = activation_function(activation)
        self.activation = activation
        self.norm, self.post_norm = make_norms(norm, d_model, norm_eps, norm_position)
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, t, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.fc1.in_features:
            raise ValueError(f"FeedForward expects states of width d_model="
                             f"{self.fc1.in_features}, got shape {tuple(x.shape)}")
        y = self.fc2(self.act(self.fc1(self.norm(x))))                         # (..., n, d)
        return drop(self.dropout, post(self.post_norm, y))


class SwiGLU(nn.Module):
    """The gated feed-forward network of Llama, Qwen2 and Mistral (Shazeer 2020), pre-norm
    inside (convection field): ``G(x) = W_down (silu(W_gate n(x)) * W_up n(x))``, no biases,
    hidden width ``d_ff``; ``activation="gelu_tanh"``: Gemma's GeGLU. Its kinds:
    :class:`splitnet.configs.kinds.SwiGLUKind`, :class:`~splitnet.configs.kinds.GeGLUKind`."""

    uses_memory = False
    mixes_tokens = False       # each particle alone
    supports_cache = False

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, norm_eps: float = 1e-5,
                 norm: str = "rms", norm_position: str = "pre", activation: str = "silu"):
        super().__init__()
        self.act, self.activation = activation_function(activation), activation
        self.norm, self.post_norm = make_norms(norm, d_model, norm_eps, norm_position)
        self.gate = nn.Linear(d_model, d_ff, bias=False)
        self.up = nn.Linear(d_model, d_ff, bias=False)
        self.down = nn.Linear(d_ff, d_model, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, t, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.gate.in_features:
            raise ValueError(f"SwiGLU expects states of width d_model={self.gate.in_features}, "
                             f"got shape {tuple(x.shape)}")
        h = self.norm(x)
        return drop(self.dropout, post(self.post_norm, self.down(self.act(self.gate(h)) *
                                                                 self.up(h))))


__all__ = ["FeedForward", "SwiGLU", "activation_function", "gelu_tanh"]
