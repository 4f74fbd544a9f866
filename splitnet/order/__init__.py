"""The order of a stage list, from its coefficients alone (reads :mod:`splitnet.stagelists`).

* :mod:`~splitnet.order.check` -- the order measured on random non-commuting matrices (exact
  exponentials, numpy): the verdict of ``sn.check_order``.
* :mod:`~splitnet.order.algebra` -- the order conditions exactly, in the free algebra (Lyndon
  words, Witt's count), in any number type.
* :mod:`~splitnet.order.conditions` -- the same conditions in torch, differentiable in the
  coefficients: the order penalty of learned coefficients.
"""

__all__ = []   # a folder of modules: import each by name
