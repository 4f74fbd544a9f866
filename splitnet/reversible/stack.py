"""A reversible stack: the pair ``x1 = x2 = x`` stepped by every layer, read out as its mean::

    x1, x2 = x, x                                   # on the grid in exact mode
    for k, layer in enumerate(stack):
        x1, x2 = layer(x1, x2, k h)                 # ReversibleLayer: shears, invertible
    x = (x1 + x2) / 2

With gradients the stack is one autograd Function that stores the final pair only and
recomputes each layer's input by its inverse in backward (:mod:`.backprop`).
"""

from __future__ import annotations

import torch

from ..integrators.stack import Stack
from ..integrators.subflows import Euler, get_method
from .backprop import run_stack
from .layer import check_grid, end_pair, start_pair


class ReversibleStack(Stack):
    """Reversible layers on a partitioned state (module docstring); ``grid``: exact mode
    (:func:`splitnet.reversible.layer.to_grid`) for the starting pair."""

    def __init__(self, layers=(), step_size: float = 1.0, grid: int | None = None):
        super().__init__(layers, step_size)
        self.grid = check_grid(grid)

    def settings(self) -> dict:
        return {**super().settings(), "grid": self.grid}

    @staticmethod
    def settings_of(c) -> dict:
        return {"step_size": c.step_size, "grid": c.reversible_grid}

    @staticmethod
    def saved_bytes(layer: float, n_layers: int, state: float) -> float:
        """One layer's activations (the one being recomputed) and the final pair with its
        gradient, whatever the depth."""
        return layer + 4 * state

    def run(self, x: torch.Tensor, plain: bool = False, **context) -> torch.Tensor:
        x1, x2 = start_pair(x, self.grid)
        if torch.is_grad_enabled() and not plain:
            # the store would keep the memory's keys and values from the forward, projected
            # without gradients, for the backward's recomputation: each stage projects its own
            context.pop("memory_cache", None)
        return end_pair(*run_stack(self, x1, x2, self.step_size, plain=plain, **context))

    def run_cached(self, x: torch.Tensor, caches, **context) -> torch.Tensor:
        h = self.step_size
        x1, x2 = start_pair(x, self.grid)
        for k, (layer, cs) in enumerate(zip(self, caches)):
            x1, x2 = layer.forward_cached(x1, x2, k * h, cs, **context)
        return end_pair(x1, x2)

    def states(self, x: torch.Tensor, **context):
        """The final state and the mean of the pair after every stage."""
        h, pairs = self.step_size, []
        x1, x2 = start_pair(x, self.grid)
        for k, layer in enumerate(self):
            x1, x2 = layer(x1, x2, k * h, states=pairs, **context)
        return end_pair(x1, x2), [end_pair(a, b) for a, b in pairs]

    # the ODE of the pair: dx1/dt = D(x2) + X(x2; m), dx2/dt = C(x1), started at (x, x)
    restartable = False   # a state read out is the mean of a pair, not the pair itself

    def ode_start(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([x, x])

    def ode_fields(self, layers=None) -> list:
        return [layer.pair_ode_field() for layer in (self if layers is None else layers)]

    def ode_step(self, k: int, X: torch.Tensor) -> torch.Tensor:
        return torch.stack(self[k](X[0], X[1], k * self.step_size))

    def ode_read(self, X: torch.Tensor) -> torch.Tensor:
        return end_pair(X[:, 0], X[:, 1])

    def refuses(self, method) -> str | None:
        m = get_method(method)
        if isinstance(m, Euler):
            return None
        return (f"a reversible network's stages are shears, whose Euler step is their exact "
                f"flow: refine it with method='euler' (more substeps, other schemes) or its "
                f"ODE (ode_model), not {m.name!r}")

    def extra_repr(self) -> str:
        grid = f", grid=2^-{self.grid}" if self.grid is not None else ""
        return super().extra_repr() + ", reversible" + grid


__all__ = ["ReversibleStack"]
