"""What a run stands on: safe checkpoints and locks, corpora, processes and the machine.

* :mod:`~splitnet.runs.checkpoint` -- ``weights_only`` checkpoints, the run lock, metrics files,
  ``load_model``.
* :mod:`~splitnet.runs.integrity` -- the digest of every tensor of a checkpoint, checked on load;
  what is wrong with a checkpoint that cannot be read.
* :mod:`~splitnet.runs.data` -- corpora, their fingerprint, the resumable batch sequence.
"""

__all__ = []   # a folder of modules: import each by name
