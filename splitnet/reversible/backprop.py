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

import torch
from torch import nn

from .index import stack_index
from .layer import ReversibleLayer, replay

MEMORY = "memory"
# the autograd engine torch.autograd.grad calls (None: use that function)
_ENGINE = getattr(getattr(torch.autograd, "variable", None), "Variable", None)
_ENGINE = getattr(_ENGINE, "_execution_engine", None)
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


# the attribute two_streams sets on every reversible layer of a network for its duration
STREAMS = "reversible_two_streams"


@contextlib.contextmanager
def two_streams(model: nn.Module, enabled: bool = True):
    """Inside, on CUDA: the backward of ``model``'s reversible stacks reconstructs stage
    ``i - 1`` on one stream while stage ``i``'s gradients are computed on another (PaReprop's
    schedule, Zhuang et al. 2023: the reconstruction chain and the gradient chain depend on
    each other only through each stage's recomputed graph). The same arithmetic as the one-stream
    backward; on the CPU it changes nothing. Nested uses restore the previous setting."""
    layers = [m for m in getattr(model, "module", model).modules()
              if isinstance(m, ReversibleLayer)]
    before = [getattr(m, STREAMS, False) for m in layers]
    for m in layers:
        setattr(m, STREAMS, bool(enabled))
    try:
        yield model
    finally:
        for m, b in zip(layers, before):
            setattr(m, STREAMS, b)


def _needs_rng(layers) -> bool:
    return any(m.p > 0 and m.training for layer in layers for m in _dropouts(layer))


def _dropouts(layer) -> tuple:
    """The layer's dropout modules, listed once per layer (the set is fixed at construction;
    only ``p`` and ``training`` change, and those are read at every call)."""
    found = layer.__dict__.get("_rev_dropouts")
    if found is None:
        found = tuple(m for m in layer.modules() if isinstance(m, nn.Dropout))
        layer.__dict__["_rev_dropouts"] = found
    return found


class _Run:
    """What one forward of the stack saw, kept to replay it in backward."""

    def __init__(self, layers, h: float, context: dict, device: torch.device, index=None):
        self.layers, self.h, self.context, self.device = layers, h, context, device
        self.seq = list(layers)     # slicing a Stack would build (and register) a new one
        self.index = stack_index(layers) if index is None else index
        self.seed = int(torch.randint(0, 2**62, (1,))) if _needs_rng(layers) else None
        try:
            self.autocast = (torch.is_autocast_enabled(device.type),
                             torch.get_autocast_dtype(device.type))
        except RuntimeError:              # a device autocast does not know (meta): off
            self.autocast = (False, torch.float32)

    def stages(self, context: dict | None = None):
        """``(layer, t, f, c h, clock, w, its parameters)`` of every stage, in order."""
        ctx = self.context if context is None else context
        for k, layer in enumerate(self.seq):
            for (f, dt, clock, w), ps in zip(layer.plan(ctx), self.index.stage_params(k)):
                yield layer, k * self.h, f, dt, clock, w, ps

    def rng(self, first: int):
        return None if self.seed is None else (self.seed, first, self.device)

    def forward(self, x1, x2):
        """Every layer called as a module (its hooks fire), field call i of the stack drawing
        from ``seed + i``; a pair layer without stages (an ODE layer) takes the pair as is."""
        first = 0
        for k, layer in enumerate(self.seq):
            if isinstance(layer, ReversibleLayer):
                x1, x2 = layer(x1, x2, k * self.h, rng=self.rng(first), **self.context)
                first += len(layer.stage_callables())      # one call per shear
            else:
                x1, x2 = layer(x1, x2, k * self.h, **self.context)
        return x1, x2


def _recompute(run: _Run, layer, f, dt: float, t: float, x_r, call: int):
    """The increment ``c h f(t, x_r)`` of field call ``call`` of the stack, under gradients,
    as the forward computed it: its random numbers and its autocast state (each context is
    entered only when it does something: it costs microseconds, and this runs once a stage)."""
    on, dtype = run.autocast
    if run.seed is None and not on:
        return layer.increment(f, dt, t, x_r)
    cast = torch.autocast(run.device.type, dtype=dtype) if on else contextlib.nullcontext()
    with cast, replay(run.rng(0), call):
        return layer.increment(f, dt, t, x_r)


def _vjp(dx, inputs: tuple, g):
    """``(d dx / d inputs)^T g``, None for an input ``dx`` does not depend on:
    ``torch.autograd.grad(dx, inputs, g, allow_unused=True)`` without its Python checks (the
    engine call it makes; a host-bound backward makes one per stage, and the checks were a
    tenth of it). Falls back to the public function where the engine is not where torch 2.x
    keeps it."""
    if _ENGINE is None or dx.shape != g.shape:
        return torch.autograd.grad(dx, inputs, g, allow_unused=True)
    return _ENGINE.run_backward((dx,), (g,), False, False, inputs, True, False)


def _records(run: _Run, ctx: dict, grads: dict) -> list:
    """Every stage as ``(layer, f, c h, time, written block, its parameters, their gradient
    buffers)`` (the parameters from the stack's index: no module walk)."""
    return [(layer, f, dt, t + clock, w, ps, [grads[id(p)] for p in ps])
            for layer, t, f, dt, clock, w, ps in run.stages(ctx)]


def _grad_buffers(params) -> dict:
    """Zeroed gradient buffers by parameter id, made before the walk so that nothing small is
    allocated between the stages' activations (the heap would stay pinned: :func:`_backward`).
    One ``zeros_like`` each: one allocation split into views was measured slower (the views
    cost more than the allocations)."""
    return {id(p): torch.zeros_like(p) for p in params}


def _add_grads(bufs: list, got) -> None:
    """A stage's parameter gradients ``got`` added into their buffers: one foreach add, or one
    by one where the engine returned None (a parameter the stage does not use)."""
    if not bufs:
        return
    try:
        torch._foreach_add_(bufs, got)
    except TypeError:          # a None among them: refused before anything is added
        for buf, gp in zip(bufs, got):
            if gp is not None:
                buf.add_(gp)


def _backward(run: _Run, y: list, g: list, memory, params) -> tuple:
    """Reconstruct the inputs stage by stage from the outputs ``y`` and pull the gradients
    ``g`` back (module docstring); returns the gradient per parameter by id (and the memory's
    under ``MEMORY``), the input pair and its gradient. The gradient buffers are allocated
    before the walk: small tensors allocated between the stages' activations would pin the
    allocator's heap, and the peak memory of a step would grow with depth (measured: 190 MB at
    32 layers against 51 MB at 4). The pair and its gradient are updated in place (copies made
    once, the inputs autograd handed over are not written): no allocation per stage beyond the
    recomputation's own. The loop is kept lean (a host-bound backward spends its time here,
    once per stage)."""
    grads = _grad_buffers(params)
    ctx = dict(run.context)
    # keys and values a cross-attention stored without gradients would cut the memory's
    ctx.pop("memory_cache", None)
    extra = ()
    if memory is not None:
        leaf = ctx[MEMORY] = memory.detach().requires_grad_(memory.requires_grad)
        if leaf.requires_grad:
            grads[MEMORY] = torch.zeros_like(memory)
            extra = (leaf,)
    records = _records(run, ctx, grads)
    y = [y[0].clone(), y[1].clone()]
    g = [g[0].clone(), g[1].clone()]
    if run.device.type == "cuda" and getattr(run.seq[0], STREAMS, False):
        _backward_two_streams(run, records, y, g, extra, grads)
        return grads, y, g
    fast = run.seed is None and not run.autocast[0] and _ENGINE is not None
    with torch.enable_grad():
        for i in range(len(records) - 1, -1, -1):
            layer, f, dt, t, w, ps, bufs = records[i]
            x_r = y[1 - w].detach().requires_grad_()
            dx = layer.increment(f, dt, t, x_r) if fast else \
                _recompute(run, layer, f, dt, t, x_r, i)
            y[w].sub_(dx.detach())
            gw = g[w] if g[w].dtype == dx.dtype else g[w].to(dx.dtype)
            out = _vjp(dx, (x_r, *ps, *extra), gw)
            if out[0] is not None:
                g[1 - w].add_(out[0])
            _add_grads(bufs, out[1:1 + len(ps)])
            if extra and out[-1] is not None:
                grads[MEMORY].add_(out[-1])
    return grads, y, g


def _accumulate(bufs: list, got, g_other, grad_r):
    """``g_other + grad_r`` (a new tensor: another stream may still read the old one) and the
    parameters' gradients added into their buffers."""
    _add_grads(bufs, got)
    return g_other if grad_r is None else g_other + grad_r


def _backward_two_streams(run: _Run, records: list, y: list, g: list, extra, grads) -> None:
    """:func:`_backward`'s walk on two CUDA streams (:func:`two_streams`): stage ``i`` runs on
    stream ``i % 2``; its recomputation waits for the reconstruction of stage ``i + 1`` (an
    event recorded right after it, before that stage's gradients are launched), its gradients
    for the gradients of stage ``i + 1``. The pair and its gradient are replaced, not written
    (the other stream may still read them), and every tensor one stream hands the other is
    recorded on it for the allocator."""
    main = torch.cuda.current_stream(run.device)
    side = torch.cuda.Stream(run.device)
    side.wait_stream(main)
    streams = (main, side)
    for t in (*y, *g):          # made on the main stream, read on both
        t.record_stream(side)
    ev_y = ev_g = None
    with torch.enable_grad():
        for i in range(len(records) - 1, -1, -1):
            layer, f, dt, t, w, ps, bufs = records[i]
            s, other = streams[i % 2], streams[1 - i % 2]
            with torch.cuda.stream(s):
                if ev_y is not None:
                    s.wait_event(ev_y)
                x_r = y[1 - w].detach().requires_grad_()
                dx = _recompute(run, layer, f, dt, t, x_r, i)
                y[w] = y[w] - dx.detach()
                y[w].record_stream(other)
                ev_y = s.record_event()
                if ev_g is not None:
                    s.wait_event(ev_g)
                gw = g[w] if g[w].dtype == dx.dtype else g[w].to(dx.dtype)
                out = _vjp(dx, (x_r, *ps, *extra), gw)
                g[1 - w] = _accumulate(bufs, out[1:1 + len(ps)], g[1 - w], out[0])
                g[1 - w].record_stream(other)
                if extra and out[-1] is not None:
                    grads[MEMORY].add_(out[-1])
                ev_g = s.record_event()
    main.wait_stream(side)


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
        grads, _, g = _backward(ctx.run, y, g, memory, ctx.params)
        return (None, g[0], g[1], grads.get(MEMORY), *(grads[id(p)] for p in ctx.params))


def run_stack(layers, x1: torch.Tensor, x2: torch.Tensor, h: float, plain: bool = False,
              **context):
    """``(x1, x2)`` through ``layers`` (layer k at time ``k h``) -> the final pair. With
    gradients enabled and ``plain`` false: one autograd Function that stores the final pair only
    (module docstring); otherwise each layer's forward, ordinarily (also for pair layers that
    are not :class:`ReversibleLayer`: a refined network's ODE layers). The parameters come
    from the stack's index (:func:`~splitnet.reversible.index.stack_index`), not a walk of its
    modules."""
    context = {k: v for k, v in context.items() if v is not None}
    index = stack_index(layers)
    run = _Run(layers, h, context, x1.device, index)
    params = index.params()
    wants_grad = torch.is_grad_enabled() and (x1.requires_grad or x2.requires_grad
                                              or bool(params))
    if plain or not wants_grad or not all(isinstance(la, ReversibleLayer) for la in layers):
        return run.forward(x1, x2)
    memory = context.get(MEMORY)
    memory = memory if isinstance(memory, torch.Tensor) else x1.new_empty(0)
    return _Stack.apply(run, x1, x2, memory, *params)


__all__ = ["MEMORY", "PLAIN", "STREAMS", "plain_autograd", "run_stack", "two_streams"]
