"""The zoo's efficiency figure: work–precision of splitting methods with exact sub-flows
(``experiments/zoo.py``)."""

from __future__ import annotations

import numpy as np

from .style import readable_log_ticks, save_figure, series_style

__all__ = ["plot_zoo_efficiency"]


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

