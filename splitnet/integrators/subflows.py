"""Sub-flow methods: how each stage ``x -> phi^f_{dt}(x)`` of a scheme is advanced.

A registry of names to small solver classes (torchdiffeq style). ``order`` is the classical
order q of the one-step method (``None`` for ``exact``), ``evals`` the field evaluations per
sub-step; ``splitnet schemes``, the configs' choices, the command-line help and the plots read
:data:`METHODS`, the one list of these names. Pure Python at import (no torch), so the command
line's ``--help`` stays fast; :class:`Exact` imports torch and torchdiffeq when it runs.

===========  =====  =====  ============================================================
name         q      evals  update for ``dx/dt = f(t, x)`` over ``dt``
===========  =====  =====  ============================================================
euler        1      1      ``x + dt f(t, x)`` -- a residual sub-layer
midpoint     2      2      ``x + dt f(t + dt/2, x + dt/2 f(t, x))``
rk4          4      4      classical Runge–Kutta
exact        --     adapt  torchdiffeq ``odeint`` (dopri5 by default) at tight tolerances
===========  =====  =====  ============================================================

Adding a method is one class here and one entry in :data:`METHODS` (a test renders this table
from the registry and fails when it is stale).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..names import unknown_name

if TYPE_CHECKING:  # pragma: no cover
    import torch

Field = Callable[[float, "torch.Tensor"], "torch.Tensor"]


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
    import torch

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
        import torch
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


__all__ = ["METHODS", "RK4", "Euler", "Exact", "Field", "Midpoint", "SubflowMethod",
           "default_tolerances", "get_method"]
