"""Input checks of the numerical API, and field wrappers that check or count.

Each check raises a ``TypeError`` / ``ValueError`` that names the argument and the problem (the
rows of ``docs/errors.md``). The network layer's hot path skips them;
:func:`~splitnet.integrators.flows.step`,
:func:`~splitnet.integrators.flows.integrate` and the analysis functions use them.
"""

from __future__ import annotations

import math
import numbers
from contextlib import contextmanager

import torch

from .arrays import check_array, check_output


def check_state(x, what: str = "x0"):
    """A floating tensor (or another array: numpy, JAX; see
    :func:`~splitnet.integrators.arrays.check_array`) with at least one dimension and only
    finite entries."""
    if not isinstance(x, torch.Tensor):
        return check_array(x, what)
    if not x.is_floating_point():
        raise TypeError(f"{what} must be a floating tensor, got dtype {x.dtype}")
    if x.dim() == 0:
        raise ValueError(f"{what} must have at least one dimension")
    if x.numel() == 0:
        raise ValueError(f"{what} is empty (shape {tuple(x.shape)})")
    if not torch.isfinite(x).all():
        raise ValueError(f"{what} contains NaN or inf")
    return x


def check_step_size(h, allow_negative: bool = False) -> float:
    """A finite real step; positive, or (``allow_negative``) nonzero."""
    if isinstance(h, bool) or not isinstance(h, numbers.Real):
        raise TypeError(f"step_size must be a real number, got {h!r}")
    h = float(h)
    if not math.isfinite(h):
        raise ValueError(f"step_size must be finite, got {h}")
    if h == 0 and allow_negative:
        raise ValueError(f"step_size must be nonzero, got {h}")
    if h <= 0 and not allow_negative:
        raise ValueError(f"step_size must be positive, got {h}")
    return h


def check_time(t, what: str = "t") -> float:
    """A finite real time (a 0-d tensor is accepted); a string or NaN is refused."""
    if isinstance(t, torch.Tensor) and t.numel() == 1:
        t = t.item()
    if isinstance(t, bool) or not isinstance(t, numbers.Real):
        raise TypeError(f"{what} must be a real number, got {t!r}")
    t = float(t)
    if not math.isfinite(t):
        raise ValueError(f"{what} must be finite, got {t}")
    return t


def check_callable(f, name: str) -> None:
    if not callable(f):
        raise TypeError(f"{name} field must be callable f(t, x), got {type(f).__name__}")


class CountingField:
    """Wraps a field ``f(t, x)`` (or a flow ``phi(t, x, dt)``) and counts its evaluations in
    ``.count``."""

    def __init__(self, f, name: str = "field"):
        self.f, self.name, self.count = f, name, 0

    def __call__(self, *args):
        self.count += 1
        return self.f(*args)


class CheckedField:
    """Wraps a field ``f(t, x)`` and checks its output against the state: an array of the
    state's kind (a tensor for a tensor), shape and dtype, finite."""

    def __init__(self, f, name: str):
        self.f, self.name = f, name

    def __call__(self, t, x):
        out = self.f(t, x)
        check_output(out, x, self.name, "field", t)
        return out


@contextmanager
def small_problem_threads(x: torch.Tensor, limit: int = 100_000):
    """Run with one intra-op CPU thread when the state is small (< ``limit`` elements).

    Order studies evaluate fields on a few dozen numbers thousands of times; on CPU, OpenMP
    threads only add synchronisation, and on a busy machine their spin-waiting made one
    attention call ~300x slower (30 ms instead of 0.1 ms on 2 shared cores). The previous
    setting is restored on exit."""
    if (not isinstance(x, torch.Tensor) or x.device.type != "cpu" or x.numel() >= limit
            or torch.get_num_threads() == 1):
        yield
        return
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


__all__ = ["CheckedField", "CountingField", "check_callable", "check_state", "check_step_size",
           "check_time", "small_problem_threads"]
