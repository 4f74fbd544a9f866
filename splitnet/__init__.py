"""splitnet: Transformer layers as ODE splitting integrators.

Tokens are particles; self-attention is the diffusion field, the feed-forward network the
convection field; a :class:`SplittingScheme` turns the two into a network layer and an ODE
integrator whose order can be measured.

The package is layered, one folder per layer, each importing only the ones above it in this
list (``tests/test_structure.py`` enforces it; ``docs/architecture.md`` says what goes where):

``stagelists`` (stages, the published methods as data) · ``order`` (order conditions and checks) ·
``integrators`` (schemes, sub-flows, the verbs step/integrate/layer) · ``configs`` ·
``fields`` · ``nets`` · ``runs`` (checkpoints, corpora) · ``translate`` ·
``interop`` · ``plots`` · ``analyses`` · ``training`` · ``cli`` · ``dev``.

This file is the front door: ``sn.schemes``, ``sn.SplittingScheme``, ``sn.check_order``,
``sn.models``, ... are served from :data:`PUBLIC_MODULES` and :data:`PUBLIC_NAMES`, the one
table of public paths. Modules are imported on first use (PEP 562), so ``import splitnet`` and
the command line's ``--help`` do not pay for torch until something needs it. The flat module
names of earlier releases (``splitnet.schemes``, ``splitnet.train``, ...) stay importable as
aliases of the same module objects, so user code and old checkpoints keep working.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

__version__ = "0.3.0"

# Public module name -> where it lives (relative to splitnet). `sn.NAME`, and
# `import splitnet.NAME` / `from splitnet.NAME import x`, give that very module.
PUBLIC_MODULES = {
    # stagelists: plain data
    "stages": "stagelists.stages", "zoo": "stagelists.zoo",
    # order: the order of a stage list
    "algebra": "order.algebra", "check": "order.check", "conditions": "order.conditions",
    # integrators: the schemes and their verbs
    "subflows": "integrators.subflows", "validate": "integrators.validate",
    "flows": "integrators.flows", "layers": "integrators.layers",
    "splitting": "integrators.splitting", "core": "integrators.core",
    "schemes": "integrators.schemes",
    # configs
    "options": "configs.options", "signature": "configs.signature", "kinds": "configs.kinds",
    "config": "configs.config", "seq2seq_config": "configs.seq2seq", "stacks": "configs.stacks",
    # nets
    "learned": "nets.learned", "models": "nets.models", "seq2seq": "nets.seq2seq",
    "generation": "nets.generation", "decoding": "nets.decoding", "cost": "nets.cost",
    "reference": "nets.reference", "depth": "nets.depth",
    # runs
    "checkpoint": "runs.checkpoint", "data": "runs.data", "runenv": "runenv",
    # translate
    "translation": "translate.translation", "pairs": "translate.pairs",
    "pair_batches": "translate.batches", "catalogs": "translate.catalogs",
    "scores": "translate.scores",
    # interop (GPT-2 / GPT-NeoX in and out; `hf` needs the hf extra)
    "hf": "interop.hf",
    # analyses
    "analysis": "analyses.convergence", "gap": "analyses.gap", "problems": "analyses.problems",
    "refine": "analyses.refine", "trajectories": "analyses.trajectories",
    "blocks": "analyses.blocks",
    # training
    "train": "training.train", "trainsetup": "training.setup", "losses": "tasks.losses",
    "accel": "training.accel", "tracking": "training.tracking",
}
# Public name -> the module (a key of PUBLIC_MODULES or a package) that defines it.
PUBLIC_NAMES = {
    "SplittingScheme": "schemes", "Stage": "stages", "check_order": "schemes",
    "SplitLayer": "layers", "SplitConfig": "config", "SplitTransformer": "models",
    "SplitSeq2Seq": "seq2seq", "Seq2SeqConfig": "seq2seq_config",
    "reference_solution": "analysis", "convergence_study": "analysis",
    "ConvergenceResult": "analysis", "lie_bracket": "analysis", "work_precision": "analysis",
    "particle_system": "problems", "partitioned_system": "problems",
}
# Names a public module serves although another module defines them (the contract's
# sn.models.SplitSeq2Seq, sn.analysis.rediscretize, sn.schemes.ZooScheme): each such module's
# __getattr__ looks them up here on first use, so none of them is imported by a module only to be
# served again, and no module of the package reaches a name by a second path (one path per name).
ALSO_SERVED = {
    "nets.models": {"SplitSeq2Seq": "nets.seq2seq", "Seq2SeqConfig": "configs.seq2seq",
                    "WEIGHTS": "configs.options"},
    "analyses.convergence": {"GapResult": "analyses.gap", "discretization_gap": "analyses.gap",
                             "rediscretize": "nets.rediscretize"},
    "analyses.refine": dict.fromkeys(("MAX_SUBSTEPS", "OWN", "Refinement", "check_substeps",
                                      "ode_model", "rediscretize", "refined", "refined_layer",
                                      "refinement_at", "repeated", "scheme_label", "stacks"),
                                     "nets.rediscretize"),
    "training.train": dict.fromkeys(("build_optimizer", "estimate_memory", "lr_at", "plan",
                                     "resume_config"), "training.setup"),
    "analyses.trajectories": dict.fromkeys(("PCA", "Clustering", "clustering", "effective_rank",
                                            "pairwise_cosines", "pca"), "geometry"),
    "configs.config": {**dict.fromkeys(("ACTIVATIONS", "FIXED", "FREE", "LIMITS", "MAX_SEED",
                                        "SESSION", "WEIGHTS"), "configs.options"),
                       "METHODS": "integrators.subflows", "config_from_call": "configs.signature",
                       "config_signature": "configs.signature"},
    "integrators.schemes": {"FIELDS": "stagelists.stages", "StrangComposition": "integrators.core",
                            "ZooScheme": "integrators.core"},
}


def served(module: str, name: str):
    """``name`` as the public module ``module`` serves it (:data:`ALSO_SERVED`)."""
    table = ALSO_SERVED.get(module.removeprefix(f"{__name__}."), {})
    if name not in table:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{table[name]}"), name)


# The packages themselves (sn.fields, sn.plots, sn.interop, ...), served too.
PACKAGES = ("analyses", "cli", "configs", "dev", "fields", "integrators", "interop", "mlm",
            "nets", "order", "plots", "reversible", "runs", "stagelists", "tasks", "training",
            "translate")

# Public modules that need an optional extra to import (name -> the pip extra). They are served
# (`sn.hf`, `import splitnet.hf`: without the extra, one ImportError naming it), but `__all__`
# leaves them out, so `from splitnet import *` works on a bare `pip install splitnet`.
OPTIONAL_MODULES = {"hf": "hf"}

_SERVED = (*sorted(PUBLIC_MODULES), *PACKAGES, "geometry", "names", *sorted(PUBLIC_NAMES))
__all__ = [*(n for n in _SERVED if n not in OPTIONAL_MODULES),  # noqa: PLE0604 - from the tables
           "__version__"]


def _module(name: str):
    return importlib.import_module(f"{__name__}.{PUBLIC_MODULES.get(name, name)}")


class _Aliases(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import splitnet.schemes`` gives ``splitnet.integrators.schemes`` itself (one module
    object under two names: monkeypatching either patches both)."""

    def find_spec(self, fullname, path=None, target=None):
        head, _, tail = fullname.partition(".")
        if head == __name__ and tail in PUBLIC_MODULES:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        return _module(spec.name.partition(".")[2])

    def exec_module(self, module) -> None:
        pass                                    # the target ran when it was imported


if not any(isinstance(f, _Aliases) for f in sys.meta_path):
    sys.meta_path.append(_Aliases())


def __getattr__(name: str):
    if name in PUBLIC_MODULES or name in PACKAGES or name in ("geometry", "names"):
        value = _module(name)
    elif name in PUBLIC_NAMES:
        value = getattr(_module(PUBLIC_NAMES[name]), name)
    else:
        raise AttributeError(f"module 'splitnet' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
