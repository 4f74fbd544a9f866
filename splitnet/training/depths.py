"""The depth of a ``--grow-at`` run at each step: what a checkpoint's network must be.

A run's options hold the network it starts with; each step of ``grow_at`` doubles its depth
(:mod:`splitnet.training.growth`). After ``s`` steps the growths at steps ``<= s`` are due
(:func:`due`); a checkpoint written at a growth step holds the network before or after that
growth (:func:`check_resumed`).
"""

from __future__ import annotations

from ..nets.depth import depths, prolonged_config

FACTOR = 2     # each growth doubles the depth


def due(grow_at, step: int) -> int:
    """Growths that must have happened once ``step`` steps are done (those at steps <= it)."""
    return sum(1 for s in grow_at if s <= step)


def grown_config(model_cfg, times: int):
    """``model_cfg`` after ``times`` growths."""
    for _ in range(times):
        model_cfg = prolonged_config(model_cfg, FACTOR)
    return model_cfg


def done(start_cfg, model_cfg) -> int | None:
    """How many growths took ``start_cfg`` (the run's) to ``model_cfg`` (a model's), or None
    when no number of them does."""
    first, now = next(iter(depths(start_cfg).values())), next(iter(depths(model_cfg).values()))
    times = 0
    while first * FACTOR ** times < now:
        times += 1
    return times if grown_config(start_cfg, times) == model_cfg else None


def check_resumed(cfg, model_cfg, step: int) -> None:
    """A checkpoint's network at ``step`` is the run's grown as its ``--grow-at`` says: every
    growth of a step below ``step`` done, the one at ``step`` done or not (a run stopped
    between the growth and the step after it). Otherwise ValueError."""
    n = done(cfg.model, model_cfg)
    before = sum(1 for s in cfg.grow_at if s < step)
    if n is None or not before <= n <= due(cfg.grow_at, step):
        raise ValueError("incompatible checkpoint: its model config differs from its run "
                         "options (edited by hand?)")


__all__ = ["FACTOR", "check_resumed", "done", "due", "grown_config"]
