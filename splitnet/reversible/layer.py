"""A reversible splitting layer: a scheme's step on a partitioned state ``(x1, x2)``.

Attention (diffusion) writes ``x1`` reading ``x2``, the feed-forward (convection) writes ``x2``
reading ``x1``, cross-attention writes ``x1`` reading ``x2`` and the memory. Each stage is a
**shear**::

    x_w <- x_w + c h f(t + clock, x_r)          (x_r untouched)

whose Euler step is its exact flow. So the layer is exactly the scheme's step on the shear
fields ``D~(x1, x2) = (D(x2), 0)``, ``C~(x1, x2) = (0, C(x1))``, ``X~ = (X(x2; m), 0)``: every
composition keeps its order with plain residual sub-layers (Lie–Trotter 1, Strang 2, Yoshida4
4), and the step is explicitly invertible: stages reversed, each increment subtracted
(:meth:`ReversibleLayer.inverse`). Lie–Trotter (``d c``) is the RevNet / Reformer block
``y1 = x1 + F(x2)``, ``y2 = x2 + G(y1)``; Strang (``c/2 d c/2``) is a leapfrog (Störmer–Verlet)
step.

**Time-dependent weights** (a stage callable that says ``time_dependent``: a
:class:`~splitnet.fields.depthfield.DepthField` with K > 1 functions of depth). A shear's exact
flow is then ``x_w += int_a^{a + c h} f(s, x_r) ds`` over the stage's clock interval (``x_r``
is constant during it, so nothing else is exact): Gauss–Legendre quadrature with
``m = ceil(p / 2)`` points, of order ``2 m >= p`` for a scheme of order p (the midpoint for
Lie–Trotter and Strang, 2 points for Blanes–Moan's order 4, 3 for order 6), and the midpoint
for every composition of Strang steps (Yoshida4 too:
:func:`splitnet.configs.depth.quadrature_points`) and exact
splittings. The m terms are m consecutive shears of the same block, coefficients ``w_q c`` at
the nodes' times ``a + xi_q c h``: they all read the same ``x_r``, so their sum is the
quadrature, and each is a stage of the plan like any other (inverted, recomputed in backward,
replayed, cached and put on the grid one by one). A stage of a time-independent field keeps its
one evaluation at its clock's start.

**Exact mode** (``grid=k``): every increment is rounded to a multiple of ``2^-k`` (a
straight-through gradient: the rounding's derivative is taken as 1), so on a state that starts
on that grid every sum is exact in float32 and the inverse reconstructs the input bit for bit
at any depth, whatever the precision of the fields' compute. It holds while ``|x| < 2^(24-k)``
(float32's 24-bit significand): :func:`check_grid` raises before that bound is reached.
"""

from __future__ import annotations

import contextlib
import functools

import numpy as np
import torch
from torch import nn

from ..configs.depth import quadrature_points
from ..integrators.layers import SplitLayer
from ..integrators.subflows import Euler, get_method
from ..stagelists.stages import WRITES, reversible_unsupported

# the float32 significand: a grid-k state is exact while |x| < 2 ** (FLOAT32_BITS - k)
FLOAT32_BITS = 24
MAX_GRID = 20


def check_grid(grid) -> int | None:
    """``reversible_grid``: ``None`` (off) or an int k in [1, 20]: increments on multiples of
    2^-k."""
    if grid is None:
        return None
    if isinstance(grid, bool) or not isinstance(grid, int) or not 1 <= grid <= MAX_GRID:
        raise ValueError(f"reversible_grid must be an int in [1, {MAX_GRID}] (increments on "
                         f"multiples of 2^-k) or None, got {grid!r}")
    return grid


def to_grid(x: torch.Tensor, grid: int | None) -> torch.Tensor:
    """``x`` rounded to a multiple of ``2^-grid`` in float32, with a straight-through gradient
    (``grid`` None: ``x`` unchanged)."""
    if grid is None:
        return x
    scale = float(2 ** grid)
    q = torch.round(x.float() * scale) / scale
    return x + (q - x).detach() if x.requires_grad else q


def guard(x: torch.Tensor, grid: int | None, where: str) -> None:
    """Raise when a grid-``k`` state nears ``2^(24-k)``, past which float32 sums stop being
    exact (the reconstruction would drift)."""
    if grid is None:
        return
    bound = 2.0 ** (FLOAT32_BITS - grid - 1)      # one bit of headroom for the next sum
    top = float(x.detach().abs().max()) if x.numel() else 0.0
    if not top < bound:
        raise FloatingPointError(
            f"reversible_grid={grid}: |x| reached {top:g} at {where}, at or above 2^"
            f"{FLOAT32_BITS - grid - 1} = {bound:g}; float32 sums on a 2^-{grid} grid stop "
            f"being exact there (lower reversible_grid)")


@contextlib.contextmanager
def replay(rng, call: int):
    """Field call ``call`` of a stack draws its random numbers (dropout) from generators
    seeded ``seed + call`` (restored after), ``rng = (seed, first call of the layer, device)``;
    ``None``: torch's generators as they are. So a recomputation in backward draws the same."""
    if rng is None:
        yield
        return
    seed, first, device = rng
    devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed + first + call)
        yield


def start_pair(x: torch.Tensor, grid: int | None = None):
    """The pair a network starts from: ``x1 = x2 = x`` (on the grid in exact mode)."""
    x = to_grid(x, grid)
    return x, x


def end_pair(x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    """What a network reads out of the final pair: the mean ``(x1 + x2) / 2``. With zero fields
    it is the embedding, as for a plain network of the same width (the head, its parameters
    and its initial scale stay the Transformer's)."""
    return (x1 + x2) / 2


def pair_field(fields: dict):
    """The partitioned ODE of a reversible layer on the stacked pair ``X = (x1, x2)``::

        dX/dt = (sum of the fields that write x1, at x2;  sum of those that write x2, at x1)

    (``D(x2) + X(x2; m)`` and ``C(x1)`` for a decoder). ``fields``: field name -> callable
    ``f(t, x)`` (:meth:`SplitLayer.field` of each); a memory goes to the fields that read one:
    ``rhs(t, X, memory=m, memory_mask=...)``."""
    from ..integrators.flows import context_for

    def rhs(t, X, **context):
        out = [torch.zeros_like(X[0]), torch.zeros_like(X[1])]
        for name, f in fields.items():
            w = WRITES[name]
            out[w] = out[w] + f(t, X[1 - w], **context_for(f, context))
        return torch.stack(out)
    return rhs


def time_dependent(f) -> bool:
    """Whether the stage callable ``f`` (a field, or a sum stage's :class:`SumField`) has weights
    that change with t."""
    if getattr(f, "time_dependent", False) is True:
        return True
    parts = getattr(f, "fields", None)
    return isinstance(parts, list) and any(time_dependent(g) for g in parts)


def shear_plan(plan, fields, points: int) -> tuple:
    """``(stage, c h, time offset, ends the stage)`` of every shear: one per stage of a
    time-independent field, at its clock's start; ``points`` for a stage of a time-dependent
    one, coefficients ``w_q c h`` at ``clock + xi_q c h`` (module docstring; ``points=0``: one
    at the clock's start, the first-order control)."""
    if points == 0:
        rule = [(0.0, 1.0)]
    else:
        nodes, weights = np.polynomial.legendre.leggauss(points)
        rule = [(float((x + 1) / 2), float(w / 2)) for x, w in zip(nodes, weights)]
    out = []
    for j, ((dt, clock), f) in enumerate(zip(plan, fields)):
        if not time_dependent(f):
            out.append((j, dt, clock, True))
            continue
        out += [(j, w * dt, clock + xi * dt, q == len(rule) - 1)
                for q, (xi, w) in enumerate(rule)]
    return tuple(out)


def _same_shapes(a: torch.Tensor, b: torch.Tensor) -> None:
    """A pair's blocks are one shape (else a raw broadcasting error, or a silent broadcast)."""
    if a.shape != b.shape:
        raise ValueError(f"a reversible step's pair has blocks of one shape; got "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")


class ReversibleLayer(SplitLayer):
    """``(x1, x2) -> (y1, y2)``: the scheme's step on the shear fields (module docstring).
    Built like a :class:`~splitnet.integrators.layers.SplitLayer` (its fields, plan, ODE views
    and coefficients are the same); ``method`` must be Euler (on a shear every explicit method
    equals it, at more evaluations); ``grid``: exact mode; ``quadrature``: the Gauss points
    per stage of a time-dependent field (default ``quadrature_points`` of the scheme's order;
    0: one evaluation at the stage's clock start, which makes every scheme first order: the
    control of docs/elastic.md)."""

    def __init__(self, scheme, diffusion=None, convection=None, step_size: float = 1.0,
                 method: str = "euler", *, fields=None, grid: int | None = None,
                 quadrature: int | None = None):
        super().__init__(scheme, diffusion, convection, step_size, method, fields=fields)
        if not isinstance(self.method, Euler):
            raise ValueError(f"a reversible layer takes method='euler' (the Euler step of a "
                             f"shear is its exact flow; {self.method.name!r} would repeat it), "
                             f"got {self.method.name!r}")
        reason = reversible_unsupported(self.stages)
        if reason:
            raise ValueError(f"scheme {self.name!r} cannot be reversible: {reason}")
        self.writes = tuple(WRITES[st.components[0]] for st in self.stages)
        self.grid = check_grid(grid)
        if quadrature is not None and (isinstance(quadrature, bool) or
                                       not isinstance(quadrature, int) or quadrature < 0):
            raise ValueError(f"quadrature must be an int >= 0 (Gauss points per stage; 0: the "
                             f"clock's start), got {quadrature!r}")
        self.quadrature = quadrature
        points = quadrature_points(getattr(scheme, "order", 1), self.stages) \
            if quadrature is None else quadrature
        self._shears = shear_plan(self._plan, self._fields, points)

    def rebuilt(self, scheme, fields: dict, method) -> ReversibleLayer:
        """The same shears, more of them (Euler is exact on a shear, so ``method`` is not
        used): a re-discretisation keeps the layer reversible, at its grid."""
        return ReversibleLayer(scheme, step_size=self.step_size, fields=fields, grid=self.grid,
                               quadrature=self.quadrature)

    def ode_layer(self, method="exact"):
        """This layer as the exact flow of its partitioned ODE (:class:`PairODELayer`)."""
        return PairODELayer(self, method)

    def plan(self, context: dict) -> list:
        """``(field callable, c h, clock, written block)`` per shear, context bound: one per
        stage, m per stage of a time-dependent field (module docstring)."""
        fields = self._with_context(context)
        return [(fields[j], dt, clock, self.writes[j]) for j, dt, clock, _ in self._shears]

    def stage_callables(self) -> tuple:
        """The callable of every shear of :meth:`plan` (of every stage when no field depends
        on time): the stack's index and the generation caches follow the plan."""
        return tuple(self._fields[j] for j, _, _, _ in self._shears)

    def increment(self, f, dt: float, t: float, x_r: torch.Tensor) -> torch.Tensor:
        """``c h f(t, x_r)`` (on the grid in exact mode)."""
        dx = f(t, x_r)
        return to_grid(dx if dt == 1.0 else dt * dx, self.grid)

    def forward(self, x1: torch.Tensor, x2: torch.Tensor, t: float = 0.0,
                states: list | None = None, rng=None, **context):
        """One step from the pair at time ``t``: the stages in order, each ``x_w += c h
        f(t + clock, x_r)``. ``context``: as :meth:`SplitLayer.forward` (a memory).
        ``states``: a list that gets the pair after every stage; ``rng``: see :func:`replay`.
        In exact mode each new state is checked against the grid's bound (:func:`guard`)."""
        _same_shapes(x1, x2)
        x = [x1, x2]
        for j, (f, dt, clock, w) in enumerate(self.plan(context)):
            if rng is None:            # no context to enter: a deep narrow network is host-bound
                x[w] = x[w] + self.increment(f, dt, t + clock, x[1 - w])
            else:
                with replay(rng, j):
                    x[w] = x[w] + self.increment(f, dt, t + clock, x[1 - w])
            if self.grid is not None:
                guard(x[w], self.grid, f"stage {j + 1} at time {t + clock:g}")
            if states is not None and self._shears[j][3]:
                states.append((x[0], x[1]))
        return x[0], x[1]

    def inverse(self, y1: torch.Tensor, y2: torch.Tensor, t: float = 0.0, **context):
        """The pair this step maps to ``(y1, y2)``: the stages reversed, each ``x_w -= c h
        f(t + clock, x_r)`` (the same increment, recomputed from the untouched block)."""
        _same_shapes(y1, y2)
        y = [y1, y2]
        for f, dt, clock, w in reversed(self.plan(context)):
            y[w] = y[w] - self.increment(f, dt, t + clock, y[1 - w])
        return y[0], y[1]

    def forward_cached(self, x1, x2, t: float, caches, **context):
        """The step for new tokens of a causal network with its earlier tokens' keys and values
        in ``caches`` (one entry per stage, as :meth:`SplitLayer.forward_cached`)."""
        from ..integrators.layers import EvaluationCaches

        x = [x1, x2]
        for j, ((f, dt, clock, w), c) in enumerate(zip(self.plan(context), caches)):
            g = EvaluationCaches(f, c) if c is not None else f
            x[w] = x[w] + self.increment(g, dt, t + clock, x[1 - w])
            guard(x[w], self.grid, f"stage {j + 1} at time {t + clock:g}")
        return x[0], x[1]

    def pair_ode_field(self):
        """The ODE this layer is a step of, on the stacked pair (:func:`pair_field` of
        :meth:`SplitLayer.field` of each field): with Euler sub-steps on shears, the layer is
        the scheme's step of it, of the scheme's order."""
        return pair_field({f: self.field(f) for f in self.field_names})

    def extra_repr(self) -> str:
        grid = f", grid=2^-{self.grid}" if self.grid is not None else ""
        return super().extra_repr() + ", reversible" + grid


class PairODELayer(nn.Module):
    """A reversible layer as the exact flow of its partitioned ODE over ``[t, t + h]``::

        dx1/dt = D_k(x2) + X_k(x2; m),     dx2/dt = C_k(x1)

    (:func:`splitnet.reversible.layer.pair_field`), solved on the stacked pair by ``method``."""

    def __init__(self, layer: ReversibleLayer, method="exact"):
        super().__init__()
        self.field_names = layer.field_names
        self.fields = nn.ModuleDict({f: layer.field(f) for f in self.field_names})
        self.step_size = layer.step_size
        self.method = get_method(method)

    def field_modules(self, name: str) -> list:
        return [self.fields[name]]

    def forward(self, x1, x2, t: float = 0.0, states: list | None = None, rng=None, **context):
        h, X = self.step_size, torch.stack([x1, x2])
        context = {k: v for k, v in context.items() if v is not None}
        rhs = pair_field(dict(self.fields.items()))
        rhs = functools.partial(rhs, **context) if context else rhs
        k = 1 if states is None else len(self.field_names)   # the states at t + h j/k
        for j in range(k):
            X = self.method(rhs, t + h * j / k, X, h / k)
            if states is not None:
                states.append((X[0], X[1]))
        return X[0], X[1]


__all__ = ["FLOAT32_BITS", "MAX_GRID", "PairODELayer", "ReversibleLayer", "check_grid",
           "end_pair", "guard", "pair_field", "replay", "shear_plan", "start_pair",
           "time_dependent", "to_grid"]
