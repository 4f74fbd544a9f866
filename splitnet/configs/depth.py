"""Weights as functions of depth: the ``depth_basis`` option of both network configs (pure
Python, no torch).

A network of ``n_layers`` steps of size ``h`` integrates ``[0, T]``, ``T = n_layers h``. With
``depth_basis="legendre:K"`` or ``"linear:K"`` every weight of every field is a function of ODE
time, ``W(t) = sum_j phi_j(t / T) W_j`` over K functions of depth (the Legendre polynomials of
degrees ``0 .. K-1`` shifted to [0, 1], or the hat functions on K equally spaced nodes), so the
number of steps is a choice made when the network runs (:func:`splitnet.nets.depth.at_depth`).
The functions are built by :mod:`splitnet.fields.depthfield`; this module only reads the
option.
"""

from __future__ import annotations

DEPTH_BASES = ("legendre", "linear")
MAX_BASIS = 1024       # functions of depth: far beyond any use, small enough to stay cheap
DEPTH_BASIS_HELP = ("every weight a function of ODE time over K functions of depth: "
                    "legendre:K (Legendre polynomials of degrees 0..K-1 on t/T) or linear:K "
                    "(hat functions on K equally spaced nodes); the number of steps is then "
                    "chosen at run time (splitnet.nets.depth.at_depth); off by default (one set "
                    "of weights per layer)")


def parse_depth_basis(spec) -> tuple[str, int] | None:
    """``"legendre:K"`` / ``"linear:K"`` -> ``(kind, K)``; ``None`` -> ``None``; anything else
    (another kind, K not an int in 1..1024, another type) a one-line ``ValueError``."""
    if spec is None:
        return None
    if isinstance(spec, str):
        kind, sep, k = spec.strip().lower().partition(":")
        if sep and kind in DEPTH_BASES and k.strip().isdigit() and \
                1 <= int(k) <= MAX_BASIS:
            return kind, int(k)
    raise ValueError(f"depth_basis must be None, 'legendre:K' or 'linear:K' with an int K in "
                     f"1..{MAX_BASIS} (K functions of depth), got {spec!r}")


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


__all__ = ["DEPTH_BASES", "DEPTH_BASIS_HELP", "MAX_BASIS", "check_depth_basis",
           "parse_depth_basis"]
