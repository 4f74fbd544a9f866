"""The Highway Transformer's self-dependency unit (Chai et al. 2020), added to any field:
``f(t, x) + SDU(x)`` with ``SDU(x) = T(x) * (x W_2 + b_2)``, ``T = sigmoid or tanh(x W_1 + b_1)``.
"""

from __future__ import annotations

import torch
from torch import nn

from ..configs.config import GATES


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

    ``cache`` (generation) and a memory context are handed to the wrapped field; the gate is
    position-wise and needs neither. Works on any field: :class:`splitnet.configs.kinds.GatedKind`
    wraps any kind."""

    def __init__(self, field: nn.Module, d_model: int, gate: str = "sigmoid"):
        super().__init__()
        self.field = field
        self.sdu = SDU(d_model, gate)

    @property
    def supports_cache(self) -> bool:
        return getattr(self.field, "supports_cache", False)

    @property
    def mixes_tokens(self) -> bool:
        return getattr(self.field, "mixes_tokens", True)

    @property
    def uses_memory(self) -> bool:
        return getattr(self.field, "uses_memory", False)

    @property
    def masks_padding(self) -> bool:
        return getattr(self.field, "masks_padding", False)

    @property
    def reads_embedding(self) -> bool:
        return getattr(self.field, "reads_embedding", False)

    def forward(self, t, x: torch.Tensor, cache=None, **context) -> torch.Tensor:
        if cache is not None:
            context["cache"] = cache
        return self.field(t, x, **context) + self.sdu(x)


__all__ = ["SDU", "Gated"]
