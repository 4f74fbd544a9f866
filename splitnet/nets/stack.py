"""From a config to a stack: the kind a config names (``stack``, :mod:`splitnet.configs.stacks`)
built around its layers.

``build_stack(c, scheme, n_layers, fields_of)`` gives ``n_layers`` steps of ``scheme`` (layer k's
fields from ``fields_of(k)``) in the kind ``c.stack`` names, each layer of the kind's layer
class::

    plain         -> Stack of SplitLayer (LearnedSplitLayer with learned coefficients)
    checkpointed  -> CheckpointedStack of the same
    reversible    -> ReversibleStack of ReversibleLayer     (splitnet.reversible)
    a user's kind -> its class (sn.stacks.register)

``depth_basis`` set: every layer shares layer 0's field modules, each wrapped in a
:class:`~splitnet.fields.depthfield.DepthField` over the stack's time ``n_layers h``.

``c`` is a :class:`~splitnet.configs.config.SplitConfig` or one stack of a
:class:`~splitnet.configs.seq2seq.Seq2SeqConfig` (:class:`~splitnet.configs.seq2seq.StackConfig`).
Everything after construction asks the stack (:mod:`splitnet.integrators.stack`).
"""

from __future__ import annotations

from typing import Callable

from ..configs import stacks as _stacks
from ..fields.depthfield import over_depth
from ..integrators.layers import SplitLayer
from ..integrators.stack import Stack


def stack_class(c) -> type:
    """The stack class of config ``c``."""
    return _stacks.get(c.stack).stack_class()


def build_layer(c, scheme, fields: dict) -> SplitLayer:
    """One step of ``scheme`` over ``fields`` (field name -> module or per-stage modules), of
    the layer class ``c``'s stack kind builds."""
    kind = _stacks.get(c.stack)
    return kind.layer_class(c)(scheme, step_size=c.step_size, method=c.method, fields=fields,
                               **kind.layer_options(c))


def build_stack(c, scheme, n_layers: int, fields_of: Callable[[int], dict]) -> Stack:
    """``n_layers`` layers of ``scheme`` at ``c.step_size`` in the kind ``c`` asks for."""
    cls = stack_class(c)
    if getattr(c, "depth_basis", None):     # one set of depth fields, shared by every layer
        shared = over_depth(fields_of(0), c.depth_basis, n_layers * c.step_size)
        fields_of = lambda k: shared   # noqa: E731
    layers = [build_layer(c, scheme, fields_of(k)) for k in range(n_layers)]
    return cls(layers, **cls.settings_of(c))


__all__ = ["build_layer", "build_stack", "stack_class"]
