"""The GLU convolution, a *local* diffusion field (ConvS2S's block, Gehring et al. 2017):
each particle interacts with its ``k`` nearest neighbours in position only.

    h = LN(x)                                  # (..., n, d), pre-norm inside
    [a, b] = conv_k(h)                         # a 1-D convolution over positions, d -> 2d
    G(x) = W_o (a * sigmoid(b))                # GLU, then the output projection d -> d

``causal=True`` pads ``k - 1`` positions on the left, so token i sees tokens ``i-k+1 .. i``;
``causal=False`` pads ``(k - 1) / 2`` on each side (k odd), so token i sees ``i ± (k-1)/2``.
There is no key/value cache: generation recomputes the window per token. Its kind (built from a
config, closed-form cost): :class:`splitnet.configs.kinds.ConvKind` (``SplitConfig(diffusion_field=
"conv", conv_kernel=k)``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .dropout import drop
from .norms import make_norm


class GLUConv(nn.Module):
    """``G(x) = W_o GLU(conv_k(LN x))`` over the token axis of ``x`` (..., n, d_model)."""

    uses_memory = False
    mixes_tokens = True        # token i's update depends on its k - 1 neighbours
    supports_cache = False     # no key/value cache: a new token recomputes its window

    def __init__(self, d_model: int, kernel_size: int = 3, causal: bool = True,
                 dropout: float = 0.0, norm_eps: float = 1e-5, norm: str = "layer"):
        super().__init__()
        if isinstance(kernel_size, bool) or not isinstance(kernel_size, int) or kernel_size < 1:
            raise ValueError(f"kernel_size must be an int >= 1, got {kernel_size!r}")
        if not causal and kernel_size % 2 == 0:
            raise ValueError(f"a non-causal convolution needs an odd kernel_size (a window "
                             f"centred on the token), got {kernel_size}")
        self.d_model, self.kernel_size, self.causal = d_model, kernel_size, bool(causal)
        self.norm = make_norm(norm, d_model, norm_eps)
        self.conv = nn.Conv1d(d_model, 2 * d_model, kernel_size)
        self.proj = nn.Linear(d_model, d_model)      # a residual output projection (scaled init)
        self.resid_dropout = nn.Dropout(dropout)
        k = kernel_size - 1
        self._pad = (k, 0) if self.causal else (k // 2, k // 2)

    def forward(self, t, x: torch.Tensor) -> torch.Tensor:
        if x.dim() < 2 or x.shape[-1] != self.d_model:
            raise ValueError(f"GLUConv expects states of shape (..., n_tokens, d_model="
                             f"{self.d_model}), got shape {tuple(x.shape)}")
        *lead, n, d = x.shape
        h = self.norm(x).reshape(-1, n, d).transpose(1, 2)          # (B, d, n)
        h = F.glu(self.conv(F.pad(h, self._pad)), dim=1)            # (B, 2d, n) -> (B, d, n)
        y = h.transpose(1, 2).reshape(*lead, n, d)                  # (..., n, d)
        return drop(self.resid_dropout, self.proj(y))

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, kernel_size={self.kernel_size}, causal={self.causal}"


__all__ = ["GLUConv"]
