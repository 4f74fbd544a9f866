"""Networks built from schemes, and what they compute.

* :mod:`~splitnet.nets.models` -- :class:`SplitTransformer` (``sn.models``, which also serves the
  encoder--decoder); :mod:`~splitnet.nets.seq2seq` -- :class:`SplitSeq2Seq`.
* :mod:`~splitnet.nets.learned` -- learned splitting coefficients.
* :mod:`~splitnet.nets.generation` / :mod:`~splitnet.nets.decoding` -- cached generation,
  greedy and beam search.
* :mod:`~splitnet.nets.cost` -- parameters and FLOPs per token in closed form.
* :mod:`~splitnet.nets.reference` -- the nanoGPT-style GPT that tests prove equal.
"""

__all__ = []   # a folder of modules: import each by name
