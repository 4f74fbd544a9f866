"""Arrays beyond torch: the few operations the numerical verbs need, for torch tensors and for
any other array (numpy, JAX, ...).

The numerical API (``step``, ``integrate``, ``convergence_study``) works on the state's own
array type: a numpy ``x0`` gives numpy states back, a torch tensor tensors, and a state that a
user's flow returns as a JAX array stays one. Everything that is not a ``torch.Tensor`` goes
through numpy's functions (``numpy.isfinite``, ``numpy.linalg.norm``) or the array's own
namespace (``x.__array_namespace__()``, the array API standard, which JAX arrays provide) for
:func:`stack`. The torch path is the same calls as before (one ``isinstance`` more); the
networks never come here.
"""

from __future__ import annotations

import numpy as np
import torch


def is_torch(x) -> bool:
    return isinstance(x, torch.Tensor)


def _namespace(x):
    """The array API namespace of ``x`` (``jax.numpy`` for a JAX array), numpy otherwise."""
    get = getattr(x, "__array_namespace__", None)
    if get is not None and not isinstance(x, np.ndarray):
        return get()
    return np


def check_array(x, what: str = "x0"):
    """A floating array (numpy or any array with ``shape`` and ``dtype``) with at least one
    dimension, not empty, every entry finite; the messages of the torch check."""
    if not (hasattr(x, "shape") and hasattr(x, "dtype")):
        raise TypeError(f"{what} must be a torch.Tensor or an array (numpy, JAX), got "
                        f"{type(x).__name__}")
    if not np.issubdtype(np.dtype(x.dtype), np.floating):
        raise TypeError(f"{what} must be a floating array, got dtype {x.dtype}")
    if len(x.shape) == 0:
        raise ValueError(f"{what} must have at least one dimension")
    if int(np.prod(x.shape)) == 0:
        raise ValueError(f"{what} is empty (shape {tuple(x.shape)})")
    if not all_finite(x):
        raise ValueError(f"{what} contains NaN or inf")
    return x


def all_finite(x) -> bool:
    """Every entry of ``x`` finite (any array type)."""
    if is_torch(x):
        return bool(torch.isfinite(x).all())
    return bool(np.isfinite(np.asarray(x)).all())


def stack(xs: list):
    """The states ``xs`` stacked along a new first axis, in their own array type."""
    if is_torch(xs[0]):
        return torch.stack(xs)
    return _namespace(xs[0]).stack(xs)


def norm(x) -> float:
    """The Euclidean norm of the whole array, a Python float."""
    if is_torch(x):
        return float(x.norm())
    return float(np.linalg.norm(np.asarray(x, dtype=np.float64).ravel()))


def check_output(out, x, name: str, what: str = "field", t=0.0) -> None:
    """A field's (or flow's) output ``out`` for the state ``x``: the state's array kind, shape
    and dtype (torch would silently promote or round the state), every entry finite."""
    if is_torch(x) and not is_torch(out):
        raise TypeError(f"{name} {what} returned {type(out).__name__}, not a tensor")
    if not (hasattr(out, "shape") and hasattr(out, "dtype")):
        raise TypeError(f"{name} {what} returned {type(out).__name__}, not an array")
    if tuple(out.shape) != tuple(x.shape):
        raise ValueError(f"{name} {what} returned shape {tuple(out.shape)} for a state of "
                         f"shape {tuple(x.shape)}; a vector field must return dx/dt of the "
                         f"state's shape" if what == "field" else
                         f"{name} {what} returned shape {tuple(out.shape)} for a state of "
                         f"shape {tuple(x.shape)}; a flow must return the state after dt")
    if out.dtype != x.dtype:
        raise TypeError(f"{name} {what} returned dtype {out.dtype} for a state of dtype "
                        f"{x.dtype}; return {'dx/dt' if what == 'field' else 'the state'} in "
                        f"the state's dtype")
    if not all_finite(out):
        raise ValueError(f"{name} {what} produced NaN/inf at t={float(t):.6g}")


__all__ = ["all_finite", "check_array", "check_output", "is_torch", "norm",
           "stack"]
