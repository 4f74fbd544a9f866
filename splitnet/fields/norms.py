"""The normalisation inside every field and before the head (``norm`` of a network config,
:data:`splitnet.configs.options.NORMS`):

* ``layer`` -- ``LayerNorm``: ``g (x - mean x) / sqrt(var x + eps) + b`` (GPT-2, GPT-NeoX);
* ``rms`` -- ``RMSNorm``: ``g x / sqrt(mean x^2 + eps)``, no mean, no bias (Llama, Qwen2,
  Mistral; Zhang and Sennrich 2019);
* ``none`` -- the identity (ConvS2S, Gehring et al. 2017: no normalisation; its fields keep the
  activations' variance by scaling instead, ``init="convs2s"``).
"""

from __future__ import annotations

from torch import nn

from ..configs.options import NORM_POSITIONS, NORMS

NORM_TYPES = (nn.LayerNorm, nn.RMSNorm)     # what initialisation resets to ones (and zeros)


def make_norm(kind: str, d: int, eps: float) -> nn.Module:
    """The norm ``kind`` over the last ``d`` channels."""
    if kind == "layer":
        return nn.LayerNorm(d, eps=eps)
    if kind == "rms":
        return nn.RMSNorm(d, eps=eps)
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


__all__ = ["NORM_TYPES", "make_norm", "make_norms", "post"]
