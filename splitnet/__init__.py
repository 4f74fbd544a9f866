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
import pkgutil

__version__ = "0.2.0"

# Every public module of the package is served (found on disk, so a new module needs no entry
# here): sn.refine, sn.zoo, sn.hf (which needs the hf extra), ...
_SUBMODULES = tuple(sorted(m.name for m in pkgutil.iter_modules(__path__)
                           if not m.name.startswith("_")))
# name -> module that defines it
_NAMES = {
    "SplittingScheme": "schemes", "Stage": "stages", "check_order": "schemes",
    "SplitLayer": "layers", "SplitConfig": "config", "SplitTransformer": "models",
    "SplitSeq2Seq": "seq2seq", "Seq2SeqConfig": "seq2seq_config",
    "reference_solution": "analysis", "convergence_study": "analysis",
    "ConvergenceResult": "analysis", "lie_bracket": "analysis", "work_precision": "analysis",
    "particle_system": "problems",
}

__all__ = [*_SUBMODULES, *sorted(_NAMES), "__version__"]  # noqa: PLE0604 - derived above


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
