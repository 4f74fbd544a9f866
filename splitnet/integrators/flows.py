"""Stepping: the two numerical verbs every scheme shares, :func:`step` and :func:`integrate`,
written on plain stage tuples and field callables (this module never imports
:mod:`~splitnet.integrators.schemes`; schemes call it). How each stage is advanced is a sub-flow
method of
:mod:`splitnet.integrators.subflows`, re-exported here, or the field's own flow
``phi(t, x, dt)`` given by the user (a :class:`Flow`: exact, closed form, an FFT step, a linear
solve), field by field. The state may be a torch tensor or another array (numpy, JAX):
:mod:`~splitnet.integrators.arrays`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..stagelists.stages import CONVECTION, DIFFUSION, Stage, component_clocks, field_name
from ..stagelists.stages import clocks as stage_clocks
from . import arrays
from .subflows import Exact, get_method
from .validate import (
    CheckedField,
    CountingField,
    check_callable,
    check_state,
    check_step_size,
    check_time,
    small_problem_threads,
)

# --------------------------------------------------------------------------------------------
# Stepping on stage tuples


class Flow:
    """A field given by its flow: ``phi(t, x, dt)`` is the state after ``dt`` of
    ``dx/dt = F(t, x)`` from ``x`` at time ``t`` (exact, closed form, an FFT step, an implicit
    solve: whatever the user trusts as that field's sub-flow). A stage of this field is
    ``x -> phi(t + h clock, x, c h)``, whatever the sub-flow method of the other fields."""

    def __init__(self, phi, name: str = "field"):
        if isinstance(phi, Flow):
            phi = phi.phi
        if not callable(phi):
            raise TypeError(f"{name} flow must be callable phi(t, x, dt), got "
                            f"{type(phi).__name__}")
        self.phi, self.name = phi, name

    def __call__(self, t, x, dt):
        return self.phi(t, x, dt)

    def __repr__(self) -> str:
        return f"Flow({self.phi!r})"


class CheckedFlow(Flow):
    """A :class:`Flow` whose output is checked against the state (kind, shape, dtype, finite)."""

    def __call__(self, t, x, dt):
        out = self.phi(t, x, dt)
        arrays.check_output(out, x, self.name, "flow", t)
        return out


def is_flow(f) -> bool:
    """``f`` advances its stage by itself (a user's flow, possibly counted)."""
    return isinstance(f, Flow) or (isinstance(f, CountingField) and isinstance(f.f, Flow))


class SumField:
    """``f(t, x) = sum_j F_j(t + d_j, x)``: the field of a sum stage (``d+c``), each component
    on its own clock (``d_j``: how far its clock runs ahead of the stage's first component, in
    time units). A key/value ``cache`` goes to the one component that takes it
    (``supports_cache``), a memory (``memory=``, ``memory_mask=``) to the components that read one
    (``uses_memory``). The sum supports a cache when exactly one component takes it and every
    other component is position-wise (``mixes_tokens`` false; a callable that does not say is
    taken to mix tokens)."""

    def __init__(self, fields: Sequence, offsets: Sequence[float]):
        self.fields, self.offsets = list(fields), [float(d) for d in offsets]
        takers = [f for f in self.fields if getattr(f, "supports_cache", False)]
        mixers = [f for f in self.fields if getattr(f, "mixes_tokens", True)]
        self.mixes_tokens = bool(mixers)
        self.supports_cache = len(takers) == 1 and all(f is takers[0] for f in mixers)
        self._taker = takers[0] if len(takers) == 1 else None
        self.uses_memory = any(getattr(f, "uses_memory", False) for f in self.fields)
        self.masks_padding = any(getattr(f, "masks_padding", False) for f in self.fields)
        self.reads_embedding = any(getattr(f, "reads_embedding", False) for f in self.fields)

    def __call__(self, t, x, cache=None, **context):
        out = None
        for f, d in zip(self.fields, self.offsets):
            kw = context_for(f, context) if context else {}
            if cache is not None and f is self._taker:
                kw["cache"] = cache
            y = f(t + d, x, **kw)
            out = y if out is None else out + y
        return out

    def __repr__(self) -> str:
        return f"SumField({self.fields!r})"


MEMORY_CONTEXT = ("memory", "memory_mask", "memory_cache")   # read by fields that use_memory
PADDING_CONTEXT = ("padding_mask",)                          # read by fields that mask padding
EMBEDDING_CONTEXT = ("target_embedding",)    # read by fields that reads_embedding (ConvS2S's)


def context_for(f, context: dict) -> dict:
    """The part of a network's ``context`` the field ``f`` reads: the memory (``memory=``,
    ``memory_mask=``, ``memory_cache=``) when it ``uses_memory``; the padding of the tokens
    (``padding_mask=`` (B, n) bool, True = padding) when it ``masks_padding``. A field that mixes
    tokens but cannot mask padding is a ``ValueError``: padding would leak into real tokens.
    The decoder's embedded inputs (``target_embedding=``) go to a field that
    ``reads_embedding`` (ConvS2S's multi-step attention)."""
    kw = {}
    if getattr(f, "uses_memory", False):
        kw.update((k, context[k]) for k in MEMORY_CONTEXT if k in context)
    if getattr(f, "reads_embedding", False):
        kw.update((k, context[k]) for k in EMBEDDING_CONTEXT if k in context)
    if "padding_mask" in context:
        if getattr(f, "masks_padding", False):
            kw["padding_mask"] = context["padding_mask"]
        elif getattr(f, "mixes_tokens", True):
            raise ValueError(f"{type(f).__name__} mixes tokens but cannot mask padding: give "
                             f"sequences without padding, or use attention")
    return kw


def field_map(names: Sequence[str], diffusion=None, convection=None, fields=None,
              name: str = "scheme", flows=None) -> dict:
    """The callables of a scheme's fields ``names``: ``fields={"cross": X, ...}`` and/or the
    two-field keywords ``diffusion`` / ``convection``, and ``flows={"kinetic": phi, ...}``
    (each a :class:`Flow`). A field given twice (also as a field and a flow), a field of the
    scheme not given, or one given that the scheme does not advance is a ``ValueError`` naming
    it (a typo in a field name cannot pass silently)."""
    given = {}
    if flows is not None:
        if not isinstance(flows, dict):
            raise TypeError(f"flows must be a dict of field name -> callable phi(t, x, dt), "
                            f"got {type(flows).__name__}")
        for k, v in flows.items():
            given[field_name(k)] = Flow(v, field_name(k))
    if fields is not None:
        if not isinstance(fields, dict):
            raise TypeError(f"fields must be a dict of field name -> callable f(t, x), got "
                            f"{type(fields).__name__}")
        for k, v in fields.items():
            if field_name(k) in given:
                raise ValueError(f"the {field_name(k)} field is given twice (in fields= and "
                                 f"flows=); give its vector field or its flow")
            given[field_name(k)] = v
    for k, v in ((DIFFUSION, diffusion), (CONVECTION, convection)):
        if v is not None:
            if k in given:
                raise ValueError(f"the {k} field is given twice ({k}= and fields=)")
            given[k] = v
    missing = [f for f in names if f not in given]
    if missing:
        raise ValueError(f"scheme {name!r} advances {', '.join(names)}; no callable given for "
                         f"{', '.join(missing)} (pass fields={{name: f(t, x)}})")
    extra = [f for f in given if f not in names]
    if extra:
        raise ValueError(f"field(s) {', '.join(extra)} given, but scheme {name!r} advances only "
                         f"{', '.join(names)}")
    return given


def stage_fields(stages: Sequence[Stage], fields: dict, name: str = "scheme",
                 step_size: float = 1.0) -> list:
    """One callable per stage from ``fields`` (field name -> a callable shared by all its
    stages, or a sequence with one per stage that advances it: ``weights="per-stage"``). A sum
    stage gets a :class:`SumField` of its components, each on its own clock."""
    per_field = {}
    for fname, f in fields.items():
        n = sum(fname in st.components for st in stages)
        if isinstance(f, (list, tuple, torch.nn.ModuleList)):
            if len(f) != n:
                raise ValueError(f"{len(f)} {fname} fields given for the {n} {fname} stages of "
                                 f"{name!r}")
            fs = list(f)
        else:
            fs = [f] * n
        for g in fs:
            check_callable(g, fname)
        per_field[fname] = iter(fs)
    out = []
    for st, clocks in zip(stages, component_clocks(stages)):
        parts = [next(per_field[c]) for c in st.components]
        if len(parts) > 1 and any(is_flow(p) for p in parts):
            raise ValueError(f"stage {st.field} of {name!r} advances a sum of fields, one of "
                             f"them given by its flow: the flow of a sum is not the composition "
                             f"of the flows; give those fields' vector fields")
        out.append(parts[0] if len(parts) == 1 else
                   SumField(parts, [step_size * (c - clocks[0]) for c in clocks]))
    return out


def step(stages: Sequence[Stage], fields: dict, x, t=0.0, step_size=None, method="exact",
         clocks: Sequence[float] | None = None, check: bool = True, states: list | None = None,
         name: str = "scheme", **options):
    """One step ``x(t) -> x(t + h)``: stage i advances its field (or sum of fields) by
    ``c_i h`` from its clock ``t + h clocks[i]`` (default: each field's own clock); a field
    given as a :class:`Flow` by its own flow, the others by the sub-flow method. ``fields``:
    field name -> callable (or one per stage, see :func:`stage_fields`). Appends the state
    after each stage to ``states`` if given. A negative step runs the adjoint direction; zero
    is an error."""
    if step_size is None:
        raise TypeError("step() needs step_size")
    if x is None:
        raise TypeError("step() needs the state x")
    h = check_step_size(step_size, allow_negative=True)
    t = check_time(t)
    if check:
        check_state(x, "x")
    run = _Stepper(stages, fields, h, get_method(method, **options), clocks, check, name, x)
    return run(x, t, states)


class _Stepper:
    """One step planned once for a step size: the stage callables (checked when ``check``),
    whether each is a flow, and the start times ``h clock``. :func:`integrate` reuses it for
    every step, so only the stages themselves run in the loop."""

    def __init__(self, stages, fields, h, m, clocks, check, name, x):
        fields = stage_fields(stages, fields, name, h)
        clocks = stage_clocks(stages) if clocks is None else clocks
        flow = [is_flow(f) for f in fields]
        if check:
            check_method_for(m, x, not all(flow))
            fields = [CheckedFlow(f, st.field) if fl else CheckedField(f, st.field)
                      for f, st, fl in zip(fields, stages, flow)]
        self.plan = [(f, h * clock, h * st.coeff, fl)
                     for f, st, clock, fl in zip(fields, stages, clocks, flow)]
        self.m, self.check, self.name = m, check, name

    def __call__(self, x, t, states=None):
        m = self.m
        with small_problem_threads(x):
            for f, start, dt, fl in self.plan:
                # a flow advances its stage itself; a vector field by the sub-flow method
                x = f(t + start, x, dt) if fl else m(f, t + start, x, dt)
                if states is not None:
                    states.append(x)
        if self.check and not arrays.all_finite(x):
            raise ValueError(f"NaN/inf in the state after a {self.name} step from t={t:.6g}")
        return x


def check_method_for(method, x, any_field: bool) -> None:
    """``exact`` (torchdiffeq) advances torch tensors only: on another array with a vector
    field to advance it is a ``ValueError`` saying what works instead."""
    if any_field and isinstance(method, Exact) and not arrays.is_torch(x):
        raise ValueError(f"method 'exact' (torchdiffeq) advances torch tensors only; for a "
                         f"{type(x).__name__} state give each field's flow (flows=) or an "
                         f"explicit method (method='rk4', ...)")


def n_steps_for(t_span, step_size) -> tuple[float, float, int]:
    """``(t0, h, n)`` for ``t_span = (t0, T)``; ``(T - t0) / h`` must be an integer."""
    if isinstance(t_span, torch.Tensor):        # torch.tensor([t0, T]) is a pair too
        t_span = t_span.tolist() if t_span.dim() == 1 else t_span
    if not (isinstance(t_span, (tuple, list)) and len(t_span) == 2):
        raise ValueError(f"t_span must be a pair (t0, T), got {t_span!r}")
    t0, t1 = (check_time(v, "t_span") for v in t_span)
    h = check_step_size(step_size)
    if not t1 > t0:
        raise ValueError(f"t_span must have T > t0, got {t_span!r}")
    n = round((t1 - t0) / h)
    if n < 1 or abs(n * h - (t1 - t0)) > 1e-9 * max(1.0, abs(t1 - t0)):
        raise ValueError(f"(T - t0) / h = {(t1 - t0) / h:.12g} is not an integer; choose a step "
                         f"size that divides the interval")
    return t0, h, n


def integrate(stages: Sequence[Stage], fields: dict, x0, t_span, step_size, method="exact",
              clocks: Sequence[float] | None = None, progress: bool = False,
              check: bool = True, name: str = "scheme", **options):
    """``n`` steps; returns the states at ``t0 + k h``, shape ``(n + 1, *x0.shape)``, in the
    array type of the states (a tensor for a torch ``x0``, a numpy array for a numpy one)."""
    if x0 is None or t_span is None:
        raise TypeError("integrate() needs x0 and t_span")
    t0, h, n = n_steps_for(t_span, step_size)
    check_state(x0, "x0")
    run = _Stepper(stages, fields, h, get_method(method, **options), clocks, check, name, x0)
    out = [x0]
    x = x0
    it = range(n)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, desc=f"{name}/{method}", unit="step")
    for k in it:
        x = run(x, t0 + k * h)
        out.append(x)
    return arrays.stack(out)


__all__ = [
    "EMBEDDING_CONTEXT",
    "MEMORY_CONTEXT",
    "PADDING_CONTEXT",
    "CheckedFlow",
    "Flow",
    "SumField",
    "check_method_for",
    "context_for",
    "field_map",
    "integrate",
    "is_flow",
    "n_steps_for",
    "stage_fields",
    "step",
]
