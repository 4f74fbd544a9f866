"""What a training run is set up from (:func:`splitnet.training.train.train` runs it).

* the configuration on ``--resume`` (:func:`resume_config`),
* the optimiser and its schedule (:func:`build_optimizer`, :func:`lr_at`),
* FLOPs per token for MFU, and the memory a step needs (:func:`estimate_memory`, checked
  against the device before anything is allocated),
* the model built or restored (:func:`build_model`) and wrapped as trained: bf16 copy, compiled,
  DDP (:func:`wrap_model`, :func:`compile_scope`),
* the checks, the checkpoint to resume from and the corpus (:func:`plan_run`; :func:`plan` for
  the command line's ``--dry-run``): nothing is written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import random
import sys
from pathlib import Path

import numpy as np
import torch

from .._io import require_writable_dir
from ..configs.options import FIXED, FREE
from ..nets.cost import count_params, forward_flops
from ..nets.stack import stack_class
from ..runenv import RunEnv, available_memory, run_env
from ..runs import checkpoint as ck
from ..runs import data as D
from ..runs import shards
from ..runs.lock import RunLock
from ..tasks.contract import check_batch, check_fingerprint
from ..tasks.task import check_task_options, get_task
from . import sharding
from .config import TrainConfig, option_fields
from .depths import check_resumed

__all__ = ["autocast", "build_model", "build_optimizer", "compile_scope",
           "describe_model", "estimate_memory", "flops_per_token", "lr_at", "plan", "plan_run",
           "resume_config", "step_batch", "wrap_model"]

# ----------------------------------------------------------------------------------------------
# configuration on --resume


def _explicit_fields(cfg: TrainConfig) -> set[str]:
    """Options that differ from their defaults (``model.x`` for model options): what a Python
    caller 'gave' when no explicit set is passed."""
    out = {f.name for attr, f in option_fields(cfg.task)
           if getattr(cfg, f.name) != f.default}
    base = type(cfg.model)()
    derived = ("max_len", "src_vocab", "tgt_vocab", "pad_id", "bos_id", "eos_id")  # set by runs
    out |= {f"model.{f.name}" for f in dataclasses.fields(base)
            if f.name not in derived and getattr(cfg.model, f.name) != getattr(base, f.name)}
    return out


def resume_config(given: TrainConfig, stored: dict, explicit: set[str] | None = None
                  ) -> TrainConfig:
    """The configuration of a resumed run: the checkpoint's, with the explicitly given options
    applied. A given option that defines the run (``fixed``) and differs is a ValueError naming
    it; ``free`` ones (steps, logging, device...) are taken; session ones always come from
    ``given``. ``explicit``: names given (``model.d_model`` for model options); default: the
    options of ``given`` that differ from their defaults."""
    explicit = _explicit_fields(given) if explicit is None else set(explicit)
    old = TrainConfig.from_dict({**stored, "out": given.out})
    # the task is the checkpoint's: an option of the other task is refused, as on a new run
    check_task_options(old.task, sorted(explicit - {"task"}), resumed=True)
    changes, bad = {}, []
    for _, f in option_fields(old.task):
        name, kind = f.name, f.metadata.get("resume", FIXED)
        if kind not in (FIXED, FREE):                      # session options: from `given`
            changes[name] = getattr(given, name)
        elif name in explicit and getattr(given, name) != getattr(old, name):
            # the corpus may be spelled otherwise or have moved (issue 49 D10): its content is
            # compared by fingerprint once read (--allow-data-change for other content)
            if kind == FREE or name in ("pairs", "text"):
                changes[name] = getattr(given, name)
            else:
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


# ----------------------------------------------------------------------------------------------
# optimiser, schedule, FLOPs, memory


def lr_at(step: int, warmup: int, steps: int, min_lr_ratio: float,
          schedule: str = "cosine") -> float:
    """Learning-rate multiplier for optimiser step ``step`` (0-based): linear warmup over
    ``warmup`` steps, then cosine from 1 to ``min_lr_ratio`` at ``steps``, or (``schedule=
    "inverse-sqrt"``, Vaswani et al.) ``sqrt(warmup / (step + 1))``."""
    if step < warmup:
        return (step + 1) / warmup
    if schedule == "inverse-sqrt":
        return math.sqrt(max(1, warmup) / (step + 1))
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
    """Training FLOPs per token for MFU: 3 x the forward matmul FLOPs of the model's closed form
    (:func:`splitnet.nets.cost.forward_flops`: every field evaluation -- each stage times the
    sub-flow
    method's evaluations -- at ``context`` tokens, attention dense, plus the head), the nanoGPT
    convention (6 x weights applied per token + 12 x context x d_model per attention call). A
    method with an adaptive number of evaluations (``exact``) counts one per stage, a lower
    bound."""
    from ..integrators.subflows import get_method

    if hasattr(model, "decoder_layers"):     # an encoder–decoder: nanoGPT's 6 N (no attention)
        return 6.0 * model.n_params(embeddings=False)
    evals = get_method(model.config.method).evals or 1
    return 3.0 * forward_flops(model.config, context, evals=evals)


def estimate_memory(cfg: TrainConfig, world: int = 1, device=None) -> float:
    """Rough bytes a training step needs on one process: weights, gradients and AdamW moments
    (16 bytes per parameter, counted exactly; 2 more for a bf16 compute copy), plus what the
    backward pass keeps per token and stage (Korthikanti et al. 2022, in bytes of 16-bit
    activations: an attention stage 13 d_model -- its norm, q, k, v, output, dropout mask --
    and the probabilities 5 heads x context unless a fused kernel keeps them out, as flash and
    memory-efficient SDPA do on CUDA; a feed-forward stage 5 d_model + 4 d_ff; twice as much
    in float32), plus the logits (compute dtype, float32 copy, its gradient) of every token, or
    of one chunk under ``--loss chunked``. A reversible network keeps one layer's worth and the
    final pair. Measured on an H200 (2026-11-26, bf16 autocast, eager, Strang, d_model 768,
    ``benchmarks/gpu_reversible.py``): 46.4 KB per token and layer, 42.2 KB by this rule.
    Used to refuse a run that cannot fit before anything is allocated."""
    task = get_task(cfg.task)
    own = task.memory(cfg, world, _on_cuda(cfg, device))    # an encoder–decoder's own rule
    if own is not None:
        return own
    m = task.planned_model(cfg)         # (a masked LM's BPE: the vocabulary it will give)
    sch = m.resolved_scheme()
    n_d = sch.n_stages("diffusion")
    n_c = sch.n_stages("convection")
    d, ff = m.d_model, m.d_ff
    params = count_params(m)[0]                     # exact, from the field kinds' closed forms
    tokens = cfg.batch_size // (world * cfg.grad_accum) * cfg.context
    cuda = _on_cuda(cfg, device)
    width = 1.0 if cfg.param_dtype == "bfloat16" or (cuda and cfg.amp) else 2.0  # x 16-bit
    probs = 0.0 if cuda else 5.0 * width * m.n_heads * cfg.context
    layer = n_d * (13 * d * width + probs) + n_c * (5 * d + 4 * ff) * width
    kept = stack_class(m).saved_bytes(layer, m.n_layers, d * width)
    rows = min(tokens, cfg.loss_chunk) if cfg.loss == "chunked" else tokens
    logits = rows * m.vocab_size * (2 * width + 8)
    low = 2.0 * params if cfg.param_dtype == "bfloat16" else 0.0    # the bf16 compute copy
    return 16.0 * params + low + tokens * kept + logits


def autocast(cfg: TrainConfig, device: torch.device):
    """The context forward passes run in: bf16 autocast on CUDA for float32 weights (``--amp``,
    the default). Not for ``--param-dtype bfloat16``: its weights are bf16 already, and
    autocast would only run norms and softmax in float32 and cast back, round trips the
    benchmarks' master-weight lever does not make (on an H200, 2026-11-26: the trainer under
    both at 34.7% MFU against the lever's 43.0% in ``benchmarks/bench_layers.py``; 41.2% with
    this rule, measured again the same day)."""
    if device.type == "cuda" and cfg.amp and cfg.param_dtype == "float32":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _on_cuda(cfg: TrainConfig, device) -> bool:
    if device is not None:
        return torch.device(device).type == "cuda"
    return cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available())


def _check_memory(cfg: TrainConfig, device, world: int, log) -> None:
    need, have = estimate_memory(cfg, world, device), available_memory(device)
    if have is None:
        return
    if need > 0.9 * have:     # a margin: the estimate is rough, the allocator fragments
        raise ValueError(f"this run needs about {need / 2**30:.1f} GiB per process "
                         f"(context {cfg.context}, batch {cfg.batch_size}, d_model "
                         f"{cfg.model.d_model}) but {device} has {have / 2**30:.1f} GiB free "
                         f"(a run may take 90%); "
                         f"lower --context or --batch-size, or raise --grad-accum")
    if need > 0.5 * have:
        log(f"warning: this run needs about {need / 2**30:.1f} GiB of the "
            f"{have / 2**30:.1f} GiB free on {device}")


# ----------------------------------------------------------------------------------------------
# the model as trained


def _loss(fwd, *batch):
    """Mean cross-entropy of one micro-batch: ``fwd`` is the
    :class:`~splitnet.tasks.losses.LMLoss`
    (``batch`` = inputs, targets) or :class:`~splitnet.translate.translation.Seq2SeqLoss` (source,
    target
    in, target out, source padding): model and loss in one module, maybe DDP-wrapped."""
    return fwd(*batch)


def _seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2 ** 32)


_DAMAGED = (KeyError, TypeError, ValueError, RuntimeError, IndexError)


def _damaged(cfg: TrainConfig, e: BaseException) -> ValueError:
    return ValueError(f"{Path(cfg.out) / ck.CKPT}: its optimiser, schedule or random state does "
                      f"not fit this run ({type(e).__name__}: "
                      f"{str(e).splitlines()[0] if str(e) else ''}); the file was edited or "
                      f"damaged")


def build_model(cfg: TrainConfig, state: dict | None, env: RunEnv):
    """Model, optimiser and schedule, restored from ``state`` when resuming (into the unsharded
    model; then, under ``--parallel fsdp``, sharded: :mod:`splitnet.training.sharding`)."""
    _seed_everything(cfg.seed)
    # resumed: the checkpoint's depth (--grow-at may have grown it; _prepare checked it)
    model = get_task(cfg.task).build(cfg.model if state is None else
                                     type(cfg.model).from_dict(state["model_config"]))
    folder = (state or {}).get(shards.FOLDER)         # (read lazily: see _prepare)
    if folder and not (env.distributed and cfg.parallel == "fsdp"):
        state = {**state, **shards.read_whole(folder)}
        folder = None
    if state is not None and not folder:
        try:
            model.load_state_dict(state["model"])
        except RuntimeError as e:
            raise ValueError(f"incompatible checkpoint: weights do not fit the model "
                             f"({str(e).splitlines()[0]})") from None
    model.to(env.device)
    opt = build_optimizer(model, cfg)
    step = 0
    if state is not None:
        try:
            if not folder:
                sharding.load_optimizer(model, opt, state["optimizer"])
            ck.set_rng_state(state["rng"], env.device)
        except _DAMAGED as e:
            raise _damaged(cfg, e) from None
    rebuild = functools.partial(build_optimizer, cfg=cfg)     # on the sharded model
    if folder:                                 # each rank reads its own chunks of the shards
        opt = sharding.load_shards(model, rebuild, folder, env.device, env.world, cfg.amp,
                                   env.tp)
    elif env.distributed and cfg.parallel == "fsdp":   # shards after the full state is in
        opt = sharding.restore(model, opt, rebuild, env.device, env.world, cfg.amp, env.tp)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: lr_at(s, cfg.warmup, cfg.steps, cfg.min_lr_ratio, cfg.schedule))
    if state is not None:
        try:
            sched.load_state_dict(state["scheduler"])
        except _DAMAGED as e:
            raise _damaged(cfg, e) from None
        for g in opt.param_groups:  # the horizon (steps) may have changed: recompute the lr
            g["lr"] = cfg.lr * lr_at(state["step"], cfg.warmup, cfg.steps, cfg.min_lr_ratio,
                                     cfg.schedule)
        step = state["step"]
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


def wrap_model(model, opt, cfg: TrainConfig, env: RunEnv):
    """Model and loss as trained (the task's loss module): on a bf16 copy with float32 master
    weights when asked; compiled together as one graph (the float32 upcast of the logits fuses
    into it; fullgraph, except under DDP, whose optimiser splits the graph at bucket
    boundaries) or region by region; DDP-wrapped across processes."""
    from . import accel

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
    from .elastic import training_loss

    # at several depths (--train-depths, --layer-drop, --early-exit): one module, elastic.py
    fwd = training_loss(get_task(cfg.task), compute, cfg) or get_task(cfg.task).loss(compute, cfg)
    if scope == "regional":
        accel.compile_regions(accel.field_regions(compute), cfg.compile_mode)
    if scope == "regional" and hasattr(fwd, "head_loss"):     # LMLoss: the last region
        fwd.head_fn = torch.compile(fwd.head_loss, fullgraph=True, dynamic=False,
                                    **accel.compile_kwargs(cfg.compile_mode))
    if env.distributed and cfg.parallel == "ddp":     # fsdp: the model is sharded already
        from torch.nn.parallel import DistributedDataParallel as DDP

        fwd = DDP(fwd, device_ids=[env.device.index] if env.device.type == "cuda" else None,
                  find_unused_parameters=cfg.layer_drop > 0)   # a dropped layer has no grad
    if scope == "model+loss":
        return fwd, torch.compile(_loss, fullgraph=not env.distributed,
                                  **accel.compile_kwargs(cfg.compile_mode))
    return fwd, _loss


def step_batch(cfg: TrainConfig, corpus, step: int, env: RunEnv) -> tuple[list, int]:
    """This rank's share of step ``step``'s batch (tensors split row-wise into micro-
    batches) and the tokens the whole step trains on (:meth:`splitnet.tasks.task.Task.batch`:
    ``batch_size x context`` bytes for a language model, the target tokens of the global batch
    for translation)."""
    task = get_task(cfg.task)
    out = task.batch(cfg, corpus, step, env.replica, env.replicas)
    return check_batch(task, out, step, cfg.batch_size // env.replicas, cfg.grad_accum)


def describe_model(m) -> str:
    """The network in one line of the start-up report: scheme(s), diagram(s), layers."""
    if hasattr(m, "decoder_layers"):
        return (f"encoder {m.encoder_scheme.name} [{m.encoder_scheme.diagram()}] x "
                f"{m.config.n_encoder_layers}, decoder {m.decoder_scheme.name} "
                f"[{m.decoder_scheme.diagram()}] x {m.config.n_decoder_layers};")
    return f"scheme={m.scheme.name} [{m.scheme.diagram()}] layers={m.config.n_layers}"


# ----------------------------------------------------------------------------------------------
# the plan: every check before anything is written


def _prepare(cfg: TrainConfig, explicit, env: RunEnv):
    """Validated configuration and the checkpoint to resume from (read-only: nothing is
    written yet)."""
    out = Path(cfg.out)
    require_writable_dir(out)
    if (out / "config.json").is_file() and not (out / ck.CKPT).exists():
        # an exported model (splitnet export, save_pretrained) would sit beside the run and
        # outlive it: 'sample --hf' would read its old weights as the run's
        raise ValueError(f"--out {out} holds a Hugging Face model folder (config.json): give "
                         f"the run a folder of its own")
    state = None
    if cfg.resume:
        # several processes: a sharded checkpoint's shapes only, each rank then reading its
        # own chunks (build_model)
        state = ck.load(out, trust=cfg.trust_checkpoint, whole=not env.distributed)
        if "train_config" not in state:
            raise ValueError(f"incompatible checkpoint {out / ck.CKPT}: it has no training "
                             f"options (not written by splitnet train)")
        ck.check_training_state(state, out)
        ck.check_weights(state, out)
        cfg = resume_config(cfg, state["train_config"], explicit)
        if cfg.steps < state["step"]:
            raise ValueError(f"--steps {cfg.steps} is below the checkpoint's step "
                             f"{state['step']}")
        if cfg.stop_at is not None and cfg.stop_at < state["step"]:
            raise ValueError(f"--stop-at {cfg.stop_at} is below the checkpoint's step "
                             f"{state['step']}: the run is past it already")
        # the network at its depth of the moment (--grow-at: the run's, grown)
        check_resumed(cfg, type(cfg.model).from_dict(state["model_config"]), state["step"])
    elif (out / ck.CKPT).exists() and not cfg.overwrite:
        RunLock(out).refuse_if_held()        # a live run there: say so, not 'pass --resume'
        raise ValueError(f"{out / ck.CKPT} already exists: pass --resume to continue it or "
                         f"--overwrite to start again")
    if explicit is not None:         # what the caller gave and the run would not read
        cfg.check_given(explicit)
    from .accel import check_sdpa

    m = cfg.model
    amp = env.device.type == "cuda" and cfg.amp
    check_sdpa(cfg.sdpa, env.device, m.d_model // m.n_heads,
               torch.bfloat16 if amp or cfg.param_dtype == "bfloat16" else torch.float32)
    if cfg.param_dtype != "float32" and env.distributed:
        raise ValueError(f"--param-dtype {cfg.param_dtype} runs on one process only (its master "
                         f"gradients are taken before DDP averages them); use float32 with "
                         f"torchrun")
    env.tp = cfg.tp               # tp ranks share a batch (RunEnv)
    if cfg.tp > 1:
        from .tensor_parallel import check_tp

        check_tp(cfg.tp, env.world, cfg.model)
    if cfg.batch_size % (env.replicas * cfg.grad_accum):
        raise ValueError(f"--batch-size {cfg.batch_size} must be divisible by the data-"
                         f"parallel ranks {env.replicas} x --grad-accum {cfg.grad_accum}")
    if cfg.tensorboard_dir() is not None and env.is_main:
        from .tracking import check

        check(cfg.tensorboard_dir())
    return cfg, state


def _corpus(cfg: TrainConfig, state: dict | None, log):
    """The task's data, refused on ``--resume`` if it is not the checkpoint's."""
    task = get_task(cfg.task)
    corpus = task.corpus(cfg, state, log)
    check_fingerprint(task, corpus)      # plain data: stored, and compared on --resume
    task.check_data(cfg, state, corpus, log)
    return corpus


def plan_run(cfg: TrainConfig, explicit, env: RunEnv, log):
    """The checked configuration, the checkpoint state to resume from (or None) and the
    corpus, for :func:`splitnet.training.train.train` in the environment ``env``."""
    cfg, state = _prepare(cfg, explicit, env)
    if cfg.parallel == "fsdp" and not env.distributed:
        log("note: --parallel fsdp shards over the processes torchrun starts; this run is one "
            "process, so nothing is sharded")
    task = get_task(cfg.task)
    task.requires(cfg)
    _check_memory(cfg, env.device, env.world, log)
    corpus = _corpus(cfg, state, log)
    return task.fit(cfg, corpus, state, env.device), state, corpus


def plan(cfg: TrainConfig, explicit: set[str] | None = None) -> tuple[TrainConfig, D.Corpus]:
    """What :func:`~splitnet.training.train.train` would run (the configuration after ``--resume``
    merging, and the corpus), with every check it makes first; writes nothing."""
    env = run_env(cfg.device)
    cfg, _, corpus = plan_run(cfg, explicit, env, lambda msg: print(msg, file=sys.stderr))
    return cfg, corpus
