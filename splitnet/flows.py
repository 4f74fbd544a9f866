"""Sub-flow methods: how each stage ``x -> phi^f_{dt}(x)`` of a scheme is advanced.

A registry of names to small solver classes (torchdiffeq style), and the two numerical verbs
every scheme shares, :func:`step` and :func:`integrate`, written on plain stage tuples and field
callables (this module never imports :mod:`~splitnet.schemes`; schemes call it). ``order`` is
the classical order q of the one-step method (``None`` for ``exact``), ``evals`` the field
evaluations per sub-step:

===========  =====  =====  ============================================================
name         q      evals  update for ``dx/dt = f(t, x)`` over ``dt``
===========  =====  =====  ============================================================
euler        1      1      ``x + dt f(t, x)`` -- a residual sub-layer
midpoint     2      2      ``x + dt f(t + dt/2, x + dt/2 f(t, x))``
rk4          4      4      classical Runge–Kutta
exact        --     adapt  torchdiffeq ``odeint`` (dopri5 by default) at tight tolerances
===========  =====  =====  ============================================================
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence

import torch

from .names import unknown_name
from .stages import CONVECTION, DIFFUSION, Stage
from .stages import clocks as stage_clocks
from .validate import (
    CheckedField,
    check_callable,
    check_state,
    check_step_size,
    check_time,
    small_problem_threads,
)

Field = Callable[[float, torch.Tensor], torch.Tensor]


class SubflowMethod:
    name: str = ""
    order: int | None = None
    evals: int | None = None
    options: tuple[str, ...] = ()

    def __init__(self, **options):
        unknown = set(options) - set(self.options)
        if unknown:
            allowed = ", ".join(self.options) or "none"
            raise ValueError(f"option(s) {sorted(unknown)} do not apply to method {self.name!r} "
                             f"(its options: {allowed})")

    def __call__(self, f: Field, t: float, x: torch.Tensor, dt: float) -> torch.Tensor:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Euler(SubflowMethod):
    """``x + dt f(t, x)``: one residual sub-layer."""

    name, order, evals = "euler", 1, 1

    def __call__(self, f, t, x, dt):
        return x + dt * f(t, x)


class Midpoint(SubflowMethod):
    """Explicit midpoint (RK2): two evaluations."""

    name, order, evals = "midpoint", 2, 2

    def __call__(self, f, t, x, dt):
        k1 = f(t, x)
        return x + dt * f(t + dt / 2, x + (dt / 2) * k1)


class RK4(SubflowMethod):
    """Classical fourth-order Runge–Kutta: four evaluations."""

    name, order, evals = "rk4", 4, 4

    def __call__(self, f, t, x, dt):
        k1 = f(t, x)
        k2 = f(t + dt / 2, x + (dt / 2) * k1)
        k3 = f(t + dt / 2, x + (dt / 2) * k2)
        k4 = f(t + dt, x + dt * k3)
        return x + (dt / 6) * (k1 + 2 * k2 + 2 * k3 + k4)


def default_tolerances(dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol) for ``exact``: tight in float64, sensible in float32/16."""
    if dtype == torch.float64:
        # dopri5 at these reaches ~3e-13 relative on the built-in system (checked against
        # scipy's DOP853 at rtol 1e-14). torchdiffeq's dopri8 stalls near 1e-9 here: not used.
        return 1e-13, 1e-15
    return 1e-6, 1e-8


class Exact(SubflowMethod):
    """The sub-flow solved by torchdiffeq (``solver``, default ``dopri5``) at tight tolerances
    (float64: rtol 1e-13, atol 1e-15; lower precision: 1e-6, 1e-8)."""

    name, order, evals = "exact", None, None
    options = ("rtol", "atol", "solver")

    def __init__(self, rtol: float | None = None, atol: float | None = None,
                 solver: str = "dopri5", **unknown):
        super().__init__(**unknown)   # unknown option -> ValueError naming it
        for k, v in (("rtol", rtol), ("atol", atol)):
            if v is not None and not (isinstance(v, numbers.Real) and not isinstance(v, bool)
                                      and math.isfinite(v) and v > 0):
                raise ValueError(f"{k} must be a positive number, got {v!r}")
        self.rtol, self.atol, self.solver = rtol, atol, solver

    def __call__(self, f, t, x, dt):
        from torchdiffeq import odeint

        rtol, atol = default_tolerances(x.dtype)
        times = torch.tensor([t, t + dt], dtype=x.dtype if x.is_floating_point() else None,
                             device=x.device)
        return odeint(f, x, times, rtol=self.rtol or rtol, atol=self.atol or atol,
                      method=self.solver)[-1]


METHODS: dict[str, type[SubflowMethod]] = {
    "euler": Euler, "midpoint": Midpoint, "rk4": RK4, "exact": Exact,
}


def get_method(method, **options) -> SubflowMethod:
    """A sub-flow method from its name (or an instance, returned as is)."""
    if isinstance(method, SubflowMethod):
        if options:
            raise ValueError("pass options when naming the method, not with an instance")
        return method
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(unknown_name("method", method, METHODS))
    return METHODS[method](**options)


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
