"""Models in and out: GPT-2 and GPT-NeoX (Pythia) from ``transformers`` as a SplitTransformer with
equal logits, and any SplitTransformer back (``sn.interop.from_hf``, ``sn.interop.to_hf``).

* :mod:`~splitnet.interop.convert` -- the mappings and the tokenizers written out (bytes, BPE).
* :mod:`~splitnet.interop.imported` -- imported models for the analyses (a folder, its
  tokenizer, the loss of any re-discretised copy). Both modules' public names are served here.
* :mod:`~splitnet.interop.agree` -- a source's config and its tensors agree, or the import
  follows transformers and warns (a head its config calls tied, tensors its config does not use).
* :mod:`~splitnet.interop.hf` -- the ``transformers`` classes of any scheme (needs the ``hf``
  extra; registered with the Auto classes on import).
"""

from __future__ import annotations

from .convert import (
    ACT_TO_HF,
    FORMATS,
    HF_TO_ACT,
    LIE_TROTTER,
    byte_tokenizer,
    from_hf,
    gpt2_mismatch,
    hf_tokenizer,
    require_hf,
    to_hf,
)
from .folder import check_directory
from .imported import (
    TOKENIZER_FILES,
    Imported,
    load_hf_for_analysis,
    load_tokenizer,
)

__all__ = [
    "ACT_TO_HF",
    "FORMATS",
    "HF_TO_ACT",
    "LIE_TROTTER",
    "TOKENIZER_FILES",
    "Imported",
    "byte_tokenizer",
    "check_directory",
    "from_hf",
    "gpt2_mismatch",
    "hf_tokenizer",
    "load_hf_for_analysis",
    "load_tokenizer",
    "require_hf",
    "to_hf",
]
