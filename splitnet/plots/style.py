"""The one style of splitnet's figures and its atomic saver.

Series are told apart by colour *and* line style/marker (:func:`series_style`): 12 colours
that read on white, times line styles, so up to ~24 series stay distinguishable. Every marker
that carries meaning is named in the legend. :func:`save_figure` writes atomically (a crash
never leaves half a PNG). matplotlib is imported inside the functions.
"""

from __future__ import annotations

from pathlib import Path

from .._io import atomic_write

__all__ = ["LINESTYLES", "MARKERS", "PALETTE", "TOKEN_PALETTE", "check_format",
           "readable_log_ticks", "save_figure", "series_style"]

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


def check_format(path, flag: str = "--out") -> str:
    """The image format :func:`save_figure` would write to ``path`` (its suffix; none = png);
    ValueError naming ``flag`` and the formats matplotlib writes when it has none of them, so
    an unknown format is refused before any work."""
    from matplotlib.backend_bases import FigureCanvasBase

    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    known = FigureCanvasBase.get_supported_filetypes()
    if fmt not in known:
        raise ValueError(f"{flag} {path}: unknown image format {fmt!r}; use one of "
                         f"{', '.join(sorted(known))}")
    return fmt


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
