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

from .convergence import plot_convergence, plot_gaps, plot_work_precision
from .refinement import plot_refinement, plot_refinement_summary
from .style import (
    LINESTYLES,
    MARKERS,
    PALETTE,
    TOKEN_PALETTE,
    check_format,
    readable_log_ticks,
    save_figure,
    series_style,
)
from .training import plot_metrics, plot_seed_curves, smoothed
from .trajectories import (
    animate,
    plot_clustering,
    plot_scheme_comparison,
    plot_trajectories,
    save_trajectory_plot,
)
from .zoo import plot_zoo_efficiency

__all__ = [
    "LINESTYLES", "MARKERS", "PALETTE", "TOKEN_PALETTE", "animate", "check_format",
    "plot_clustering",
    "plot_convergence", "plot_gaps", "plot_metrics", "plot_refinement", "plot_refinement_summary",
    "plot_scheme_comparison", "plot_seed_curves", "plot_trajectories", "plot_work_precision",
    "plot_zoo_efficiency", "readable_log_ticks", "save_figure", "save_trajectory_plot",
    "series_style", "smoothed",
]
