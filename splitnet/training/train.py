"""Training a byte-level language model from any splitting scheme: ``train(TrainConfig)``.

The command line is ``splitnet train`` (:mod:`splitnet.cli.commands.cmd_train`); several
processes run ``torchrun ... -m splitnet train ...``. The loop, top to bottom::

    run = _setup(cfg, checkpoint)              # model, optimiser, schedule, RNG, data, files
    while run.step < cfg.steps:
        loss = _train_step(run)                # forward + backward over the micro-batches, update
        report.log_step(run, loss)                        # metrics.jsonl, progress bar, validation
        _save(run) every ckpt_every steps, at the end and on a signal

Set-up (``--resume``, optimiser, schedule, memory check, model, corpus) lives in
:mod:`splitnet.training.setup`, processes and signals in :mod:`splitnet.runenv`, sharding
in :mod:`splitnet.training.sharding`.

Optimisation: AdamW (decay on matrices), warmup then cosine to ``min_lr_ratio * lr``, clipping
by global norm, accumulation (``--project-coefficients``: a projection after each step).

Batches: ``batch_size`` is the global number of sequences per optimiser step. Step ``s`` draws
its windows from a generator seeded by ``(seed, s)`` (:mod:`splitnet.runs.data`); rank r of a world
of W takes the r-th contiguous block of that batch and splits it into ``grad_accum``
micro-batches; each micro-batch loss is divided by ``grad_accum`` and DDP (or FSDP) averages
over ranks: the gradient is the global batch's mean whatever the processes, and a checkpoint's
data position is its step.

Nothing lost: the checkpoint (:mod:`splitnet.runs.checkpoint`: config, weights, optimiser,
scheduler, RNG states, step, corpus fingerprint) is written atomically every ``ckpt_every``
steps, at the end and on SIGINT/SIGTERM; ``resume=True`` restores all of it and cuts
``metrics.jsonl`` back to the checkpoint's step, so a run killed with ``kill -9`` continues as if
uninterrupted. A non-finite loss stops the run without overwriting the last good checkpoint.
"""

from __future__ import annotations

import math
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..nets.learned import coefficient_metrics, order_penalty, project_coefficients
from ..nets.rediscretize import refined, refinement_at, scheme_label
from ..order.projection import ProjectionError
from ..runenv import Interrupted, RunEnv, Signals, default_threads, run_env, setup_phase
from ..runs import checkpoint as ck
from ..runs import data as D
from ..runs import lock as run_lock
from ..runs import shards as shard_store
from ..tasks.contract import check_held_out, fits_loss
from ..tasks.task import Task, get_task
from . import depths, growth, report, sharding
from .config import TrainConfig, stored_options
from .report import PEAK_BF16, TrainingError
from .setup import (
    autocast,
    build_model,
    compile_scope,
    describe_model,
    flops_per_token,
    plan_run,
    step_batch,
    wrap_model,
)

# ----------------------------------------------------------------------------------------------
# one run


@dataclass
class _Run:
    cfg: TrainConfig
    env: RunEnv
    task: Task                    # what the run learns (splitnet.tasks)
    corpus: object                # the task's data (D.Corpus, translation.PairData, ...)
    model: torch.nn.Module        # the raw model (checkpoints, evaluation)
    step_fn: object               # callable (fwd, x, y) -> loss, compiled with --compile
    fwd: torch.nn.Module          # model + the task's loss as trained (DDP-wrapped)
    opt: torch.optim.Optimizer
    sched: object
    step: int
    amp: object
    out: Path
    signals: Signals
    fpt: float
    peak: float | None
    val: object                   # what the task's held-out score reads (windows, ...)
    n_params: int
    log: object
    step_times: list = field(default_factory=list)
    pending: list = field(default_factory=list)   # _Pending steps not yet read back
    block_start: float = 0.0                      # when the first pending step began
    compile_scope: str | None = None
    last_val: float | None = None
    last_extra: dict = field(default_factory=dict)   # the last evaluation's other metrics
    metrics: object = None
    bar: object = None
    tb: object = None             # tracking.TensorBoardLog with --tensorboard
    lock: object = None           # lock.RunLock of the run directory (rank 0)
    step_tokens: list = field(default_factory=list)   # target tokens of each step this session
    fitted: bool = False          # the task's batch has met its loss (tasks.contract.fits_loss)
    scores: dict | None = None    # the task's scores after the last step (BLEU, chrF)


def _setup(cfg: TrainConfig, state: dict | None, corpus: D.Corpus, env: RunEnv, signals,
           log) -> _Run:
    model, opt, sched, step = build_model(cfg, state, env)
    if getattr(cfg.model, "project_coefficients", False):   # before a bf16 copy's sync hook
        opt.register_step_post_hook(lambda *_: project_coefficients(model))
    fwd, step_fn = wrap_model(model, opt, cfg, env)
    cuda = env.device.type == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    peak = cfg.peak_tflops * 1e12 if cfg.peak_tflops else None
    if peak is None and cuda:
        name = torch.cuda.get_device_name(env.device)
        peak = next((v for k, v in PEAK_BF16.items() if k in name), None)
    out = Path(cfg.out)
    task = get_task(cfg.task)
    return _Run(cfg=cfg, env=env, task=task, corpus=corpus, model=model, step_fn=step_fn, fwd=fwd,
                opt=opt, sched=sched, step=step, amp=autocast(cfg, env.device), out=out,
                signals=signals, fpt=flops_per_token(model, cfg.context), peak=peak,
                val=task.validation(cfg, corpus),
                n_params=model.n_params(), log=log, compile_scope=compile_scope(cfg, model))


def _evaluate(run: _Run) -> tuple[float, dict]:
    """The task's held-out loss (nats) and extra metrics, on the float32 model, eagerly
    (compiled regions are bypassed rather than recompiled for another batch shape); the
    model is back in training mode afterwards."""
    from . import accel

    run.model.eval()
    try:
        with torch.no_grad(), run.amp, run.signals.interruptible(), accel.eager():
            return check_held_out(run.task, run.task.held_out(run.model, run.corpus, run.cfg,
                                                              run.env, run.val))
    finally:
        run.model.train()


@dataclass
class _Pending:
    """A finished step whose numbers are still on the device: read back at the next sync
    (:func:`_settle`), so a GPU step does not wait for the host."""

    step: int
    loss: torch.Tensor
    gnorm: torch.Tensor | None
    lr: float
    tokens: int                   # tokens the step trained on (all ranks)


def _train_step(run: _Run) -> _Pending:
    """One optimiser step over the micro-batches of step ``run.step``, with no host sync: the
    loss and gradient norm stay on the device until :func:`_settle` reads them (and stops the
    run on a non-finite loss before anything is saved)."""
    cfg, env = run.cfg, run.env
    accum = cfg.grad_accum
    micro = cfg.batch_size // (env.replicas * accum)
    batch, tokens = step_batch(cfg, run.corpus, run.step, env)
    loss_sum = torch.zeros((), device=env.device)
    # ODE-consistent training: this step's forward may run a refinement of the own scheme
    k = refinement_at(cfg.seed, run.step, cfg.refine_prob, cfg.refine_substeps)
    with run.signals.interruptible(), refined(run.model, k) if k and k > 1 else nullcontext():
        for m in range(accum):
            part = [t[m * micro:(m + 1) * micro].to(env.device, non_blocking=True)
                    for t in batch]
            sync = sharding.micro_batch_sync(run.fwd, run.model, cfg.parallel,
                                             env.distributed, last=m == accum - 1)
            # the session's first micro-batch: a batch the task's loss does not take is said
            first = fits_loss(run.task, run.fwd, run.step) if not run.fitted else nullcontext()
            run.fitted = True
            with sync, first:      # all-reduce only on the last micro-batch
                with run.amp:
                    loss = run.step_fn(run.fwd, *part)
                total = loss / accum
                if cfg.order_penalty > 0 and m == accum - 1:   # once, in the reduced backward
                    total = total + cfg.order_penalty * order_penalty(run.model)
                total.backward()
            loss_sum += loss.detach()
    loss_t = loss_sum / accum
    if env.distributed:
        import torch.distributed as dist

        dist.all_reduce(loss_t)
        loss_t /= env.world      # (the tp ranks of a replica hold equal losses)
    gnorm = None
    if cfg.clip > 0:    # of sharded gradients (fsdp): made whole
        gnorm = sharding.clip_grad_norm(run.model.parameters(), cfg.clip)
    try:
        run.opt.step()
    except ProjectionError as e:    # never a silent drift: the run stops, its checkpoint kept
        raise TrainingError(f"{e}; the run stops here (the last checkpoint is unchanged): start "
                            f"a new run with a lower --lr") from None
    run.sched.step()
    run.opt.zero_grad(set_to_none=True)
    run.step += 1
    return _Pending(run.step, loss_t.detach(), gnorm, run.opt.param_groups[0]["lr"], tokens)


def _verify_directory(run: _Run) -> None:
    """TrainingError when the run directory is no longer the one this run locked (removed or
    replaced, perhaps by another run): nothing more is written there. Several processes agree
    first (rank 0 holds the lock and tells the others), so every rank stops together."""
    problem = None
    if run.lock is not None:
        try:
            run.lock.verify()
        except run_lock.RunDirectoryReplaced as e:
            problem = str(e)
    if run.env.distributed:
        import torch.distributed as dist

        flag = torch.tensor([0 if problem is None else 1], device=run.env.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        if flag.item() and problem is None:
            problem = f"{run.out} was removed or replaced while this run was going (rank 0)"
    if problem is not None:
        raise TrainingError(problem)


def _save(run: _Run) -> None:
    """Checkpoint (rank 0) and the loss plot; every rank waits for it."""
    _verify_directory(run)
    shards = None
    if run.env.distributed and run.cfg.parallel == "fsdp":   # every rank writes its shards
        shards = sharding.save_shards(run.model, run.opt, run.out, run.step, run.env.is_main)
    if run.env.is_main:
        try:
            _write_checkpoint(run, shards)
        except OSError as e:          # the last good checkpoint is still there
            from .._io import write_failure

            fix = ("free some space" if write_failure(e, run.out / ck.CKPT) is not None else
                   f"make {run.out} writable again")      # permission, read-only, ...: not space
            raise TrainingError(f"{e}; stopping at step {run.step}: {fix}, then --resume") \
                from None
    if run.env.distributed:
        import torch.distributed as dist

        dist.barrier()


def _write_checkpoint(run: _Run, shards: str | None = None) -> None:
    """The checkpoint, then the loss plot (atomically); ``shards``: a sharded run's folder."""
    model_state, opt_state = ({}, {}) if shards else (run.model.state_dict(), run.opt.state_dict())
    # a sharded run: its folder, and the CRC-32 of every chunk stored there (checked on load)
    extra = {"model_kind": ck.model_kind(run.model), **({"shards": shards, shard_store.DIGESTS:
             shard_store.digests(run.out / shards)} if shards else {})}
    if getattr(run.corpus, "tokenizer", None) is not None:     # translate, mlm --bpe
        extra["tokenizer"] = run.corpus.tokenizer.to_dict()
    ck.save({"version": ck.VERSION, "step": run.step, **extra,
             "model_config": run.model.config.to_dict(), "model": model_state,
             "optimizer": opt_state, "scheduler": run.sched.state_dict(),
             "rng": ck.rng_state(run.env.device), "train_config": stored_options(run.cfg),
             "corpus": run.corpus.fingerprint(), "n_params": run.n_params,
             "world_size": run.env.world}, run.out / ck.CKPT)
    shard_store.remove_others(run.out, keep=shards)      # older shards folders, superseded
    if run.cfg.plot and (run.out / ck.METRICS).exists():
        from ..plots import plot_metrics

        plot_metrics(ck.read_metrics(run.out / ck.METRICS), run.out / ck.PLOT,
                     title=f"{scheme_label(run.model)} ({run.cfg.model.weights}), "
                           f"{run.n_params:,} params")


def _stop_requested(run: _Run) -> int | None:
    sig = run.signals.received
    if run.env.distributed:   # every rank must agree to stop at the same step
        import torch.distributed as dist

        flag = torch.tensor([0 if sig is None else int(sig)], device=run.env.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        sig = int(flag.item()) or None
    return sig


def _sync_every(run: _Run) -> int:
    """Steps between host syncs: ``sync_every``, else 10 on CUDA, 1 on the CPU (free there)."""
    return run.cfg.sync_every or (10 if run.env.device.type == "cuda" else 1)


def _boundary(run: _Run) -> bool:
    """Read the pending steps back now? At every evaluation, checkpoint, the end, --stop-at,
    every ``_sync_every`` steps, after the session's first step (its time is the compile
    time), and on a signal (one process; several agree at the regular boundaries)."""
    cfg, s = run.cfg, run.step
    return (s % cfg.eval_every == 0 or s % cfg.ckpt_every == 0 or s == cfg.steps
            or (cfg.stop_at is not None and s >= cfg.stop_at) or not run.step_times
            or len(run.pending) >= _sync_every(run)
            or (run.signals.received is not None and not run.env.distributed))


def _settle(run: _Run, evaluate: bool = True) -> None:
    """One host sync for the pending steps: their losses, gradient norms and times; a
    non-finite loss stops the run (TrainingError, before any save); validation if due; the
    metrics lines."""
    pending, run.pending = run.pending, []
    if not pending:
        return
    if run.env.device.type == "cuda":
        torch.cuda.synchronize(run.env.device)
    dt = (time.perf_counter() - run.block_start) / len(pending)
    losses = torch.stack([p.loss for p in pending]).tolist()
    gnorms = [None if p.gnorm is None else float(p.gnorm) for p in pending]
    for p, loss in zip(pending, losses):
        if not math.isfinite(loss):
            # advice that can be followed: --resume keeps the run's --lr, --warmup and --clip
            kept = (f"The last good checkpoint in {run.out / ck.CKPT} was left untouched; "
                    f"start a new run with a lower --lr, a longer --warmup or --clip (another "
                    f"--out, or --overwrite, which keeps this run in previous-N; --resume "
                    f"would keep these settings)"
                    if (run.out / ck.CKPT).exists() else
                    "No checkpoint was written (none was due yet); lower --lr, raise --warmup "
                    "or set --clip and start again")
            raise TrainingError(f"non-finite training loss ({loss}) at step {p.step}: "
                                f"stopping. {kept}")
    if not run.env.distributed:      # several processes check at every save (they agree)
        _verify_directory(run)
    run.step_times += [dt] * len(pending)
    run.step_tokens += [p.tokens for p in pending]
    recs = [report.record(run, p, loss, g, dt) for p, loss, g in zip(pending, losses, gnorms)]
    s = run.step
    if evaluate and (s % run.cfg.eval_every == 0 or s == run.cfg.steps):
        try:
            vl, extra = _evaluate(run)
        except Interrupted:
            for rec in recs:        # the steps themselves are complete: keep their lines
                report.log_step(run, rec)
            raise
        run.last_val, run.last_extra = vl / D.LN2, extra
        recs[-1].update(val_loss=vl, val_bpb=run.last_val, **extra,
                        **coefficient_metrics(run.model))
    for rec in recs:
        report.log_step(run, rec)


def _one_step(run: _Run) -> None:
    if run.cfg.compile:
        from .accel import mark_step

        mark_step(run.cfg.compile_mode)     # CUDA-graph modes: a new step begins
    if not run.pending:
        run.block_start = time.perf_counter()
    run.pending.append(_train_step(run))
    if _boundary(run):
        _settle(run)


def _loop(run: _Run) -> int | None:
    """Steps until done, ``stop_at`` or a signal; returns the signal number if one stopped it."""
    cfg = run.cfg
    run.fwd.train()
    while run.step < cfg.steps:
        if run.step in cfg.grow_at and depths.done(cfg.model, run.model.config) < \
                depths.due(cfg.grow_at, run.step):   # a listed step only (see check_resumed)
            _settle(run)                     # the steps before it: their numbers, old depth
            growth.grow_run(run)
        try:
            _one_step(run)
        except Interrupted as e:
            run.opt.zero_grad(set_to_none=True)      # an abandoned step: no update was made
            _settle(run, evaluate=False)             # the finished ones keep their lines
            _save(run)
            return e.signum
        if run.pending:
            continue                                 # between syncs: nothing to decide yet
        sig = _stop_requested(run)
        pause = cfg.stop_at is not None and run.step >= cfg.stop_at
        if run.step % cfg.ckpt_every == 0 or run.step == cfg.steps or sig is not None or pause:
            _save(run)
        if sig is not None:
            return sig
        if pause and run.step < cfg.steps:
            run.log(f"\nstopped at step {run.step} (--stop-at); continue with --resume")
            break
    return None


# ----------------------------------------------------------------------------------------------
# the front door


def train(cfg: TrainConfig, explicit: set[str] | None = None) -> dict:
    """Run (or resume) training; returns a summary dict (steady-state speed included).

    ``explicit``: with ``cfg.resume``, the option names the caller gave (``model.x`` for model
    options); default: those that differ from their defaults. Raises ValueError on bad input
    (before anything is written), TrainingError on a non-finite loss."""
    from .accel import sdpa_backend

    if not isinstance(cfg, TrainConfig):
        raise TypeError(f"train() takes a TrainConfig, got {type(cfg).__name__}")
    t_start = time.perf_counter()
    env = run_env(cfg.device)
    log = (lambda msg: print(msg, file=sys.stderr, flush=True)) if env.is_main else \
        (lambda msg: None)
    with Signals() as signals:
        with setup_phase(signals):          # a signal before the first step: stop, write nothing
            cfg, state, corpus = plan_run(cfg, explicit, env, log)
        torch.set_num_threads(cfg.threads or default_threads())
        if env.distributed:
            import torch.distributed as dist

            if env.device.type == "cuda":
                torch.cuda.set_device(env.device)
            dist.init_process_group("nccl" if env.device.type == "cuda" else "gloo")
        try:
            lock = run_lock.RunLock(cfg.out) if env.is_main else nullcontext()
            with lock, sdpa_backend(cfg.sdpa):
                with setup_phase(signals):
                    run = _setup(cfg, state, corpus, env, signals, log)
                run.lock = lock if env.is_main else None
                return _session(run, t_start)
        finally:
            if env.distributed:
                import torch.distributed as dist
                if sys.exc_info()[0] is None:   # D16: a rank that tears its group down first
                    dist.barrier()              # can abort its peers' gloo threads (SIGABRT)
                dist.destroy_process_group()


def _session(run: _Run, t_start: float) -> dict:
    from tqdm.auto import tqdm

    cfg = run.cfg
    report.open_files(run)
    run.log(f"splitnet train: {run.corpus.describe()}")
    run.log(f"model: {describe_model(run.model)} weights={cfg.model.weights} d_model="
            f"{cfg.model.d_model} params={run.n_params:,}; device={run.env.device} world="
            f"{run.env.world}{f' (tp {run.env.tp})' if run.env.tp > 1 else ''} batch="
            f"{cfg.batch_size}x{cfg.context} accum={cfg.grad_accum}; "
            f"steps {run.step} -> {cfg.steps}")
    for note in run.task.notes(cfg) if run.step == 0 else ():    # once, when the run starts
        run.log(f"note: {note}")
    from ..runenv import draws_progress

    run.bar = tqdm(total=cfg.steps, initial=run.step, unit="step", dynamic_ncols=True,
                   disable=not (run.env.is_main and draws_progress(cfg.progress)), file=sys.stderr)
    t_loop = time.perf_counter()
    try:
        sig = _loop(run)
        if sig is None and run.step == cfg.steps:
            sig = _final_scores(run)
    finally:
        run.bar.close()
        if run.metrics is not None:
            run.metrics.close()
        if run.tb is not None:
            run.tb.close()
    return report.summary(run, sig, t_loop - t_start)


def _final_scores(run: _Run) -> int | None:
    """The task's scores after the last step (translation: BLEU and chrF of beam search on
    the test pairs), logged and written to metrics.jsonl (rank 0). A signal during them stops
    them and is returned: the last step's checkpoint is complete, and ``--resume`` scores."""
    cfg = run.cfg
    if not run.task.scores_at_end(cfg):
        return None
    model = sharding.scoring_model(run.model, cfg, run.env)    # fsdp: gathered to rank 0
    if not run.env.is_main:
        return None
    try:
        with run.signals.interruptible():
            run.scores = run.task.final_scores(model, run.corpus, cfg, run.env.device, run.log)
    except Interrupted as e:
        return e.signum
    run.model.train()
    if run.scores:
        report.log_line(run, {"step": run.step, **{f"test_{k}": v for k, v in run.scores.items()}})


__all__ = ["PEAK_BF16", "TrainConfig", "TrainingError", "flops_per_token", "train"]


def __getattr__(name: str):
    """The names this public module also serves, defined elsewhere (``splitnet.ALSO_SERVED``),
    looked up on first use: no module imports them through here."""
    from .. import served

    return served(__name__, name)
