"""Every figure the library draws, one style, one atomic saver; a module per figure family:

* :mod:`~splitnet.plots.style` — colours, line styles and markers (:func:`series_style`),
  :func:`save_figure` (atomic), :func:`check_format` (before any work),
  :func:`readable_log_ticks`,
* :mod:`~splitnet.plots.convergence` — convergence and work–precision plots
  (:func:`plot_convergence`, :func:`plot_work_precision`), the network against its ODE
  (:func:`plot_gaps`),
* :mod:`~splitnet.plots.training` — training curves (:func:`plot_metrics`,
  :func:`plot_seed_curves`),
* :mod:`~splitnet.plots.trajectories` — tokens as particles (:func:`plot_trajectories`,
  :func:`plot_scheme_comparison`, :func:`plot_clustering`, :func:`animate`),
* :mod:`~splitnet.plots.zoo` — the zoo's work–precision (:func:`plot_zoo_efficiency`),
* :mod:`~splitnet.plots.refinement` — a trained network re-integrated
  (:func:`plot_refinement`, :func:`plot_refinement_summary`).

Every public function is served from here (``from splitnet.plots import plot_gaps``).
matplotlib is imported inside the functions: importing this package costs nothing.
"""

from __future__ import annotations

# Every family module's __all__ is served from here, so a new plot is one function in its
# family's module (and its name in that module's __all__).
from . import convergence, refinement, style, training, trajectories, zoo
from .convergence import *  # noqa: F403
from .refinement import *  # noqa: F403
from .style import *  # noqa: F403
from .training import *  # noqa: F403
from .trajectories import *  # noqa: F403
from .zoo import *  # noqa: F403

__all__ = sorted({name for m in (convergence, refinement, style, training, trajectories, zoo)  # noqa: PLE0605
                  for name in m.__all__})
