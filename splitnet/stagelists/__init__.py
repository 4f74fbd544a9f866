"""Plain data, the bottom layer: no torch, no numpy, nothing of splitnet below it.

* :mod:`~splitnet.stagelists.stages` -- the field names, :class:`Stage`, and pure functions of a
  stage sequence (clocks, sums, merging, the diagram, stage strings ``c:0.5,d:1,c:0.5``).
* :mod:`~splitnet.stagelists.zoo` -- the published splitting and composition methods as data (name,
  citation, declared order, published coefficient strings).
"""

__all__ = []   # a folder of modules: import each by name
