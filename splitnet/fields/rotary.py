"""Rotary position embeddings (RoPE; Su et al. 2021) in GPT-NeoX's convention.

The first ``dims`` channels of every head's query and key are rotated by the token's absolute
position ``p``: channel ``i < dims/2`` is paired with ``i + dims/2`` (NeoX's "rotate half", not
GPT-J's interleaved pairs) and the pair is turned by the angle ``p * base^(-2i/dims)``::

    q_rot = q * cos(p w) + rotate_half(q) * sin(p w),   rotate_half([a, b]) = [-b, a]

The other ``head_dim - dims`` channels pass through (``rotary_pct`` < 1, Pythia's 0.25). The
angles are computed in float32 and then cast to the state's dtype, as GPT-NeoX and
``transformers`` do, so an imported model gives the same logits in any dtype. No parameters, no
buffers: nothing enters the state dict. The element-wise work is not counted in the FLOPs
closed forms (FlopCounterMode does not count it either).
"""

from __future__ import annotations

import torch
from torch import nn


class Rotary(nn.Module):
    """Rotates the first ``dims`` channels of (B, H, n, head_dim) queries and keys at positions
    ``start .. start + n - 1``."""

    def __init__(self, dims: int, base: float = 10000.0):
        super().__init__()
        if dims < 2 or dims % 2:
            raise ValueError(f"rotary dims must be an even number >= 2, got {dims}")
        if not base > 0:
            raise ValueError(f"rotary base must be > 0, got {base}")
        self.dims, self.base = int(dims), float(base)

    def angles(self, start: int, n: int, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin)`` of shape (n, dims) for positions ``start .. start + n - 1``."""
        idx = torch.arange(0, self.dims, 2, dtype=torch.int64, device=device).float()
        inv_freq = 1.0 / (self.base ** (idx / self.dims))                     # (dims/2,)
        pos = torch.arange(start, start + n, device=device).float()
        freqs = pos[:, None] * inv_freq[None, :]                               # (n, dims/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def rotate(self, z: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        r, rest = z[..., :self.dims], z[..., self.dims:]
        half = self.dims // 2
        turned = torch.cat((-r[..., half:], r[..., :half]), dim=-1)
        out = r * cos + turned * sin
        return out if rest.shape[-1] == 0 else torch.cat((out, rest), dim=-1)

    def forward(self, q: torch.Tensor, k: torch.Tensor, start: int = 0
                ) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = self.angles(start, q.shape[-2], q.device, q.dtype)
        return self.rotate(q, cos, sin), self.rotate(k, cos, sin)

    def extra_repr(self) -> str:
        return f"dims={self.dims}, base={self.base:g}"


__all__ = ["Rotary"]
