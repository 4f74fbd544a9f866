"""The network against its ODE: how far a SplitTransformer is from the flow of its own fields.

Layer k of a :class:`~splitnet.nets.models.SplitTransformer` with step size h is one step of its
scheme over ``[k h, (k + 1) h]`` for the ODE of that layer's fields

    dx/dt = D_k(t, x) + C_k(t, x),                                     t in [k h, (k + 1) h].

With ``weights="shared"`` D_k and C_k are the layer's attention and feed-forward modules. With
``weights="per-stage"`` a field has one module per stage, ``D_{k,1}, ..., D_{k,m}`` with
coefficients ``c_1..c_m`` (summing to 1); the ODE used here is the one the layer is consistent
with, the coefficient-weighted sum

    D_k = sum_i c_i D_{k,i},          C_k = sum_j c_j C_{k,j},

because one layer is ``x + h (sum_i c_i D_{k,i}(x) + sum_j c_j C_{k,j}(x)) + O(h^2)``: to first
order it advances this field, whatever the order of the stages. (Negative coefficients, as in
Yoshida's triple jump, enter with their sign.)

:func:`discretization_gap` reports, per layer k (Euclidean norm of the whole state tensor):

* ``local[k] = ||N_k(x_k) - Phi_k(x_k)||``: the layer ``N_k`` against the exact flow ``Phi_k``
  of its ODE over one step, both from the network's own input ``x_k`` (the local error);
  ``local_rel[k]`` divides it by ``||Phi_k(x_k) - x_k||``, the ODE's own displacement.
* ``cumulative[k] = ||x_{k+1} - y_{k+1}||`` with ``y_0 = x_0`` the embedding and
  ``y_{k+1} = Phi_k(y_k)``: the network against the ODE integrated continuously from the
  embedding through layers 0..k (the global error); ``cumulative_rel[k]`` divides it by
  ``||y_{k+1} - x_0||``, how far the ODE has moved the tokens.

The layer's ODE is :meth:`~splitnet.integrators.layers.SplitLayer.ode_field` (one definition,
shared with
the trajectories' ODE path and re-discretisation). ``Phi_k`` is the core's ``exact`` sub-flow
method (torchdiffeq dopri5 at rtol 1e-13, atol 1e-15 in float64). The model is copied to
``dtype`` (float64 by default) in eval mode (no dropout); the caller's model is not modified.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch

from ..integrators.subflows import get_method


@dataclass
class GapResult:
    scheme: str
    weights: str
    step_size: float
    method: str                 # the network's sub-flow method (euler = residual sub-layers)
    local: np.ndarray           # (n_layers,)
    local_rel: np.ndarray
    cumulative: np.ndarray
    cumulative_rel: np.ndarray
    update: np.ndarray          # ||N_k(x_k) - x_k||, the size of each layer's update

    @property
    def depth(self) -> np.ndarray:
        return np.arange(1, len(self.local) + 1)

    def table(self) -> str:
        title = (f"{self.scheme} ({self.weights}, h={self.step_size:g}, {self.method}): "
                 f"network against the flow of its own fields")
        head = (f"{'layer':>5} {'local':>11} {'local rel':>10} {'cumulative':>11} "
                f"{'cum rel':>10} {'|update|':>10}")
        lines = [title, head]
        for k in range(len(self.local)):
            lines.append(f"{k:>5} {self.local[k]:11.3e} {self.local_rel[k]:10.3e} "
                         f"{self.cumulative[k]:11.3e} {self.cumulative_rel[k]:10.3e} "
                         f"{self.update[k]:10.3e}")
        return "\n".join(lines)


def discretization_gap(model, idx, dtype: torch.dtype = torch.float64, progress: bool = True,
                       **options) -> GapResult:
    """Per-layer distance between ``model`` (a SplitTransformer) and the ODE of its own fields,
    from the embedding of ``idx`` (B, T). ``options`` go to the ``exact`` method
    (``rtol``, ``atol``, ``solver``). See the module docstring for the definitions."""
    if not (hasattr(model, "layers") and hasattr(model, "embed") and hasattr(model, "step_size")):
        raise TypeError(f"discretization_gap needs a SplitTransformer, got {type(model).__name__}")
    if not isinstance(idx, torch.Tensor):
        raise TypeError(f"idx must be a torch.Tensor of int64 token ids, got "
                        f"{type(idx).__name__}")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    unknown = sorted(set(options) - {"rtol", "atol", "solver"})
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for discretization_gap; it takes the "
                         f"exact method's rtol, atol, solver")
    exact = get_method("exact", **options)
    m = copy.deepcopy(model).to(dtype).eval()
    h = m.step_size
    local, local_rel, cum, cum_rel, upd = [], [], [], [], []
    it = list(enumerate(m.layers))
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, desc=f"gap {m.scheme.name}", unit="layer", leave=False)
    stack = m.layers                     # its kind says what the ODE's state is (a pair...)
    fields = stack.ode_fields()
    with torch.no_grad():
        x0 = stack.ode_start(m.embed(idx.to(next(m.parameters()).device)))
        x = y = x0
        for k, _ in it:
            rhs, t = fields[k], k * h
            nx = stack.ode_step(k, x)
            phi_x = exact(rhs, t, x, h)          # the ODE from the network's own input
            y = exact(rhs, t, y, h)              # the ODE continued from the embedding
            local.append((nx - phi_x).norm().item())
            local_rel.append(local[-1] / max((phi_x - x).norm().item(), 1e-300))
            cum.append((nx - y).norm().item())
            cum_rel.append(cum[-1] / max((y - x0).norm().item(), 1e-300))
            upd.append((nx - x).norm().item())
            x = nx
    a = np.asarray
    return GapResult(m.scheme.name, m.weights, h, layer_method_name(m), a(local), a(local_rel),
                     a(cum), a(cum_rel), a(upd))


def layer_method_name(model) -> str:
    """The sub-flow method the model's layers use (``euler`` = residual sub-layers)."""
    return model.layers[0].method.name


__all__ = ["GapResult", "discretization_gap", "layer_method_name"]
