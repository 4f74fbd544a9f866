"""Activation checkpointing as a stack kind: the layers of a plain stack, each run under
non-reentrant ``torch.utils.checkpoint`` while gradients are on::

    for k, layer in enumerate(stack):
        x = checkpoint(layer, x, k h)     # keeps x; the layer's activations recomputed in backward

The same function as :class:`~splitnet.integrators.stack.Stack` (forward, cached forward,
states, ODE are inherited); a backward keeps every layer's input and one layer's activations
at a time instead of every layer's. Turn a network's stack into one and back::

    model.layers = CheckpointedStack(model.layers, model.layers.step_size)
    model.layers = Stack(model.layers, model.layers.step_size)

(The parameters and their names are unchanged: the stack holds the same layers.)
This file is also the recipe for a new stack kind: a subclass that overrides what it changes.
"""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

from .stack import Stack


class CheckpointedStack(Stack):
    """A plain stack whose layers are checkpointed under gradients (module docstring)."""

    @staticmethod
    def saved_bytes(layer: float, n_layers: int, state: float) -> float:
        """Every layer's input and the activations of the layer being recomputed."""
        return n_layers * state + layer

    def run(self, x: torch.Tensor, plain: bool = False, **context) -> torch.Tensor:
        if not torch.is_grad_enabled():
            return super().run(x, **context)
        h = self.step_size
        for k, layer in enumerate(self):
            x = checkpoint(layer, x, k * h, use_reentrant=False, **context)
        return x

    def extra_repr(self) -> str:
        return super().extra_repr() + ", checkpointed"


__all__ = ["CheckpointedStack"]
