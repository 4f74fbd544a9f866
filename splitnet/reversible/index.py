"""Which parameters each stage of a reversible stack reads, listed once per network.

A reversible backward hands the autograd engine, for every stage, the parameters of the stage's
callable; the stack's autograd Function takes all of them as inputs. Walking the module tree for
these lists at every step was a twentieth of a host-bound step (``Module.parameters()`` is a
generator over a memo of every submodule). :func:`stack_index` lists each stage's *modules* once
and keeps the list on the stack until the module structure of the process changes (any module
registering a submodule bumps a counter, through torch's global registration hook); the
parameters are read from those modules' ``_parameters`` at every use, so a parameter replaced,
frozen or swapped in (``torch.func.functional_call``) is seen at once.
"""

from __future__ import annotations

import functools

import torch
from torch import nn

# bumped whenever any module anywhere registers a submodule: an index built before is stale
_STRUCTURE = [0]


def _bump(*_) -> None:
    _STRUCTURE[0] += 1


torch.nn.modules.module.register_module_module_registration_hook(_bump)


def _modules_of(f, memo: dict) -> tuple:
    """The distinct modules a stage's callable ``f`` runs: its module tree, or the union of a
    sum stage's components' (``memo``: callable id -> tuple, so a shared field is walked once)."""
    f = f.func if isinstance(f, functools.partial) else f
    found = memo.get(id(f))
    if found is None:
        if isinstance(f, nn.Module):
            found = tuple(f.modules())
        else:                                           # a SumField (d+x): its components'
            parts = getattr(f, "fields", ())
            found = tuple({id(m): m for g in parts for m in _modules_of(g, memo)}.values())
        memo[id(f)] = found
    return found


def _live(modules: tuple) -> list:
    """The parameters of ``modules`` that require gradients, read now, once each by identity
    (two modules may hold one parameter, tied at any time: a flag kept from an earlier read
    would go stale, and a parameter listed twice would get its gradient twice)."""
    return list({id(p): p for m in modules for p in m._parameters.values()
                 if p is not None and p.requires_grad}.values())


class StackIndex:
    """The stage modules of a stack's layers (module docstring): ``stages[k][j]`` the modules
    of stage ``j`` of layer ``k`` (``None`` for a layer without stages), ``modules`` every
    distinct module of the stack."""

    def __init__(self, layers):
        self.version = _STRUCTURE[0]
        memo: dict = {}
        self.stages = [tuple(_modules_of(f, memo) for f in layer.stage_callables())
                       if hasattr(layer, "plan") else None for layer in layers]
        self.modules = tuple({id(m): m for layer in layers for m in layer.modules()}.values())

    def params(self) -> list:
        """Every parameter of the stack that requires gradients, once each."""
        return _live(self.modules)

    def stage_params(self, k: int) -> list:
        """Per stage of layer ``k``: its callable's parameters that require gradients."""
        return [_live(ms) for ms in self.stages[k]]


def stack_index(layers) -> StackIndex:
    """``layers``' index, kept on the stack module while no module structure changed."""
    cached = getattr(layers, "__dict__", {}).get("_reversible_index")
    if cached is not None and cached.version == _STRUCTURE[0]:
        return cached
    index = StackIndex(layers)
    if isinstance(layers, nn.Module):
        layers.__dict__["_reversible_index"] = index
    return index


__all__ = ["StackIndex", "stack_index"]
