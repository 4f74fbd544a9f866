"""Residual dropout that costs nothing when it does nothing.

``drop(module, y)``: ``module(y)`` for an ``nn.Dropout`` that would drop (``p > 0``, training),
``y`` itself otherwise, without calling the module: a module call costs microseconds of
Python, a field calls its dropout once per evaluation, and a deep network on a small width (or a
reversible one, which evaluates every field twice a step) is bound by exactly that work.
"""

from __future__ import annotations

import torch
from torch import nn


def drop(module: nn.Dropout, y: torch.Tensor) -> torch.Tensor:
    """``module(y)`` when it would drop something, else ``y`` (module docstring)."""
    return module(y) if module.p and module.training else y


__all__ = ["drop"]
