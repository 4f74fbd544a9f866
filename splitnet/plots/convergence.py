"""Convergence, work–precision, and the network against its ODE: error or gap on log axes.

* :func:`plot_convergence`: error against step size, with each result's theoretical slope,
* :func:`plot_work_precision`: global error against field evaluations,
* :func:`plot_gaps`: a network's layers against the exact flow of its own fields.
"""

from __future__ import annotations

import numpy as np

from .style import LINESTYLES, MARKERS, PALETTE, readable_log_ticks, save_figure, series_style

__all__ = ["plot_convergence", "plot_gaps", "plot_work_precision"]


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
    """Error against h for several :class:`~splitnet.analyses.convergence.ConvergenceResult` on one
    log-log
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
    (:func:`~splitnet.analyses.convergence.work_precision`). Writes ``path``."""
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
    :class:`~splitnet.analyses.gap.GapResult` (colour: scheme, dashes: weights mode)."""
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

