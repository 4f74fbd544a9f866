"""Training at several depths (``--train-depths``, issue 60): one network, each step at the
finest depth and one coarser.

**The rule** (the sandwich rule of slimmable networks, Yu & Huang 2019, without its smallest
member: the finest is always run, and one of the others): step ``s`` of a run of seed ``seed``
runs the depths :func:`depths_at` ``(seed, s, depths)`` = the finest, then one drawn uniformly
from the rest by a generator seeded by ``(seed, s)`` alone, never a stateful RNG, so ``--resume``
draws what the uninterrupted run drew and every DDP rank draws the same. A list of one depth
runs that depth only.

**The loss** of a step is the mean over the depths it runs of each depth's loss (the task's,
on the same micro-batch), so the learning rate means what it means in a one-depth run; the
logged training loss is that mean. With ``--depth-distill`` (language models) a coarser
depth's loss is ``(CE + KL(p_fine || p_coarse)) / 2``, ``p_fine`` the finest's next-token
distribution on the same batch, detached (in-place distillation: the teacher is the network at
its finest, no second model).

**The views.** A depth other than the network's own is :func:`splitnet.nets.depth.at_depth`
``(model, n, view=True)``: with ``depth_basis`` the same depth fields at the view's clock times,
for a layered network coarsened layers that evaluate the mean of the layers they merge; either
way the view's gradients reach the model's parameters (every layer). The views are built once
and held by :class:`DepthsLoss`, the module the trainer (and DDP) runs, so DDP sees one forward.

**FLOPs**: a step's are the sum over the depths it ran of their training FLOPs per token
(:func:`splitnet.training.setup.flops_per_token` of each view) times the step's tokens
(``step_flops`` in metrics.jsonl).
"""

from __future__ import annotations

import random

import torch
import torch.nn.functional as F
from torch import nn

from ..configs.options import check_int


def depths_at(seed: int, step: int, depths) -> tuple[int, ...]:
    """The depths step ``step`` runs: the finest of ``depths``, then (when there are others)
    one of the others drawn uniformly by a generator seeded by ``(seed, step)`` only: a pure
    function, so a resumed run and every rank draw the same."""
    seed, step = check_int("seed", seed, lo=0), check_int("step", step, lo=0)
    ds = sorted({check_int("depth", d) for d in depths})
    if not ds:
        raise ValueError("depths must be a non-empty list of ints >= 1")
    if len(ds) == 1:
        return (ds[0],)
    r = random.Random(f"splitnet.training.elastic:{seed}:{step}")
    return ds[-1], r.choice(ds[:-1])


def kl_to(teacher_logits: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """Mean over positions of ``KL(softmax(teacher) || softmax(logits))`` (nats), in float32;
    the teacher is detached here."""
    t = F.log_softmax(teacher_logits.detach().float(), dim=-1)
    s = F.log_softmax(logits.float(), dim=-1)
    return (t.exp() * (t - s)).sum(-1).mean()


class DepthsLoss(nn.Module):
    """``forward(*batch)``: the mean of the task's loss at each depth of :attr:`now` (set by the
    trainer before each step to :func:`depths_at`), the finest being ``model`` itself and the
    others views of it. ``distill``: the coarser depths' losses are ``(CE + KL) / 2`` against
    the finest's detached distribution (language models: ``batch`` = inputs, targets)."""

    def __init__(self, task, model: nn.Module, cfg, depths, distill: bool = False):
        super().__init__()
        from ..nets.depth import at_depth

        self.depths = tuple(sorted(depths))
        self.finest, self.distill = self.depths[-1], bool(distill)
        self.model = model
        views = {n: model if n == self.finest else at_depth(model, n, view=True)
                 for n in self.depths}
        self.views = nn.ModuleDict({str(n): v for n, v in views.items() if n != self.finest})
        self.losses = nn.ModuleDict({str(n): task.loss(v, cfg) for n, v in views.items()})
        self.now = (self.finest,)

    def view(self, n: int) -> nn.Module:
        """The network at ``n`` steps (the model itself at the finest)."""
        return self.model if n == self.finest else self.views[str(n)]

    def forward(self, *batch):
        if not self.distill:
            return sum(self.losses[str(n)](*batch) for n in self.now) / len(self.now)
        from ..tasks.losses import plain_cross_entropy

        idx, targets = batch
        teacher = self.model(idx)
        total = plain_cross_entropy(teacher, targets)
        for n in self.now[1:]:
            logits = self.view(n)(idx)
            total = total + (plain_cross_entropy(logits, targets) + kl_to(teacher, logits)) / 2
        return total / len(self.now)


def step_flops(fpt: dict, now, tokens: int) -> float:
    """Training FLOPs of a step that ran the depths ``now`` on ``tokens`` tokens, ``fpt`` the
    training FLOPs per token at each depth."""
    return float(sum(fpt[n] for n in now) * tokens)


def begin_step(run, flops_per_token) -> float | None:
    """Before step ``run.step`` of a ``--train-depths`` run: its depths set on the run's
    :class:`DepthsLoss` (under DDP too); returns the training FLOPs per token of the step (the
    depths' sum of ``flops_per_token(network, context)``), None for a run at one depth."""
    loss = getattr(run.fwd, "module", run.fwd)      # DDP wraps it
    if not isinstance(loss, DepthsLoss):
        return None
    if run.depth_fpt is None:
        run.depth_fpt = {n: flops_per_token(loss.view(n), run.cfg.context) for n in loss.depths}
    loss.now = depths_at(run.cfg.seed, run.step, loss.depths)
    return step_flops(run.depth_fpt, loss.now, 1)


__all__ = ["DepthsLoss", "begin_step", "depths_at", "kl_to", "step_flops"]
