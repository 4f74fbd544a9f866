"""A stack: a network's layers run in order, each one step of its scheme.

Layer k of a stack with step h integrates ``[k h, (k + 1) h]``::

    for k, layer in enumerate(stack):
        x = layer(x, k h)

A network holds its layers in a stack and asks the stack, never its config, how to run them:
forward (:meth:`Stack.run`), forward for new tokens over key/value caches (:meth:`Stack.run_cached`:
generation, beam search), the states after every stage (:meth:`Stack.states`: trajectories)
and the ODE its layers are steps of (:meth:`Stack.ode_start`, :meth:`Stack.ode_fields`,
:meth:`Stack.ode_read`: trajectories). A stack is an ``nn.ModuleList`` of its layers, so a
checkpoint's keys are those of a list (``layers.k...``) whatever the stack's kind.

Kinds: :class:`Stack` (plain), :class:`splitnet.reversible.stack.ReversibleStack` (a pair
``(x1, x2)``, nothing stored for backward),
:class:`splitnet.integrators.checkpointed.CheckpointedStack` (activation checkpointing per
layer). A new kind is one subclass overriding what it changes
(docs/architecture.md).
"""

from __future__ import annotations

import torch
from torch import nn


class Stack(nn.ModuleList):
    """The layers of one network, run in order at step ``step_size`` (layer k at ``k h``)."""

    def __init__(self, layers=(), step_size: float = 1.0):
        super().__init__(layers)
        self.step_size = float(step_size)

    # -- construction ------------------------------------------------------------------------
    def settings(self) -> dict:
        """The keyword arguments that rebuild this kind of stack around other layers."""
        return {"step_size": self.step_size}

    @staticmethod
    def settings_of(c) -> dict:
        """The settings a network config ``c`` gives this kind of stack."""
        return {"step_size": c.step_size}

    def like(self, layers, **changes) -> Stack:
        """A stack of the same kind and settings (``changes`` replacing some) over ``layers``:
        re-discretisation, depth changes."""
        return type(self)(layers, **{**self.settings(), **changes})

    def __getitem__(self, idx):
        if isinstance(idx, slice):         # torch's list would forget the step and the kind
            return self.like(list(self._modules.values())[idx])
        return super().__getitem__(idx)

    @staticmethod
    def saved_bytes(layer: float, n_layers: int, state: float) -> float:
        """Activation bytes per token a backward keeps: ``layer`` per layer (its stages'),
        ``state`` for one state. A plain stack keeps every layer's."""
        return n_layers * layer

    # -- running -----------------------------------------------------------------------------
    def run(self, x: torch.Tensor, plain: bool = False, **context) -> torch.Tensor:
        """``x`` through every layer, layer k at time ``k h``. ``context``: what the fields
        read besides the state (a decoder's memory, an encoder's padding mask). ``plain``:
        ordinary autograd whatever the kind (:func:`splitnet.reversible.plain_autograd`)."""
        h = self.step_size
        for k, layer in enumerate(self):
            x = layer(x, k * h, **context)
        return x

    def run_cached(self, x: torch.Tensor, caches, **context) -> torch.Tensor:
        """:meth:`run` for new tokens ``x`` whose earlier tokens' keys and values sit in
        ``caches`` (one entry per layer: :class:`splitnet.nets.generation.GenerationCache`)."""
        h = self.step_size
        for k, (layer, cs) in enumerate(zip(self, caches)):
            x = layer.forward_cached(x, k * h, cs, **context)
        return x

    def states(self, x: torch.Tensor, **context):
        """``(final state, [the state after every stage of every layer]``)."""
        h, out = self.step_size, []
        for k, layer in enumerate(self):
            x, st = layer(x, k * h, return_states=True, **context)
            out += st
        return x, out

    # -- the ODE the layers are steps of -----------------------------------------------------
    restartable = True    # the ODE's state is the network's: a path can restart at any layer

    def ode_start(self, x: torch.Tensor) -> torch.Tensor:
        """The ODE's state at the stack's input ``x``."""
        return x

    def ode_fields(self, layers=None) -> list:
        """One field ``f(t, X)`` per layer (of ``layers``, default the stack's): the ODE layer
        k is a step of over ``[k h, (k + 1) h]``."""
        return [layer.ode_field() for layer in (self if layers is None else layers)]

    def ode_step(self, k: int, X: torch.Tensor) -> torch.Tensor:
        """Layer ``k`` applied to an ODE state ``X`` (its step of the ODE from ``k h``)."""
        return self[k](X, k * self.step_size)

    def ode_read(self, X: torch.Tensor) -> torch.Tensor:
        """The network's states from ODE states ``X`` stacked along dimension 0."""
        return X

    def refuses(self, method) -> str | None:
        """Why this stack's layers cannot be re-discretised with sub-flow ``method``, or None."""
        return None

    def extra_repr(self) -> str:
        return f"h={self.step_size:g}"


__all__ = ["Stack"]
