"""Growing depth during training (``splitnet train --grow-at STEP,...``).

After each listed step the network is prolonged by 2 (:func:`splitnet.nets.depth.prolong`):
twice the layers at half the step size, layers ``2k`` and ``2k + 1`` copies of layer k, so the
grown network computes what the old one did up to its scheme's order in ``h``. What the
optimiser knew goes with the weights::

    AdamW state of a copy = the state of the weight it copies (exp_avg, exp_avg_sq, step)
    the learning rate, the schedule and the batches go on as if nothing happened

A checkpoint holds the network at its depth of the moment (``model_config``), the run options
the depth it started at; ``--resume`` before, at or after a growth step continues bit for bit
(``tests/test_growth.py``). Growth needs the whole model in every process: ``--parallel ddp``
or one process (``--parallel fsdp``, ``--tp`` and ``--param-dtype bfloat16`` are refused by
:func:`splitnet.configs.options.check_growth`).
"""

from __future__ import annotations

import copy

import torch

from ..nets.depth import depths, prolong, source_layer, stack_names
from .depths import FACTOR


def _carry_state(old_model, old_opt, new_model, new_opt) -> None:
    """Each new parameter's AdamW state a copy of the state of the weight it copies; each
    group's learning rate the old group's."""
    stacks = stack_names(old_model)
    old = dict(old_model.named_parameters())
    for name, p in new_model.named_parameters():
        st = old_opt.state.get(old[source_layer(name, stacks, FACTOR)])
        if st:
            new_opt.state[p] = {k: v.clone() if torch.is_tensor(v) else copy.deepcopy(v)
                                for k, v in st.items()}
    for g_new, g_old in zip(new_opt.param_groups, old_opt.param_groups):
        g_new["lr"], g_new["initial_lr"] = g_old["lr"], g_old["initial_lr"]


def grow(model, opt, sched, cfg):
    """``(model, opt, sched)`` after one growth: the prolonged network, a new AdamW over it
    holding the carried state (module docstring), a schedule at the same point. Draws nothing
    from torch's random generators (the initialisation of the new network is overwritten, and
    made on a forked generator), so a resumed run draws what an uninterrupted one does."""
    from .setup import build_optimizer, lr_at

    dev = next(model.parameters()).device
    with torch.random.fork_rng(devices=[dev.index or 0] if dev.type == "cuda" else []):
        big = prolong(model, FACTOR)
    new_opt = build_optimizer(big, cfg)
    _carry_state(model, opt, big, new_opt)
    new_sched = torch.optim.lr_scheduler.LambdaLR(
        new_opt, lambda s: lr_at(s, cfg.warmup, cfg.steps, cfg.min_lr_ratio, cfg.schedule))
    new_sched.load_state_dict(sched.state_dict())
    for g_new, g_old in zip(new_opt.param_groups, opt.param_groups):
        g_new["lr"] = g_old["lr"]          # the constructor's step set lr_at(0)
    return big, new_opt, new_sched




def grow_run(run) -> None:
    """One growth of a running training (the ``_Run`` of :mod:`splitnet.training.train`): the
    network, optimiser and schedule grown (:func:`grow`), the model and loss wrapped again as
    at the start (compiled, DDP), the FLOPs per token and parameter count of the new depth."""
    from ..nets.learned import project_coefficients
    from .setup import compile_scope, flops_per_token, wrap_model

    run.model, run.opt, run.sched = grow(run.model, run.opt, run.sched, run.cfg)
    if getattr(run.cfg.model, "project_coefficients", False):
        model = run.model
        run.opt.register_step_post_hook(lambda *_: project_coefficients(model))
    run.fwd, run.step_fn = wrap_model(run.model, run.opt, run.cfg, run.env)
    run.fwd.train()
    run.fpt, run.n_params = flops_per_token(run.model, run.cfg.context), run.model.n_params()
    run.compile_scope = compile_scope(run.cfg, run.model)
    L = ", ".join(f"{n} {v}" for n, v in depths(run.model.config).items())
    run.log(f"step {run.step}: depth doubled (--grow-at): {L}, h = "
            f"{run.model.config.step_size:g}, {run.n_params:,} parameters")


__all__ = ["grow", "grow_run"]
