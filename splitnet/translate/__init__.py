"""Parallel corpora offline and the translation task.

* :mod:`~splitnet.translate.catalogs` -- gettext ``.mo`` / ``.po`` readers.
* :mod:`~splitnet.translate.pairs` -- ``load_pairs``: cleaning, the stable split, the corpus.
* :mod:`~splitnet.translate.sources` -- the readers of each source: catalogues, TSV, folders,
  the Bible pair.
* :mod:`~splitnet.translate.batches` -- byte and BPE tokenizers, resumable translation batches.
* :mod:`~splitnet.translate.scores` -- BLEU and chrF (sacrebleu).
* :mod:`~splitnet.translate.translation` -- what the ``translate`` task
  (:mod:`splitnet.tasks.translation`) and ``splitnet translate`` run: label-smoothed loss,
  validation, beam search on the test pairs.
"""

__all__ = []   # a folder of modules: import each by name
