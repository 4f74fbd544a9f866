"""The network layer of a scheme: one step of the integrator as a ``torch.nn.Module``.

With ``method="euler"`` every stage is a residual sub-layer ``x + c h f(x)``; Lie–Trotter at
h = 1 is the pre-norm Transformer block::

    x = x + attn(x)          # stage (diffusion, 1)
    x = x + ffn(x)           # stage (convection, 1)

The layer also knows the ODE it is a step of (:meth:`SplitLayer.field`,
:meth:`SplitLayer.ode_field`): the one definition used by the discretization gap, the
trajectories' ODE path and re-discretisation.
"""

from __future__ import annotations

import functools

import torch
from torch import nn

from ..stagelists.stages import (
    BUILTIN,
    as_stages,
    clocks,
    diagram,
    field_coeffs,
    field_name,
    field_names,
)
from .flows import context_for, field_map, stage_fields
from .subflows import Euler, get_method
from .validate import check_step_size


class WeightedSum(nn.Module):
    """``f(t, x) = sum_i c_i f_i(t, x)``: the field a per-stage layer is consistent with.

    One layer is ``x + h (sum_i c_i D_i(x) + sum_j c_j C_j(x)) + O(h^2)`` whatever the order of
    its stages (BCH), so to first order it advances this field. Terms that call the same module
    are grouped (their coefficients add up), so a shared module is evaluated once."""

    def __init__(self, fields, coeffs):
        super().__init__()
        groups: list[list] = []
        for f, c in zip(fields, coeffs):
            for g in groups:
                if g[0] is f:
                    g[1] += float(c)
                    break
            else:
                groups.append([f, float(c)])
        groups = [g for g in groups if abs(g[1]) > 1e-15]
        fs = [g[0] for g in groups]
        self.terms = nn.ModuleList(fs) if all(isinstance(f, nn.Module) for f in fs) else fs
        self.coeffs = [g[1] for g in groups]
        self.uses_memory = any(getattr(f, "uses_memory", False) for f in fs)
        self.reads_embedding = any(getattr(f, "reads_embedding", False) for f in fs)
        self.masks_padding = any(getattr(f, "masks_padding", False) for f in fs)
        self.mixes_tokens = any(getattr(f, "mixes_tokens", True) for f in fs)
        self.supports_cache = False

    def forward(self, t, x, **context):
        out = None
        for c, f in zip(self.coeffs, self.terms):
            y = f(t, x, **context_for(f, context)) if context else f(t, x)
            y = y if c == 1.0 else c * y
            out = y if out is None else out + y
        return out


class EvaluationCaches:
    """A field whose k-th evaluation within one sub-step reads and extends ``caches[k]``.

    A sub-flow method calls its field ``evals`` times per sub-step, each time on a different
    intermediate state (midpoint: ``x``, then ``x + dt/2 k1``), so each call has keys and values
    of its own and its own cache."""

    def __init__(self, f, caches):
        self.f, self.caches, self.calls = f, caches, 0

    def __call__(self, t, x):
        if self.calls >= len(self.caches):
            raise RuntimeError(f"the sub-flow method evaluated the field more than "
                               f"{len(self.caches)} times in one sub-step (one cache each)")
        cache = self.caches[self.calls]
        self.calls += 1
        return self.f(t, x, cache=cache)


class SplitLayer(nn.Module):
    """``x -> phi^{X_s}_{c_s h} o ... o phi^{X_1}_{c_1 h}(x)`` with sub-flows advanced by
    ``method``.

    ``scheme``: a :class:`~splitnet.integrators.schemes.SplittingScheme` (anything with ``stages``
    and
    ``clocks()``) or a plain sequence of stages. The fields: ``diffusion`` / ``convection``
    keywords or ``fields={name: ...}``, each one module shared by all stages of that field, or a
    sequence with one module per stage; a module is registered under its field's name. The plan
    (field, c h, clock) is fixed at construction, so ``forward`` does no per-call bookkeeping."""

    def __init__(self, scheme, diffusion=None, convection=None, step_size: float = 1.0,
                 method: str = "euler", *, fields=None):
        super().__init__()
        if hasattr(scheme, "stages"):
            self.stages, self.name = tuple(scheme.stages), getattr(scheme, "name", "scheme")
            stage_clocks = tuple(scheme.clocks()) if hasattr(scheme, "clocks") else \
                clocks(self.stages)
        else:
            self.stages, self.name = as_stages(scheme), "custom"
            stage_clocks = clocks(self.stages)
        h = check_step_size(step_size)
        self.step_size = h
        self.method = get_method(method)
        self.field_names = field_names(self.stages)
        given = field_map(self.field_names, diffusion, convection, fields, self.name)
        self._fields = stage_fields(self.stages, given, self.name, h)
        # registered in a fixed order (diffusion, convection, cross, then others): parameter
        # order, which optimiser states and checkpoints follow, must not depend on the scheme
        order = [f for f in BUILTIN if f in given] + [f for f in given if f not in BUILTIN]
        for name, f in ((n, given[n]) for n in order):
            if hasattr(nn.Module, name) or name in ("stages", "name", "method", "step_size"):
                raise ValueError(f"field name {name!r} clashes with an attribute of the layer; "
                                 f"choose another name")
            if isinstance(f, (list, tuple)):
                f = nn.ModuleList(f) if all(isinstance(g, nn.Module) for g in f) else f
            if isinstance(f, nn.Module):
                self.add_module(name, f)          # state-dict keys: layers.K.<field>.…
            else:
                object.__setattr__(self, name, f)
        self._plan = tuple((h * st.coeff, h * c) for st, c in zip(self.stages, stage_clocks))
        self._euler = isinstance(self.method, Euler)

    def _with_context(self, context: dict) -> list:
        """The stage callables with ``context`` bound to the fields that read it
        (:func:`~splitnet.integrators.flows.context_for`: ``memory=``, ``memory_mask=``,
        ``memory_cache=`` to those that read a memory, ``padding_mask=`` to those that mix
        tokens). ``None`` values are dropped; context that no field reads is an error."""
        context = {k: v for k, v in context.items() if v is not None}
        if not context:
            return self._fields
        out, used = list(self._fields), set()
        for i, f in enumerate(self._fields):
            kw = context_for(f, context)
            if kw:
                out[i] = functools.partial(f, **kw)
                used |= set(kw)
        unused = sorted(set(context) - used - {"padding_mask"})   # position-wise: no padding
        if unused:
            raise ValueError(f"context {unused} given, but no field of layer {self.name!r} "
                             f"reads it")
        return out

    def stage_callables(self) -> tuple:
        """The callable each stage advances, in order: a field module (the same one repeated
        when shared), or for a sum stage a :class:`~splitnet.integrators.flows.SumField` of its
        components. Generation reads their ``supports_cache`` / ``mixes_tokens``."""
        return tuple(self._fields)

    # -- the ODE this layer is a step of -----------------------------------------------------
    def field_modules(self, field: str) -> list:
        """One callable per stage that advances ``field`` (alone or in a sum), in order (the
        same module repeated when shared)."""
        field = field_name(field)
        if field not in self.field_names:
            raise ValueError(f"field must be one of {self.field_names}, got {field!r}")
        out = []
        for f, st in zip(self._fields, self.stages):
            if field in st.components:
                out.append(f if not st.is_sum else f.fields[st.components.index(field)])
        return out

    def field(self, field: str):
        """The layer's vector field for ``field``: the module itself when shared, the
        coefficient-weighted sum ``sum_i c_i X_i`` of the stage modules when per-stage."""
        mods = self.field_modules(field)
        if all(m is mods[0] for m in mods):
            return mods[0]
        return WeightedSum(mods, field_coeffs(self.stages, field_name(field)))

    def rebuilt(self, scheme, fields: dict, method) -> SplitLayer:
        """A layer of this kind at this step size over ``scheme`` with ``fields`` (name ->
        callable): a re-discretisation (:func:`splitnet.analyses.refine.refined_layer`)."""
        return SplitLayer(scheme, step_size=self.step_size, method=method, fields=fields)

    def ode_layer(self, method="exact") -> nn.Module:
        """This layer as the exact flow of its unsplit ODE over ``[t, t + h]``
        (:class:`ODELayer`; the fields shared)."""
        return ODELayer(self, method)

    def ode_field(self):
        """``f(t, x) = sum_f F_f(t, x)`` with :meth:`field` of each: the ODE one layer is a
        step of over ``[t, t + h]``."""
        terms, coeffs = [], []
        for f, st in zip(self._fields, self.stages):
            parts = f.fields if st.is_sum else [f]
            terms += parts
            coeffs += [st.coeff] * len(parts)
        return WeightedSum(terms, coeffs)

    # -- the step ----------------------------------------------------------------------------
    def forward(self, x: torch.Tensor, t: float = 0.0, return_states: bool = False,
                **context):
        """One step from ``x`` at time ``t``. ``context`` (``memory=`` the encoder output,
        ``memory_mask=`` its padding) goes to the fields that read a memory."""
        states = [] if return_states else None
        fields = self._with_context(context)
        if self._euler:
            for f, (dt, clock) in zip(fields, self._plan):
                dx = f(t + clock, x)
                # dt == 1 (the usual residual): skip a multiply the plain block does not do.
                x = x + dx if dt == 1.0 else x + dt * dx
                if states is not None:
                    states.append(x)
        else:
            for f, (dt, clock) in zip(fields, self._plan):
                x = self.method(f, t + clock, x, dt)
                if states is not None:
                    states.append(x)
        return (x, states) if return_states else x

    def forward_cached(self, x: torch.Tensor, t: float, caches, **context) -> torch.Tensor:
        """The step for new tokens ``x`` (B, n, D) of a causal network whose earlier tokens'
        keys and values sit in ``caches`` (generation; the training path is :meth:`forward`).

        ``caches``: one entry per stage -- ``None`` for a stage whose field is position-wise
        (it needs none), for a stage whose field takes a cache (``supports_cache``: causal
        attention, alone or in a sum or a gate) a sequence of ``method.evals`` key/value caches,
        one per field evaluation of the sub-step. Each stage has its own even when its attention
        module is shared: every stage sees a different state. The arithmetic is
        :meth:`forward`'s, row by row. ``context``: as :meth:`forward` (a decoder's memory)."""
        for f, (dt, clock), c in zip(self._with_context(context), self._plan, caches):
            if c is not None:
                f = EvaluationCaches(f, c)
            if self._euler:
                dx = f(t + clock, x)
                x = x + dx if dt == 1.0 else x + dt * dx
            else:
                x = self.method(f, t + clock, x, dt)
            if c is not None and f.calls != len(c):
                raise RuntimeError(f"the sub-flow method evaluated the field {f.calls} times, "
                                   f"not the {len(c)} its caches were made for")
        return x

    def extra_repr(self) -> str:
        return (f"scheme={self.name!r} [{diagram(self.stages)}], h={self.step_size}, "
                f"method={self.method.name!r}")


class ODELayer(nn.Module):
    """Layer k as the exact flow of its ODE ``dx/dt = sum_f F_f,k`` (``D_k + C_k`` for two
    fields) over ``[t, t + h]`` (no splitting): each ``F_f,k`` from
    :meth:`~splitnet.integrators.layers.SplitLayer.field` (the ODE of
    :meth:`~splitnet.integrators.layers.SplitLayer.ode_field`), solved by the ``exact`` sub-flow
    method
    (torchdiffeq dopri5 at the tolerances of the state's dtype)."""

    def __init__(self, layer, method="exact"):
        super().__init__()
        self.field_names = layer.field_names
        self.fields = nn.ModuleDict({f: layer.field(f) for f in self.field_names})
        self.rhs = WeightedSum(list(self.fields.values()), [1.0] * len(self.fields))
        self.step_size = layer.step_size
        self.method = get_method(method)

    def field_modules(self, name: str) -> list:
        return [self.fields[name]]

    def forward(self, x, t: float = 0.0, return_states: bool = False, **context):
        h = self.step_size
        context = {k: v for k, v in context.items() if v is not None}
        rhs = functools.partial(self.rhs, **context) if context else self.rhs   # a decoder's
        if not return_states:                                   # memory, an encoder's padding
            return self.method(rhs, t, x, h)
        # the states at t + h j/k, j = 1..k: the state_times of ode_model's scheme (f_j 1)
        k = len(self.field_names)
        states = []
        for j in range(k):
            x = self.method(rhs, t + h * j / k, x, h / k)
            states.append(x)
        return x, states


__all__ = ["EvaluationCaches", "ODELayer", "SplitLayer", "WeightedSum"]
