"""``--at-depth N`` of the inference commands (each adds it with :func:`add_at_depth_option`):
the network run at N steps over its time (:func:`splitnet.nets.depth.at_depth`)."""

from __future__ import annotations

from ._args import positive_int


def add_at_depth_option(p) -> None:
    """``--at-depth N``: the network run at N steps over its time (:func:`at_depth_of`)."""
    p.add_argument("--at-depth", type=positive_int, default=None, metavar="N",
                   help="run the network at N steps over its time T = L h (step T / N; "
                        "splitnet.nets.depth.at_depth): with --depth-basis any N, a layered "
                        "network a multiple of its layers (prolonged) or a divisor (coarsened "
                        "by the mean) (default: as trained)")


def at_depth_of(model, n: int | None):
    """``model`` at ``n`` steps (None: itself), in ``model``'s mode; a network where ``n``
    cannot apply is a ValueError naming ``--at-depth``."""
    if n is None:
        return model
    from ..nets.depth import at_depth

    try:
        return at_depth(model, n).train(model.training)
    except (TypeError, ValueError) as e:
        raise ValueError(f"--at-depth {n}: {e}") from None


__all__ = ["add_at_depth_option", "at_depth_of"]
