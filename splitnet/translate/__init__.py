"""Parallel corpora offline and the translation task.

* :mod:`~splitnet.translate.catalogs` -- gettext ``.mo`` / ``.po`` readers.
* :mod:`~splitnet.translate.pairs` -- ``load_pairs``: catalogues, TSV, folders, the Bible pair.
* :mod:`~splitnet.translate.batches` -- byte and BPE tokenizers, resumable translation batches.
* :mod:`~splitnet.translate.scores` -- BLEU and chrF (sacrebleu).
* :mod:`~splitnet.translate.translation` -- the task as the trainer and ``splitnet translate``
  run it (label-smoothed loss, validation, beam search on the test pairs).
"""

__all__ = []   # a folder of modules: import each by name
