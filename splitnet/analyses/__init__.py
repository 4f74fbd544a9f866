"""Measurements of schemes and of networks as integrators.

* :mod:`~splitnet.analyses.convergence` -- reference solutions, convergence studies, the Lie
  bracket, work--precision (``sn.analysis``).
* :mod:`~splitnet.analyses.problems` -- the particle systems and exact-solution test problems.
* :mod:`~splitnet.analyses.gap` -- a network against the exact flow of its own fields.
* :mod:`~splitnet.analyses.refine` -- a trained network re-integrated with its own weights.
* :mod:`~splitnet.analyses.trajectories` -- token states through a network, the ODE path.
* :mod:`~splitnet.analyses.blocks` -- published Runge--Kutta / predictor--corrector blocks.
* :mod:`~splitnet.analyses.seeds` -- paired comparisons over seeds: t, 95 % interval, and the
  smallest difference a study of that spread detects at 80 % power.
"""

__all__ = []   # a folder of modules: import each by name
