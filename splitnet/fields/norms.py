"""The normalisation inside every field and before the head (``norm`` of a network config,
:data:`splitnet.configs.options.NORMS`):

* ``layer`` -- ``LayerNorm``: ``g (x - mean x) / sqrt(var x + eps) + b`` (GPT-2, GPT-NeoX);
* ``rms`` -- ``RMSNorm``: ``g x / sqrt(mean x^2 + eps)``, no mean, no bias (Llama, Qwen2,
  Mistral; Zhang and Sennrich 2019);
* ``rms_offset`` -- RMSNorm with the scale ``1 + w``, ``w`` stored and initialised at zero
  (Gemma 1-3: :class:`OffsetRMSNorm`);
* ``none`` -- the identity (ConvS2S, Gehring et al. 2017: no normalisation; its fields keep the
  activations' variance by scaling instead, ``init="convs2s"``).
"""

from __future__ import annotations

import torch
from torch import nn

from ..configs.options import NORM_POSITIONS, NORMS

NORM_TYPES = (nn.LayerNorm, nn.RMSNorm)     # what initialisation resets to ones (and zeros)


class OffsetRMSNorm(nn.Module):
    """``(1 + w) x / sqrt(mean x^2 + eps)`` over the last ``d`` channels, ``w`` from zero
    (Gemma's RMSNorm: its checkpoints store ``w``, the scale's offset from one)."""

    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(d))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1.0 + self.weight)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"


def make_norm(kind: str, d: int, eps: float) -> nn.Module:
    """The norm ``kind`` over the last ``d`` channels."""
    if kind == "layer":
        return nn.LayerNorm(d, eps=eps)
    if kind == "rms":
        return nn.RMSNorm(d, eps=eps)
    if kind == "rms_offset":
        return OffsetRMSNorm(d, eps)
    if kind == "none":
        return nn.Identity()
    raise ValueError(f"norm must be one of {', '.join(NORMS)}; got {kind!r}")


def make_norms(kind: str, d: int, eps: float, position: str = "pre"
               ) -> tuple[nn.Module, nn.Module | None]:
    """A field's norms ``(pre, post)`` at ``position`` (:data:`NORM_POSITIONS`): ``pre`` on the
    field's input (the identity under ``"post"``), ``post`` on its output (None under
    ``"pre"``): the field is ``f(pre(x))``, ``post(f(x))`` (OLMo 2) or ``post(f(pre(x)))``
    (Gemma's sandwich); the layer adds it to the stream in every case."""
    if position not in NORM_POSITIONS:
        raise ValueError(f"norm_position must be one of {', '.join(NORM_POSITIONS)}; got "
                         f"{position!r}")
    pre = nn.Identity() if position == "post" else make_norm(kind, d, eps)
    return pre, None if position == "pre" else make_norm(kind, d, eps)


def post(norm: nn.Module | None, y):
    """``norm(y)``, or ``y`` without a post-norm."""
    return y if norm is None else norm(y)


__all__ = ["NORM_TYPES", "OffsetRMSNorm", "make_norm", "make_norms", "post"]
