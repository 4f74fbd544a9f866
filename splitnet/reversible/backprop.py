"""Backpropagation through a stack of reversible layers that stores nothing per layer.

:func:`run_stack` advances ``(x1, x2)`` through the layers. When gradients are wanted it runs
as one ``torch.autograd.Function`` that keeps only the final pair; its backward walks the
stages in reverse, and for each (writing block ``w``, reading ``r``, increment ``c h f``)::

    x_r = y_r                                   (untouched by the stage)
    dx  = c h f(x_r)                            recomputed under grad
    x_w = y_w - dx                              the input, reconstructed
    g_r += (d dx / d x_r)^T g_w                 a vector-Jacobian product; g_w passes through
    g_theta += (d dx / d theta)^T g_w           the stage's parameters (shared ones accumulate)

replaying what the forward saw: the random numbers of every field call (dropout: each call
draws from a generator seeded ``seed + call``, the seed drawn once per forward from torch's
global generator, so the ordinary-autograd path draws the same numbers), the autocast state,
the padding masks and the decoder's memory (whose gradient is returned too).
:func:`plain_autograd` makes a network use ordinary autograd instead (the same function and
the same random numbers; activations stored per stage: faster, not flat in memory).
"""

from __future__ import annotations

import contextlib
import functools

import torch
from torch import nn

from .layer import ReversibleLayer, replay

MEMORY = "memory"
# the attribute plain_autograd sets on a network for its duration
PLAIN = "reversible_plain_autograd"


@contextlib.contextmanager
def plain_autograd(model: nn.Module):
    """Inside: ``model`` (or the module a DDP / FSDP wrapper holds) backpropagates its
    reversible layers with ordinary autograd (for checks, and for users who prefer speed to
    memory). Nested uses restore the previous setting."""
    target = getattr(model, "module", model)
    if not isinstance(target, nn.Module):
        raise TypeError(f"plain_autograd takes a network (torch.nn.Module), got "
                        f"{type(model).__name__}")
    before = getattr(target, PLAIN, False)
    setattr(target, PLAIN, True)
    try:
        yield model
    finally:
        setattr(target, PLAIN, before)


def _needs_rng(layers) -> bool:
    return any(isinstance(m, nn.Dropout) and m.p > 0 and m.training
               for layer in layers for m in layer.modules())


class _Run:
    """What one forward of the stack saw, kept to replay it in backward."""

    def __init__(self, layers, h: float, context: dict, device: torch.device):
        self.layers, self.h, self.context, self.device = layers, h, context, device
        self.seed = int(torch.randint(0, 2**62, (1,))) if _needs_rng(layers) else None
        try:
            self.autocast = (torch.is_autocast_enabled(device.type),
                             torch.get_autocast_dtype(device.type))
        except RuntimeError:              # a device autocast does not know (meta): off
            self.autocast = (False, torch.float32)

    def stages(self, context: dict | None = None):
        """``(layer, t, f, c h, clock, w)`` of every stage, in order."""
        ctx = self.context if context is None else context
        for k, layer in enumerate(self.layers):
            for f, dt, clock, w in layer.plan(ctx):
                yield layer, k * self.h, f, dt, clock, w

    def rng(self, first: int):
        return None if self.seed is None else (self.seed, first, self.device)

    def forward(self, x1, x2):
        """Every layer called as a module (its hooks fire), field call i of the stack drawing
        from ``seed + i``; a pair layer without stages (an ODE layer) takes the pair as is."""
        first = 0
        for k, layer in enumerate(self.layers):
            if isinstance(layer, ReversibleLayer):
                x1, x2 = layer(x1, x2, k * self.h, rng=self.rng(first), **self.context)
                first += len(layer.stages)
            else:
                x1, x2 = layer(x1, x2, k * self.h, **self.context)
        return x1, x2


def _params(f) -> list:
    """The parameters a stage's callable uses: its module's, or a sum stage's components'."""
    mod = f.func if isinstance(f, functools.partial) else f
    if isinstance(mod, nn.Module):
        return [p for p in mod.parameters() if p.requires_grad]
    parts = getattr(mod, "fields", ())          # a SumField (d+x)
    return list({id(p): p for g in parts for p in _params(g)}.values())


def _backward(run: _Run, y: list, g: list, memory, params) -> dict:
    """Reconstruct the inputs stage by stage from the outputs ``y`` and pull the gradients
    ``g`` back (module docstring); returns the gradient per parameter by id, and the memory's
    under ``MEMORY``. The gradient buffers are allocated before the walk: small tensors
    allocated between the stages' activations would pin the allocator's heap, and the peak
    memory of a step would grow with depth (measured: 190 MB at 32 layers against 51 MB at 4)."""
    grads = {id(p): torch.zeros_like(p) for p in params}
    ctx = dict(run.context)
    # keys and values a cross-attention stored without gradients would cut the memory's
    ctx.pop("memory_cache", None)
    leaf = None
    if memory is not None:
        leaf = ctx[MEMORY] = memory.detach().requires_grad_(memory.requires_grad)
        if leaf.requires_grad:
            grads[MEMORY] = torch.zeros_like(memory)
    stages = list(run.stages(ctx))
    on, dtype = run.autocast
    for i in range(len(stages) - 1, -1, -1):
        layer, t, f, dt, clock, w = stages[i]
        x_r = y[1 - w].detach().requires_grad_()
        with torch.enable_grad(), replay(run.rng(0), i), \
                torch.autocast(run.device.type, dtype=dtype, enabled=on):
            dx = layer.increment(f, dt, t + clock, x_r)
        y[w] = y[w] - dx.detach()
        params = _params(f)
        targets = [x_r] + params + ([leaf] if leaf is not None and leaf.requires_grad else [])
        out = torch.autograd.grad(dx, targets, g[w].to(dx.dtype), allow_unused=True)
        if out[0] is not None:
            g[1 - w] = g[1 - w] + out[0].to(g[1 - w].dtype)
        for p, gp in zip(targets[1:], out[1:]):
            key = MEMORY if p is leaf else id(p)
            if gp is not None:
                grads[key].add_(gp)
    return grads


class _Stack(torch.autograd.Function):
    """``(x1, x2, memory, *params) -> (y1, y2)``; saves the outputs only."""

    @staticmethod
    def forward(ctx, run, x1, x2, memory, *params):
        with torch.no_grad():
            y1, y2 = run.forward(x1, x2)
        ctx.run, ctx.has_memory = run, memory is not None and memory.numel() > 0
        ctx.save_for_backward(y1, y2, *([memory] if ctx.has_memory else []))
        ctx.params = params
        return y1, y2

    @staticmethod
    def backward(ctx, g1, g2):
        saved = ctx.saved_tensors
        y, memory = [saved[0].detach(), saved[1].detach()], saved[2] if ctx.has_memory else None
        g = [torch.zeros_like(y[0]) if g1 is None else g1,
             torch.zeros_like(y[1]) if g2 is None else g2]
        grads = _backward(ctx.run, y, g, memory, ctx.params)
        return (None, g[0], g[1], grads.get(MEMORY), *(grads[id(p)] for p in ctx.params))


def run_stack(layers, x1: torch.Tensor, x2: torch.Tensor, h: float, plain: bool = False,
              **context):
    """``(x1, x2)`` through ``layers`` (layer k at time ``k h``) -> the final pair. With
    gradients enabled and ``plain`` false: one autograd Function that stores the final pair only
    (module docstring); otherwise each layer's forward, ordinarily (also for pair layers that
    are not :class:`ReversibleLayer`: a refined network's ODE layers)."""
    context = {k: v for k, v in context.items() if v is not None}
    run = _Run(layers, h, context, x1.device)
    params = list({id(p): p for layer in layers for p in layer.parameters()
                   if p.requires_grad}.values())
    wants_grad = torch.is_grad_enabled() and (x1.requires_grad or x2.requires_grad
                                              or bool(params))
    if plain or not wants_grad or not all(isinstance(la, ReversibleLayer) for la in layers):
        return run.forward(x1, x2)
    memory = context.get(MEMORY)
    memory = memory if isinstance(memory, torch.Tensor) else x1.new_empty(0)
    return _Stack.apply(run, x1, x2, memory, *params)


__all__ = ["MEMORY", "PLAIN", "plain_autograd", "run_stack"]
