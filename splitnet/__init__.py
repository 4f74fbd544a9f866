"""splitnet: Transformer layers as ODE splitting integrators.

Tokens are particles; self-attention is the diffusion field, the feed-forward network the
convection field; a :class:`SplittingScheme` turns the two into a network layer and an ODE
integrator whose order can be measured.

The package is a flat front door: ``sn.schemes``, ``sn.SplittingScheme``, ``sn.check_order``,
``sn.models``, ... Submodules and names are imported on first use (PEP 562), so
``import splitnet`` and the command line's ``--help`` do not pay for torch until something needs
it.
"""

from __future__ import annotations

import importlib

__version__ = "0.2.0"

_SUBMODULES = (
    "analysis", "check", "checkpoint", "cli", "config", "cost", "data", "fields", "flows", "gap",
    "generation", "interop", "layers", "models", "plots", "problems", "reference", "runenv",
    "schemes", "stages", "tracking", "train", "trainsetup", "trajectories", "validate",
)
# name -> module that defines it
_NAMES = {
    "SplittingScheme": "schemes", "Stage": "stages", "check_order": "schemes",
    "SplitLayer": "layers", "SplitConfig": "config", "SplitTransformer": "models",
    "reference_solution": "analysis", "convergence_study": "analysis",
    "ConvergenceResult": "analysis", "lie_bracket": "analysis", "work_precision": "analysis",
    "particle_system": "problems",
}

__all__ = [  # noqa: RUF022 - grouped: submodules, then names
    "analysis", "check", "checkpoint", "cli", "config", "cost", "data", "fields", "flows", "gap",
    "generation", "interop", "layers", "models", "plots", "problems", "reference", "runenv",
    "schemes", "stages", "tracking", "train", "trainsetup", "trajectories", "validate",
    "ConvergenceResult", "SplitConfig", "SplitLayer", "SplitTransformer", "SplittingScheme",
    "Stage", "check_order", "convergence_study", "lie_bracket", "particle_system",
    "reference_solution", "work_precision", "__version__",
]


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _NAMES:
        value = getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'splitnet' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
