"""Stepping: the two numerical verbs every scheme shares, :func:`step` and :func:`integrate`,
written on plain stage tuples and field callables (this module never imports
:mod:`~splitnet.schemes`; schemes call it). How each stage is advanced is a sub-flow method of
:mod:`splitnet.subflows`, re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .stages import CONVECTION, DIFFUSION, Stage
from .stages import clocks as stage_clocks
from .subflows import (  # noqa: F401 - the sub-flow registry, re-exported for flows' users
    METHODS,
    RK4,
    Euler,
    Exact,
    Field,
    Midpoint,
    SubflowMethod,
    default_tolerances,
    get_method,
)
from .validate import (
    CheckedField,
    check_callable,
    check_state,
    check_step_size,
    check_time,
    small_problem_threads,
)

# --------------------------------------------------------------------------------------------
# Stepping on stage tuples


def stage_fields(stages: Sequence[Stage], diffusion, convection, name: str = "scheme") -> list:
    """One callable per stage: a single field is shared by all its stages, a sequence gives each
    stage of that field its own (``weights="per-stage"``)."""
    given = {DIFFUSION: diffusion, CONVECTION: convection}
    per_field = {}
    for fname, f in given.items():
        n = sum(st.field == fname for st in stages)
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
    return [next(per_field[st.field]) for st in stages]


def step(stages: Sequence[Stage], diffusion, convection, x, t=0.0, step_size=None,
         method="exact", clocks: Sequence[float] | None = None, check: bool = True,
         states: list | None = None, name: str = "scheme", **options):
    """One step ``x(t) -> x(t + h)``: stage i advances its field by ``c_i h`` from its clock
    ``t + h clocks[i]`` (default: each field's own clock). Appends the state after each stage
    to ``states`` if given. A negative step runs the adjoint direction; zero is an error."""
    if step_size is None:
        raise TypeError("step() needs step_size")
    h = check_step_size(step_size, allow_negative=True)
    t = check_time(t)
    m = get_method(method, **options)
    fields = stage_fields(stages, diffusion, convection, name)
    clocks = stage_clocks(stages) if clocks is None else clocks
    if check:
        check_state(x, "x")
        fields = [CheckedField(f, st.field) for f, st in zip(fields, stages)]
    with small_problem_threads(x):
        for f, st, clock in zip(fields, stages, clocks):
            x = m(f, t + h * clock, x, h * st.coeff)
            if states is not None:
                states.append(x)
    if check and not torch.isfinite(x).all():
        raise ValueError(f"NaN/inf in the state after a {name} step from t={t:.6g}")
    return x


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


def integrate(stages: Sequence[Stage], diffusion, convection, x0, t_span, step_size,
              method="exact", clocks: Sequence[float] | None = None, progress: bool = False,
              check: bool = True, name: str = "scheme", **options) -> torch.Tensor:
    """``n`` steps; returns the states at ``t0 + k h``, shape ``(n + 1, *x0.shape)``."""
    t0, h, n = n_steps_for(t_span, step_size)
    check_state(x0, "x0")
    get_method(method, **options)  # fail before stepping on a bad method/option
    out = [x0]
    x = x0
    it = range(n)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, desc=f"{name}/{method}", unit="step")
    for k in it:
        x = step(stages, diffusion, convection, x, t0 + k * h, h, method, clocks=clocks,
                 check=check, name=name, **options)
        out.append(x)
    return torch.stack(out)


__all__ = ["integrate", "n_steps_for", "stage_fields", "step"]
