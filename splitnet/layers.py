"""The network layer of a scheme: one step of the integrator as a ``torch.nn.Module``.

With ``method="euler"`` every stage is a residual sub-layer ``x + c h f(x)``; Lie–Trotter at
h = 1 is the pre-norm Transformer block ``x = x + attn(x); x = x + ffn(x)``.
"""

from __future__ import annotations

import torch
from torch import nn

from .flows import Euler, check_step_size, get_method, stage_fields
from .schemes import CONVECTION, DIFFUSION, SplittingScheme


class SplitLayer(nn.Module):
    """``x -> phi^{X_s}_{c_s h} o ... o phi^{X_1}_{c_1 h}(x)`` with sub-flows advanced by
    ``method``. ``diffusion`` / ``convection`` are one module shared by all stages of that field,
    or a sequence with one module per stage. The plan (field, c h, clock) is fixed at
    construction, so ``forward`` does no per-call bookkeeping."""

    def __init__(self, scheme: SplittingScheme, diffusion, convection, step_size: float = 1.0,
                 method: str = "euler"):
        super().__init__()
        h = check_step_size(step_size)
        self.scheme = scheme
        self.step_size = h
        self.method = get_method(method)
        fields = stage_fields(scheme, diffusion, convection)  # validates counts and callables
        for name, f in ((DIFFUSION, diffusion), (CONVECTION, convection)):
            if isinstance(f, (list, tuple)):
                f = nn.ModuleList(f) if all(isinstance(g, nn.Module) for g in f) else f
            if isinstance(f, nn.Module):
                self.add_module(name, f)
            else:
                object.__setattr__(self, name, f)
        self._fields = fields  # plain list: modules already registered above
        self._plan = tuple((h * st.coeff, h * c) for st, c in zip(scheme.stages, scheme.clocks()))
        self._euler = isinstance(self.method, Euler)

    def forward(self, x: torch.Tensor, t: float = 0.0, return_states: bool = False):
        states = [] if return_states else None
        if self._euler:
            for f, (dt, clock) in zip(self._fields, self._plan):
                dx = f(t + clock, x)
                # dt == 1 (the usual residual): skip a multiply the plain block does not do.
                x = x + dx if dt == 1.0 else x + dt * dx
                if states is not None:
                    states.append(x)
        else:
            for f, (dt, clock) in zip(self._fields, self._plan):
                x = self.method(f, t + clock, x, dt)
                if states is not None:
                    states.append(x)
        return (x, states) if return_states else x

    def extra_repr(self) -> str:
        return (f"scheme={self.scheme.name!r} [{self.scheme.pattern()}], h={self.step_size}, "
                f"method={self.method.name!r}")
