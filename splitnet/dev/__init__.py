"""Developer tools of the splitnet repository (not needed to use the library).

``python3 -m splitnet.dev regen [TARGET ...]`` regenerates the generated documents
(:mod:`splitnet.dev.regen`, targets in :mod:`splitnet.dev.targets`); :mod:`splitnet.dev.zoocache`
is the committed per-method cache behind docs/zoo.md. The targets run scripts of a source
checkout (``experiments/``, ``tests/``), not of an installed wheel.
"""

__all__ = []   # submodules: regen, targets, zoocache (imported on use)
