"""Tokens as particles (:mod:`splitnet.analyses.trajectories` drawn): :func:`plot_trajectories`,
:func:`save_trajectory_plot`, :func:`plot_scheme_comparison`, :func:`plot_clustering`,
:func:`animate`."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .._io import require_replaceable
from .style import TOKEN_PALETTE, save_figure

if TYPE_CHECKING:  # pragma: no cover
    Trajectories = object   # splitnet.analyses.trajectories records them; only attributes read

__all__ = ["animate", "plot_clustering", "plot_scheme_comparison", "plot_trajectories",
           "save_trajectory_plot"]


def _colours(n: int):
    import matplotlib

    if n <= len(TOKEN_PALETTE):
        return list(TOKEN_PALETTE[:n])
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


def _path_pieces(traj, z, zp):
    """The ODE path in pieces: one from the embedding, or (``path_restart``) one per layer
    starting at the network's state at that layer's start (each x is then where the exact flow
    of that layer's ODE would have put the token). Each piece: ``(n_points, T, dim)``."""
    if zp is None:
        return []
    if not traj.path_restart:
        return [zp]
    n = (zp.shape[0] - 1) // traj.n_layers
    zl = z[traj.layer_end]
    return [np.concatenate([zl[j][None], zp[j * n + 1:(j + 1) * n + 1]])
            for j in range(traj.n_layers)]


def _draw_token(ax, traj, z, pieces, i, colour, centre, label: bool) -> None:
    """One token's polyline with its markers, its ODE path pieces and its label."""
    dim, le = z.shape[-1], traj.layer_end
    pts = [z[:, i, d] for d in range(dim)]
    ax.plot(*pts, color=colour, lw=1.2, alpha=0.9, zorder=2)
    if not le.all():
        ax.plot(*[q[~le] for q in pts], color=colour, marker=".", ms=4, ls="none", zorder=3)
    ax.plot(*[q[le][1:-1] for q in pts], color=colour, marker="o", ms=4.5, ls="none", zorder=3)
    ax.plot(*[q[:1] for q in pts], color=colour, marker="s", ms=7, ls="none", mfc="white",
            mew=1.5, zorder=4)
    ax.plot(*[q[-1:] for q in pts], color=colour, marker="*", ms=12, ls="none", mec="k",
            mew=0.5, zorder=5)
    for piece in pieces:
        q = piece[:, i]
        ax.plot(*[q[:, d] for d in range(dim)], color=colour, ls=":", lw=1.5, alpha=0.9,
                zorder=1)
        ax.plot(*[q[-1:, d] for d in range(dim)], color=colour, marker="x", ms=6, mew=1.5,
                ls="none", zorder=1)
    if not label:
        return
    kw = {"fontsize": 10, "color": colour, "fontweight": "bold", "zorder": 6}
    if dim == 3:      # a box in 3-D hides the markers behind it
        ax.text(*[q[-1] for q in pts], "  " + _tok_text(traj, i), **kw)
        return
    # Push the label away from the centre of the end points: fewer overlaps.
    v = z[-1, i] - centre
    v = v / (np.linalg.norm(v) + 1e-12)
    ax.annotate(_tok_text(traj, i), (pts[0][-1], pts[1][-1]), xytext=(14 * v[0], 12 * v[1]),
                textcoords="offset points", ha="center", va="center",
                bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.7},
                **kw)


def plot_trajectories(traj, ax=None, dim: int = 2, projection=None, show_path: bool = True,
                      title: str | None = None, legend: bool = True, label_tokens: bool = True):
    """One polyline per token in PCA coordinates (2-D or 3-D): small dots after every stage,
    circles after every layer, a hollow square at the start, a star at the end, the character
    (with its position as a subscript) at the end point, and the ODE path dotted.

    ``projection`` defaults to :func:`~splitnet.geometry.pca` of ``traj``; pass one to
    share
    axes between panels. Returns the axes."""
    import matplotlib.pyplot as plt

    from ..geometry import pca

    if dim not in (2, 3):
        raise ValueError(f"dim must be 2 or 3, got {dim!r}")
    p = projection or pca(traj, dim)
    if p.components.shape[0] < dim:
        raise ValueError(f"projection has {p.components.shape[0]} components, need {dim}")
    if ax is None:
        fig = plt.figure(figsize=(8.5, 6.5) if dim == 2 else (9, 7.5))
        ax = fig.add_subplot(111, projection="3d" if dim == 3 else None)
    z = p.transform(traj.states)[..., :dim]                 # (n_points, T, dim)
    zp = p.transform(traj.path)[..., :dim] if show_path and traj.path is not None else None
    pieces = _path_pieces(traj, z, zp)
    centre = z[-1].mean(axis=0)
    for i, c in enumerate(_colours(traj.n_tokens)):
        _draw_token(ax, traj, z, pieces, i, c, centre, label_tokens)
    if getattr(traj, "memory", None) is not None:
        _draw_memory(ax, traj, p, dim, label_tokens)
    ev = p.explained_variance_ratio
    ax.set_xlabel(f"PC 1 ({100 * ev[0]:.0f}% of variance)")
    ax.set_ylabel(f"PC 2 ({100 * ev[1]:.0f}% of variance)")
    if dim == 3:
        ax.set_zlabel(f"PC 3 ({100 * ev[2]:.0f}% of variance)")
    else:
        ax.grid(alpha=0.3)
    ax.set_title(title if title is not None else _title(traj), fontsize=10)
    if legend:
        hs = _legend_handles(zp is not None, not traj.layer_end.all(), traj.first_layer,
                             traj.path_restart)
        if getattr(traj, "memory", None) is not None:
            from matplotlib.lines import Line2D

            hs.append(Line2D([], [], color="0.55", marker="D", ms=5, ls="none", mec="0.25",
                             label="memory (encoder output)"))
        ax.legend(handles=hs, loc="upper left", bbox_to_anchor=(1.01 if dim == 2 else 1.08, 1.0),
                  fontsize=9, frameon=False)
    return ax


def _draw_memory(ax, traj, p, dim: int, label: bool) -> None:
    """An encoder–decoder's memory, the fixed particles the cross field pulls toward, on the
    same PCA axes (not part of the fit). It is the encoder's output after its final norm, on
    another scale than the decoder's residual stream, so in 2-D it gets an inset of its own
    (grey diamonds) instead of stretching the tokens' axes."""
    zm = p.transform(traj.memory[None])[0, :, :dim]          # (S, dim)
    where = ax if dim == 3 else ax.inset_axes([1.06, 0.02, 0.3, 0.36])
    where.scatter(*zm.T, marker="D", s=22, c="0.55", edgecolors="0.25", linewidths=0.5)
    if label:
        for j, lab in enumerate(traj.memory_labels):
            where.text(*zm[j], f" {lab}", fontsize=7, color="0.3")
    if dim == 2:
        where.set_title("memory (encoder output)", fontsize=7)
        where.tick_params(labelsize=6)


def _save(fig, out) -> Path:
    return save_figure(fig, out, dpi=130, bbox_inches="tight")


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
    from ..geometry import pca

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

    from ..geometry import clustering

    if hasattr(trajs, "states"):  # one recorded Trajectories
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
    curves[0].set_title("mean pairwise cosine (1 = all tokens point one way)",
                        fontsize=10)
    curves[1].set_ylabel(f"effective rank of the {T} unit tokens")
    curves[1].set_title("effective rank (1 = one cluster, T = spread out)", fontsize=10)
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

    from ..geometry import pca

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
    # PillowWriter needs a path: write to a temporary name beside `out`, then rename.
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp.gif")
    try:
        require_replaceable(out)
        anim.save(tmp, writer=PillowWriter(fps=fps), dpi=dpi)
        require_replaceable(out)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
        plt.close(fig)
    return out
