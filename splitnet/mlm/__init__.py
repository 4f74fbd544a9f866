"""Masked language models (``splitnet train --task mlm``): a bidirectional ``SplitTransformer``
(``causal=False``) over bytes and a mask token, trained to restore masked bytes (BERT's
objective, the Macaron paper's second setting). :mod:`.masking` draws the masks."""

from ..configs.config import MLM_VOCAB
from .masking import (
                      IGNORE,
                      MASK_ID,
                      mask_tokens,
                      masked_windows,
                      train_batch,
                      validation,
)

__all__ = ["IGNORE", "MASK_ID", "MLM_VOCAB", "mask_tokens", "masked_windows", "train_batch",
           "validation"]
