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
                        "by the mean); trained with --layer-drop: every (L/N)-th layer kept, "
                        "with --early-exit: the first N layers (default: as trained)")


def at_depth_of(model, n: int | None, train_options: dict | None = None):
    """``model`` at ``n`` steps (None: itself), in ``model``'s mode, restricted as its training
    options (a checkpoint's ``train_config``) say (:func:`splitnet.training.elastic.
    restriction_of`: pruned after LayerDrop, an exit after an early-exit loss); a network
    where ``n`` cannot apply is a ValueError naming ``--at-depth``."""
    if n is None:
        return model
    from ..nets.depth import at_depth
    from ..training.elastic import restriction_of

    try:
        return at_depth(model, n, restriction=restriction_of(train_options)).train(
            model.training)
    except (TypeError, ValueError) as e:
        raise ValueError(f"--at-depth {n}: {e}") from None


__all__ = ["add_at_depth_option", "at_depth_of"]
