"""Every figure the library draws, one style, one atomic saver; a module per figure family:

* :mod:`~splitnet.plots.style` — colours, line styles and markers, the atomic saver, the
  output-format check, readable log ticks,
* :mod:`~splitnet.plots.convergence` — convergence and work–precision, the network against its
  ODE,
* :mod:`~splitnet.plots.training` — training curves and what training learns,
* :mod:`~splitnet.plots.trajectories` — tokens as particles,
* :mod:`~splitnet.plots.zoo` — the zoo's work–precision,
* :mod:`~splitnet.plots.refinement` — a trained network re-integrated,
* :mod:`~splitnet.plots.reversible` — reversible networks against depth.

Every public function of every family is served from here (``from splitnet.plots import
plot_gaps``; ``sorted(splitnet.plots.__all__)`` lists them). matplotlib is imported inside the
functions: importing this package costs nothing.
"""

from __future__ import annotations

# Every family module's __all__ is served from here, so a new plot is one function in its
# family's module (and its name in that module's __all__).
from . import convergence, refinement, reversible, style, training, trajectories, zoo
from .convergence import *  # noqa: F403
from .refinement import *  # noqa: F403
from .reversible import *  # noqa: F403
from .style import *  # noqa: F403
from .training import *  # noqa: F403
from .trajectories import *  # noqa: F403
from .zoo import *  # noqa: F403

__all__ = sorted({name for m in (convergence, refinement, reversible, style,  # noqa: PLE0605
                                 training, trajectories, zoo) for name in m.__all__})
