"""Every option of a network or a run, named once and validated once (pure Python, no torch).

* :mod:`~splitnet.configs.options` -- ``option()``, the checks, ``LIMITS`` and shared tables.
* :mod:`~splitnet.configs.signature` -- keyword signatures of config-built classes.
* :mod:`~splitnet.configs.kinds` -- the field kinds: what builds each field of a network, its
  parameters and FLOPs in closed form.
* :mod:`~splitnet.configs.config` -- :class:`SplitConfig` (a language model) and the names of
  a run's choices; :mod:`~splitnet.configs.seq2seq` -- :class:`Seq2SeqConfig`. A run's
  ``TrainConfig`` is :mod:`splitnet.training.config` (it asks the run's task).
"""

__all__ = []   # a folder of modules: import each by name
