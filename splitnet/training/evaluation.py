"""The trainer's held-out score of each task, on the float32 model, eagerly (compiled regions
are bypassed rather than recompiled for another batch shape):

* ``lm``: mean next-byte cross-entropy over the fixed validation windows;
* ``mlm``: mean cross-entropy over the masked bytes of the same windows (each masked by its
  own generator, :mod:`splitnet.mlm.masking`), and the accuracy of restoring them;
* ``translate``: the validation split's loss (:mod:`splitnet.translate.translation`).

A language model's windows are shared out over the ranks (each a contiguous share) and the
sums all-reduced; a translation run scores the whole (small) split on every rank.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..runs import data as D


def _all_reduce(env, *tensors) -> None:
    if env.distributed:
        import torch.distributed as dist

        for t in tensors:
            dist.all_reduce(t)


def _lm_sums(run, share, batch):
    cfg, device = run.cfg, run.env.device
    tot = torch.zeros((), dtype=torch.float64, device=device)
    n = 0
    for x, y in D.val_batches(run.corpus, share, batch, cfg.context):
        x, y = x.to(device), y.to(device)
        logits = run.model(x)
        tot += F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1),
                               reduction="sum").double()
        n += y.numel()
    return tot, torch.tensor(float(n), dtype=torch.float64, device=device)


def held_out(run) -> tuple[float, dict]:
    """``(mean validation loss in nats, extra metrics)`` of the run's model (module
    docstring); the model is back in training mode afterwards."""
    from . import accel

    cfg, env = run.cfg, run.env
    run.model.eval()
    try:
        with torch.no_grad(), run.amp, run.signals.interruptible(), accel.eager():
            if cfg.task == "translate":
                from ..translate.translation import validation_loss

                return validation_loss(run.model, run.corpus, env.device), {}
            share = run.vstarts.tensor_split(env.replicas)[env.replica]
            batch = max(cfg.batch_size // (env.replicas * cfg.grad_accum), 32)
            if cfg.task == "mlm":
                from ..mlm import validation

                tot, right, cnt = validation(run.model, run.corpus, share, cfg.context,
                                             cfg.seed, batch, env.device)
                _all_reduce(env, tot, right, cnt)
                return float(tot / cnt), {"val_acc": float(right / cnt)}
            tot, cnt = _lm_sums(run, share, batch)
            _all_reduce(env, tot, cnt)
            return float(tot / cnt), {}
    finally:
        run.model.train()


__all__ = ["held_out"]
