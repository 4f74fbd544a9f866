"""Reversible splitting networks: a scheme over a partitioned state ``(x1, x2)``.

Attention writes ``x1`` reading ``x2``, the feed-forward writes ``x2`` reading ``x1`` (and
cross-attention writes ``x1`` reading ``x2`` and the memory): every stage is a shear whose Euler
step is its exact flow, so a network of residual sub-layers keeps its scheme's order, a step is
explicitly invertible, and training recomputes activations from the outputs instead of
storing them (:mod:`.layer`, :mod:`.backprop`). ``SplitConfig(reversible=True)`` builds one.
"""

from ..stagelists.stages import reversible_unsupported
from .backprop import plain_autograd, run_stack, two_streams
from .layer import ReversibleLayer, check_grid, end_pair, start_pair, to_grid
from .memory import saved_bytes

__all__ = ["ReversibleLayer", "check_grid", "end_pair", "plain_autograd",
           "reversible_unsupported", "run_stack", "saved_bytes", "start_pair", "to_grid",
           "two_streams"]
