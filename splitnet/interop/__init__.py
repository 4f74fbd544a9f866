"""Models in and out: GPT-2 and GPT-NeoX (Pythia) from ``transformers`` as a SplitTransformer with
equal logits, and any SplitTransformer back (``sn.interop.from_hf``, ``sn.interop.to_hf``).

* :mod:`~splitnet.interop.convert` -- the mappings, the byte tokenizer, imported models for the
  analyses (its public names are served here).
* :mod:`~splitnet.interop.hf` -- the ``transformers`` classes of any scheme (needs the ``hf``
  extra; registered with the Auto classes on import).
"""

from __future__ import annotations

from . import convert
from .convert import *  # noqa: F403

__all__ = list(convert.__all__)
