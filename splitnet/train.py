"""Training a byte-level language model from any splitting scheme: ``train(TrainConfig)``.

The command line is ``splitnet train`` (:mod:`splitnet.cli.cmd_train`); several processes run
``torchrun ... -m splitnet train ...``. The loop, top to bottom::

    run = _setup(cfg, checkpoint)              # model, optimiser, schedule, RNG, data, files
    while run.step < cfg.steps:
        loss = _train_step(run)                # forward + backward over the micro-batches, update
        _log(run, loss)                        # metrics.jsonl, progress bar, validation
        _save(run) every ckpt_every steps, at the end and on a signal

Optimisation: AdamW (weight decay on matrices only), linear warmup then cosine decay to
``min_lr_ratio * lr``, gradient clipping by global norm, gradient accumulation. The loss is the
mean cross-entropy in nats per byte; ``bpb = loss / ln 2`` (bits per byte).

Batches: ``batch_size`` is the global number of sequences per optimiser step. Step ``s`` draws
its windows from a generator seeded by ``(seed, s)`` (:mod:`splitnet.data`); rank r of a world
of W takes the r-th contiguous block of that batch and splits it into ``grad_accum``
micro-batches; each micro-batch loss is divided by ``grad_accum`` and DDP averages over ranks, so
the gradient is the mean over the global batch whatever the number of processes, and the data
position of a checkpoint is just its step.

Nothing lost: the checkpoint (:mod:`splitnet.checkpoint`: config, weights, optimiser,
scheduler, RNG states, step, corpus fingerprint) is written atomically every ``ckpt_every``
steps, at the end and on SIGINT/SIGTERM; ``resume=True`` restores all of it and cuts
``metrics.jsonl`` back to the checkpoint's step, so a run killed with ``kill -9`` continues as if
uninterrupted. A non-finite loss stops the run without overwriting the last good checkpoint.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import signal
import statistics
import sys
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from . import checkpoint as ck
from . import data as D
from ._io import require_writable_dir
from .config import FIXED, FREE, SplitConfig, TrainConfig
from .refine import refined, refinement_at

# Dense bf16 tensor-core peak (FLOP/s) for MFU, matched on the CUDA device name.
PEAK_BF16 = {"H200": 989.4e12, "H100": 989.4e12, "A100": 312e12, "L40S": 362e12, "A10": 125e12,
             "4090": 165.2e12}


class TrainingError(RuntimeError):
    """Training cannot go on (non-finite loss)."""


# ----------------------------------------------------------------------------------------------
# configuration on --resume


def _explicit_fields(cfg: TrainConfig) -> set[str]:
    """Options that differ from their defaults (``model.x`` for model options): what a Python
    caller 'gave' when no explicit set is passed."""
    out = {f.name for f in dataclasses.fields(TrainConfig)
           if f.name != "model" and getattr(cfg, f.name) != _default(TrainConfig, f)}
    base = SplitConfig()
    out |= {f"model.{f.name}" for f in dataclasses.fields(SplitConfig)
            if f.name != "max_len" and getattr(cfg.model, f.name) != getattr(base, f.name)}
    return out


def _default(cls, f):
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def resume_config(given: TrainConfig, stored: dict, explicit: set[str] | None = None
                  ) -> TrainConfig:
    """The configuration of a resumed run: the checkpoint's, with the explicitly given options
    applied. A given option that defines the run (``fixed``) and differs is a ValueError naming
    it; ``free`` ones (steps, logging, device...) are taken; session ones always come from
    ``given``. ``explicit``: names given (``model.d_model`` for model options); default: the
    options of ``given`` that differ from their defaults."""
    explicit = _explicit_fields(given) if explicit is None else set(explicit)
    old = TrainConfig.from_dict({**stored, "out": given.out})
    changes, bad = {}, []
    for f in dataclasses.fields(TrainConfig):
        name, kind = f.name, f.metadata.get("resume", FIXED)
        if name == "model":
            continue
        if kind not in (FIXED, FREE):                      # session options: from `given`
            changes[name] = getattr(given, name)
        elif name in explicit and getattr(given, name) != getattr(old, name):
            if kind == FREE:
                changes[name] = getattr(given, name)
            elif not (name == "text" and _same_path(given.text, old.text)):
                bad.append(f"{name}: checkpoint {getattr(old, name)!r}, given "
                           f"{getattr(given, name)!r}")
    for name in sorted(e[6:] for e in explicit if e.startswith("model.")):
        if getattr(given.model, name) != getattr(old.model, name):
            bad.append(f"{name}: checkpoint {getattr(old.model, name)!r}, given "
                       f"{getattr(given.model, name)!r}")
    if bad:
        raise ValueError("incompatible checkpoint: --resume with options that differ from the "
                         "checkpoint (" + "; ".join(bad) + "); drop them, or start a new run "
                         "with another --out")
    return old.replace(**changes)


def _same_path(a, b) -> bool:
    return a is not None and b is not None and Path(a).resolve() == Path(b).resolve()


# ----------------------------------------------------------------------------------------------
# pieces


def lr_at(step: int, warmup: int, steps: int, min_lr_ratio: float) -> float:
    """Learning-rate multiplier for optimiser step ``step`` (0-based): linear warmup over
    ``warmup`` steps, then cosine from 1 to ``min_lr_ratio`` at ``steps``."""
    if step < warmup:
        return (step + 1) / warmup
    if steps <= warmup:
        return 1.0
    p = min(1.0, (step - warmup) / max(1, steps - warmup))
    return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * p))


def build_optimizer(model, cfg: TrainConfig):
    """AdamW with weight decay on matrices only; ``cfg.adamw`` picks the implementation (auto:
    fused on CUDA)."""
    from .accel import adamw_kwargs

    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    kw = adamw_kwargs(cfg.adamw, next(model.parameters()).device)
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), **kw)


def flops_per_token(model, context: int) -> float:
    """Training FLOPs per token, nanoGPT style: 6 x (matrix weights applied per token, each
    counted once per stage that uses it) + 12 x context x d_model per attention call + head."""
    from torch import nn

    from .stages import CONVECTION, DIFFUSION

    matmul, attn_calls = 0, 0
    for layer in model.layers:
        for name in (DIFFUSION, CONVECTION):
            mods = layer.field_modules(name)
            for m in mods:
                matmul += sum(x.weight.numel() for x in m.modules() if isinstance(x, nn.Linear))
            if name == DIFFUSION:
                attn_calls += len(mods)
    matmul += model.head.weight.numel()
    return 6.0 * matmul + 12.0 * attn_calls * context * model.d_model


def estimate_memory(cfg: TrainConfig, world: int = 1) -> float:
    """Rough bytes a training step needs on one process: weights, gradients and AdamW moments
    (16 bytes per parameter), plus activations kept for the backward pass: per token and stage
    about 18 d_model floats (norms, projections, residuals) and 4 d_ff for a feed-forward stage,
    and the attention matrix when no fused kernel applies (heads x context floats per token).
    Used to refuse a run that cannot fit before anything is allocated."""
    m = cfg.model
    sch = m.resolved_scheme()
    n_d = sch.n_stages("diffusion")
    n_c = sch.n_stages("convection")
    d, ff = m.d_model, m.d_ff
    params = 2 * 256 * d + m.n_layers * (n_d if m.weights == "per-stage" else 1) * 4 * d * d \
        + m.n_layers * 2 * d * ff * (n_d if m.weights == "per-stage" else 1)
    tokens = cfg.batch_size // (world * cfg.grad_accum) * cfg.context
    per_token = m.n_layers * (n_d * (18 * d + m.n_heads * cfg.context) + n_c * (6 * d + 4 * ff))
    per_token += 2 * 256     # logits and their float32 copy
    low = 2.0 * params if cfg.param_dtype == "bfloat16" else 0.0    # the bf16 compute copy
    return 16.0 * params + low + 4.0 * tokens * per_token


def _available_memory(device) -> float | None:
    if device.type == "cuda":
        return float(torch.cuda.mem_get_info(device)[0])
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _check_memory(cfg: TrainConfig, device, world: int, log) -> None:
    need, have = estimate_memory(cfg, world), _available_memory(device)
    if have is None:
        return
    if need > 0.9 * have:
        raise ValueError(f"this run needs about {need / 2**30:.1f} GiB per process "
                         f"(context {cfg.context}, batch {cfg.batch_size}, d_model "
                         f"{cfg.model.d_model}) but {device} has {have / 2**30:.1f} GiB free; "
                         f"lower --context or --batch-size, or raise --grad-accum")
    if need > 0.5 * have:
        log(f"warning: this run needs about {need / 2**30:.1f} GiB of the "
            f"{have / 2**30:.1f} GiB free on {device}")


# ----------------------------------------------------------------------------------------------
# processes and devices


@dataclass
class _Env:
    world: int
    rank: int
    local_rank: int
    device: torch.device

    @property
    def distributed(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def _env(device_name: str) -> _Env:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if device_name == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device is available")
    if device_name == "auto":
        device_name = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(f"cuda:{local}") if device_name == "cuda" else torch.device("cpu")
    return _Env(world, rank, local, dev)


# ----------------------------------------------------------------------------------------------
# signals: honoured at the next step boundary, or at once inside forward/backward/evaluation


class _Interrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class _Signals:
    """SIGINT/SIGTERM handlers for a run. Outside :meth:`interruptible` sections a signal only
    sets :attr:`received` (the loop saves at the next step boundary); inside (forward, backward,
    evaluation: nothing there changes the weights) it raises at once, so even a long step
    stops within seconds."""

    def __init__(self):
        self.received: int | None = None
        self._armed = False
        self._old: dict = {}

    def __enter__(self) -> _Signals:
        for s in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old[s] = signal.signal(s, self._handle)
            except ValueError:   # not the main thread: the default behaviour stays
                pass
        return self

    def __exit__(self, *exc) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)

    def _handle(self, signum, frame) -> None:
        self.received = signum
        if self._armed:
            self._armed = False
            raise _Interrupted(signum)

    def interruptible(self):
        sig = self

        class _Section:
            def __enter__(self):
                if sig.received is not None:
                    raise _Interrupted(sig.received)
                sig._armed = True

            def __exit__(self, *exc):
                sig._armed = False

        return _Section()


# ----------------------------------------------------------------------------------------------
# one run


@dataclass
class _Run:
    cfg: TrainConfig
    env: _Env
    corpus: D.Corpus
    model: torch.nn.Module        # the raw model (checkpoints, evaluation)
    step_fn: object               # callable (fwd, x, y) -> loss, compiled with --compile
    fwd: torch.nn.Module          # model + loss as trained (LMLoss, DDP-wrapped across ranks)
    opt: torch.optim.Optimizer
    sched: object
    step: int
    amp: object
    out: Path
    signals: _Signals
    fpt: float
    peak: float | None
    vstarts: torch.Tensor
    n_params: int
    log: object
    step_times: list = field(default_factory=list)
    pending: list = field(default_factory=list)   # _Pending steps not yet read back
    block_start: float = 0.0                      # when the first pending step began
    compile_scope: str | None = None
    last_val: float | None = None
    metrics: object = None
    bar: object = None
    tb: object = None             # tracking.TensorBoardLog with --tensorboard


def _loss(fwd, x, y):
    """Mean cross-entropy of one micro-batch: ``fwd`` is the :class:`~splitnet.losses.LMLoss`
    (model and loss in one module, maybe DDP-wrapped)."""
    return fwd(x, y)


def _seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2 ** 32)


def _build(cfg: TrainConfig, state: dict | None, env: _Env):
    """Model, optimiser and schedule, restored from ``state`` when resuming."""
    from .models import SplitTransformer

    _seed_everything(cfg.seed)
    model = SplitTransformer.from_config(cfg.model)
    if state is not None:
        try:
            model.load_state_dict(state["model"])
        except RuntimeError as e:
            raise ValueError(f"incompatible checkpoint: weights do not fit the model "
                             f"({str(e).splitlines()[0]})") from None
    model.to(env.device)
    opt = build_optimizer(model, cfg)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: lr_at(s, cfg.warmup, cfg.steps, cfg.min_lr_ratio))
    step = 0
    if state is not None:
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        for g in opt.param_groups:  # the horizon (steps) may have changed: recompute the lr
            g["lr"] = cfg.lr * lr_at(state["step"], cfg.warmup, cfg.steps, cfg.min_lr_ratio)
        step = state["step"]
        ck.set_rng_state(state["rng"], env.device)
    return model, opt, sched, step


def compile_scope(cfg: TrainConfig, model) -> str | None:
    """What ``--compile`` compiles: ``"model+loss"`` (one graph of network and loss),
    ``"regional"`` (each distinct field module, then head + loss), or None without --compile."""
    from .accel import regional_default

    if not cfg.compile:
        return None
    if cfg.compile_scope == "auto":
        return "regional" if regional_default(model) else "model+loss"
    return cfg.compile_scope


def _wrap(model, opt, cfg: TrainConfig, env: _Env):
    """Model and loss as trained (an LMLoss): on a bf16 copy with float32 master weights when
    asked; compiled together as one graph (the float32 upcast of the logits fuses into it;
    fullgraph, except under DDP, whose optimiser splits the graph at bucket boundaries) or
    region by region; DDP-wrapped across processes."""
    from . import accel
    from .losses import LMLoss

    compute = model
    if cfg.param_dtype == "bfloat16":
        compute = accel.MasterWeights(model, torch.bfloat16, opt).copy
    scope = compile_scope(cfg, model)
    if scope is not None:
        # dynamo caches compiled code per code object (_loss, Attention.forward, ...), at most
        # 8 variants each: after 8 differently shaped models in one process (a comparison
        # harness) the next would run eagerly with only a warning. Nothing compiled is shared
        # between runs, so each compiled run starts afresh.
        torch._dynamo.reset()
    fwd = LMLoss(compute, cfg.loss, cfg.loss_chunk)
    if scope == "regional":
        accel.compile_regions(accel.field_regions(compute), cfg.compile_mode)
        fwd.head_fn = torch.compile(fwd.head_loss, fullgraph=True, dynamic=False,
                                    **accel.compile_kwargs(cfg.compile_mode))
    if env.distributed:
        from torch.nn.parallel import DistributedDataParallel as DDP

        fwd = DDP(fwd, device_ids=[env.device.index] if env.device.type == "cuda" else None)
    if scope == "model+loss":
        return fwd, torch.compile(_loss, fullgraph=not env.distributed,
                                  **accel.compile_kwargs(cfg.compile_mode))
    return fwd, _loss


def _setup(cfg: TrainConfig, state: dict | None, corpus: D.Corpus, env: _Env, signals,
           log) -> _Run:
    model, opt, sched, step = _build(cfg, state, env)
    fwd, step_fn = _wrap(model, opt, cfg, env)
    cuda = env.device.type == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if cuda and cfg.amp else nullcontext()
    peak = cfg.peak_tflops * 1e12 if cfg.peak_tflops else None
    if peak is None and cuda:
        name = torch.cuda.get_device_name(env.device)
        peak = next((v for k, v in PEAK_BF16.items() if k in name), None)
    out = Path(cfg.out)
    return _Run(cfg=cfg, env=env, corpus=corpus, model=model, step_fn=step_fn, fwd=fwd,
                opt=opt, sched=sched, step=step, amp=amp, out=out, signals=signals,
                fpt=flops_per_token(model, cfg.context), peak=peak,
                vstarts=D.val_starts(corpus, cfg.eval_windows, cfg.context, seed=0),
                n_params=model.n_params(), log=log, compile_scope=compile_scope(cfg, model))


def _evaluate(run: _Run) -> float:
    """Mean validation loss over the fixed windows (each rank a contiguous share, all-reduced),
    on the float32 model, eagerly (compiled regions are bypassed rather than recompiled for
    another batch shape)."""
    from . import accel

    cfg, env = run.cfg, run.env
    run.model.eval()
    tot = torch.zeros((), dtype=torch.float64, device=env.device)
    n = 0
    share = run.vstarts.tensor_split(env.world)[env.rank]
    micro = cfg.batch_size // (env.world * cfg.grad_accum)
    with torch.no_grad(), run.amp, run.signals.interruptible(), accel.eager():
        for x, y in D.val_batches(run.corpus, share, max(micro, 32), cfg.context):
            x, y = x.to(env.device), y.to(env.device)
            logits = run.model(x)
            tot += F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1),
                                   reduction="sum").double()
            n += y.numel()
    cnt = torch.tensor(float(n), dtype=torch.float64, device=env.device)
    if env.distributed:
        import torch.distributed as dist

        dist.all_reduce(tot)
        dist.all_reduce(cnt)
    run.model.train()
    return float(tot / cnt)


@dataclass
class _Pending:
    """A finished step whose numbers are still on the device: read back at the next sync
    (:func:`_settle`), so a GPU step does not wait for the host."""

    step: int
    loss: torch.Tensor
    gnorm: torch.Tensor | None
    lr: float


def _train_step(run: _Run) -> _Pending:
    """One optimiser step over the micro-batches of step ``run.step``, with no host sync: the
    loss and gradient norm stay on the device until :func:`_settle` reads them (and stops the
    run on a non-finite loss before anything is saved)."""
    cfg, env = run.cfg, run.env
    accum = cfg.grad_accum
    micro = cfg.batch_size // (env.world * accum)
    x, y = D.train_batch(run.corpus, run.step, cfg.batch_size, cfg.context, cfg.seed,
                         env.rank, env.world)
    loss_sum = torch.zeros((), device=env.device)
    # ODE-consistent training: this step's forward may run a refinement of the own scheme
    k = refinement_at(cfg.seed, run.step, cfg.refine_prob, cfg.refine_substeps)
    with run.signals.interruptible(), refined(run.model, k) if k and k > 1 else nullcontext():
        for m in range(accum):
            xm = x[m * micro:(m + 1) * micro].to(env.device, non_blocking=True)
            ym = y[m * micro:(m + 1) * micro].to(env.device, non_blocking=True)
            sync = run.fwd.no_sync() if env.distributed and m < accum - 1 else nullcontext()
            with sync:      # all-reduce only on the last micro-batch
                with run.amp:
                    loss = run.step_fn(run.fwd, xm, ym)
                (loss / accum).backward()
            loss_sum += loss.detach()
    loss_t = loss_sum / accum
    if env.distributed:
        import torch.distributed as dist

        dist.all_reduce(loss_t)
        loss_t /= env.world
    gnorm = None
    if cfg.clip > 0:
        gnorm = torch.nn.utils.clip_grad_norm_(run.model.parameters(), cfg.clip)
    run.opt.step()
    run.sched.step()
    run.opt.zero_grad(set_to_none=True)
    run.step += 1
    return _Pending(run.step, loss_t.detach(), gnorm, run.opt.param_groups[0]["lr"])


def _save(run: _Run) -> None:
    """Checkpoint (rank 0) and the loss plot; every rank waits for it."""
    if run.env.is_main:
        ck.save({"version": ck.VERSION, "step": run.step,
                 "model_config": run.model.config.to_dict(), "model": run.model.state_dict(),
                 "optimizer": run.opt.state_dict(), "scheduler": run.sched.state_dict(),
                 "rng": ck.rng_state(run.env.device), "train_config": _stored(run.cfg),
                 "corpus": run.corpus.fingerprint(), "n_params": run.n_params,
                 "world_size": run.env.world}, run.out / ck.CKPT)
        if run.cfg.plot and (run.out / ck.METRICS).exists():
            from .plots import plot_metrics

            plot_metrics(ck.read_metrics(run.out / ck.METRICS), run.out / ck.PLOT,
                         title=f"{run.model.scheme.name} ({run.cfg.model.weights}), "
                               f"{run.n_params:,} params")
    if run.env.distributed:
        import torch.distributed as dist

        dist.barrier()


def _stored(cfg: TrainConfig) -> dict:
    """The run options a checkpoint keeps (session options are not stored)."""
    d = cfg.to_dict()
    for f in dataclasses.fields(TrainConfig):
        if f.metadata.get("resume") not in (FIXED, FREE) and f.name != "model":
            d.pop(f.name, None)
    return d


def _record(run: _Run, p: _Pending, loss: float, gnorm, dt: float) -> dict:
    cfg = run.cfg
    tokens = cfg.batch_size * cfg.context
    rec = {"step": p.step, "loss": loss, "bpb": loss / D.LN2, "lr": p.lr,
           "tokens": p.step * tokens, "tok_per_s": tokens / dt, "step_s": dt}
    if gnorm is not None:
        rec["grad_norm"] = gnorm
    if run.peak:
        rec["mfu"] = run.fpt * rec["tok_per_s"] / run.peak
    return rec


def _log(run: _Run, rec: dict) -> None:
    if not run.env.is_main:
        return
    run.metrics.write(json.dumps(rec) + "\n")
    run.metrics.flush()
    if run.tb is not None:
        run.tb.write(rec)
    speed = _steady(run)
    post = {"loss": f"{rec['loss']:.3f}", "bpb": f"{rec['bpb']:.3f}",
            "tok/s": f"{speed['tok_per_s']:.0f}"}
    if "mfu" in speed:
        post["mfu"] = f"{speed['mfu']:.1%}"
    if run.last_val is not None:
        post["val_bpb"] = f"{run.last_val:.3f}"
    run.bar.set_postfix(post, refresh=False)
    run.bar.update(1)


def _steady(run: _Run) -> dict:
    """Steady-state speed: the median over this session's steps after the warm-up ones (the
    first tenth, at least the first two: compilation, allocator and cache warm-up), never an
    average that includes them. ``compile_s`` (with --compile): the first step's excess over
    that median, i.e. tracing and code generation of forward and backward."""
    ts = run.step_times
    if not ts:
        return {"tok_per_s": 0.0}
    skip = min(len(ts) - 1, max(2, len(ts) // 10))
    med = statistics.median(ts[skip:])
    out = {"tok_per_s": run.cfg.batch_size * run.cfg.context / med, "step_s": med,
           "first_step_s": ts[0], "warmup_steps": skip,
           "compile_s": max(0.0, ts[0] - med) if run.cfg.compile else None}
    if run.peak:
        out["mfu"] = run.fpt * out["tok_per_s"] / run.peak
    return out


def _stop_requested(run: _Run) -> int | None:
    sig = run.signals.received
    if run.env.distributed:   # every rank must agree to stop at the same step
        import torch.distributed as dist

        flag = torch.tensor([0 if sig is None else int(sig)], device=run.env.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        sig = int(flag.item()) or None
    return sig


def _sync_every(run: _Run) -> int:
    """Steps between host syncs: ``sync_every`` if given, else 10 on CUDA and 1 on the CPU
    (where a sync costs nothing)."""
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
            raise TrainingError(
                f"non-finite training loss ({loss}) at step {p.step}: stopping. The last good "
                f"checkpoint in {run.out / ck.CKPT} was left untouched; lower --lr, raise "
                f"--warmup or set --clip, then --resume")
    run.step_times += [dt] * len(pending)
    recs = [_record(run, p, loss, g, dt) for p, loss, g in zip(pending, losses, gnorms)]
    s = run.step
    if evaluate and (s % run.cfg.eval_every == 0 or s == run.cfg.steps):
        try:
            vl = _evaluate(run)
        except _Interrupted:
            for rec in recs:        # the steps themselves are complete: keep their lines
                _log(run, rec)
            raise
        run.last_val = vl / D.LN2
        recs[-1].update(val_loss=vl, val_bpb=run.last_val)
    for rec in recs:
        _log(run, rec)


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
        try:
            _one_step(run)
        except _Interrupted as e:
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


def _prepare(cfg: TrainConfig, explicit, env: _Env):
    """Validated configuration and the checkpoint to resume from (read-only: nothing is
    written yet)."""
    out = Path(cfg.out)
    require_writable_dir(out)
    state = None
    if cfg.resume:
        state = ck.load(out, trust=cfg.trust_checkpoint)
        if "train_config" not in state:
            raise ValueError(f"incompatible checkpoint {out / ck.CKPT}: it has no training "
                             f"options (not written by splitnet train)")
        cfg = resume_config(cfg, state["train_config"], explicit)
        if cfg.steps < state["step"]:
            raise ValueError(f"--steps {cfg.steps} is below the checkpoint's step "
                             f"{state['step']}")
        if SplitConfig.from_dict(state["model_config"]) != cfg.model:
            raise ValueError("incompatible checkpoint: its model config differs from its run "
                             "options (edited by hand?)")
    elif (out / ck.CKPT).exists() and not cfg.overwrite:
        raise ValueError(f"{out / ck.CKPT} already exists: pass --resume to continue it or "
                         f"--overwrite to start again")
    if cfg.param_dtype != "float32" and env.distributed:
        raise ValueError(f"--param-dtype {cfg.param_dtype} runs on one process only (its master "
                         f"gradients are taken before DDP averages them); use float32 with "
                         f"torchrun")
    if cfg.batch_size % (env.world * cfg.grad_accum):
        raise ValueError(f"--batch-size {cfg.batch_size} must be divisible by world size "
                         f"{env.world} x --grad-accum {cfg.grad_accum}")
    if cfg.tensorboard_dir() is not None and env.is_main:
        from .tracking import check

        check(cfg.tensorboard_dir())
    return cfg, state


def _corpus(cfg: TrainConfig, state: dict | None, log) -> D.Corpus:
    corpus = D.load_corpus(cfg.text, cfg.val_fraction)
    D.check_context(corpus, cfg.context)
    if state is not None and state.get("corpus") != corpus.fingerprint():
        msg = (f"the corpus changed since the checkpoint was written (checkpoint: "
               f"{D.describe_fingerprint(state.get('corpus'))}; now: "
               f"{D.describe_fingerprint(corpus.fingerprint())})")
        if not cfg.allow_data_change:
            raise ValueError(msg + "; pass --allow-data-change to go on with the new data")
        log(f"warning: {msg}; going on (--allow-data-change)")
    return corpus


def _plan(cfg: TrainConfig, explicit, env: _Env, log):
    cfg, state = _prepare(cfg, explicit, env)
    _check_memory(cfg, env.device, env.world, log)
    corpus = _corpus(cfg, state, log)
    return cfg, state, corpus


def plan(cfg: TrainConfig, explicit: set[str] | None = None) -> tuple[TrainConfig, D.Corpus]:
    """What :func:`train` would run (the configuration after ``--resume`` merging, and the
    corpus), with every check :func:`train` makes first; writes nothing."""
    env = _env(cfg.device)
    cfg, _, corpus = _plan(cfg, explicit, env, lambda msg: print(msg, file=sys.stderr))
    return cfg, corpus


@contextmanager
def _setup_phase(signals: _Signals):
    """Set-up work (reading the corpus, building and compiling the model): a signal stops it at
    once as a KeyboardInterrupt (the command line prints one line, exit 130)."""
    try:
        with signals.interruptible():
            yield
    except _Interrupted:
        raise KeyboardInterrupt from None


def train(cfg: TrainConfig, explicit: set[str] | None = None) -> dict:
    """Run (or resume) training; returns a summary dict (steady-state speed included).

    ``explicit``: with ``cfg.resume``, the option names the caller gave (``model.x`` for model
    options); default: those that differ from their defaults. Raises ValueError on bad input
    (before anything is written), TrainingError on a non-finite loss."""
    from .accel import sdpa_backend

    if not isinstance(cfg, TrainConfig):
        raise TypeError(f"train() takes a TrainConfig, got {type(cfg).__name__}")
    t_start = time.perf_counter()
    env = _env(cfg.device)
    log = (lambda msg: print(msg, file=sys.stderr, flush=True)) if env.is_main else \
        (lambda msg: None)
    with _Signals() as signals:
        with _setup_phase(signals):          # a signal before the first step: stop, write nothing
            cfg, state, corpus = _plan(cfg, explicit, env, log)
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        if env.distributed:
            import torch.distributed as dist

            if env.device.type == "cuda":
                torch.cuda.set_device(env.device)
            dist.init_process_group("nccl" if env.device.type == "cuda" else "gloo")
        try:
            lock = ck.RunLock(cfg.out) if env.is_main else nullcontext()
            with lock, sdpa_backend(cfg.sdpa):
                with _setup_phase(signals):
                    run = _setup(cfg, state, corpus, env, signals, log)
                return _session(run, t_start)
        finally:
            if env.distributed:
                import torch.distributed as dist

                dist.destroy_process_group()


def _open_files(run: _Run) -> None:
    """Under the lock: clear what an overwritten run left, trim metrics on resume."""
    if not run.env.is_main:
        return
    if run.cfg.overwrite:
        prev = ck.move_aside(run.out)
        if prev is not None:
            run.log(f"--overwrite: the earlier run in {run.out} was moved to {prev}")
    elif not run.cfg.resume and (run.out / ck.CKPT).exists():
        raise ValueError(f"{run.out / ck.CKPT} appeared while this run started: another "
                         f"process wrote it; pass --resume or --overwrite")
    ck.remove_torn_saves(run.out)
    if run.cfg.resume:
        ck.truncate_metrics(run.out / ck.METRICS, run.step)
    else:
        (run.out / ck.METRICS).unlink(missing_ok=True)
    run.metrics = open(run.out / ck.METRICS, "a")
    if run.cfg.tensorboard_dir() is not None:
        from .tracking import TensorBoardLog

        run.tb = TensorBoardLog(run.cfg.tensorboard_dir(), run.step)
        run.log(f"TensorBoard events: {run.tb.log_dir} (tensorboard --logdir {run.tb.log_dir})")


def _session(run: _Run, t_start: float) -> dict:
    from tqdm.auto import tqdm

    cfg = run.cfg
    _open_files(run)
    run.log(f"splitnet train: {run.corpus.describe()}")
    run.log(f"model: scheme={run.model.scheme.name} [{run.model.scheme.diagram()}] "
            f"weights={cfg.model.weights} d_model={cfg.model.d_model} layers="
            f"{cfg.model.n_layers} params={run.n_params:,}; device={run.env.device} world="
            f"{run.env.world} batch={cfg.batch_size}x{cfg.context} accum={cfg.grad_accum}; "
            f"steps {run.step} -> {cfg.steps}")
    run.bar = tqdm(total=cfg.steps, initial=run.step, unit="step", dynamic_ncols=True,
                   disable=not run.env.is_main or not cfg.progress, file=sys.stderr)
    t_loop = time.perf_counter()
    try:
        sig = _loop(run)
    finally:
        run.bar.close()
        if run.metrics is not None:
            run.metrics.close()
        if run.tb is not None:
            run.tb.close()
    return _summary(run, sig, t_loop - t_start)


def _summary(run: _Run, sig, startup_s: float) -> dict:
    cfg = run.cfg
    speed = _steady(run)
    summary = {"step": run.step, "steps": cfg.steps, "val_bpb": run.last_val,
               "n_params": run.n_params, "out": str(run.out), "signal": sig,
               "flops_per_token": run.fpt, "startup_s": startup_s,
               "compile_scope": run.compile_scope, **speed}
    if sig is not None:
        run.log(f"\nreceived signal {sig}: checkpoint saved at step {run.step} in "
                f"{run.out / ck.CKPT}; continue with --resume")
    elif run.step == cfg.steps:
        vb = f"{run.last_val:.4f}" if run.last_val is not None else "n/a (no step run)"
        mfu = f", MFU {speed['mfu']:.1%}" if "mfu" in speed else ""
        first = ""
        if run.step_times:
            comp = (f", compile {speed['compile_s']:.1f} s ({run.compile_scope})"
                    if cfg.compile else "")
            first = (f"; start-up {startup_s:.1f} s{comp}, first step "
                     f"{speed['first_step_s']:.2f} s")
        run.log(f"done: step {run.step}, val bpb {vb}, {speed['tok_per_s']:.0f} tokens/s "
                f"steady (median after {speed.get('warmup_steps', 0)} warm-up steps){mfu}"
                f"{first}; {run.out}/{{{ck.CKPT},{ck.METRICS},{ck.PLOT}}}")
    return summary


__all__ = ["PEAK_BF16", "TrainConfig", "TrainingError", "build_optimizer", "estimate_memory",
           "flops_per_token", "lr_at", "plan", "resume_config", "train"]
