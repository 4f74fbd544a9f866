"""Learned splitting coefficients: every stage coefficient of a layer a trainable parameter.

``SplitConfig(learn_coefficients=True)`` builds every layer as a :class:`LearnedSplitLayer`:
the scheme's stages fix the structure (which field each stage advances, in which order) and
initialise one parameter per stage, ``stage_coeffs`` (one vector per layer). One step is then
the scheme's step with those coefficients::

    x <- phi^{X_i}_{c_i h}(x)   for i = 1..s, c = layer.stage_coeffs (learned)

Each field keeps its own clock, the running sum of its own learned coefficients (a stage of
field X starts at ``t + h * sum of X's earlier coefficients``; a sum stage's components each on
theirs). Nothing keeps the coefficients a consistent method on its own: that is what
:func:`order_penalty` (``splitnet train --order-penalty λ``) is for, the squared order
conditions up to the scheme's declared order (:mod:`splitnet.order.conditions`; degree 1 is
consistency, each field summing to 1). A penalty rather than a parametrisation: the conditions
of degree >= 2 can only be a penalty anyway, degree 1 is one more condition of the same kind,
and unpenalised training then shows where free coefficients go, consistency included.

The plain :class:`~splitnet.integrators.layers.SplitLayer` is untouched (its fixed plan is the hot
path);
this subclass overrides the step (:meth:`LearnedSplitLayer.forward`, ``forward_cached``) and
what the analyses read (``ode_field``, ``field``, :meth:`LearnedSplitLayer.current_stages`).
"""

from __future__ import annotations

import copy
import math

import torch
from torch import nn

from ..integrators.layers import EvaluationCaches, SplitLayer, WeightedSum
from ..integrators.subflows import Exact
from ..order import conditions
from ..stagelists.stages import EXACT_ORDER, Stage, field_coeffs, field_name

# The penalty's degree for a scheme declared exact (the unsplit "parallel"): its one stage is
# the exact flow at coefficient 1, and the degree-1 conditions already say so.
EXACT_PENALTY_DEGREE = 1


class LearnedSplitLayer(SplitLayer):
    """A :class:`~splitnet.integrators.layers.SplitLayer` whose stage coefficients are the parameter
    ``stage_coeffs`` (initialised from the scheme). Clocks follow from them (each field's
    clock is the running sum of its own coefficients)."""

    def __init__(self, scheme, diffusion=None, convection=None, step_size: float = 1.0,
                 method: str = "euler", *, fields=None, float64: bool = False):
        super().__init__(scheme, diffusion, convection, step_size, method, fields=fields)
        self.float64 = bool(float64)
        dtype = torch.float64 if self.float64 else torch.get_default_dtype()
        self.stage_coeffs = nn.Parameter(torch.tensor([float(st.coeff) for st in self.stages],
                                                      dtype=dtype))
        # clock[i, j, l] = 1: stage l (< i) advances component j of stage i
        n, width = len(self.stages), max(len(st.components) for st in self.stages)
        clock = torch.zeros(n, width, n)
        for i, st in enumerate(self.stages):
            for j, f in enumerate(st.components):
                for l_ in range(i):
                    clock[i, j, l_] = float(f in self.stages[l_].components)
        self.register_buffer("clock_matrix", clock, persistent=False)

    def _apply(self, fn, recurse=True):
        """With ``float64``: conversions (``.float()``, ``.half()``, ``.to(dtype)``) leave
        ``stage_coeffs`` float64 (a projection holds them to 1e-13, which float32 cannot
        store); a move to another device still moves it."""
        if not self.float64:
            return super()._apply(fn, recurse)
        c = self._parameters.pop("stage_coeffs")
        try:
            super()._apply(fn, recurse)
        finally:
            self._parameters["stage_coeffs"] = c
        device = fn(torch.empty(0, dtype=torch.float64, device=c.device)).device
        if device != c.device:
            c.data = c.data.to(device)
            if c.grad is not None:
                c.grad = c.grad.to(device)
        return self

    # -- the coefficients --------------------------------------------------------------------
    def current_stages(self) -> tuple[Stage, ...]:
        """The stages with the coefficients as they are now (floats)."""
        return tuple(Stage(st.field, float(c)) for st, c in
                     zip(self.stages, whole(self.stage_coeffs).detach().cpu().tolist()))

    def _plan_now(self, t):
        """``(dt_i, t_i, fields_i)`` of every stage from the current coefficients: tensors
        (a time-dependent field sees its clock move with the coefficients), floats for the
        ``exact`` method (torchdiffeq wants numbers); a sum stage's components on their own
        clocks."""
        c = self.stage_coeffs
        h = self.step_size
        clocks = h * torch.einsum("ijl,l->ij", self.clock_matrix.to(c.dtype), c)   # (s, width)
        dts = h * c
        if isinstance(self.method, Exact):
            clocks, dts = clocks.detach().cpu().tolist(), dts.detach().cpu().tolist()
        out = []
        for i, (st, f) in enumerate(zip(self.stages, self._fields)):
            if st.is_sum:
                f = copy.copy(f)
                f.offsets = [clocks[i][j] - clocks[i][0] for j in range(len(st.components))]
            out.append((dts[i], t + clocks[i][0], f))
        return out

    # -- the step ----------------------------------------------------------------------------
    def forward(self, x: torch.Tensor, t: float = 0.0, return_states: bool = False,
                **context):
        states = [] if return_states else None
        if context:
            raise ValueError("learned coefficients: a memory context is not supported")
        for dt, tt, f in self._plan_now(t):
            x = self.method(f, tt, x, dt)
            if states is not None:
                states.append(x)
        return (x, states) if return_states else x

    def forward_cached(self, x: torch.Tensor, t: float, caches) -> torch.Tensor:
        for (dt, tt, f), c in zip(self._plan_now(t), caches):
            if c is not None:
                f = EvaluationCaches(f, c)
            x = self.method(f, tt, x, dt)
            if c is not None and f.calls != len(c):
                raise RuntimeError(f"the sub-flow method evaluated the field {f.calls} times, "
                                   f"not the {len(c)} its caches were made for")
        return x

    # -- the ODE the layer is a step of --------------------------------------------------------
    def field(self, field: str):
        """The field's vector field per unit time: the module itself when shared, else the
        learned-coefficient-weighted mean of its stage modules."""
        mods = self.field_modules(field)
        if all(m is mods[0] for m in mods):
            return mods[0]
        cs = field_coeffs(self.current_stages(), field_name(field))
        total = math.fsum(cs)
        return WeightedSum(mods, [c / total if abs(total) > 1e-12 else c for c in cs])

    def ode_field(self):
        """``sum_i c_i X_i`` with the learned coefficients: to first order in h the layer
        advances ``sum_f s_f F_f`` for h, ``s_f`` each field's coefficient sum (1 when the
        coefficients are consistent)."""
        terms, coeffs = [], []
        for f, st in zip(self._fields, self.current_stages()):
            parts = f.fields if st.is_sum else [f]
            terms += parts
            coeffs += [st.coeff] * len(parts)
        return WeightedSum(terms, coeffs)

    def extra_repr(self) -> str:
        return super().extra_repr() + ", learned coefficients"


# ---------------------------------------------------------------------------------------------
# a model's coefficients


def whole(p: torch.Tensor) -> torch.Tensor:
    """A parameter's full value: itself, or, sharded over ranks (FSDP's DTensor, outside the
    forward), gathered -- every rank must call it then."""
    return p.full_tensor() if hasattr(p, "full_tensor") else p


def learned_layers(model) -> list[LearnedSplitLayer]:
    layers = getattr(model, "layers", ())       # an encoder–decoder has none (nor learns any)
    return [layer for layer in layers if isinstance(layer, LearnedSplitLayer)]


def coefficients(model) -> tuple[tuple[Stage, ...], ...]:
    """Per layer, its stages with the coefficients as they are now (the scheme's for a layer
    that does not learn them)."""
    return tuple(layer.current_stages() if isinstance(layer, LearnedSplitLayer)
                 else tuple(layer.stages) for layer in model.layers)


def penalty_degree(order: int) -> int:
    """The degree the order penalty goes to for a scheme declared of ``order``."""
    if order >= EXACT_ORDER:
        return EXACT_PENALTY_DEGREE
    if order > conditions.MAX_DEGREE:
        raise ValueError(f"the order penalty has the conditions up to degree "
                         f"{conditions.MAX_DEGREE}; the scheme declares order {order}")
    return order


def order_penalty(model, order: int | None = None) -> torch.Tensor:
    """Sum over the model's learned layers of the squared order conditions of degrees
    1..``order`` (default: the scheme's declared order; 1 for the exact flow ``parallel``):
    zero exactly when every layer's coefficients are a consistent method of that order."""
    layers = learned_layers(model)
    if not layers:
        raise ValueError("the model does not learn its coefficients (learn_coefficients=False)")
    p = penalty_degree(model.scheme.order if order is None else order)
    letters, k = conditions.structure(layers[0].stages)
    coeffs = torch.stack([whole(layer.stage_coeffs) for layer in layers])   # (layers, stages)
    return conditions.penalty(coeffs, letters, k, p)


def project_coefficients(model) -> dict:
    """Every learned layer's coefficients moved, in place, onto the order conditions of the
    scheme's declared order (1 for the exact flow ``parallel``) by the damped, least-norm
    Gauss–Newton projection of :func:`splitnet.order.projection.project`, in float64: after
    it every condition of degree <= p is below 1e-13, and each layer is a method of order p.
    Returns ``steps``, the largest ``defect`` before and after and the largest ``move``. A
    layer the projection cannot bring there is a ``ProjectionError`` naming it."""
    from ..order.projection import project

    layers = learned_layers(model)
    if not layers:
        raise ValueError("project_coefficients: the model does not learn its coefficients "
                         "(learn_coefficients=False)")
    if not all(layer.float64 for layer in layers):
        raise ValueError("project_coefficients needs float64 coefficients, which float32 "
                         "rounds to 1e-8: build the model with project_coefficients=True")
    p = penalty_degree(model.scheme.order)
    letters, k = conditions.structure(layers[0].stages)
    names = [f"layer {i}" for i, la in enumerate(model.layers) if la in layers]
    with torch.no_grad():
        c = torch.stack([whole(la.stage_coeffs).detach() for la in layers])
        x, info = project(c, letters, k, p, names=names)
        for la, row in zip(layers, x.to(c.device)):
            la.stage_coeffs.copy_(row)
    return info


def coefficient_metrics(model) -> dict:
    """What a training record keeps of the coefficients (nothing for a plain model): every
    layer's coefficients and the unweighted penalty at the declared order."""
    layers = learned_layers(model)
    if not layers:
        return {}
    with torch.no_grad():
        pen = float(order_penalty(model))
    return {"order_defect": pen,
            "coefficients": [whole(layer.stage_coeffs).detach().cpu().tolist()
                             for layer in layers]}


__all__ = ["EXACT_PENALTY_DEGREE", "LearnedSplitLayer", "coefficient_metrics", "coefficients",
           "learned_layers", "order_penalty", "penalty_degree", "project_coefficients", "whole"]
