"""Every figure the library draws, one style, one atomic saver.

* convergence and work–precision plots (:func:`plot_convergence`, :func:`plot_work_precision`),
* the network against its ODE (:func:`plot_gaps`),
* training curves (:func:`plot_metrics`, :func:`plot_seed_curves`),
* tokens as particles (:func:`plot_trajectories`, :func:`plot_scheme_comparison`,
  :func:`plot_clustering`, :func:`animate`).

Series are told apart by colour *and* line style/marker (:func:`series_style`): 12 colours
that read on white, times line styles, so up to ~24 series stay distinguishable. Every marker
that carries meaning is named in the legend. :func:`save_figure` writes atomically (a crash
never leaves half a PNG). matplotlib is imported inside the functions: importing this module
costs nothing.
"""

from __future__ import annotations

import math
import os
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ._io import atomic_write

if TYPE_CHECKING:  # pragma: no cover
    from .trajectories import Trajectories

# 12 hues dark enough to read on white: tab10 without its grey and olive, then Dark2 shades.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#17becf", "#1b9e77", "#7570b3", "#a6761d", "#000080")
# ":" is kept for theory lines and ODE paths, so no series is dotted.
LINESTYLES = ("-", "--", "-.", (0, (6, 1.5, 1, 1.5, 1, 1.5)))
MARKERS = "os^Dv<>pPXh*"
# 20 hues for tokens (labels in their colour): the palette, then more distinct dark shades.
TOKEN_PALETTE = PALETTE + ("#e6ab02", "#e7298a", "#66a61e", "#800000", "#008080", "#4d4d00",
                           "#7f7f7f", "#bcbd22")


def series_style(i: int) -> dict:
    """Colour, line style and marker of series ``i``: colours cycle first, then the line style
    and marker change, so series 0..23 all differ in colour or dash."""
    n = len(PALETTE)
    return {"color": PALETTE[i % n], "ls": LINESTYLES[(i // n) % len(LINESTYLES)],
            "marker": MARKERS[(i // n) % len(MARKERS)]}


def save_figure(fig, path, close: bool = True, **savefig_kwargs) -> Path:
    """``fig.savefig`` to ``path`` atomically (format from the suffix, PNG by default); closes
    ``fig`` unless ``close=False``."""
    path = Path(path)
    fmt = savefig_kwargs.pop("format", None) or (path.suffix.lstrip(".") or "png")
    try:
        atomic_write(path, lambda f: fig.savefig(f, format=fmt, **savefig_kwargs))
    finally:
        if close:
            import matplotlib.pyplot as plt

            plt.close(fig)
    return path


def readable_log_ticks(axis) -> None:
    """Labels at 1, 2, 5 x 10^k in plain numbers, no minor labels (matplotlib's default minor
    labels overlap on short log ranges)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


# ---------------------------------------------------------------------------------------------
# Convergence and work–precision

def _scheme_method_styles(pairs) -> dict:
    """Colour per scheme, line style and marker per method: a reader finds a scheme by colour
    and a method by dash, for any number of pairs."""
    schemes = list(dict.fromkeys(s for s, _ in pairs))
    methods = list(dict.fromkeys(m for _, m in pairs))
    out = {}
    for s, m in pairs:
        i, j = schemes.index(s), methods.index(m)
        st = series_style(i)
        out[(s, m)] = {"color": st["color"], "ls": LINESTYLES[j % len(LINESTYLES)],
                       "marker": MARKERS[j % len(MARKERS)]}
    return out


def _step_size_ticks(ax, step_sizes) -> None:
    """Ticks at the step sizes studied (few, and the ones a reader looks for)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    ax.xaxis.set_major_locator(FixedLocator(sorted({float(h) for h in step_sizes})))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def plot_convergence(results, path, title: str | None = None, theory_offset: float = 0.4):
    """Error against h for several :class:`~splitnet.analysis.ConvergenceResult` on one log-log
    plot. Each result's theoretical slope is drawn as a thin dotted line ``theory_offset`` times
    below its data (through the first fitted point), so it is never hidden under the data;
    points left out of the fit are ringed with an ``x``. Writes ``path``."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    fig, ax = plt.subplots(figsize=(10.5, 5.2), dpi=120)
    styles = _scheme_method_styles([(r.scheme, r.method) for r in results])
    left_out = False
    for r in results:
        st = styles[(r.scheme, r.method)]
        ax.loglog(r.step_sizes, r.errors, color=st["color"], ls=st["ls"], marker=st["marker"],
                  ms=5, zorder=3, label=f"{r.scheme} ({r.method}): {r.slope_name} "
                                        f"{r.order:.2f}, theory {r.expected_order}")
        if (~r.used).any():
            left_out = True
            ax.loglog(r.step_sizes[~r.used], r.errors[~r.used], "x", color="k", ms=9, mew=1.2,
                      ls="none", zorder=4)
        if r.used.any():
            j = np.flatnonzero(r.used)[0]
            hs = r.step_sizes
            ax.loglog(hs, theory_offset * r.errors[j] * (hs / hs[j]) ** r.expected_order,
                      color=st["color"], ls=":", lw=1.1, alpha=0.8, zorder=5)
    _step_size_ticks(ax, [h for r in results for h in r.step_sizes])
    ax.set_xlabel("step size h")
    ax.set_ylabel(f"{results[0].kind} error  ||exact - scheme||")
    ax.set_title(title or f"{results[0].kind} error against step size")
    ax.grid(True, which="both", alpha=0.3)
    handles, _ = ax.get_legend_handles_labels()
    handles.append(Line2D([], [], color="0.3", ls=":", lw=1.4,
                          label=f"theory slope (dotted, drawn x{theory_offset:g} below the data)"))
    if left_out:
        handles.append(Line2D([], [], color="k", marker="x", ls="none", ms=9,
                              label="x: left out of the fit (round-off floor or not decreasing)"))
    # Outside the axes: inside, some curve is always covered.
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return save_figure(fig, path)


def plot_work_precision(points, path, title: str | None = None):
    """Global error against field evaluations, one line per scheme x method
    (:func:`~splitnet.analysis.work_precision`). Writes ``path``."""
    import matplotlib.pyplot as plt

    pairs = list(dict.fromkeys((p.scheme, p.method) for p in points))
    styles = _scheme_method_styles(pairs)
    fig, ax = plt.subplots(figsize=(11, 6.5), dpi=120)
    for s, m in pairs:
        pts = sorted((p for p in points if p.scheme == s and p.method == m),
                     key=lambda p: p.evaluations)
        ax.loglog([p.evaluations for p in pts], [max(p.error, 1e-17) for p in pts],
                  label=f"{s} / {m}", ms=4, **styles[(s, m)])
    readable_log_ticks(ax.xaxis)
    ax.set_xlabel("field evaluations (attention + feed-forward) over [0, T]")
    ax.set_ylabel("global error at T")
    ax.set_title(title or "work–precision: lower-left is better")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return save_figure(fig, path)


# ---------------------------------------------------------------------------------------------
# The network against its ODE

def plot_gaps(results, path, title: str | None = None):
    """Local and cumulative relative gap against depth, one line per
    :class:`~splitnet.gap.GapResult` (colour: scheme, dashes: weights mode)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 5.0), dpi=120)
    dashes = {"shared": "-", "per-stage": "--"}
    colors: dict = {}
    for r in results:
        c = colors.setdefault(r.scheme, len(colors))
        st = series_style(c)
        kw = {"marker": st["marker"] if c < len(PALETTE) else MARKERS[c % len(MARKERS)],
              "ms": 4, "ls": dashes.get(r.weights, "-"), "color": st["color"],
              "label": f"{r.scheme} ({r.weights})"}
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
    return save_figure(fig, path)


# ---------------------------------------------------------------------------------------------
# Training curves

def smoothed(values, span: int | None = None) -> np.ndarray:
    """Bias-corrected exponential moving average with a span that suits the run's length
    (``len/10`` clipped to 2..20 steps): long runs get a smooth line, short runs one that does not
    lag behind a falling loss."""
    v = np.asarray(values, dtype=float)
    span = span or int(min(20, max(2, len(v) // 10)))
    a = 1.0 - 1.0 / span
    m, out = 0.0, np.empty_like(v)
    for i, x in enumerate(v):
        m = a * m + (1 - a) * x
        out[i] = m / (1 - a ** (i + 1))
    return out


def plot_metrics(records, path, title: str = ""):
    """Training curve of a run: bits per byte per step (faint), its moving average, and the
    validation points. ``records``: the dicts of ``metrics.jsonl``. Writes ``path``."""
    import matplotlib.pyplot as plt

    tr = [(r["step"], r["bpb"]) for r in records if "bpb" in r]
    va = [(r["step"], r["val_bpb"]) for r in records if "val_bpb" in r]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    if tr:
        s, b = np.array(tr).T
        ax.plot(s, b, color=PALETTE[0], alpha=0.25, lw=0.8, label="train (per step)")
        if len(b) > 10:
            span = int(min(20, max(2, len(b) // 10)))
            ax.plot(s, smoothed(b, span), color=PALETTE[0], lw=1.6,
                    label=f"train (moving average, span {span})")
    if va:
        s, b = np.array(va).T
        ax.plot(s, b, "o-", color=PALETTE[3], ms=4, label="validation")
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("bits per byte")
    if tr:
        lo = min(min(x[1] for x in tr), min((x[1] for x in va), default=9))
        ax.set_ylim(max(0.0, lo - 0.2), min(8.5, max(x[1] for x in tr[len(tr) // 20:]) + 0.3))
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path, dpi=110)


def plot_seed_curves(curves: Mapping[str, list], path, xlabel: str, ylabel: str,
                     title: str = "", zoom_from: float | None = None):
    """Mean ± standard deviation over seeds, one line per entry of ``curves`` (label -> one
    list of ``(x, y)`` points per seed; the mean is taken at the x every seed has). With
    ``zoom_from`` a second panel shows ``x >= zoom_from`` close up. Writes ``path``."""
    import matplotlib.pyplot as plt

    panels = 2 if zoom_from is not None else 1
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 4.6), squeeze=False)
    axes, zoom_y = axes[0], []
    for i, (label, runs) in enumerate(curves.items()):
        xs = sorted(set.intersection(*(set(dict(r)) for r in runs)))
        ys = np.array([[dict(r)[x] for x in xs] for r in runs])
        m, st = ys.mean(0), series_style(i)
        for ax in axes:
            ax.plot(xs, m, color=st["color"], ls=st["ls"], marker=st["marker"], ms=3,
                    label=label)
            if len(runs) > 1:
                s = ys.std(0, ddof=1)
                ax.fill_between(xs, m - s, m + s, color=st["color"], alpha=0.15)
        if zoom_from is not None:
            zoom_y += [v for x, v in zip(xs, m) if x >= zoom_from]
    for ax in axes:
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    axes[0].set_title(title, fontsize=10)
    if zoom_from is not None and zoom_y:
        xmax = max(x for runs in curves.values() for r in runs for x, _ in r)
        axes[1].set_xlim(zoom_from * 0.97, xmax * 1.02)
        axes[1].set_ylim(min(zoom_y) - 0.03, max(zoom_y) + 0.03)
        axes[1].set_title("the second half, close up", fontsize=10)
    axes[0].legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return save_figure(fig, path, dpi=110)


# ---------------------------------------------------------------------------------------------
# Tokens as particles



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

    ``projection`` defaults to :func:`~splitnet.trajectories.pca` of ``traj``; pass one to share
    axes between panels. Returns the axes."""
    import matplotlib.pyplot as plt

    from .trajectories import pca

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
        ax.legend(handles=hs, loc="upper left", bbox_to_anchor=(1.01 if dim == 2 else 1.08, 1.0),
                  fontsize=9, frameon=False)
    return ax


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
    from .trajectories import pca

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

    from .trajectories import Trajectories, clustering

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

    from .trajectories import pca

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
        anim.save(tmp, writer=PillowWriter(fps=fps), dpi=dpi)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
        plt.close(fig)
    return out


# ---------------------------------------------------------------------------------------------
# The zoo

def plot_zoo_efficiency(curves, path, bands=(), title: str | None = None):
    """Work–precision of splitting methods with exact sub-flows: global error at T against
    sub-flows (field solves) over [0, T], one line per method, in two panels (orders up to 4;
    orders 6 and up) so that each keeps its series distinguishable. ``curves``: ``{name:
    (order, costs, errors)}``; ``bands``: error levels drawn as grey lines (the accuracy bands
    of the ranking). Writes ``path``."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(15, 8.5), dpi=110, sharey=True)
    groups = ([n for n, c in curves.items() if c[0] <= 4],
              [n for n, c in curves.items() if c[0] > 4])
    for ax, names, label in zip(axes, groups, ("orders 1-4", "orders 6-10")):
        for i, name in enumerate(names):
            order, costs, errors = curves[name]
            ax.loglog(costs, np.maximum(errors, 1e-16), ms=4, lw=1.3,
                      label=f"{name} (order {order})", **series_style(i))
        for b in bands:
            ax.axhline(b, color="0.6", lw=0.8, ls="--", zorder=0)
        readable_log_ticks(ax.xaxis)
        ax.set_xlabel("sub-flows (field solves) over [0, T]")
        ax.set_title(f"{label}: lower-left is better")
        ax.grid(True, which="both", alpha=0.3)
        # Below the axes: inside, the lower left (where the best curves end) would be covered.
        ax.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=3)
    axes[0].set_ylabel("global error at T relative to |x0|")
    fig.suptitle(title or "zoo efficiency on the attention + feed-forward particle system, "
                          "exact sub-flows")
    fig.tight_layout()
    return save_figure(fig, path)


# ---------------------------------------------------------------------------------------------
# A trained network re-integrated (splitnet.refine)

# sub-flow method -> (line style, marker); never "^", which marks values off the scale, and
# never dotted, which marks the ODE level (as everywhere in splitnet's figures)
_METHOD_STYLE = {"euler": ("-", "o"), "midpoint": ("--", "s"), "rk4": ("-.", "D"),
                 "exact": ((0, (7, 2, 1, 2, 1, 2)), "X")}


def _refinement_styles(keys) -> dict:
    """Colour per scheme, a fixed dash and marker per method."""
    schemes = list(dict.fromkeys(s for s, _ in keys))
    out = {}
    for s, m in keys:
        ls, mk = _METHOD_STYLE.get(m, ("-", "p"))
        out[(s, m)] = {"color": series_style(schemes.index(s))["color"], "ls": ls, "marker": mk}
    return out


def _refinement_panel(ax, res, styles, top_above: float | None) -> float | None:
    """One model: a line per (scheme, method) through its substep counts; the model as trained
    (star) and the finest exact re-integration (dotted level). Returns the y-limit used."""
    own = res.value(res.own)
    vals = [res.value(p) for p in res.points] + [own]
    top = None if top_above is None else min(max(vals), own + top_above)
    for key, pts in res.series().items():
        x = [p.evals for p in pts]
        y = [res.value(p) for p in pts]
        ax.semilogx(x, y, ms=4, lw=1.3, **styles[key])
        if top is not None:
            off = [(xi, yi) for xi, yi in zip(x, y) if yi > top]
            if off:
                ax.plot([o[0] for o in off], [top] * len(off), "^", color=styles[key]["color"],
                        mec="k", ms=8, clip_on=False, zorder=4)
    lim = res.limit()
    if lim is not None:
        ax.axhline(res.value(lim), color="0.35", ls=":", lw=1.2, zorder=1)
    ax.plot([res.own.evals], [own], "*", color="k", ms=15, zorder=6, mfc="gold")
    lo = min(vals)
    ax.set_ylim(lo - 0.03 * max(0.1, (top or max(vals)) - lo),
                (top or max(vals)) + 0.05 * max(0.1, (top or max(vals)) - lo))
    readable_log_ticks(ax.xaxis)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(f"{res.label}\nas trained: {own:.3f} {res.unit}", fontsize=9)
    return top


def plot_refinement(results, path, title: str | None = None, top_above: float | None = 1.0,
                    ncols: int = 3):
    """Loss against field evaluations per layer when a trained network's own fields are
    re-integrated (:func:`~splitnet.refine.refinement_study`): one panel per
    :class:`~splitnet.refine.RefinementResult`, one line per scheme x method through its substep
    counts (colour: scheme, dash and marker: method), the network as trained as a star, the
    ODE of the fields (``res.limit()``: the unsplit ODE solved exactly) as a dotted level.
    Values more than
    ``top_above`` above the trained network's are drawn as triangles on the top edge (None:
    no clipping). The legend takes a free panel, or the right margin. Writes ``path``."""
    import matplotlib.pyplot as plt

    results = [results] if hasattr(results, "points") else list(results)
    keys = list(dict.fromkeys(k for r in results for k in r.series()))
    styles = _refinement_styles(keys)
    ncols = min(ncols, len(results))
    nrows = math.ceil(len(results) / ncols)
    free = nrows * ncols > len(results)
    width = 4.6 * ncols + (0 if free else 3.6)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, 3.9 * nrows + 0.5), dpi=110,
                             squeeze=False)
    clipped = False
    for ax, res in zip(axes.flat, results):
        top = _refinement_panel(ax, res, styles, top_above)
        clipped |= top is not None and any(res.value(p) > top for p in res.points)
    for ax in axes.flat[len(results):]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel(f"validation {results[0].unit}")
    for ax in axes.flat[max(0, len(results) - ncols):len(results)]:
        ax.set_xlabel("field evaluations per layer")
    handles = _refinement_legend(keys, styles, clipped, top_above, results[0].unit)
    if free:
        axes.flat[-1].legend(handles=handles, loc="center", fontsize=8, frameon=False)
    else:
        fig.legend(handles=handles, loc="center left", bbox_to_anchor=(1 - 3.5 / width, 0.5),
                   fontsize=8, frameon=False)
    ks = sorted({p.substeps for r in results for p in r.points})
    fig.suptitle(title or f"the trained network's own fields re-integrated (each line: "
                 f"substeps {', '.join(map(str, ks))} from left to right)", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1 if free else 1 - 3.6 / width, 1))
    return save_figure(fig, path)


def _refinement_legend(keys, styles, clipped: bool, top_above, unit: str) -> list:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], label=f"{s} / {m}", ms=4, **styles[(s, m)]) for s, m in keys]
    handles.append(Line2D([], [], color="k", marker="*", mfc="gold", ms=13, ls="none",
                          label="the network as trained\n(its own scheme, one step per layer)"))
    handles.append(Line2D([], [], color="0.35", ls=":", label="the ODE of the network's own "
                          "fields\n(each layer's unsplit ODE solved exactly)"))
    if clipped:
        handles.append(Line2D([], [], color="0.6", mec="k", marker="^", ls="none", ms=8,
                              label=f"off the scale: > {top_above:g} {unit} above\nthe "
                                    f"trained network (see the table)"))
    return handles


def _seed_note(seeds: Mapping[str, int]) -> str:
    """The panel's seed count: one line when every model has the same, else per model."""
    counts = list(seeds.values())
    n = max(set(counts), key=counts.count)
    note = f"mean ± sd over {n} seeds" if n > 1 else "one seed"
    others = [f"{lab}: {k}" for lab, k in seeds.items() if k != n]
    return textwrap.fill(note + (f" (except {'; '.join(others)})" if others else ""), 70)


def plot_refinement_summary(panels: Mapping[str, Mapping[str, np.ndarray]], xlabels, path,
                            ylabel: str = "change in validation bpb", title: str = "",
                            xlabel: str = "substeps per layer, then the ODE solved exactly"):
    """Mean ± standard deviation over seeds of a change in loss along a refinement, one panel
    per entry of ``panels`` (title -> label -> array ``(seeds, len(xlabels))``), one line per
    model; ``xlabels`` name the columns (e.g. substeps 1, 2, 4, 8 and "ODE"). Writes ``path``."""
    import matplotlib.pyplot as plt

    n = len(panels)
    fig, axes = plt.subplots(1, n, figsize=(max(6.5 * n, 9.0), 5.2), dpi=110, squeeze=False,
                             sharey=True)
    labels = list(dict.fromkeys(lab for p in panels.values() for lab in p))
    x = np.arange(len(xlabels))
    for ax, (ptitle, curves) in zip(axes[0], panels.items()):
        seeds = {}
        for label, ys in curves.items():
            ys = np.atleast_2d(np.asarray(ys, dtype=float))
            st = series_style(labels.index(label))
            seeds[label] = len(ys)
            err = ys.std(0, ddof=1) if len(ys) > 1 else None
            ax.errorbar(x + 0.04 * (labels.index(label) - len(labels) / 2), ys.mean(0),
                        yerr=err, color=st["color"], ls=st["ls"], marker=st["marker"], ms=5,
                        capsize=3, label=label)
        ax.axhline(0.0, color="0.5", lw=0.8)
        ax.set_xticks(x, [str(v) for v in xlabels])
        ax.set_xlabel(xlabel)
        ax.set_title(f"{ptitle}\n{_seed_note(seeds)}", fontsize=10)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(ylabel)
    handles, names = [], []
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in names:
                handles.append(h)
                names.append(lab)
    # below the panels: beside them the long model names would squeeze the axes
    fig.legend(handles, names, loc="lower center", ncol=2, fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.04 + 0.035 * math.ceil(len(names) / 2), 1, 1))
    return save_figure(fig, path)
