"""Token embeddings as particles: their paths through a network, and the ODE the network steps.

A :class:`~splitnet.models.SplitTransformer` with step size ``h`` maps the embedding ``x(0)`` of
a sequence through ``n_layers`` steps of its splitting scheme; layer ``k`` integrates
``[k h, (k + 1) h]``. :func:`collect` records every token's state after every layer (and after
every stage), with times ``t = k h + h * scheme.stage_times()`` (the mean of the two fields'
clocks), and, with ``continuous=True``, the dense path of the ODE the layers approximate.

The model's own ODE
-------------------
Layer ``k`` has one callable ``X_{k,i}`` per stage ``i`` with coefficient ``c_i`` (each field's
coefficients sum to 1). To first order in ``h`` the composition of sub-flows
``exp(c_s h X_s) ... exp(c_1 h X_1)`` equals the flow of ``sum_i c_i X_i`` (BCH), so the ODE a
layer is consistent with is

    dx/dt = sum_i c_i X_{k,i}(t, x)          for t in [k h, (k + 1) h].

With ``weights="shared"`` all stages of a field call the same module, the coefficients of each
field add up to 1 and this is ``dx/dt = D_k(t, x) + C_k(t, x)``. With ``weights="per-stage"`` it
is ``Dbar_k + Cbar_k``, the coefficient-weighted mean of the stage modules of each field (negative
coefficients, e.g. the triple jump's, enter with their sign). Every field is evaluated at the
ODE time ``t`` (both clocks equal ``t``). The path starts from the embedding and runs through all
layers (``restart=False``: the *global* comparison, drift accumulates); with ``restart=True``
each layer's piece starts from the network's state at the start of that layer (the *local*
comparison: one step's error per layer).

Projection and diagnostics
--------------------------
:func:`pca` fits principal axes jointly on all network states of the sequence (every token at
every recorded point), centred on their mean, in float64, with a fixed sign convention: in each
component the loading of largest magnitude is positive. The ODE path is projected on the same
axes (it does not enter the fit, so the picture of the network does not change when it is drawn).

:func:`clustering` gives, at every recorded point, the mean pairwise cosine similarity of the
tokens (off-diagonal pairs), the pairwise cosines themselves (for per-layer histograms) and the
effective rank ``exp(H(p))`` of the token cloud, ``p`` the normalised singular values of the
matrix of unit-normalised token vectors (Roy & Vetterli 2007): it is ``n_tokens``-ish when the
directions are spread and 1 when every token points the same way, the clustering that
Geshkovski et al. (2023) prove for self-attention dynamics.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .flows import default_tolerances
from .models import SplitTransformer

DEFAULT_TEXT = "for i in range(n):"   # 18 bytes of the kind the default run was trained on
EMBEDDING = "embedding"

# ---------------------------------------------------------------------------------------------
# Tokens


def encode(text: str) -> torch.Tensor:
    """UTF-8 bytes of ``text`` as token ids (the byte tokenizer, vocabulary 256), shape (T,)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if not text:
        raise ValueError("text is empty: give at least one character")
    return torch.tensor(list(text.encode("utf-8")), dtype=torch.long)


_VISIBLE = {" ": "\u2423", "\n": "\u23ce", "\t": "\u21e5"}   # glyphs DejaVu Sans has


def token_label(token_id: int) -> str:
    """A printable label for a byte token: the character, ``␣`` for a space, ``⏎`` for a newline,
    ``\\xNN`` for a byte that is not printable on its own (e.g. half of a UTF-8 character)."""
    token_id = int(token_id)
    if not 0 <= token_id < 256:
        return f"#{token_id}"
    ch = bytes([token_id]).decode("utf-8", "replace")
    if ch in _VISIBLE:
        return _VISIBLE[ch]
    if ch == "\ufffd" or not ch.isprintable():
        return f"\\x{token_id:02x}"
    return ch


# ---------------------------------------------------------------------------------------------
# Collection


@dataclass
class Trajectories:
    """Every token's state at every recorded point of one sequence.

    Attributes
    ----------
    states : (n_points, T, D) tensor -- point 0 is the embedding, then the state after every
        stage of every layer (``per_stage=True``) or after every layer.
    times : (n_points,) float64 -- ``0``, then ``k h + h * stage_times`` (layer end: ``(k+1) h``).
    layer : (n_points,) int -- 0-based index of the layer that produced the point, -1 for the
        embedding.
    stage : (n_points,) int -- stage index inside that layer, -1 for the embedding.
    fields : names per point: ``"embedding"``, ``"diffusion"`` or ``"convection"``.
    layer_end : (n_points,) bool -- the point is the embedding or the output of a whole layer.
    tokens : token ids (T,); labels : printable characters (T,).
    path, path_times : the ODE path ``(n_path, T, D)`` at ``path_times`` (``continuous=True``),
        else None; ``path_restart`` says whether each layer's piece restarts from the network.
    """

    states: torch.Tensor
    times: torch.Tensor
    layer: np.ndarray
    stage: np.ndarray
    fields: tuple[str, ...]
    layer_end: np.ndarray
    tokens: tuple[int, ...]
    labels: tuple[str, ...]
    step_size: float
    n_layers: int
    scheme: str
    weights: str
    method: str
    path: torch.Tensor | None = None
    path_times: torch.Tensor | None = None
    path_restart: bool = False
    meta: dict = field(default_factory=dict)

    @property
    def n_points(self) -> int:
        return self.states.shape[0]

    @property
    def n_tokens(self) -> int:
        return self.states.shape[1]

    def layer_states(self) -> torch.Tensor:
        """States at the layer boundaries ``t = k h``, k = 0..n_layers: (n_layers + 1, T, D)."""
        return self.states[torch.as_tensor(self.layer_end)]

    @property
    def first_layer(self) -> int:
        """Layer boundary of the first point: 0 (the embedding) unless cut by :meth:`since`."""
        return int(self.layer[0]) + 1

    def since(self, k: int) -> Trajectories:
        """The part from the layer boundary ``t = k h`` on (``k = 0``: everything), e.g. to look
        at the later layers once a first layer's large jump would dominate the picture."""
        n_bound = int(self.layer_end.sum())
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < n_bound - 1:
            raise ValueError(f"layer boundary must be an int in 0..{n_bound - 2}, got {k!r}")
        i0 = int(np.flatnonzero(self.layer_end)[k])
        path = path_times = None
        if self.path is not None:
            n = (self.path.shape[0] - 1) // self.n_layers
            j0 = (k - self.first_layer) * n
            path, path_times = self.path[j0:], self.path_times[j0:]
        return Trajectories(
            states=self.states[i0:], times=self.times[i0:], layer=self.layer[i0:],
            stage=self.stage[i0:], fields=self.fields[i0:], layer_end=self.layer_end[i0:],
            tokens=self.tokens, labels=self.labels, step_size=self.step_size,
            n_layers=self.n_layers - (k - self.first_layer), scheme=self.scheme,
            weights=self.weights, method=self.method, path=path, path_times=path_times,
            path_restart=self.path_restart, meta=dict(self.meta))

    def path_at_layers(self) -> torch.Tensor:
        """The ODE path at ``t = k h``: (n_layers + 1, T, D)."""
        if self.path is None:
            raise ValueError("no continuous path: collect(..., continuous=True)")
        n = (self.path.shape[0] - 1) // self.n_layers
        return self.path[::n]

    def gap(self, relative: bool = False) -> np.ndarray:
        """Distance between the network and its ODE at every layer boundary ``t = k h``:
        root-mean-square over tokens of ``||x_net(k h) - x_ode(k h)||``, shape (n_layers + 1,).

        ``relative=True`` divides by the RMS over tokens of the ODE's net displacement
        ``||x_ode(L h) - x_ode(0)||``, so the number reads as "fraction of how far the tokens
        travel". With ``restart=True`` each entry is the one-layer (local) error."""
        net = self.layer_states().double()
        ode = self.path_at_layers().double()
        g = (net - ode).norm(dim=-1).pow(2).mean(dim=-1).sqrt().numpy()
        if relative:
            disp = (self.path[-1].double() - self.path[0].double()).norm(dim=-1)
            g = g / float(disp.pow(2).mean().sqrt())
        return g


def _as_sequence(model: SplitTransformer, idx) -> torch.Tensor:
    if isinstance(idx, str):
        if model.vocab_size < 256:
            raise ValueError(f"text needs the byte vocabulary (256); the model has "
                             f"vocab_size {model.vocab_size}: pass token ids instead")
        idx = encode(idx)
    if not isinstance(idx, torch.Tensor):
        idx = torch.as_tensor(idx)
    if idx.dtype != torch.long:
        raise TypeError(f"token ids must be int64, got {idx.dtype}")
    if idx.dim() == 2:
        if idx.shape[0] != 1:
            raise ValueError(f"collect takes one sequence, shape (T,) or (1, T); got a batch of "
                             f"{idx.shape[0]} (call it once per sequence)")
        idx = idx[0]
    if idx.dim() != 1 or idx.numel() == 0:
        raise ValueError(f"token ids must have shape (T,) with T >= 1, got {tuple(idx.shape)}")
    ctx = context_length(model)
    if idx.numel() > ctx:
        raise ValueError(f"the text has {idx.numel()} tokens but the model's context is {ctx}: "
                         f"shorten the text")
    if int(idx.min()) < 0 or int(idx.max()) >= model.vocab_size:
        raise ValueError(f"token ids must lie in [0, {model.vocab_size}), got "
                         f"[{int(idx.min())}, {int(idx.max())}]")
    return idx


def context_length(model: SplitTransformer) -> int:
    """Longest sequence the model takes: the training context if the checkpoint recorded one,
    else ``max_len`` (the positional table)."""
    return int(getattr(model, "_trajectory_context", None) or model.max_len)


def ode_field(layer):
    """The ODE a layer is consistent with, ``f(t, x) = sum_i c_i X_i(t, x)`` over its stages.

    Stages that call the same module are grouped (their coefficients add up), so for shared
    weights this evaluates ``D(t, x) + C(t, x)`` once each."""
    groups: list[list] = []          # [callable, coefficient]
    for f, st in zip(layer._fields, layer.scheme.stages):
        for g in groups:
            if g[0] is f:
                g[1] += st.coeff
                break
        else:
            groups.append([f, st.coeff])
    terms = [(f, c) for f, c in groups if abs(c) > 1e-15]

    def rhs(t, x):
        out = None
        for f, c in terms:
            y = f(t, x)
            y = y if c == 1.0 else c * y
            out = y if out is None else out + y
        return out

    return rhs


def _ode_path(model, x0, layer_starts, points_per_layer, solver, rtol, atol, restart):
    from torchdiffeq import odeint

    h = model.step_size
    r, a = default_tolerances(x0.dtype)
    kwargs = {"method": solver}
    if solver in ("dopri5", "dopri8", "bosh3", "adaptive_heun", "fehlberg2"):
        kwargs.update(rtol=rtol or r, atol=atol or a)
    else:
        # Fixed-grid solver: 8 sub-steps between output points, fine against the layer's h.
        kwargs["options"] = {"step_size": h / (8 * points_per_layer)}
    pieces = [x0.unsqueeze(0)]
    times = [torch.zeros(1, dtype=torch.float64)]
    x = x0
    for k, layer in enumerate(model.layers):
        if restart:
            x = layer_starts[k]
        ts = torch.linspace(k * h, (k + 1) * h, points_per_layer + 1, dtype=torch.float64)
        sol = odeint(ode_field(layer), x, ts.to(x.dtype), **kwargs)
        pieces.append(sol[1:])
        times.append(ts[1:])
        x = sol[-1]
    return torch.cat(pieces), torch.cat(times)


@torch.no_grad()
def collect(model: SplitTransformer, idx, per_stage: bool = True, continuous: bool = False,
            points_per_layer: int = 16, restart: bool = False, solver: str = "dopri5",
            rtol: float | None = None, atol: float | None = None) -> Trajectories:
    """Every token's state after every layer (and every stage) of one sequence.

    Parameters
    ----------
    model : SplitTransformer (run in eval mode here; its mode is restored).
    idx : token ids of ONE sequence, shape (T,) or (1, T), or a str (encoded as UTF-8 bytes).
    per_stage : record the state after every stage, not only after every layer.
    continuous : also integrate the model's own ODE (module docstring) with torchdiffeq, at
        ``points_per_layer`` points per layer, from the embedding (``restart=False``) or from the
        network state at the start of every layer (``restart=True``).
    solver, rtol, atol : torchdiffeq solver (adaptive ``dopri5`` by default at
        :func:`~splitnet.flows.default_tolerances` of the model's dtype; a fixed-grid solver
        such as ``"rk4"`` takes 8 sub-steps per output point).

    Returns
    -------
    Trajectories, with ``states`` of shape ``(n_points, T, D)``; the times are the model's
    :meth:`~splitnet.models.SplitTransformer.state_times`.
    """
    if not isinstance(model, SplitTransformer):
        raise TypeError(f"model must be a SplitTransformer, got {type(model).__name__}")
    if isinstance(points_per_layer, bool) or not isinstance(points_per_layer, int) \
            or points_per_layer < 1:
        raise ValueError(f"points_per_layer must be a positive int, got {points_per_layer!r}")
    idx = _as_sequence(model, idx)
    dev = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        _, states = model(idx.to(dev)[None], return_states=True)
        states = states[:, 0].detach()                     # (n_all, T, D)
        times = model.state_times()
        sch = model.scheme
        n_st = len(sch.stages)
        L = model.n_layers
        layer = np.array([-1] + [k for k in range(L) for _ in range(n_st)])
        stage = np.array([-1] + [i for _ in range(L) for i in range(n_st)])
        fields = (EMBEDDING,) + tuple(st.field for _ in range(L) for st in sch.stages)
        layer_end = np.array([True] + [i == n_st - 1 for _ in range(L) for i in range(n_st)])
        if not per_stage:
            keep = np.flatnonzero(layer_end)
            states, times = states[keep], times[keep]
            layer, stage, layer_end = layer[keep], stage[keep], layer_end[keep]
            fields = tuple(fields[i] for i in keep)
        path = path_times = None
        if continuous:
            starts = states[torch.as_tensor(layer_end)]
            path, path_times = _ode_path(model, states[0], starts, points_per_layer, solver,
                                         rtol, atol, restart)
            path = path.detach().cpu()
    finally:
        model.train(was_training)
    ids = tuple(int(i) for i in idx)
    sch_name = sch.name
    return Trajectories(
        states=states.cpu(), times=times, layer=layer, stage=stage, fields=fields,
        layer_end=layer_end, tokens=ids, labels=tuple(token_label(i) for i in ids),
        step_size=model.step_size, n_layers=L, scheme=sch_name, weights=model.weights,
        method=model.layers[0].method.name, path=path, path_times=path_times,
        path_restart=restart)


# ---------------------------------------------------------------------------------------------
# PCA


@dataclass
class PCA:
    """Principal axes: ``transform(x) = (x - mean) @ components.T``.

    ``components`` (k, D) are orthonormal, sorted by explained variance, and signed so that the
    loading of largest magnitude in each is positive (ties: the first such entry)."""

    mean: np.ndarray
    components: np.ndarray
    explained_variance_ratio: np.ndarray

    def transform(self, x) -> np.ndarray:
        x = np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x, dtype=np.float64)
        return (x - self.mean) @ self.components.T


def pca(traj: Trajectories | torch.Tensor | np.ndarray, dim: int = 2) -> PCA:
    """PCA of all network states of a sequence (every token at every point), or of an array of
    vectors ``(..., D)``; deterministic: float64 SVD and a fixed sign convention."""
    if isinstance(traj, Trajectories):
        x = traj.states
    elif isinstance(traj, Sequence) and traj and isinstance(traj[0], Trajectories):
        x = torch.cat([t.states.reshape(-1, t.states.shape[-1]) for t in traj])
    else:
        x = traj
    x = np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x, dtype=np.float64)
    x = x.reshape(-1, x.shape[-1])
    D = x.shape[1]
    if isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim <= D:
        raise ValueError(f"dim must be an int in 1..{D}, got {dim!r}")
    mean = x.mean(axis=0)
    xc = x - mean
    _, s, vt = np.linalg.svd(xc, full_matrices=False)
    comps = vt[:dim].copy()
    for c in comps:
        j = int(np.argmax(np.abs(c)))
        if c[j] < 0:
            c *= -1.0
    var = s ** 2
    ratio = var[:dim] / var.sum() if var.sum() > 0 else np.zeros(dim)
    return PCA(mean=mean, components=comps, explained_variance_ratio=ratio)


# ---------------------------------------------------------------------------------------------
# Clustering diagnostics


def pairwise_cosines(x) -> np.ndarray:
    """Cosine similarities of all pairs i < j of the rows of ``x`` (T, D): shape (T(T-1)/2,)."""
    x = np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x, dtype=np.float64)
    u = x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-300)
    c = u @ u.T
    i, j = np.triu_indices(x.shape[0], k=1)
    return c[i, j]


def effective_rank(x) -> float:
    """Roy–Vetterli effective rank ``exp(-sum p log p)``, ``p`` the singular values of the
    unit-normalised rows of ``x`` (T, D) divided by their sum. 1 when all rows are parallel."""
    x = np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x, dtype=np.float64)
    u = x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-300)
    s = np.linalg.svd(u, compute_uv=False)
    p = s / s.sum()
    p = p[p > 0]
    return float(np.exp(-(p * np.log(p)).sum()))


@dataclass
class Clustering:
    """Per recorded point: mean pairwise cosine, effective rank, and all pairwise cosines."""

    times: np.ndarray
    mean_cosine: np.ndarray
    effective_rank: np.ndarray
    cosines: np.ndarray      # (n_points, T(T-1)/2)


def clustering(traj: Trajectories, layers_only: bool = True) -> Clustering:
    """Clustering diagnostics of the token cloud at every layer boundary (or every point).

    Needs at least 2 tokens."""
    if traj.n_tokens < 2:
        raise ValueError("clustering needs at least 2 tokens")
    if layers_only:
        xs, ts = traj.layer_states(), traj.times[torch.as_tensor(traj.layer_end)]
    else:
        xs, ts = traj.states, traj.times
    cos = np.stack([pairwise_cosines(x) for x in xs])
    return Clustering(times=np.asarray(ts, dtype=np.float64), mean_cosine=cos.mean(axis=1),
                      effective_rank=np.array([effective_rank(x) for x in xs]), cosines=cos)


# ---------------------------------------------------------------------------------------------
# Plots


# 20 hues dark enough to read as text on white (tab10, then Dark2 and Set1 shades that differ).
_PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
            "#7f7f7f", "#bcbd22", "#17becf", "#1b9e77", "#7570b3", "#e6ab02", "#a6761d",
            "#e7298a", "#66a61e", "#000080", "#800000", "#008080", "#4d4d00"]


def _colours(n: int):
    import matplotlib

    if n <= len(_PALETTE):
        return _PALETTE[:n]
    cmap = matplotlib.colormaps["turbo"]
    return [cmap(0.05 + 0.9 * i / max(1, n - 1)) for i in range(n)]


_SUB = str.maketrans("0123456789", "\u2080\u2081\u2082\u2083\u2084\u2085\u2086\u2087\u2088\u2089")


def _tok_text(traj: Trajectories, i: int) -> str:
    """Character with its position as a subscript, so repeated letters stay distinguishable."""
    return f"{traj.labels[i]}{str(i).translate(_SUB)}"


def _title(traj: Trajectories) -> str:
    k0 = traj.first_layer
    which = f"{traj.n_layers} layers" if k0 == 0 else \
        f"layers {k0 + 1}\u2013{k0 + traj.n_layers} of {k0 + traj.n_layers}"
    return f"{traj.scheme} ({traj.weights}, {traj.method}), h = {traj.step_size:g}, {which}"


def _legend_handles(has_path: bool, has_stages: bool, first_layer: int = 0,
                    restart: bool = False):
    from matplotlib.lines import Line2D

    where = "embedding" if first_layer == 0 else f"after layer {first_layer}"
    hs = [Line2D([], [], color="0.3", marker="s", ms=7, ls="none", mfc="white", mew=1.5,
                 label=f"start ({where})"),
          Line2D([], [], color="0.3", marker="o", ms=5, ls="-", lw=1.2, label="after a layer")]
    if has_stages:
        hs.append(Line2D([], [], color="0.3", marker=".", ms=4, ls="none",
                         label="after a stage"))
    hs.append(Line2D([], [], color="0.3", marker="*", ms=11, ls="none", mec="k", mew=0.5,
                     label="end (last layer)"))
    if has_path:
        hs.append(Line2D([], [], color="0.3", ls=":", lw=1.5, marker="x", ms=6, mew=1.5,
                         label="ODE path (x: its end)" if not restart else
                         "ODE from each layer's input\n(x: exact flow of the layer)"))
    return hs


def plot_trajectories(traj: Trajectories, ax=None, dim: int = 2, projection: PCA | None = None,
                      show_path: bool = True, title: str | None = None, legend: bool = True,
                      label_tokens: bool = True):
    """One polyline per token in PCA coordinates (2-D or 3-D): small dots after every stage,
    circles after every layer, a hollow square at the start, a star at the end, the character
    (with its position as a subscript) at the end point, and the ODE path dotted.

    ``projection`` defaults to :func:`pca` of ``traj``; pass one to share axes between panels.
    Returns the axes."""
    import matplotlib.pyplot as plt

    if dim not in (2, 3):
        raise ValueError(f"dim must be 2 or 3, got {dim!r}")
    p = projection or pca(traj, dim)
    if p.components.shape[0] < dim:
        raise ValueError(f"projection has {p.components.shape[0]} components, need {dim}")
    if ax is None:
        fig = plt.figure(figsize=(8.5, 6.5) if dim == 2 else (9, 7.5))
        ax = fig.add_subplot(111, projection="3d" if dim == 3 else None)
    z = p.transform(traj.states)[..., :dim]                 # (n_points, T, dim)
    zp = None
    if show_path and traj.path is not None:
        zp = p.transform(traj.path)[..., :dim]
    pieces = []
    if zp is not None:
        if traj.path_restart:
            # One piece per layer, from the network's state at its start (local comparison):
            # each x is where the exact flow of that layer's ODE would have put the token.
            n = (zp.shape[0] - 1) // traj.n_layers
            zl = z[traj.layer_end]
            pieces = [(j, slice(j * n + 1, (j + 1) * n + 1)) for j in range(traj.n_layers)]
        else:
            pieces = [slice(None)]
    cols = _colours(traj.n_tokens)
    centre = z[-1].mean(axis=0)
    le = traj.layer_end
    has_stages = not le.all()
    for i in range(traj.n_tokens):
        c = cols[i]
        pts = [z[:, i, d] for d in range(dim)]
        ax.plot(*pts, color=c, lw=1.2, alpha=0.9, zorder=2)
        if has_stages:
            ax.plot(*[q[~le] for q in pts], color=c, marker=".", ms=4, ls="none", zorder=3)
        ax.plot(*[q[le][1:-1] for q in pts], color=c, marker="o", ms=4.5, ls="none", zorder=3)
        ax.plot(*[q[:1] for q in pts], color=c, marker="s", ms=7, ls="none", mfc="white",
                mew=1.5, zorder=4)
        ax.plot(*[q[-1:] for q in pts], color=c, marker="*", ms=12, ls="none", mec="k",
                mew=0.5, zorder=5)
        if zp is not None:
            for piece in pieces:
                q = zp[piece, i] if not isinstance(piece, tuple) else \
                    np.concatenate([zl[piece[0]][None, i], zp[piece[1], i]])
                ax.plot(*[q[:, d] for d in range(dim)], color=c, ls=":", lw=1.5, alpha=0.9,
                        zorder=1)
                ax.plot(*[q[-1:, d] for d in range(dim)], color=c, marker="x", ms=6, mew=1.5,
                        ls="none", zorder=1)
        if label_tokens:
            txt = _tok_text(traj, i)
            kw = {"fontsize": 10, "color": c, "fontweight": "bold", "zorder": 6,
                  "bbox": {"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none",
                           "alpha": 0.7}}
            if dim == 2:
                # Push the label away from the centre of the end points: fewer overlaps.
                v = z[-1, i] - centre
                v = v / (np.linalg.norm(v) + 1e-12)
                ax.annotate(txt, (pts[0][-1], pts[1][-1]), xytext=(14 * v[0], 12 * v[1]),
                            textcoords="offset points", ha="center", va="center", **kw)
            else:
                kw.pop("bbox")     # a box in 3-D hides the markers behind it
                ax.text(*[q[-1] for q in pts], "  " + txt, **kw)
    ev = p.explained_variance_ratio
    ax.set_xlabel(f"PC 1 ({100 * ev[0]:.0f}% of variance)")
    ax.set_ylabel(f"PC 2 ({100 * ev[1]:.0f}% of variance)")
    if dim == 3:
        ax.set_zlabel(f"PC 3 ({100 * ev[2]:.0f}% of variance)")
    else:
        ax.grid(alpha=0.3)
    ax.set_title(title if title is not None else _title(traj), fontsize=10)
    if legend:
        hs = _legend_handles(zp is not None, has_stages, traj.first_layer, traj.path_restart)
        ax.legend(handles=hs, loc="upper left", bbox_to_anchor=(1.01 if dim == 2 else 1.08, 1.0),
                  fontsize=9, frameon=False)
    return ax


def _save(fig, out) -> Path:
    from ._io import atomic_savefig

    return atomic_savefig(fig, out, dpi=130, bbox_inches="tight")


def save_trajectory_plot(traj: Trajectories, out, dim: int = 2, text: str | None = None) -> Path:
    """:func:`plot_trajectories` to a PNG; ``text`` is added to the title."""
    ax = plot_trajectories(traj, dim=dim)
    if text is not None:
        ax.set_title(f"{_title(traj)}\ntext: {text!r}", fontsize=10)
    return _save(ax.figure, out)


def plot_scheme_comparison(trajs: Mapping[str, Trajectories], out=None, joint: bool = True,
                           ncols: int | None = None, suptitle: str | None = None):
    """Small multiples: one panel per scheme (same input). ``joint=True`` fits one PCA on all
    panels' states so the axes are comparable (meaningful when the models share their fields,
    e.g. the same seed with ``weights="shared"``). Writes ``out`` if given; returns the figure."""
    import matplotlib.pyplot as plt

    if not trajs:
        raise ValueError("no trajectories to compare")
    items = list(trajs.items())
    n = len(items)
    ncols = ncols or min(n, 3)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 4.2 * nrows + 0.6),
                             squeeze=False)
    proj = pca([t for _, t in items], 2) if joint else None
    for ax, (name, t) in zip(axes.flat, items):
        bits = [name, f"{len(t.states) // max(1, t.n_layers)} stages/layer"]
        if "h =" not in name:
            bits.append(f"h = {t.step_size:g}")
        if t.path is not None:
            bits.append(f"ODE gap {t.gap(relative=True)[-1]:.2f}")
        plot_trajectories(t, ax=ax, projection=proj, legend=False, title=", ".join(bits))
        ax.title.set_fontsize(9)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    if joint:
        xs = [ax.get_xlim() for ax in axes.flat[:n]]
        ys = [ax.get_ylim() for ax in axes.flat[:n]]
        lim_x = (min(a for a, _ in xs), max(b for _, b in xs))
        lim_y = (min(a for a, _ in ys), max(b for _, b in ys))
        for ax in axes.flat[:n]:
            ax.set_xlim(lim_x)
            ax.set_ylim(lim_y)
    first = items[0][1]
    fig.legend(handles=_legend_handles(any(t.path is not None for _, t in items),
                                       not first.layer_end.all(), first.first_layer,
                                       first.path_restart),
               loc="lower center", ncol=5, fontsize=9, frameon=False,
               bbox_to_anchor=(0.5, -0.01))
    if any(t.path is not None for _, t in items):
        note = ("ODE gap: RMS distance of the last layer's tokens to the ODE path, over the "
                "distance the ODE moves them")
        suptitle = f"{suptitle}\n{note}" if suptitle else note
    if suptitle:
        fig.suptitle(suptitle, fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    if out is not None:
        _save(fig, out)
    return fig


def plot_clustering(trajs: Trajectories | Mapping[str, Trajectories], out=None, bins: int = 40):
    """Clustering against depth: mean pairwise cosine and effective rank at every layer boundary
    (one line per entry of ``trajs``), and per entry a per-layer histogram of the pairwise
    cosines (rows: layers, colour: fraction of pairs). One entry: one row of three panels;
    several: the two curves on top, one histogram per entry below. Returns the figure."""
    import matplotlib.pyplot as plt

    if isinstance(trajs, Trajectories):
        trajs = {trajs.scheme: trajs}
    if not trajs:
        raise ValueError("no trajectories to plot")
    items = list(trajs.items())
    cl = {name: clustering(t) for name, t in items}
    n = len(items)
    if n == 1:
        fig, axs = plt.subplots(1, 3, figsize=(14, 4.2),
                                gridspec_kw={"width_ratios": [1, 1, 1.25]})
        curves, hists = axs[:2], axs[2:]
    else:
        fig = plt.figure(figsize=(max(11, 5.5 * n), 8.4))
        gs = fig.add_gridspec(2, 2 * n)
        curves = [fig.add_subplot(gs[0, :n]), fig.add_subplot(gs[0, n:])]
        hists = [fig.add_subplot(gs[1, 2 * i:2 * i + 2]) for i in range(n)]
    for name, c in cl.items():
        depth = np.arange(len(c.times))
        curves[0].plot(depth, c.mean_cosine, marker="o", ms=4, label=name)
        curves[1].plot(depth, c.effective_rank, marker="o", ms=4, label=name)
    T = items[0][1].n_tokens
    curves[0].set_ylabel("mean pairwise cosine similarity")
    curves[0].set_title("token directions align as cosine \u2192 1", fontsize=10)
    curves[1].set_ylabel(f"effective rank of the {T} unit tokens")
    curves[1].set_title("clustered cloud \u2192 effective rank 1", fontsize=10)
    for ax in curves:
        ax.set_xlabel("layer (0 = embedding)")
        ax.grid(alpha=0.3)
        ax.xaxis.get_major_locator().set_params(integer=True)
    if n > 1:
        curves[0].legend(fontsize=9, loc="best")
    edges = np.linspace(-1, 1, bins + 1)
    Hs = [np.stack([np.histogram(c, bins=edges)[0] / len(c) for c in cc.cosines])
          for cc in cl.values()]
    vmax = max(float(H.max()) for H in Hs)       # one colour scale for all panels
    for ax, (name, _), H in zip(hists, items, Hs):
        im = ax.imshow(H, aspect="auto", origin="lower", cmap="magma_r", vmin=0, vmax=vmax,
                       extent=(-1, 1, -0.5, len(H) - 0.5), interpolation="nearest")
        ax.set_xlabel("pairwise cosine similarity")
        ax.set_ylabel("layer (0 = embedding)")
        ax.set_title(f"pairwise cosines per layer: {name}", fontsize=10)
        ax.yaxis.get_major_locator().set_params(integer=True)
        fig.colorbar(im, ax=ax, label="fraction of token pairs")
    fig.tight_layout()
    if out is not None:
        _save(fig, out)
    return fig


def animate(traj: Trajectories, out, fps: int = 3, dpi: int = 80, tail: int = 4) -> Path:
    """Animated GIF (matplotlib's PillowWriter): one frame per recorded point, every token at
    its current position with its last ``tail`` moves, fixed PCA axes over the whole path."""
    import matplotlib.pyplot as plt
    from matplotlib.animation import FuncAnimation, PillowWriter

    p = pca(traj, 2)
    z = p.transform(traj.states)
    cols = _colours(traj.n_tokens)
    fig, ax = plt.subplots(figsize=(6, 5))
    pad = 0.05
    lo, hi = z.reshape(-1, 2).min(0), z.reshape(-1, 2).max(0)
    span = np.maximum(hi - lo, 1e-12)
    ax.set_xlim(lo[0] - pad * span[0], hi[0] + pad * span[0] + 0.08 * span[0])
    ax.set_ylim(lo[1] - pad * span[1], hi[1] + pad * span[1])
    ev = p.explained_variance_ratio
    ax.set_xlabel(f"PC 1 ({100 * ev[0]:.0f}% of variance)")
    ax.set_ylabel(f"PC 2 ({100 * ev[1]:.0f}% of variance)")
    ax.grid(alpha=0.3)
    lines = [ax.plot([], [], color=c, lw=1.2)[0] for c in cols]
    dots = [ax.plot([], [], color=c, marker="o", ms=6, ls="none")[0] for c in cols]
    texts = [ax.text(0, 0, " " + _tok_text(traj, i), color=cols[i], fontsize=12,
                     fontweight="bold") for i in range(traj.n_tokens)]

    def frame(j):
        a = max(0, j - tail)
        for i in range(traj.n_tokens):
            lines[i].set_data(z[a:j + 1, i, 0], z[a:j + 1, i, 1])
            dots[i].set_data(z[j:j + 1, i, 0], z[j:j + 1, i, 1])
            texts[i].set_position((z[j, i, 0], z[j, i, 1]))
        k, s = int(traj.layer[j]), int(traj.stage[j])
        where = "embedding" if k < 0 else f"layer {k + 1}, stage {s + 1} ({traj.fields[j]})"
        ax.set_title(f"{traj.scheme}: {where}, t = {float(traj.times[j]):.3g}", fontsize=10)
        return lines + dots + texts

    frames = list(range(traj.n_points)) + [traj.n_points - 1] * fps    # hold the end a second
    anim = FuncAnimation(fig, frame, frames=frames, blit=False)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    anim.save(out, writer=PillowWriter(fps=fps), dpi=dpi)
    plt.close(fig)
    return out


# ---------------------------------------------------------------------------------------------
# Models: checkpoints and fresh ones


def load_checkpoint(path, map_location="cpu") -> SplitTransformer:
    """A trained model from ``DIR/checkpoint.pt`` (or the ``.pt`` file itself), as written by
    ``splitnet train``: a dict with ``model_config`` (or ``config``) and ``model`` (the state
    dict); the training context (``run_config["context"]``) bounds the text length."""
    from .models import from_config

    p = Path(path)
    f = p / "checkpoint.pt" if p.is_dir() else p
    if not f.is_file():
        raise FileNotFoundError(f"no checkpoint at {str(f)!r} (expected DIR/checkpoint.pt as "
                                f"written by 'splitnet train --out DIR')")
    ck = torch.load(f, map_location=map_location, weights_only=False)
    if not isinstance(ck, dict):
        raise TypeError(f"{f}: not a splitnet checkpoint (a dict), got {type(ck).__name__}")
    cfg = ck.get("model_config") or ck.get("config")
    if isinstance(cfg, dict) and "model" in cfg and isinstance(cfg["model"], dict) \
            and "vocab_size" not in cfg:
        cfg = cfg["model"]
    state = ck.get("model") or ck.get("model_state") or ck.get("state_dict")
    if not isinstance(cfg, dict) or state is None:
        raise ValueError(f"{f}: checkpoint lacks the model config or its weights "
                         f"(keys: {sorted(ck)})")
    model = from_config(cfg)
    model.load_state_dict(state)
    model.eval()
    run_cfg = ck.get("run_config") if isinstance(ck.get("run_config"), dict) else {}
    ctx = ck.get("context") or run_cfg.get("context") or cfg.get("max_len")
    if isinstance(ctx, int) and ctx > 0:
        model._trajectory_context = ctx
    return model


def with_scheme(model: SplitTransformer, scheme) -> SplitTransformer:
    """The same trained fields run by another scheme (``weights="shared"`` only: then every
    scheme has the same parameters). Returns a new model."""
    from .models import from_config

    if model.weights != "shared":
        raise ValueError(f"cannot change the scheme of a model with weights={model.weights!r}: "
                         f"its stages have their own sub-layers; only shared-weight models can "
                         f"be re-run with another scheme")
    cfg = model.config()
    cfg["scheme"] = scheme
    new = from_config(cfg)
    new.load_state_dict(model.state_dict())
    new._trajectory_context = getattr(model, "_trajectory_context", None)
    return new.to(next(model.parameters()).device).eval()


def fresh_model(scheme="lie-trotter", d_model: int = 64, n_heads: int = 4, n_layers: int = 6,
                step_size: float = 1.0, weights: str = "shared", causal: bool = True,
                seed: int = 0, vocab_size: int = 256) -> SplitTransformer:
    """A freshly initialised byte-level model (seeded: the same seed gives the same fields for
    every scheme when ``weights="shared"``)."""
    torch.manual_seed(seed)
    return SplitTransformer(vocab_size=vocab_size, d_model=d_model, n_heads=n_heads,
                            n_layers=n_layers, scheme=scheme, causal=causal, weights=weights,
                            step_size=step_size).eval()


# ---------------------------------------------------------------------------------------------
# Command line


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Plot every token of a short text as a particle moving through the network: PCA of all "
        "states (one line per token, a dot per stage, a circle per layer), with the dotted path "
        "of the ODE the layers approximate. Without --checkpoint a freshly initialised model.")
    parser.add_argument("--checkpoint", metavar="DIR",
                        help="directory holding checkpoint.pt from 'splitnet train' (or the file)")
    parser.add_argument("--text", default=DEFAULT_TEXT,
                        help=f"input text; short (12-24 characters) reads best "
                             f"(default {DEFAULT_TEXT!r})")
    parser.add_argument("--out", default="trajectories.png", help="PNG to write "
                        "(default trajectories.png)")
    parser.add_argument("--scheme", default=None,
                        help="scheme name or s/f pattern; fresh model: its scheme (default "
                             "lie-trotter); checkpoint: re-run its shared fields with it")
    parser.add_argument("--3d", dest="three_d", action="store_true", help="3-D PCA plot")
    parser.add_argument("--gif", metavar="PATH", help="also write an animated GIF")
    parser.add_argument("--diagnostics", metavar="PNG",
                        help="also write the clustering diagnostics (cosines, effective rank)")
    parser.add_argument("--compare", metavar="SCHEMES",
                        help="also write small multiples for these comma-separated schemes on "
                             "the same input to <out>_compare.png (shared fields)")
    parser.add_argument("--per-layer", action="store_true",
                        help="record layer outputs only, not every stage")
    parser.add_argument("--no-ode", action="store_true", help="do not integrate the ODE path")
    parser.add_argument("--restart", action="store_true",
                        help="restart the ODE path from the network at every layer (local "
                             "comparison) instead of one path from the embedding")
    parser.add_argument("--from-layer", type=int, default=0, metavar="K",
                        help="plot from the output of layer K on (PCA fitted on those states); "
                             "default 0 = from the embedding")
    parser.add_argument("--points-per-layer", type=int, default=16,
                        help="ODE path points per layer (default 16)")
    g = parser.add_argument_group("fresh model (no --checkpoint)")
    g.add_argument("--d-model", type=int, default=64, help="width (default 64)")
    g.add_argument("--n-heads", type=int, default=4, help="attention heads (default 4)")
    g.add_argument("--n-layers", type=int, default=6, help="layers (default 6)")
    g.add_argument("--step-size", type=float, default=1.0, help="h (default 1.0)")
    g.add_argument("--weights", choices=["shared", "per-stage"], default="shared",
                   help="sub-layer weights (default shared)")
    g.add_argument("--seed", type=int, default=0, help="initialisation seed (default 0)")


def _compare_path(out: str) -> Path:
    p = Path(out)
    return p.with_name(p.stem + "_compare" + (p.suffix or ".png"))


def run(args) -> dict:
    """The work of ``splitnet trajectories`` (raises on bad input); returns what it wrote."""
    from .schemes import resolve

    if args.checkpoint:
        model = load_checkpoint(args.checkpoint)
        if args.scheme:
            model = with_scheme(model, resolve(args.scheme))
        origin = f"checkpoint {args.checkpoint}"
    else:
        scheme = resolve(args.scheme or "lie-trotter")
        model = fresh_model(scheme, d_model=args.d_model, n_heads=args.n_heads,
                            n_layers=args.n_layers, step_size=args.step_size,
                            weights=args.weights, seed=args.seed)
        origin = f"fresh initialisation (seed {args.seed})"
    idx = encode(args.text)
    traj = collect(model, idx, per_stage=not args.per_layer, continuous=not args.no_ode,
                   points_per_layer=args.points_per_layer, restart=args.restart)
    written = {"png": save_trajectory_plot(traj.since(args.from_layer) if args.from_layer
                                           else traj, args.out,
                                           dim=3 if args.three_d else 2, text=args.text)}
    cl = clustering(traj)
    print(f"model: {origin}; scheme {traj.scheme} ({traj.weights}, {traj.method}), "
          f"h = {traj.step_size:g}, {traj.n_layers} layers, d_model {model.d_model}")
    print(f"text: {args.text!r} ({traj.n_tokens} tokens), {traj.n_points} states per token")
    print(f"{'layer':>5} {'t':>7} {'mean cos':>9} {'eff. rank':>9}"
          + ("" if traj.path is None else f" {'ODE gap':>9} {'rel. gap':>9}"))
    gaps = rel = None
    if traj.path is not None:
        gaps, rel = traj.gap(), traj.gap(relative=True)
    for k in range(len(cl.times)):
        line = f"{k:>5} {cl.times[k]:7.3g} {cl.mean_cosine[k]:9.3f} {cl.effective_rank[k]:9.2f}"
        if gaps is not None:
            line += f" {gaps[k]:9.3g} {rel[k]:9.3g}"
        print(line)
    if args.diagnostics:
        written["diagnostics"] = _save(plot_clustering(traj), args.diagnostics)
    if args.compare:
        names = [s.strip() for s in args.compare.split(",") if s.strip()]
        trajs = {}
        for nm in names:
            # Shared weights: the very same fields under every scheme (a fresh model per scheme
            # would not do: the initial scale of the output projections depends on the number
            # of stages). Per-stage weights: each scheme has its own sub-layers, seeded alike.
            # A trained per-stage model cannot be re-run by another scheme: with_scheme says so.
            shared = model.weights == "shared" or args.checkpoint
            m = with_scheme(model, resolve(nm)) if shared else fresh_model(
                resolve(nm), d_model=args.d_model, n_heads=args.n_heads, n_layers=args.n_layers,
                step_size=args.step_size, weights=args.weights, seed=args.seed)
            trajs[nm] = collect(m, idx, per_stage=not args.per_layer,
                                continuous=not args.no_ode, points_per_layer=args.points_per_layer,
                                restart=args.restart)
        same = "same fields" if model.weights == "shared" else "own per-stage sub-layers"
        plot_scheme_comparison(trajs, _compare_path(args.out),
                               suptitle=f"same input {args.text!r}, {same}")
        written["compare"] = _compare_path(args.out)
    if args.gif:
        written["gif"] = animate(traj, args.gif)
    for k, v in written.items():
        print(f"{k}: {v}")
    return written


def run_cli(args) -> int:
    try:
        run(args)
    except (ValueError, TypeError, FileNotFoundError) as e:
        print(f"splitnet trajectories: error: {e}", file=sys.stderr)
        return 2
    return 0


__all__ = [
    "DEFAULT_TEXT", "PCA", "Clustering", "Trajectories", "animate", "clustering", "collect",
    "configure_parser", "context_length", "effective_rank", "encode", "fresh_model",
    "load_checkpoint", "ode_field", "pairwise_cosines", "pca", "plot_clustering",
    "plot_scheme_comparison", "plot_trajectories", "run", "run_cli", "save_trajectory_plot",
    "token_label", "with_scheme",
]
