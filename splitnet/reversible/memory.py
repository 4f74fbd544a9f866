"""What training keeps for backward: the bytes autograd saves in one forward pass, counted.

:func:`saved_bytes` runs one forward of a network under
``torch.autograd.graph.saved_tensors_hooks`` and adds up the distinct storages it saves,
parameters excluded (they are held anyway) -- the activation memory of training, measured on
the kernels of the device it runs on (the CPU's here; CUDA's flash attention saves less). A plain
network's grows with its depth (every stage's inputs and intermediates); a reversible one's
does not (the stack keeps its final pair: :mod:`splitnet.reversible.backprop`).
"""

from __future__ import annotations

import torch
from torch.autograd.graph import saved_tensors_hooks


def saved_bytes(model: torch.nn.Module, *inputs) -> int:
    """Bytes of the distinct tensors autograd saves for backward in ``model(*inputs)``,
    parameters excluded (a storage saved twice counts once)."""
    params = {p.untyped_storage()._cdata for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t):
        s = t.untyped_storage()
        if s._cdata not in params:
            seen[s._cdata] = s.nbytes()
        return t

    with torch.enable_grad(), saved_tensors_hooks(pack, lambda t: t):
        model(*inputs)
    return sum(seen.values())


__all__ = ["saved_bytes"]
