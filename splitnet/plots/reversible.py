"""Reversible networks against depth: bytes saved for backward, reconstruction error.

:func:`plot_against_depth` draws one or more panels of series ``depth -> value`` on log–log
axes (depth in powers of two). A value of exactly zero (an exact-mode reconstruction, bit for
bit) cannot sit on a log axis: it is drawn at the panel's floor with a hollow marker, and the
legend says so. matplotlib is imported inside the function.
"""

from __future__ import annotations

from collections.abc import Mapping

from .style import readable_log_ticks, save_figure, series_style

__all__ = ["plot_against_depth"]


def _floor(series: Mapping[str, list]) -> float | None:
    """A tenth of the smallest positive value in a panel (where its exact zeros are drawn)."""
    pos = [v for pts in series.values() for _, v in pts if v is not None and v > 0]
    return min(pos) / 10 if pos else None


def plot_against_depth(panels: Mapping[str, Mapping[str, list]], path, ylabel: str,
                       title: str = "", xlabel: str = "layers (depth)",
                       styles: Mapping[str, dict] | None = None):
    """One panel per entry of ``panels`` (panel title -> label -> ``[(depth, value), ...]``),
    one line per label, log–log with depths as ticks. ``None`` values are skipped; zeros are
    drawn at a floor a decade under the panel's smallest positive value, hollow, and named
    "0 (exact)" in the legend. ``styles``: label -> matplotlib line keywords (colour, ls,
    marker, ms) overriding the house style, so that coinciding series stay told apart.
    Writes ``path``."""
    import matplotlib.pyplot as plt

    n = len(panels)
    fig, axes = plt.subplots(1, n, figsize=(max(6.0 * n, 7.0), 4.8), dpi=110, squeeze=False)
    labels = list(dict.fromkeys(lab for p in panels.values() for lab in p))
    for ax, (ptitle, series) in zip(axes[0], panels.items()):
        floor, zeros = _floor(series), False
        depths = sorted({d for pts in series.values() for d, _ in pts})
        for label, pts in series.items():
            st = {**series_style(labels.index(label)), "ms": 5, **(styles or {}).get(label, {})}
            pts = [(d, v) for d, v in pts if v is not None]
            pos = [(d, v) for d, v in pts if v > 0]
            if pos:
                ax.plot(*zip(*pos), color=st["color"], ls=st["ls"], marker=st["marker"],
                        ms=st["ms"], label=label)
            zero = [d for d, v in pts if v == 0]
            if zero and floor is not None:
                zeros = True
                ax.plot(zero, [floor] * len(zero), color=st["color"], ls=st["ls"],
                        marker=st["marker"], ms=st["ms"] + 2, mfc="none",
                        label=None if pos else f"{label}: 0 (exact)")
        if zeros:
            ax.axhline(floor, color="0.5", lw=0.8, ls=":")
            ax.annotate("hollow: exactly 0", (depths[0], floor), xytext=(2, 4),
                        textcoords="offset points", fontsize=8, color="0.3")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(depths, [str(d) for d in depths])
        if _decades(series) <= 2:
            readable_log_ticks(ax.yaxis)
        ax.set_xlabel(xlabel)
        ax.set_title(ptitle, fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7.5, loc="best")
    axes[0][0].set_ylabel(ylabel)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path)


def _decades(series: Mapping[str, list]) -> float:
    """How many decades the panel's positive values span (short spans get 1-2-5 labels)."""
    import math

    pos = [v for pts in series.values() for _, v in pts if v is not None and v > 0]
    return math.log10(max(pos) / min(pos)) if pos else 0.0
