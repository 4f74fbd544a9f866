"""The GLU convolution, a *local* diffusion field (ConvS2S's block, Gehring et al. 2017):
each particle interacts with its ``k`` nearest neighbours in position only.

    h = LN(x)                                  # (..., n, d), pre-norm inside (norm="none": x)
    [a, b] = conv_k(h)                         # a 1-D convolution over positions, d -> 2d
    G(x) = W_o (a * sigmoid(b))                # GLU, then the output projection d -> d

``causal=True`` pads ``k - 1`` positions on the left, so token i sees tokens ``i-k+1 .. i``;
``causal=False`` pads ``(k - 1) / 2`` on each side (k odd), so token i sees ``i ± (k-1)/2``.

**ConvS2S's block** (``convs2s=True``, what ``init="convs2s"`` builds): no output projection,
dropout on the convolution's input (fairseq's ``fconv``), and the residual step scaled,
``x <- sqrt(1/2) (x + GLU(conv_k(h)))``. That is a unit step of the field

    G(x) = sqrt(1/2) GLU(conv_k(h)) - (1 - sqrt(1/2)) x

(the block's output scaled, plus a linear friction toward the origin), so the scaling is part
of the field and a splitting of ConvS2S's fields is an integrator of a definite ODE at any h.

**Padding** (``padding_mask`` (B, n) bool, True = padding): the padded positions of ``h`` are
zeroed before the convolution, so a real token never reads one (fairseq zeroes them the same
way); the padded positions' own outputs are never read either.

**Cache** (generation, ``causal=True``): the normalised inputs ``h`` of the positions seen so
far sit in a :class:`~splitnet.nets.generation.KVCache` (as keys of one head, values empty), and
a new token's window is their last ``k - 1`` rows and its own, so a step costs one window.
Its kind (built from a config, closed-form cost): :class:`splitnet.configs.kinds.ConvKind`
(``SplitConfig(diffusion_field="conv", conv_kernel=k)``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .dropout import drop
from .norms import make_norm

HALF = math.sqrt(0.5)      # ConvS2S's residual scale


class GLUConv(nn.Module):
    """``G(x) = W_o GLU(conv_k(LN x))`` over the token axis of ``x`` (..., n, d_model); with
    ``convs2s=True`` ConvS2S's block ``sqrt(1/2) GLU(conv_k(drop h)) - (1 - sqrt(1/2)) x``."""

    uses_memory = False
    mixes_tokens = True        # token i's update depends on its k - 1 neighbours
    masks_padding = True       # padded positions are zeroed before the convolution

    def __init__(self, d_model: int, kernel_size: int = 3, causal: bool = True,
                 dropout: float = 0.0, norm_eps: float = 1e-5, norm: str = "layer",
                 convs2s: bool = False):
        super().__init__()
        if isinstance(kernel_size, bool) or not isinstance(kernel_size, int) or kernel_size < 1:
            raise ValueError(f"kernel_size must be an int >= 1, got {kernel_size!r}")
        if not causal and kernel_size % 2 == 0:
            raise ValueError(f"a non-causal convolution needs an odd kernel_size (a window "
                             f"centred on the token), got {kernel_size}")
        self.d_model, self.kernel_size, self.causal = d_model, kernel_size, bool(causal)
        self.convs2s = bool(convs2s)
        self.supports_cache = self.causal   # a causal window of earlier inputs can be kept
        self.norm = make_norm(norm, d_model, norm_eps)
        self.conv = nn.Conv1d(d_model, 2 * d_model, kernel_size)
        # a residual output projection (scaled init); ConvS2S's block adds the GLU directly
        self.proj = None if self.convs2s else nn.Linear(d_model, d_model)
        self.resid_dropout = nn.Dropout(dropout)
        k = kernel_size - 1
        self._pad = (k, 0) if self.causal else (k // 2, k // 2)

    def forward(self, t, x: torch.Tensor, padding_mask: torch.Tensor | None = None,
                cache=None) -> torch.Tensor:
        if x.dim() < 2 or x.shape[-1] != self.d_model:
            raise ValueError(f"GLUConv expects states of shape (..., n_tokens, d_model="
                             f"{self.d_model}), got shape {tuple(x.shape)}")
        *lead, n, d = x.shape
        h = self.norm(x).reshape(-1, n, d)
        if self.convs2s:
            h = drop(self.resid_dropout, h)                         # fairseq: dropout, conv
        if padding_mask is not None:                                # never read a pad
            h = h.masked_fill(padding_mask.reshape(-1, n, 1).bool(), 0.0)
        if cache is not None:
            h = self._window(h, cache).transpose(1, 2)              # (B, d, k - 1 + n)
        else:
            h = F.pad(h.transpose(1, 2), self._pad)                 # one transpose, as before
        h = F.glu(self.conv(h), dim=1)                              # (B, 2d, n) -> (B, d, n)
        y = h.transpose(1, 2).reshape(*lead, n, d)                  # (..., n, d)
        if self.convs2s:
            return HALF * y - (1.0 - HALF) * x
        return drop(self.resid_dropout, self.proj(y))

    def _window(self, h: torch.Tensor, cache) -> torch.Tensor:
        """The inputs of new rows ``h`` (B, n, d) with the ``k - 1`` before them, from the
        cache (zeros before position 0, as the causal padding)."""
        if not self.causal:
            raise ValueError("a non-causal convolution reads later tokens: it cannot be cached")
        n = h.shape[1]
        keys, _ = cache.append(h[:, None], h[:, None, :, :0])       # (B, 1, L, d)
        past = keys[:, 0, -(self.kernel_size - 1 + n):]
        short = self.kernel_size - 1 + n - past.shape[1]
        return F.pad(past, (0, 0, short, 0)) if short > 0 else past

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, kernel_size={self.kernel_size}, causal={self.causal}"
                + (", convs2s=True" if self.convs2s else ""))


__all__ = ["HALF", "GLUConv"]
