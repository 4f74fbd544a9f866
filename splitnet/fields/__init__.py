"""Vector fields of the particle system, as ``torch.nn.Module``s with signature ``f(t, x)``.

``x`` has shape ``(..., n_tokens, d_model)``; every field returns dx/dt of the same shape. One
module per kind of field (how a network builds each one from its config, and what it costs, is
the kind's: :mod:`splitnet.configs.kinds`):

* :class:`Attention` (``attention.py``) -- self-attention, the diffusion field
  ``F(x_i, [x_1..x_n])``: particles interact. ``W_o softmax(Q K^T / sqrt(d_h)) V`` on ``LN(x)``.
* :class:`GLUConv` (``conv.py``) -- a GLU convolution over the ``k`` nearest positions
  (ConvS2S): a local diffusion field.
* :class:`CrossAttention` (``cross.py``) -- the cross field: particles pulled by a memory.
* :class:`Rotary` (``rotary.py``) -- rotary position embeddings of an attention's queries and
  keys (GPT-NeoX's convention), an option of :class:`Attention`.
* :class:`FeedForward` (``feedforward.py``) -- the convection field ``G(x_i)``: each particle
  alone, ``W_2 act(W_1 LN(x) + b_1) + b_2``.
* :class:`SDU` / :class:`Gated` (``gates.py``) -- the Highway Transformer's self-dependency
  unit (Chai et al. 2020), ``SDU(x) = T(x) * (x W_2 + b_2)``, ``T = sigmoid or tanh(x W_1 +
  b_1)``, added to any field: ``f(x) + SDU(x)``.

Each module says what generation needs to know: ``mixes_tokens`` (a token's update depends on
other tokens), ``supports_cache`` (a key/value cache makes generation exact), ``uses_memory``
(it reads a memory passed as context).
"""

from __future__ import annotations

import importlib
import pkgutil

# Every module's __all__ is served from here (sn.fields.Attention, ...), found on disk: a new
# kind's module needs no line in this file.
__all__ = []
for _info in pkgutil.iter_modules(__path__):
    if not _info.name.startswith("_"):
        _module = importlib.import_module(f"{__name__}.{_info.name}")
        globals().update({_n: getattr(_module, _n) for _n in _module.__all__})
        __all__ += _module.__all__
__all__.sort()
