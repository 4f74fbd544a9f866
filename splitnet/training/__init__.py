"""The trainer: ``train(TrainConfig)`` (``from splitnet.training.train import TrainConfig, train``);
what a run learns is its task (:mod:`splitnet.tasks`).

* :mod:`~splitnet.training.train` -- one step, evaluation, save, the loop, the summary.
* :mod:`~splitnet.training.setup` -- what a run is set up from: resume, optimiser, the model
  built and wrapped, the plan checked before anything is written.
* :mod:`~splitnet.training.config` -- :class:`TrainConfig`, the run's options.
* :mod:`~splitnet.training.accel` -- speed levers that change no maths.
* :mod:`~splitnet.training.tracking` -- TensorBoard records (optional).
"""

__all__ = []   # a folder of modules: import each by name
