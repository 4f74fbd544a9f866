"""The network against its ODE: how far a SplitTransformer is from the flow of its own fields.

Layer k of a :class:`~splitnet.models.SplitTransformer` with step size h is one step of its
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

``Phi_k`` is the core's ``exact`` sub-flow method (torchdiffeq dopri5 at rtol 1e-13, atol 1e-15
in float64). The model is copied to ``dtype`` (float64 by default) in eval mode (no dropout);
the caller's model is not modified.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .flows import get_method
from .schemes import CONVECTION, DIFFUSION


class _WeightedSum(nn.Module):
    """``f(t, x) = sum_i c_i f_i(t, x)``: the field a per-stage layer is consistent with."""

    def __init__(self, fields, coeffs):
        super().__init__()
        self.fields = nn.ModuleList(fields) if all(isinstance(f, nn.Module) for f in fields) \
            else list(fields)
        self.coeffs = [float(c) for c in coeffs]

    def forward(self, t, x):
        out = self.coeffs[0] * self.fields[0](t, x)
        for c, f in zip(self.coeffs[1:], self.fields[1:]):
            out = out + c * f(t, x)
        return out


def layer_fields(layer):
    """``(D, C)``: the vector fields of a :class:`~splitnet.layers.SplitLayer`'s ODE (the module
    itself when shared, the coefficient-weighted sum of the stage modules when per-stage)."""
    out = []
    for name in (DIFFUSION, CONVECTION):
        f = getattr(layer, name)
        if isinstance(f, (list, tuple, nn.ModuleList)):
            f = _WeightedSum(list(f), layer.scheme.field_coeffs(name))
        out.append(f)
    return tuple(out)


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


def discretization_gap(model, idx, dtype: torch.dtype = torch.float64, progress: bool = False,
                       **options) -> GapResult:
    """Per-layer distance between ``model`` (a SplitTransformer) and the ODE of its own fields,
    from the embedding of ``idx`` (B, T). ``options`` go to the ``exact`` method
    (``rtol``, ``atol``, ``solver``). See the module docstring for the definitions."""
    from .models import SplitTransformer

    if not isinstance(model, SplitTransformer):
        raise TypeError(f"discretization_gap needs a SplitTransformer, got {type(model).__name__}")
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

        it = tqdm(it, desc=f"gap {m.scheme.name}", unit="layer")
    with torch.no_grad():
        x0 = m.embed(idx.to(next(m.parameters()).device))
        x = y = x0
        for k, layer in it:
            D, C = layer_fields(layer)

            def rhs(t, z, D=D, C=C):
                return D(t, z) + C(t, z)

            t = k * h
            nx = layer(x, t)
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
    return model.layers[0].method.name


def plot_gaps(results, path, title: str | None = None) -> None:
    """Local and cumulative relative gap against depth, one line per result."""
    import matplotlib.pyplot as plt

    from ._io import atomic_savefig

    fig, axes = plt.subplots(1, 2, figsize=(11, 5.0), dpi=120)
    styles = {"shared": "-", "per-stage": "--"}
    colors = {}
    for r in results:
        c = colors.setdefault(r.scheme, len(colors))
        kw = {"marker": "os^Dv<>"[c % 7], "ms": 4, "ls": styles.get(r.weights, "-"),
              "color": f"C{c}", "label": f"{r.scheme} ({r.weights})"}
        axes[0].semilogy(r.depth, r.local_rel, **kw)
        axes[1].semilogy(r.depth, r.cumulative_rel, **kw)
    axes[0].set_ylabel("||layer(x_k) - Phi_k(x_k)|| / ||Phi_k(x_k) - x_k||")
    axes[0].set_title("local: one layer vs its ODE, same input")
    axes[1].set_ylabel("||x_k - y(k h)|| / ||y(k h) - x_0||")
    axes[1].set_title("cumulative: network vs ODE from the embedding")
    for ax in axes:
        ax.set_xlabel("layer k (depth)")
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    # below the panels: inside, it would hide the curves that start near the top
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 3), fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    atomic_savefig(fig, path)
