"""splitnet: Transformer layers as ODE splitting integrators.

Tokens are particles; self-attention is the diffusion field, the feed-forward network the
convection field; a :class:`SplittingScheme` turns the two into a network layer and an ODE
integrator whose order can be measured.
"""

from . import analysis, fields, flows, layers, models, schemes
from .analysis import (ConvergenceResult, convergence_study, lie_bracket, particle_system,
                       reference_solution, work_precision)
from .check import check_order
from . import cost, gap  # noqa: E402,I001  (networks: cost accounting, ODE gap)
from . import trajectories  # noqa: E402,I001  (token paths, ODE path, clustering)
from .layers import SplitLayer
from .schemes import SplittingScheme, Stage

__version__ = "0.1.0"

__all__ = [
    "schemes", "models", "fields", "flows", "layers", "analysis", "SplittingScheme", "Stage", "SplitLayer",
    "reference_solution", "convergence_study", "ConvergenceResult", "lie_bracket",
    "work_precision", "particle_system", "check_order",
]
