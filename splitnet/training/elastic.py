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

**LayerDrop** (``--layer-drop P``, Fan et al. 2019): step ``s`` runs only the layers
:func:`kept_at` ``(seed, s, ...)`` keeps, each layer (a whole residual block, a whole step of
the scheme) dropped with probability ``p_k``: ``uniform`` (default) ``p_k = P``, Fan et al.'s
rule, which makes every layer equally dispensable, as the every-other pruning at inference
needs; ``linear`` ``p_k = P k / (L - 1)`` (LayerSkip's rise: the first layer never dropped, the
last at ``P``; for early exits, where the late layers go first). A draw that drops every
layer is drawn again (from the same generator), so at least one runs. The generator is seeded
by ``(seed, step)`` alone (resume and DDP ranks agree; DDP is told some parameters go unused).
The kept layers run at their own step ``h`` (:func:`splitnet.nets.depth.kept_layers`), then the
final norm and head; FLOPs are counted at the layers run. At inference ``--at-depth N``
prunes to the layers ``0, L/N, 2 L/N, ...`` (Fan et al.'s every-other;
``at_depth(model, N, restriction="drop")``): the checkpoint's training options say so
(:func:`restriction_of`).

**Early exit** (``--early-exit 2,4,8``, LayerSkip's early-exit loss, Elhoushi et al. 2024):
one forward through the layers; after each exit ``n`` the state goes through the one final
norm and head, and the step's loss is ``sum_n w_n CE_n`` with ``w_n = n / sum_m m`` (a scale
rising with depth, LayerSkip's ``e_scale`` linear in the layer, without its curriculum: every
exit every step, so nothing is drawn). The last exit is the network's depth. FLOPs: the
network's, plus the head once more per earlier exit. At inference ``--at-depth N`` is the
first ``N`` layers and the head (``restriction="exit"``).
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


def drop_probabilities(L: int, p: float, rule: str = "uniform") -> tuple[float, ...]:
    """LayerDrop's probability of dropping each of ``L`` layers: ``uniform`` ``p`` each,
    ``linear`` ``p k / (L - 1)`` for layer k (one layer: never dropped)."""
    from ..configs.config import LAYER_DROP_RULES

    if rule not in LAYER_DROP_RULES:
        raise ValueError(f"rule must be one of {', '.join(LAYER_DROP_RULES)}, got {rule!r}")
    if rule == "uniform":
        return (float(p),) * L
    return tuple(p * k / (L - 1) if L > 1 else 0.0 for k in range(L))


def kept_at(seed: int, step: int, probs) -> tuple[int, ...]:
    """The layers step ``step`` keeps (runs), layer k dropped with probability ``probs[k]``:
    drawn by a generator seeded by ``(seed, step)`` only, again while it drops every layer."""
    seed, step = check_int("seed", seed, lo=0), check_int("step", step, lo=0)
    if not probs or max(probs) >= 1.0:
        raise ValueError("LayerDrop takes probabilities below 1 for at least one layer")
    r = random.Random(f"splitnet.training.elastic.layerdrop:{seed}:{step}")
    while True:
        keep = tuple(k for k, q in enumerate(probs) if r.random() >= q)
        if keep:
            return keep


def exit_weights(exits) -> dict[int, float]:
    """The early-exit loss's weight of each exit: ``w_n = n / sum_m m``."""
    total = sum(exits)
    return {n: n / total for n in exits}


def restriction_of(train_options: dict | None) -> str:
    """How ``--at-depth`` restricts a layered network trained with ``train_options`` (a
    checkpoint's ``train_config``): ``"drop"`` after LayerDrop, ``"exit"`` after an early-exit
    loss, else ``"mean"`` (coarsened: :func:`splitnet.nets.depth.at_depth`)."""
    o = train_options or {}
    return "drop" if (o.get("layer_drop") or 0) > 0 else "exit" if o.get("early_exit") else \
        "mean"


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

    def begin(self, seed: int, step: int, fpt) -> float:
        """Step ``step``'s depths (:func:`depths_at`); returns its FLOPs per token, ``fpt(key,
        network)`` the cached training FLOPs per token of a network."""
        self.now = depths_at(seed, step, self.depths)
        return sum(fpt(n, lambda n=n: self.view(n)) for n in self.now)

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


class LayerDropLoss(nn.Module):
    """``forward(*batch)``: the task's loss of ``model`` with only the layers :attr:`keep` (set
    by :meth:`begin` to :func:`kept_at`), each at its own step, then the final norm and head."""

    def __init__(self, task, model: nn.Module, cfg):
        super().__init__()
        self.model, self.task, self.cfg = model, task, cfg
        self.L = model.config.n_layers
        self.probs = drop_probabilities(self.L, cfg.layer_drop, cfg.layer_drop_rule)
        self.keep = tuple(range(self.L))

    def begin(self, seed: int, step: int, fpt) -> float:
        """Step ``step``'s layers; returns its FLOPs per token (those of ``len(keep)`` layers)."""
        from ..nets.depth import kept_layers

        self.keep = kept_at(seed, step, self.probs)
        n = len(self.keep)
        return fpt(("drop", n), lambda: kept_layers(self.model, range(n)))

    def forward(self, *batch):
        from ..nets.depth import kept_layers

        net = self.model if len(self.keep) == self.L else kept_layers(self.model, self.keep)
        return self.task.loss(net, self.cfg)(*batch)


class ExitLoss(nn.Module):
    """``forward(idx, targets)``: ``sum_n w_n CE_n`` over the exits ``n`` (:func:`exit_weights`),
    ``CE_n`` the cross-entropy of ``head(norm(x_n))``, ``x_n`` the state after ``n`` layers of
    one forward (a language model on a plain stack)."""

    def __init__(self, task, model: nn.Module, cfg):
        super().__init__()
        self.model, self.weights = model, exit_weights(cfg.early_exit)
        self.head = task.loss(model, cfg)          # the task's head loss (plain or chunked)

    def begin(self, seed: int, step: int, fpt) -> float:
        """The FLOPs per token of a step: the network's and one more head per earlier exit."""
        c = self.model.config
        return fpt("exit", lambda: self.model) + 3.0 * 2.0 * c.d_model * c.vocab_size * (
            len(self.weights) - 1)

    def forward(self, idx, targets):
        m = self.model
        x, h, total = m.embed(idx), m.layers.step_size, 0.0
        for k, layer in enumerate(m.layers):
            x = layer(x, k * h)
            if k + 1 in self.weights:
                ce = self.head.head_loss(m.norm(x), m.head.weight, targets)
                total = total + self.weights[k + 1] * ce
        return total


def training_loss(task, model: nn.Module, cfg) -> nn.Module | None:
    """The module a run at several depths trains (``--train-depths``, ``--layer-drop``,
    ``--early-exit``), over ``model``; None for a run at one depth."""
    if cfg.train_depths:
        return DepthsLoss(task, model, cfg, cfg.train_depths, cfg.depth_distill)
    if cfg.layer_drop > 0:
        return LayerDropLoss(task, model, cfg)
    if cfg.early_exit:
        return ExitLoss(task, model, cfg)
    return None


def step_flops(fpt: dict, now, tokens: int) -> float:
    """Training FLOPs of a step that ran the depths ``now`` on ``tokens`` tokens, ``fpt`` the
    training FLOPs per token at each depth."""
    return float(sum(fpt[n] for n in now) * tokens)


def begin_step(run, flops_per_token) -> float | None:
    """Before step ``run.step`` of a run at several depths (:func:`training_loss`): the step's
    depths or layers set on the run's loss module (under DDP too); returns the training FLOPs
    per token of the step, None for a run at one depth."""
    loss = getattr(run.fwd, "module", run.fwd)      # DDP wraps it
    if not isinstance(loss, (DepthsLoss, LayerDropLoss, ExitLoss)):
        return None
    if run.depth_fpt is None:
        run.depth_fpt = {}

    def fpt(key, network):
        if key not in run.depth_fpt:
            run.depth_fpt[key] = flops_per_token(network(), run.cfg.context)
        return run.depth_fpt[key]

    return loss.begin(run.cfg.seed, run.step, fpt)


__all__ = ["DepthsLoss", "ExitLoss", "LayerDropLoss", "begin_step", "depths_at",
           "drop_probabilities", "exit_weights", "kept_at", "kl_to", "restriction_of",
           "step_flops", "training_loss"]
