"""Weights as functions of depth: the ``depth_basis`` option of both network configs (pure
Python, no torch).

A network of ``n_layers`` steps of size ``h`` integrates ``[0, T]``, ``T = n_layers h``. With
``depth_basis="bernstein:K"``, ``"legendre:K"`` or ``"linear:K"`` every weight of every field is
a function of ODE time, ``W(t) = sum_j phi_j(t / T) W_j`` over K functions of depth (the
Bernstein or the Legendre polynomials of degrees ``0 .. K-1`` on [0, 1], or the hat functions
on K equally spaced nodes), so the number of steps is a choice made when the network runs
(:func:`splitnet.nets.depth.at_depth`).
The functions are built by :mod:`splitnet.fields.depthfield`; this module only reads the
option.
"""

from __future__ import annotations

from ..integrators.splitting import strang_weights
from ..stagelists.stages import EXACT_ORDER

DEPTH_BASES = ("legendre", "linear", "bernstein")
MAX_BASIS = 1024       # functions of depth: far beyond any use, small enough to stay cheap
DEPTH_BASIS_HELP = ("every weight a function of ODE time over K functions of depth: "
                    "bernstein:K (polynomials of degree K-1 by their Bezier control points: "
                    "trains best with AdamW), legendre:K (the same polynomials by their "
                    "Legendre coefficients) or linear:K (hat functions on K equally spaced "
                    "nodes: order 2 at most); the number of steps is then chosen at run time "
                    "(splitnet.nets.depth.at_depth); off by default (one set of weights per "
                    "layer)")


def parse_depth_basis(spec) -> tuple[str, int] | None:
    """``"bernstein:K"`` / ``"legendre:K"`` / ``"linear:K"`` -> ``(kind, K)``; ``None`` ->
    ``None``; anything else (another kind, K not an int in 1..1024, another type) a one-line
    ``ValueError``."""
    if spec is None:
        return None
    if isinstance(spec, str):
        kind, sep, k = spec.strip().lower().partition(":")
        if sep and kind in DEPTH_BASES and k.strip().isdigit() and \
                1 <= int(k) <= MAX_BASIS:
            return kind, int(k)
    raise ValueError(f"depth_basis must be None, 'bernstein:K', 'legendre:K' or 'linear:K' with "
                     f"an int K in 1..{MAX_BASIS} (K functions of depth), got {spec!r}")


def time_dependent(spec) -> bool:
    """Whether weights over the basis ``spec`` change with depth (K > 1)."""
    parsed = parse_depth_basis(spec)
    return parsed is not None and parsed[1] > 1


def quadrature_points(order: int, stages=()) -> int:
    """Gauss–Legendre points per stage of a time-dependent field in a reversible network whose
    scheme has ``order`` and ``stages`` (:mod:`splitnet.reversible.layer`): ``ceil(p / 2)``
    (order ``2 m >= p``); the midpoint (1) for an exact splitting and for a composition of
    Strang steps written out stage by stage (strang, yoshida4, suzuki4, yoshida6, ...: each
    Strang step of midpoint shears is symmetric and of order 2, and a composition of symmetric
    second-order steps has the order its weights give it, Hairer, Lubich & Wanner, Geometric
    Numerical Integration, II.4)."""
    if order >= EXACT_ORDER or (stages and strang_weights(tuple(stages)) is not None):
        return 1
    return max(1, -(-order // 2))


def stage_evaluations(cfg, scheme) -> int:
    """Field evaluations per stage of a network config ``cfg`` with ``scheme``: its sub-flow
    method's (``evals``, None for an adaptive one), or for a reversible network with weights
    that change with depth the quadrature's points (:func:`quadrature_points`)."""
    from ..integrators.subflows import get_method

    if getattr(cfg, "reversible", False) and time_dependent(getattr(cfg, "depth_basis", None)):
        return quadrature_points(scheme.order, scheme.stages)
    return get_method(cfg.method).evals


def check_depth_basis(cfg) -> None:
    """``depth_basis`` of a network config, checked and normalised in place (``"kind:K"`` or
    ``None``). Refused with it, in one line each: learned coefficients (one set per layer,
    which a function of depth would have to replace too: not supported yet) and gates on some
    layers only (every layer runs the same fields); gates on every layer listed one by one are
    stored as ``gate_layers=None`` (all), so a network at another depth has them all too."""
    parsed = parse_depth_basis(cfg.depth_basis)
    object.__setattr__(cfg, "depth_basis", None if parsed is None else f"{parsed[0]}:{parsed[1]}")
    if parsed is None:
        return
    if getattr(cfg, "learn_coefficients", False):
        raise ValueError("depth_basis with learned coefficients is not supported yet: choose "
                         "one of the two")
    gated = getattr(cfg, "gate_layers", None)
    if getattr(cfg, "gate", None) is not None and gated is not None:
        if tuple(gated) != tuple(range(cfg.n_layers)):
            raise ValueError(f"depth_basis runs the same fields in every layer: gates on some "
                             f"layers only (gate_layers {tuple(gated)}) cannot be; gate all "
                             f"layers or none")
        object.__setattr__(cfg, "gate_layers", None)
    local = getattr(cfg, "window_layers", None)
    if getattr(cfg, "sliding_window", None) is not None and local is not None and \
            tuple(local) != tuple(range(cfg.n_layers)):
        raise ValueError(f"depth_basis runs the same fields in every layer: attention windows "
                         f"on some layers only (window_layers {tuple(local)}: a field that "
                         f"changes from layer to layer) cannot be; window all layers or none")


__all__ = ["DEPTH_BASES", "DEPTH_BASIS_HELP", "MAX_BASIS", "check_depth_basis",
           "parse_depth_basis", "quadrature_points", "stage_evaluations", "time_dependent"]
