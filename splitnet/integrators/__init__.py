"""Splitting schemes and their verbs: ``step``, ``integrate`` and ``layer`` on any fields.

* :mod:`~splitnet.integrators.subflows` -- how each stage is advanced
  (``METHODS``).
* :mod:`~splitnet.integrators.validate` -- input checks of the numerical API.
* :mod:`~splitnet.integrators.flows` -- ``step`` / ``integrate`` on stage tuples and a field map.
* :mod:`~splitnet.integrators.layers` -- :class:`SplitLayer`, one step as an ``nn.Module``.
* :mod:`~splitnet.integrators.splitting` -- :class:`SplittingScheme` and the k-field building
  blocks; :mod:`~splitnet.integrators.core` the core schemes and one class per zoo entry;
  :mod:`~splitnet.integrators.schemes` the registry (``sn.schemes``).
"""

__all__ = []   # a folder of modules: import each by name
