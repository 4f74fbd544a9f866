"""Training curves: one run's bits per byte (:func:`plot_metrics`, the ``loss.png`` of
``splitnet train``) and mean ± sd over seeds (:func:`plot_seed_curves`)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .style import PALETTE, save_figure, series_style

__all__ = ["plot_metrics", "plot_seed_curves", "smoothed"]


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
