"""A trained network re-integrated (:mod:`splitnet.analyses.refine`): loss against field evaluations
per model (:func:`plot_refinement`), the change in loss over seeds
(:func:`plot_refinement_summary`), and each layer dropped or merged beside its block influence
(:func:`plot_layer_study`, :mod:`splitnet.analyses.redundancy`)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping

import numpy as np

from .style import readable_log_ticks, save_figure, series_style

__all__ = ["plot_layer_study", "plot_refinement", "plot_refinement_summary"]


# The i-th sub-flow method of splitnet.integrators.subflows.METHODS gets the i-th dash and marker
# (cycling);
# never "^", which marks values off the scale, and never dotted, which marks the ODE level (as
# everywhere in splitnet's figures). A method not in the registry: solid line, pentagons.
_METHOD_DASHES = ("-", "--", "-.", (0, (7, 2, 1, 2, 1, 2)))
_METHOD_MARKERS = "osDXPhv*"
_OTHER_METHOD = ("-", "p")


def _method_style(method: str) -> tuple:
    """(line style, marker) of a sub-flow method, from its place in ``subflows.METHODS`` (imported
    here: it imports torch, which importing the plots does not)."""
    from ..integrators.subflows import METHODS

    names = list(METHODS)
    if method not in names:
        return _OTHER_METHOD
    i = names.index(method)
    return _METHOD_DASHES[i % len(_METHOD_DASHES)], _METHOD_MARKERS[i % len(_METHOD_MARKERS)]


def _refinement_styles(keys) -> dict:
    """Colour per scheme, a fixed dash and marker per method."""
    schemes = list(dict.fromkeys(s for s, _ in keys))
    out = {}
    for s, m in keys:
        ls, mk = _method_style(m)
        out[(s, m)] = {"color": series_style(schemes.index(s))["color"], "ls": ls, "marker": mk}
    return out


def _refinement_panel(ax, res, styles, top_above: float | None) -> float | None:
    """One model: a line per (scheme, method) through its substep counts; the model as trained
    (star) and the finest exact re-integration (dotted level). Returns the y-limit used."""
    own = res.value(res.own)
    # a loss that diverged (NaN, inf) is drawn off the scale, never used for the limits
    vals = [v for v in [res.value(p) for p in res.points] + [own] if math.isfinite(v)] or [0.0]
    top = None if top_above is None else min(max(vals), own + top_above if math.isfinite(own)
                                             else max(vals))
    if top is None and len(vals) < len(res.points) + 1:
        top = max(vals)
    for key, pts in res.series().items():
        x = [p.evals for p in pts]
        y = [res.value(p) for p in pts]
        ax.semilogx(x, y, ms=4, lw=1.3, **styles[key])
        if top is not None:
            off = [(xi, yi) for xi, yi in zip(x, y) if not yi <= top]
            if off:
                ax.plot([o[0] for o in off], [top] * len(off), "^", color=styles[key]["color"],
                        mec="k", ms=8, clip_on=False, zorder=4)
    lim = res.limit()
    if lim is not None and math.isfinite(res.value(lim)):
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
    re-integrated (:func:`~splitnet.analyses.refine.refinement_study`): one panel per
    :class:`~splitnet.analyses.refine.RefinementResult`, one line per scheme x method through its
    substep
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
        clipped |= top is not None and any(not res.value(p) <= top for p in res.points)
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
                              label=(f"off the scale: > {top_above:g} {unit} above\nthe "
                                     f"trained network, or diverged (see the table)"
                                     if top_above is not None else
                                     "off the scale: diverged\n(NaN or inf, see the table)")))
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


def plot_layer_study(study, path, unit: str = "bpb", scale: float = 1.0,
                     title: str | None = None):
    """A :class:`~splitnet.analyses.redundancy.LayerStudy`: left, each layer's drop cost (bars)
    and block influence (line, right axis); right, each adjacent pair's cost run as one step of
    2 h, a line per restriction. Returns the path written."""
    import matplotlib.pyplot as plt

    L = len(study.bi)
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    a.bar(range(L), [c * scale for c in study.drop_costs()], color=series_style(0)["color"],
          label="drop cost")
    a.set(xlabel="layer dropped", ylabel=f"loss change ({unit})")
    t = a.twinx()
    t.plot(range(L), study.bi, "o-", color=series_style(1)["color"], label="block influence")
    t.set_ylabel("block influence (1 - cos)")
    rho, _ = study.spearman()
    a.set_title(f"Spearman(BI, drop cost) = {rho:+.2f}" if math.isfinite(rho) else
                "drop cost and block influence")
    a.legend(handles=a.get_legend_handles_labels()[0] + t.get_legend_handles_labels()[0],
             fontsize=8, loc="upper right")
    for i, r in enumerate(study.pairs):
        b.plot(range(L - 1), [c * scale for c in study.pair_costs(r)], marker="os"[i % 2],
               color=series_style(i)["color"], label=f"{r} at 2h")
    b.set(xlabel="pair run as one step", ylabel=f"loss change ({unit})")
    b.set_xticks(range(L - 1), [f"{k}-{k + 1}" for k in range(L - 1)])
    if study.pairs:
        b.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path)
