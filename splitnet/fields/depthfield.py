"""Fields whose weights are functions of other weights: continuous depth and averaged layers.

A network of ``n`` steps of size ``h`` integrates ``[0, T]``, ``T = n h``. With a basis of K
functions of depth ``phi_j`` on ``s = t / T`` (:class:`Basis`), a :class:`DepthField` is any field
module whose every parameter is a function of ODE time::

    W(t) = sum_j phi_j(t / T) W_j        f(t, x) = F(x; W(t))

its parameters are the K coefficients ``W_j`` of each weight of the module it wraps, stacked as
one tensor of shape ``(K, *shape)`` under the weight's own name. It evaluates the wrapped module
with the weights at ``t`` (``torch.func.functional_call``), so every field kind works unchanged:
attention, feed-forward, SwiGLU, convolution, cross-attention, gated fields, kinds added later.
A network with ``depth_basis`` shares one such field per field (per stage with per-stage
weights) between all its layers, layer k evaluating it at its own clock times, so its
parameters do not depend on its number of steps (:func:`splitnet.nets.depth.at_depth`).

The bases (all defined beyond [0, 1]: Yoshida's negative coefficients run a field's clock
outside ``[0, T]``):

* ``bernstein:K``: ``phi_j(s) = C(K-1, j) s^j (1 - s)^(K-1-j)``, the polynomials of degree K-1 by
  their Bezier control points: non-negative on [0, 1] and summing to 1, so ``W(t)`` is a convex
  combination of the K coefficients there and an optimiser step of each moves ``W(t)`` by at
  most that step (AdamW moves every coefficient by about its learning rate, and the Legendre
  functions reach ``sqrt(2j + 1)`` at the ends: docs/elastic.md measures what that does).
* ``legendre:K``: ``phi_j(s) = sqrt(2 j + 1) P_j(2 s - 1)``, j = 0..K-1, the shifted Legendre
  polynomials, orthonormal on [0, 1] (the same space as ``bernstein:K``).
* ``linear:K``: the hat functions of the nodes ``s_i = i / (K - 1)`` (piecewise-linear
  interpolation of K node weights), continued linearly beyond the end nodes; ``linear:1`` is
  the constant. Their kinks limit a quadrature across a node, so a network converges at order
  2 at most.

**Start.** A fresh network's depth fields start constant in time at the weights its
initialisation rule draws (``W_0 = w`` and the other coefficients 0 for Legendre, every
coefficient ``w`` for the Bernstein and hat functions): it computes what the same network with
one set of weights shared by all layers computes. :meth:`DepthField.expand` makes the
coefficients from the wrapped module's weights; the networks call it after their
initialisation (:func:`expand_depth_fields`).

:class:`MeanField` is the other function of weights: a module evaluated with the mean of the
weights of several modules of one structure (a coarsened layer as a differentiable function of
the layers it merges: :func:`splitnet.nets.depth.at_depth` with ``view=True``).
"""

from __future__ import annotations

import contextlib
import itertools
import math

import numpy as np
import torch
from torch import nn
from torch.func import functional_call

from ..configs.depth import parse_depth_basis


class Basis:
    """K functions of depth on ``s = t / T`` (module docstring): ``Basis("legendre:4")``."""

    def __init__(self, spec):
        parsed = parse_depth_basis(spec.spec if isinstance(spec, Basis) else spec)
        if parsed is None:
            raise ValueError("a depth basis needs a spec such as 'legendre:4', got None")
        self.kind, self.K = parsed
        self.spec = f"{self.kind}:{self.K}"

    @property
    def time_dependent(self) -> bool:
        """Whether the functions span more than the constants."""
        return self.K > 1

    def terms(self, s: float) -> tuple[tuple[int, float], ...]:
        """``(j, phi_j(s))`` for every function not zero at ``s`` (a float)."""
        if self.kind != "linear":
            return tuple(enumerate(self.values(s)))
        if self.K == 1:
            return ((0, 1.0),)
        a, u = self._segment(s)
        return ((a, 1.0),) if u == 0.0 else ((a, 1.0 - u), (a + 1, u))

    def _segment(self, s: float) -> tuple[int, float]:
        """The hat segment ``[s_a, s_a+1]`` of ``s`` (the first or last one beyond the nodes)
        and the position ``u`` in it (outside [0, 1] beyond the ends: linear continuation)."""
        z = s * (self.K - 1)
        a = min(max(math.floor(z), 0), self.K - 2)
        return a, z - a

    def values(self, s: float) -> list[float]:
        """``[phi_0(s), ..., phi_{K-1}(s)]``."""
        if self.kind == "bernstein":
            n = self.K - 1
            return [math.comb(n, j) * s ** j * (1.0 - s) ** (n - j) for j in range(self.K)]
        if self.kind == "legendre":       # the three-term recurrence of P_j, then normalised
            y, p = 2.0 * s - 1.0, [1.0, 2.0 * s - 1.0][:self.K]
            for j in range(1, self.K - 1):
                p.append(((2 * j + 1) * y * p[j] - j * p[j - 1]) / (j + 1))
            return [math.sqrt(2 * j + 1) * v for j, v in enumerate(p)]
        out = [0.0] * self.K
        for j, v in self.terms(s):
            out[j] = v
        return out

    def breaks(self) -> tuple[float, ...]:
        """Where the functions are not smooth (the inner hat nodes)."""
        return tuple(i / (self.K - 1) for i in range(1, self.K - 1)) if self.kind == "linear" \
            else ()

    def start(self, w: torch.Tensor) -> torch.Tensor:
        """The coefficients ``(K, *w.shape)`` of the constant ``W(s) = w``."""
        if self.kind != "legendre":           # a partition of unity: every coefficient w
            return w.unsqueeze(0).repeat(self.K, *([1] * w.dim())).contiguous()
        out = torch.zeros((self.K, *w.shape), dtype=w.dtype, device=w.device)
        out[0] = w
        return out

    def rule(self, edges, other: Basis | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per cell ``[edges[i], edges[i+1]]``, quadrature nodes and weights exact for the
        functions (with ``other``, for their products with ``other``'s): Gauss–Legendre on every
        piece between the functions' breaks (polynomials there), enough points for the
        degree."""
        edges = [float(e) for e in edges]
        cuts = sorted(set(self.breaks()) | set(other.breaks() if other else ()))
        x, w = np.polynomial.legendre.leggauss(max(2, self.K + (other.K if other else 1)))
        out = []
        for a, b in itertools.pairwise(edges):
            pts = [a] + [c for c in cuts if a < c < b] + [b]
            s = np.concatenate([lo + (hi - lo) * (x + 1) / 2
                                for lo, hi in itertools.pairwise(pts)])
            v = np.concatenate([(hi - lo) / 2 * w for lo, hi in itertools.pairwise(pts)])
            out.append((s, v))
        return out

    def matrix(self, s) -> np.ndarray:
        """``phi_j(s_i)``, shape ``(len(s), K)``."""
        return np.array([self.values(float(v)) for v in s]).reshape(len(s), self.K)

    def integrals(self, edges, other: Basis | None = None) -> np.ndarray:
        """Exact integrals over the cells ``[edges[i], edges[i+1]]``: of each function,
        ``(cells, K)``; with ``other``, of each product ``phi_j psi_l``, ``(cells, K, K')``."""
        out = []
        for s, w in self.rule(edges, other):
            v = self.matrix(s)
            out.append(np.einsum("q,qj,ql->jl", w, v, other.matrix(s)) if other else w @ v)
        return np.array(out)

    def __eq__(self, other) -> bool:
        return isinstance(other, Basis) and other.spec == self.spec

    def __hash__(self) -> int:
        return hash(self.spec)

    def __repr__(self) -> str:
        return f"Basis({self.spec!r})"


PHI_CACHE = 4096        # basis values kept per depth field (times x dtypes x devices)
# what records the depth fields' evaluations while a `recording` block is open (innermost last)
_RECORDING: list = []


@contextlib.contextmanager
def recording(fn):
    """Inside, every :class:`DepthField` evaluation calls ``fn(field, t)`` first (to find the
    times a network evaluates its fields at: :func:`splitnet.nets.depth.to_basis`)."""
    _RECORDING.append(fn)
    try:
        yield
    finally:
        _RECORDING.pop()


def combine(W: torch.Tensor, phi: torch.Tensor) -> torch.Tensor:
    """``sum_j phi_j W[j]`` (``phi`` of shape (K,)), element-wise (no matmul: the FLOPs a
    network counts per token stay its fields'; one multiply and one sum, whose backward is one
    tensor of W's shape)."""
    if W.shape[0] == 1:                  # K = 1: the constant, phi_0 = 1 in both bases
        return W[0]
    return (W * phi.view(-1, *([1] * (W.dim() - 1)))).sum(0)


def as_time(t) -> float:
    """A time as a float: a number, or a 0-d tensor (an adaptive solver's; its gradient, if it
    has one, is not the weights' business)."""
    return float(t.detach()) if isinstance(t, torch.Tensor) else float(t)


def own_store(context: dict, key) -> dict:
    """``context`` with its ``memory_cache`` store (what a cross-attention keeps its memory's
    keys and values in, under its own module) replaced by the sub-store ``key`` of it: a
    module evaluated with other weights (another time, a mean) must not find the keys its
    weights at another time computed."""
    store = context.get("memory_cache")
    if not isinstance(store, dict):
        return context
    return {**context, "memory_cache": store.setdefault(key, {})}


class _Wrapper(nn.Module):
    """A field built around another: what it does not have itself (the kind's flags
    ``mixes_tokens``, ``supports_cache``, ..., its sub-modules, whose names the initialisation's
    residual outputs use) is the wrapped module's."""

    def _inner(self) -> nn.Module:
        raise NotImplementedError

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.startswith("_") or "_modules" not in self.__dict__ or \
                    not self.__dict__["_modules"]:
                raise
            return getattr(self._inner(), name)


class DepthField(_Wrapper):
    """``f(t, x) = field(t, x)`` with every weight ``W(t) = sum_j phi_j(t / T) W_j`` (module
    docstring). ``basis``: a :class:`Basis` or its spec; ``T``: the network's time, ``n h``.
    ``expand=False`` keeps the module's own weights (constant in time) until :meth:`expand`."""

    def __init__(self, field: nn.Module, basis, T: float, expand: bool = True):
        super().__init__()
        if not isinstance(field, nn.Module):
            raise TypeError(f"a DepthField wraps a field module (torch.nn.Module), got "
                            f"{type(field).__name__}")
        if isinstance(T, bool) or not isinstance(T, (int, float)) or not T > 0 or \
                not math.isfinite(T):
            raise ValueError(f"a DepthField needs the network's time T > 0, got {T!r}")
        self.inner = field
        self.basis = basis if isinstance(basis, Basis) else Basis(basis)
        self.T = float(T)
        self.expanded = False
        if expand:
            self.expand()

    def _inner(self) -> nn.Module:
        return self.inner

    @property
    def time_dependent(self) -> bool:
        """Whether the weights change with t (K > 1): a reversible layer then integrates each
        stage of this field over its clock interval (:mod:`splitnet.reversible.layer`)."""
        return self.basis.time_dependent

    def expand(self) -> None:
        """Every weight ``w`` of the wrapped module replaced by its K coefficients of the
        constant ``W(s) = w`` (:meth:`Basis.start`), tied weights kept tied. Once."""
        if self.expanded:
            return
        new: dict[int, nn.Parameter] = {}
        for mod in self.inner.modules():
            for name, p in list(mod._parameters.items()):
                if p is None:
                    continue
                if id(p) not in new:
                    new[id(p)] = nn.Parameter(self.basis.start(p.detach()),
                                              requires_grad=p.requires_grad)
                mod._parameters[name] = new[id(p)]
        self.expanded = True

    def phi(self, t, like: torch.Tensor) -> torch.Tensor:
        """``phi(t / T)`` as a (K,) tensor of ``like``'s dtype and device, kept per time (a
        network evaluates its fields at a few hundred times: one host-to-device copy each)."""
        t = as_time(t)
        key = (t, like.dtype, like.device)
        cache = self.__dict__.setdefault("_phi", {})
        out = cache.get(key)
        if out is None:
            if len(cache) >= PHI_CACHE:
                cache.clear()
            out = cache[key] = torch.tensor(self.basis.values(t / self.T), dtype=like.dtype,
                                            device=like.device)
        return out

    def weights(self, t) -> dict[str, torch.Tensor]:
        """The wrapped module's weights at time ``t`` (a number or a 0-d tensor)."""
        params = dict(self.inner.named_parameters())
        if not params:
            return {}
        phi = self.phi(t, next(iter(params.values())))
        return {name: combine(p, phi) for name, p in params.items()}

    def forward(self, t, x, **context):
        if _RECORDING:
            _RECORDING[-1](self, t)
        if not self.expanded:
            return self.inner(t, x, **context)
        if self.time_dependent:
            context = own_store(context, (self, as_time(t)))
        return functional_call(self.inner, self.weights(t), (t, x), context)

    def extra_repr(self) -> str:
        return f"basis={self.basis.spec!r}, T={self.T:g}"


class MeanField(_Wrapper):
    """``fields[0]`` evaluated with each weight the mean of that weight over ``fields`` (modules
    of one structure): a differentiable function of all of them, whose gradient reaches each
    with a factor ``1 / len(fields)``."""

    def __init__(self, fields):
        super().__init__()
        self.parts = nn.ModuleList(fields)
        if not len(self.parts):
            raise ValueError("a MeanField needs at least one module")
        shapes = [{n: p.shape for n, p in m.named_parameters()} for m in self.parts]
        if any(s != shapes[0] for s in shapes):
            raise ValueError("a MeanField averages modules of one structure (the same "
                             "parameter names and shapes)")

    def _inner(self) -> nn.Module:
        return self.parts[0]

    @property
    def time_dependent(self) -> bool:
        return any(getattr(m, "time_dependent", False) for m in self.parts)

    def forward(self, t, x, **context):
        if len(self.parts) == 1:
            return self.parts[0](t, x, **context)
        groups = [dict(m.named_parameters()) for m in self.parts]
        mean = {}
        for n in groups[0]:
            acc = groups[0][n]
            for g in groups[1:]:
                acc = acc + g[n]
            mean[n] = acc / len(groups)
        return functional_call(self.parts[0], mean, (t, x), own_store(context, self))


def over_depth(fields: dict, basis, T: float) -> dict:
    """A layer's fields (name -> module, or a list with one per stage) each wrapped in a
    :class:`DepthField` not yet expanded (the network's initialisation expands it)."""
    def wrap(m):
        return DepthField(m, basis, T, expand=False)
    return {name: [wrap(m) for m in f] if isinstance(f, (list, tuple, nn.ModuleList))
            else wrap(f) for name, f in fields.items()}


def stacked_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The depth fields' parameters of ``model``, each the K coefficients ``(K, *shape)`` of a
    weight of shape ``shape`` (once each): a rule on a weight's dimensions (weight decay on
    matrices only) reads ``dim() - 1`` for these."""
    found = {id(p): p for m in model.modules() if isinstance(m, DepthField) and m.expanded
             for p in m.inner.parameters()}
    return list(found.values())


def expand_depth_fields(model: nn.Module) -> None:
    """:meth:`DepthField.expand` for every depth field of ``model`` (each once)."""
    for m in model.modules():
        if isinstance(m, DepthField):
            m.expand()


__all__ = ["PHI_CACHE", "Basis", "DepthField", "MeanField", "as_time", "combine",
           "expand_depth_fields", "over_depth", "own_store", "recording", "stacked_parameters"]
