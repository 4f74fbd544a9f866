"""``splitnet train``: a byte-level language model from any splitting scheme.

One entry point for one CPU, one GPU and many (``torchrun ... -m splitnet.train``)::

    splitnet train --steps 20 --out runs/demo --device cpu
    splitnet train --resume --steps 30 --out runs/demo
    torchrun --standalone --nproc_per_node=8 -m splitnet.train --device cuda --out runs/big ...

Optimisation: AdamW (weight decay on matrices only), linear warmup then cosine decay to
``min_lr_ratio * lr``, gradient clipping by global norm, gradient accumulation. The loss is the
mean cross-entropy in nats per byte; ``bpb = loss / ln 2`` (bits per byte).

Batches: ``--batch-size`` is the global number of sequences per optimiser step. Step ``s``
draws its windows from a generator seeded by ``(seed, s)`` (:mod:`splitnet.data`); rank r of a
world of W takes the r-th contiguous block of that batch and splits it into ``--grad-accum``
micro-batches; each micro-batch loss is divided by ``grad_accum`` and DDP averages over ranks, so
the gradient is the mean over the global batch whatever the number of processes, and the data
position of a checkpoint is just its step.

Nothing lost: ``checkpoint.pt`` (model config + weights, optimiser, scheduler, python / numpy /
torch / cuda RNG states, step) is written to a temporary file and renamed over the old one, every
``--ckpt-every`` steps, at the end and on SIGINT/SIGTERM. ``--resume`` restores all of it and cuts
``metrics.jsonl`` back to the checkpoint's step, so a run killed with ``kill -9`` continues as if
uninterrupted. A non-finite loss stops the run without overwriting the last good checkpoint.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from . import data as D

CKPT, METRICS, PLOT = "checkpoint.pt", "metrics.jsonl", "loss.png"
CKPT_VERSION = 1

# Keys that define a run: fixed by the checkpoint on --resume (a different explicit value is an
# error, a missing one is taken from the checkpoint). Everything else (steps, logging, device,
# compile) may change between sessions.
MODEL_KEYS = ("scheme", "weights", "d_model", "n_heads", "n_layers", "d_ff", "context",
              "step_size", "gate", "gate_layers", "dropout", "method", "activation")
RUN_KEYS = ("text", "val_fraction", "batch_size", "grad_accum", "lr", "min_lr_ratio", "warmup",
            "weight_decay", "beta1", "beta2", "clip", "seed", "eval_windows")
DEFAULTS = {
    "scheme": "lie-trotter", "weights": "shared", "d_model": 128, "n_heads": 4, "n_layers": 4,
    "d_ff": None, "context": 128, "step_size": 1.0, "gate": None, "gate_layers": None,
    "dropout": 0.0, "method": "euler", "activation": "gelu", "text": None, "val_fraction": 0.05,
    "batch_size": 16, "grad_accum": 1, "lr": 2e-3, "min_lr_ratio": 0.1, "warmup": 50,
    "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.99, "clip": 1.0, "seed": 0,
    "eval_windows": 256}
DEFAULT_STEPS = 600

# Dense bf16 tensor-core peak (FLOP/s) for MFU, matched on the CUDA device name.
PEAK_BF16 = {"H200": 989.4e12, "H100": 989.4e12, "A100": 312e12, "L40S": 362e12, "A10": 125e12,
             "4090": 165.2e12}


class TrainingError(RuntimeError):
    """Raised when training cannot go on (non-finite loss)."""


# ----------------------------------------------------------------------------------------------
# command line

def _gate_layers(s: str):
    try:
        return [int(x) for x in s.split(",") if x.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"--gate-layers wants comma-separated ints, got {s!r}") \
            from e


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Train a byte-level SplitTransformer language model. Default: the Python standard "
        f"library's .py files, d_model 128, 4 heads, 4 layers, context 128, batch 16, "
        f"{DEFAULT_STEPS} steps = 1.2M training bytes (about 1 minute on 2 idle CPU cores, "
        "8 minutes on 2 cores busy with other jobs: there use --threads 1). "
        "Writes checkpoint.pt, metrics.jsonl and loss.png to --out. Multi-GPU / multi-node: "
        "torchrun --nproc_per_node=N -m splitnet.train ...")
    g = p.add_argument_group("data")
    g.add_argument("--text", default=None, metavar="FILE",
                   help="train on this file (split by position) instead of the stdlib corpus")
    g.add_argument("--val-fraction", type=float, default=None,
                   help=f"validation share (default {DEFAULTS['val_fraction']})")
    g.add_argument("--context", type=int, default=None,
                   help=f"sequence length in bytes (default {DEFAULTS['context']})")
    g = p.add_argument_group("model")
    g.add_argument("--scheme", default=None,
                   help="scheme name (lie-trotter, strang, yoshida4, ...) or s/f sublayer pattern "
                        "such as ssfsff (default lie-trotter)")
    g.add_argument("--weights", choices=["shared", "per-stage"], default=None,
                   help="one sub-layer per field per layer, or one per stage (default shared)")
    g.add_argument("--d-model", type=int, default=None, help="width (default 128)")
    g.add_argument("--n-heads", type=int, default=None, help="attention heads (default 4)")
    g.add_argument("--n-layers", type=int, default=None, help="steps of the scheme (default 4)")
    g.add_argument("--d-ff", type=int, default=None, help="feed-forward width (default 4 d_model)")
    g.add_argument("--step-size", type=float, default=None, help="h per layer (default 1.0)")
    g.add_argument("--gate", choices=["none", "sigmoid", "tanh"], default=None,
                   help="SDU self-dependency gates (Highway Transformer) (default none)")
    g.add_argument("--gate-layers", type=_gate_layers, default=None,
                   help="0-based layers that get gates, e.g. 0,1 (default: all, with --gate)")
    g.add_argument("--dropout", type=float, default=None, help="dropout (default 0)")
    g.add_argument("--method", default=None, help="sub-flow method (default euler = residual)")
    g.add_argument("--activation", default=None, help="feed-forward activation (default gelu)")
    g = p.add_argument_group("optimisation")
    g.add_argument("--steps", type=int, default=None,
                   help=f"total optimiser steps (default {DEFAULT_STEPS}; on --resume: the "
                        "checkpoint's total)")
    g.add_argument("--batch-size", type=int, default=None,
                   help="global sequences per optimiser step (default 16)")
    g.add_argument("--grad-accum", type=int, default=None,
                   help="micro-batches per step (default 1)")
    g.add_argument("--lr", type=float, default=None, help="peak learning rate (default 2e-3)")
    g.add_argument("--min-lr-ratio", type=float, default=None,
                   help="cosine floor as a fraction of --lr (default 0.1)")
    g.add_argument("--warmup", type=int, default=None, help="linear warmup steps (default 50)")
    g.add_argument("--weight-decay", type=float, default=None, help="AdamW decay (default 0.1)")
    g.add_argument("--beta1", type=float, default=None, help="AdamW beta1 (default 0.9)")
    g.add_argument("--beta2", type=float, default=None, help="AdamW beta2 (default 0.99)")
    g.add_argument("--clip", type=float, default=None, help="grad-norm clip, 0 = off (default 1)")
    g.add_argument("--seed", type=int, default=None, help="seed of weights and batches (default 0)")
    g = p.add_argument_group("run")
    g.add_argument("--out", default="runs/train", help="output directory (default runs/train)")
    g.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    g.add_argument("--overwrite", action="store_true",
                   help="start afresh even if OUT already holds a checkpoint")
    g.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="auto (default) = cuda when available")
    g.add_argument("--compile", action="store_true", help="torch.compile the model")
    g.add_argument("--no-amp", action="store_true",
                   help="on CUDA: float32 instead of bf16 autocast")
    g.add_argument("--eval-every", type=int, default=100, help="validation every N steps (default 100)")
    g.add_argument("--eval-windows", type=int, default=None,
                   help="fixed validation windows per evaluation (default 256)")
    g.add_argument("--ckpt-every", type=int, default=100, help="checkpoint every N steps (default 100)")
    g.add_argument("--stop-at", type=int, default=None, metavar="STEP",
                   help="save and exit after STEP steps, keeping the --steps schedule (for "
                        "time-sliced jobs; continue with --resume)")
    g.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's)")
    g.add_argument("--peak-tflops", type=float, default=None,
                   help="accelerator peak for MFU (default: dense bf16 of known GPUs)")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    g.add_argument("--no-plot", action="store_true", help="do not write loss.png")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="splitnet train")
    configure_parser(p)
    return p


def _explicit(args) -> dict:
    """The run-defining options given on the command line (None = not given)."""
    out = {}
    for k in MODEL_KEYS + RUN_KEYS:
        v = getattr(args, k, None)
        if v is not None:
            out[k] = v
    if out.get("gate") == "none":
        out["gate"] = None
        out["_gate_none"] = True
    return out


def resolve_config(args, ckpt: dict | None) -> dict:
    """Merge defaults, checkpoint and command line; a conflict with the checkpoint raises."""
    given = _explicit(args)
    explicit_none = given.pop("_gate_none", False)
    if ckpt is None:
        cfg = dict(DEFAULTS)
        cfg.update(given)
        cfg["steps"] = args.steps if args.steps is not None else DEFAULT_STEPS
        return cfg
    cfg = dict(ckpt["run_config"])
    bad = []
    for k, v in given.items():
        old = cfg.get(k)
        if k == "text" and old is not None:
            same = os.path.abspath(v) == os.path.abspath(old)
        else:
            same = v == old
        if not same:
            bad.append(f"{k}: checkpoint {old!r}, given {v!r}")
    if explicit_none and cfg.get("gate") is not None:
        bad.append(f"gate: checkpoint {cfg['gate']!r}, given 'none'")
    if bad:
        raise ValueError("incompatible checkpoint: --resume with options that differ from the "
                         "checkpoint (" + "; ".join(bad) + "); drop them, or start a new run "
                         "with another --out")
    cfg["steps"] = args.steps if args.steps is not None else cfg["steps"]
    return cfg


# ----------------------------------------------------------------------------------------------
# pieces

def lr_at(step: int, cfg: dict) -> float:
    """Learning-rate multiplier for optimiser step ``step`` (0-based): linear warmup over
    ``warmup`` steps, then cosine from 1 to ``min_lr_ratio`` at ``steps``."""
    w, total, floor = cfg["warmup"], cfg["steps"], cfg["min_lr_ratio"]
    if step < w:
        return (step + 1) / w
    if total <= w:
        return 1.0
    p = min(1.0, (step - w) / max(1, total - w))
    return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * p))


def build_model(cfg: dict):
    from .models import SplitTransformer
    return SplitTransformer(
        vocab_size=D.VOCAB_SIZE, d_model=cfg["d_model"], n_heads=cfg["n_heads"],
        n_layers=cfg["n_layers"], scheme=cfg["scheme"], causal=True, weights=cfg["weights"],
        step_size=cfg["step_size"], d_ff=cfg["d_ff"], max_len=cfg["context"],
        dropout=cfg["dropout"], gate=cfg["gate"], gate_layers=cfg["gate_layers"],
        method=cfg["method"], activation=cfg["activation"])


def build_optimizer(model, cfg: dict):
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg["weight_decay"]},
              {"params": no_decay, "weight_decay": 0.0}]
    kw = {}
    if next(model.parameters()).is_cuda:
        kw["fused"] = True
    return torch.optim.AdamW(groups, lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]), **kw)


def flops_per_token(model, context: int) -> float:
    """Training FLOPs per token, nanoGPT style: 6 x (matrix weights applied per token, each
    counted once per stage that uses it) + 12 x context x d_model per attention call + head."""
    from torch import nn

    from .schemes import CONVECTION, DIFFUSION
    n_d, n_c = model.scheme.n_stages(DIFFUSION), model.scheme.n_stages(CONVECTION)
    matmul, attn_calls = 0, 0
    for layer in model.layers:
        for name, uses in ((DIFFUSION, n_d), (CONVECTION, n_c)):
            mod = getattr(layer, name)
            mods = list(mod) if isinstance(mod, nn.ModuleList) else [mod] * uses
            for m in mods:
                matmul += sum(x.weight.numel() for x in m.modules() if isinstance(x, nn.Linear))
            if name == DIFFUSION:
                attn_calls += len(mods)
    matmul += model.head.weight.numel()
    return 6.0 * matmul + 12.0 * attn_calls * context * model.d_model


def _rng_state(device) -> dict:
    st = {"python": random.getstate(), "numpy": np.random.get_state(),
          "torch": torch.get_rng_state()}
    if device.type == "cuda":
        st["cuda"] = torch.cuda.get_rng_state_all()
    return st


def _set_rng_state(st: dict, device) -> None:
    random.setstate(st["python"])
    np.random.set_state(st["numpy"])
    torch.set_rng_state(st["torch"])
    if device.type == "cuda" and "cuda" in st:
        try:
            torch.cuda.set_rng_state_all(st["cuda"])
        except (RuntimeError, IndexError):  # different GPU count: weights and data still exact
            pass


def save_atomic(obj, path: Path) -> None:
    """torch.save to ``path.tmp``, fsync, then rename: a reader never sees half a file."""
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_checkpoint(path: Path) -> dict:
    if not path.is_file():
        raise ValueError(f"--resume: no checkpoint at {path}")
    try:
        ck = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:
        raise ValueError(f"incompatible checkpoint {path}: cannot be read ({e})") from e
    if not isinstance(ck, dict) or ck.get("version") != CKPT_VERSION or "model" not in ck:
        raise ValueError(f"incompatible checkpoint {path}: not a splitnet train checkpoint "
                         f"(version {CKPT_VERSION})")
    return ck


def truncate_metrics(path: Path, step: int) -> int:
    """Keep the lines of ``path`` with ``step <= step`` (drop later ones and any torn last
    line); rewritten atomically. Returns the number of lines kept."""
    if not path.exists():
        return 0
    kept = []
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("step"), int) and rec["step"] <= step:
            kept.append(line)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(k + "\n" for k in kept))
    os.replace(tmp, path)
    return len(kept)


def read_metrics(path) -> list[dict]:
    """The records of a metrics.jsonl file."""
    return [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]


def plot_metrics(path_jsonl, path_png, title: str = "") -> None:
    import matplotlib.pyplot as plt

    recs = read_metrics(path_jsonl)
    tr = [(r["step"], r["bpb"]) for r in recs if "bpb" in r]
    va = [(r["step"], r["val_bpb"]) for r in recs if "val_bpb" in r]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    if tr:
        s, b = np.array(tr).T
        ax.plot(s, b, color="tab:blue", alpha=0.25, lw=0.8, label="train (per step)")
        if len(b) > 10:   # exponential moving average, bias-corrected
            a, m, sm = 0.95, 0.0, []
            for i, v in enumerate(b):
                m = a * m + (1 - a) * v
                sm.append(m / (1 - a ** (i + 1)))
            ax.plot(s, sm, color="tab:blue", lw=1.6, label="train (EMA 0.95)")
    if va:
        s, b = np.array(va).T
        ax.plot(s, b, "o-", color="tab:red", ms=4, label="validation")
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("bits per byte")
    if tr:
        lo = min(min(x[1] for x in tr), min((x[1] for x in va), default=9))
        ax.set_ylim(max(0.0, lo - 0.2), min(8.5, max(x[1] for x in tr[len(tr) // 20:]) + 0.3))
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path_png, dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------------------------------------
# distributed

def _dist_env():
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    return world, rank, local


def _pick_device(name: str, local_rank: int) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device is available")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(f"cuda:{local_rank}") if name == "cuda" else torch.device("cpu")


# ----------------------------------------------------------------------------------------------
# the loop

def train(args) -> dict:
    """Run (or resume) training as described by parsed ``args``; returns a summary dict.

    Raises ValueError on bad input, TrainingError on a non-finite loss."""
    world, rank, local_rank = _dist_env()
    distributed = world > 1
    device = _pick_device(args.device, local_rank)
    if args.threads:
        torch.set_num_threads(args.threads)
    out = Path(args.out)
    ckpt_path, metrics_path = out / CKPT, out / METRICS
    ckpt = load_checkpoint(ckpt_path) if args.resume else None
    if ckpt is None and ckpt_path.exists() and not args.overwrite:
        raise ValueError(f"{ckpt_path} already exists: pass --resume to continue it or "
                         f"--overwrite to start again")
    cfg = resolve_config(args, ckpt)
    for k in ("steps", "batch_size", "grad_accum", "eval_windows"):
        if not isinstance(cfg[k], int) or cfg[k] < 1:
            raise ValueError(f"--{k.replace('_', '-')} must be a positive int, got {cfg[k]!r}")
    if args.eval_every < 1 or args.ckpt_every < 1:
        raise ValueError("--eval-every and --ckpt-every must be positive")
    if cfg["batch_size"] % (world * cfg["grad_accum"]):
        raise ValueError(f"--batch-size {cfg['batch_size']} must be divisible by world size "
                         f"{world} x --grad-accum {cfg['grad_accum']}")
    if ckpt is not None and cfg["steps"] < ckpt["step"]:
        raise ValueError(f"--steps {cfg['steps']} is below the checkpoint's step {ckpt['step']}")

    corpus = D.load_corpus(cfg["text"], cfg["val_fraction"])
    D.check_context(corpus, cfg["context"])

    if distributed:
        import torch.distributed as dist
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    is_main = rank == 0
    try:
        return _train_loop(args, cfg, ckpt, corpus, device, world, rank, distributed, is_main,
                           out, ckpt_path, metrics_path)
    finally:
        if distributed:
            import torch.distributed as dist
            dist.destroy_process_group()


def _train_loop(args, cfg, ckpt, corpus, device, world, rank, distributed, is_main, out,
                ckpt_path, metrics_path):
    import torch.distributed as dist

    torch.manual_seed(cfg["seed"])
    random.seed(cfg["seed"])
    np.random.seed(cfg["seed"] % 2 ** 32)
    model = build_model(cfg)
    if ckpt is not None:
        if ckpt["model_config"] != model.config():
            raise ValueError("incompatible checkpoint: its model config differs from the one "
                             "rebuilt from it (created by another splitnet version?)")
        try:
            model.load_state_dict(ckpt["model"])
        except RuntimeError as e:
            raise ValueError(f"incompatible checkpoint: weights do not fit the model ({e})") \
                from e
    model.to(device)
    n_params = model.n_params()
    raw_model = model
    opt = build_optimizer(model, cfg)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_at(s, cfg))
    step = 0
    if ckpt is not None:
        opt.load_state_dict(ckpt["optimizer"])
        sched.load_state_dict(ckpt["scheduler"])
        for g in opt.param_groups:  # the horizon (steps) may have changed: recompute the lr
            g["lr"] = cfg["lr"] * lr_at(ckpt["step"], cfg)
        step = ckpt["step"]
        _set_rng_state(ckpt["rng"], device)

    cuda = device.type == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cuda.enable_flash_sdp(True)
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if cuda and not args.no_amp \
        else nullcontext()
    fwd_model = torch.compile(model) if args.compile else model
    if distributed:
        from torch.nn.parallel import DistributedDataParallel as DDP
        fwd_model = DDP(fwd_model, device_ids=[device.index] if cuda else None)

    if is_main:
        out.mkdir(parents=True, exist_ok=True)
        for stale in out.glob(CKPT + ".tmp*"):   # a write cut short by kill -9; the real file
            stale.unlink(missing_ok=True)        # was never replaced by it
        if ckpt is not None:
            truncate_metrics(metrics_path, step)
        elif metrics_path.exists():
            metrics_path.unlink()
    context, accum = cfg["context"], cfg["grad_accum"]
    micro = cfg["batch_size"] // (world * accum)
    tokens_per_step = cfg["batch_size"] * context
    vstarts = D.val_starts(corpus, cfg["eval_windows"], context, seed=0)
    fpt = flops_per_token(raw_model, context)
    peak = args.peak_tflops * 1e12 if args.peak_tflops else None
    if peak is None and cuda:
        name = torch.cuda.get_device_name(device)
        peak = next((v for k, v in PEAK_BF16.items() if k in name), None)

    def log(msg):
        if is_main:
            print(msg, file=sys.stderr, flush=True)

    log(f"splitnet train: {corpus.describe()}")
    log(f"model: scheme={raw_model.scheme.name} [{raw_model.scheme.pattern()}] "
        f"weights={cfg['weights']} d_model={cfg['d_model']} layers={cfg['n_layers']} "
        f"params={n_params:,}; device={device} world={world} batch={cfg['batch_size']}x{context}"
        f" accum={accum}; steps {step} -> {cfg['steps']}")

    def evaluate() -> float:
        fwd_model.eval()
        tot, n = torch.zeros((), dtype=torch.float64, device=device), 0
        # Each rank evaluates a contiguous share of the fixed windows; sums are all-reduced.
        share = vstarts.tensor_split(world)[rank]
        with torch.no_grad(), amp:
            for x, y in D.val_batches(corpus, share, max(micro, 32), context):
                x, y = x.to(device), y.to(device)
                logits = raw_model(x)
                tot += F.cross_entropy(logits.float().reshape(-1, logits.size(-1)),
                                       y.reshape(-1), reduction="sum").double()
                n += y.numel()
        cnt = torch.tensor(float(n), dtype=torch.float64, device=device)
        if distributed:
            dist.all_reduce(tot)
            dist.all_reduce(cnt)
        fwd_model.train()
        return float(tot / cnt)

    def save(step_now: int):
        if is_main:
            save_atomic({
                "version": CKPT_VERSION, "step": step_now, "model_config": raw_model.config(),
                "model": raw_model.state_dict(), "optimizer": opt.state_dict(),
                "scheduler": sched.state_dict(), "rng": _rng_state(device),
                "run_config": cfg, "data": {"seed": cfg["seed"], "next_step": step_now},
                "n_params": n_params, "world_size": world}, ckpt_path)
            if not args.no_plot and metrics_path.exists():
                plot_metrics(metrics_path, out / PLOT,
                             title=f"{raw_model.scheme.name} ({cfg['weights']}), "
                                   f"{n_params:,} params")
        if distributed:
            dist.barrier()

    stop = {"sig": None}

    def on_signal(signum, frame):
        stop["sig"] = signum

    old_handlers = {}
    for s in (signal.SIGINT, signal.SIGTERM):
        try:
            old_handlers[s] = signal.signal(s, on_signal)
        except ValueError:  # not the main thread: no handler, the default behaviour stays
            pass

    from tqdm.auto import tqdm
    bar = tqdm(total=cfg["steps"], initial=step, disable=not is_main or args.no_progress,
               unit="step", dynamic_ncols=True, file=sys.stderr)
    mf = open(metrics_path, "a") if is_main else None  # noqa: SIM115 - closed in finally
    last_val = None
    t_run = time.perf_counter()
    tokens_done = 0
    try:
        fwd_model.train()
        while step < cfg["steps"]:
            t0 = time.perf_counter()
            x, y = D.train_batch(corpus, step, cfg["batch_size"], context, cfg["seed"],
                                 rank, world)
            loss_sum = torch.zeros((), device=device)
            for m in range(accum):
                xm = x[m * micro:(m + 1) * micro].to(device, non_blocking=True)
                ym = y[m * micro:(m + 1) * micro].to(device, non_blocking=True)
                sync = nullcontext()
                if distributed and m < accum - 1:
                    sync = fwd_model.no_sync()    # all-reduce only on the last micro-batch
                with sync:
                    with amp:
                        logits = fwd_model(xm)
                    loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)),
                                           ym.reshape(-1))
                    (loss / accum).backward()
                loss_sum += loss.detach()
            loss_t = loss_sum / accum
            if distributed:
                dist.all_reduce(loss_t)
                loss_t /= world
            loss_v = float(loss_t)
            if not math.isfinite(loss_v):
                raise TrainingError(
                    f"non-finite training loss ({loss_v}) at step {step + 1}: stopping. The last "
                    f"good checkpoint in {ckpt_path} was left untouched; lower --lr, raise "
                    f"--warmup or set --clip, then --resume")
            gnorm = None
            if cfg["clip"] and cfg["clip"] > 0:
                gnorm = float(torch.nn.utils.clip_grad_norm_(raw_model.parameters(), cfg["clip"]))
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            if cuda:
                torch.cuda.synchronize(device)
            dt = time.perf_counter() - t0
            tokens_done += tokens_per_step
            rec = {"step": step, "loss": loss_v, "bpb": loss_v / D.LN2,
                   "lr": opt.param_groups[0]["lr"], "tokens": step * tokens_per_step,
                   "tok_per_s": tokens_per_step / dt}
            if gnorm is not None:
                rec["grad_norm"] = gnorm
            if peak:
                rec["mfu"] = fpt * rec["tok_per_s"] / peak
            if step % args.eval_every == 0 or step == cfg["steps"]:
                vl = evaluate()
                last_val = vl / D.LN2
                rec.update(val_loss=vl, val_bpb=last_val)
            if is_main:
                mf.write(json.dumps(rec) + "\n")
                mf.flush()
                post = {"loss": f"{loss_v:.3f}", "bpb": f"{rec['bpb']:.3f}",
                        "tok/s": f"{rec['tok_per_s']:.0f}"}
                if last_val is not None:
                    post["val_bpb"] = f"{last_val:.3f}"
                bar.set_postfix(post, refresh=False)
                bar.update(1)
            sig = stop["sig"]
            if distributed:   # every rank must agree to stop at the same step
                flag = torch.tensor([0 if sig is None else int(sig)], device=device)
                dist.all_reduce(flag, op=dist.ReduceOp.MAX)
                sig = int(flag.item()) or None
            pause = args.stop_at is not None and step >= args.stop_at
            if step % args.ckpt_every == 0 or step == cfg["steps"] or sig is not None or pause:
                save(step)
            if pause and step < cfg["steps"]:
                log(f"\nstopped at step {step} (--stop-at); continue with --resume")
                break
            if sig is not None:
                log(f"\nreceived signal {sig}: checkpoint saved at step {step} in {ckpt_path}; "
                    f"continue with --resume")
                stop["sig"] = sig
                break
    finally:
        bar.close()
        if mf is not None:
            mf.close()
        for s, h in old_handlers.items():
            signal.signal(s, h)
    wall = time.perf_counter() - t_run
    summary = {"step": step, "steps": cfg["steps"], "val_bpb": last_val, "n_params": n_params,
               "tok_per_s": tokens_done / wall if wall > 0 else None, "out": str(out),
               "signal": stop["sig"], "flops_per_token": fpt}
    if peak and summary["tok_per_s"]:
        summary["mfu"] = fpt * summary["tok_per_s"] / peak
    if stop["sig"] is None and step == cfg["steps"]:
        vb = f"{last_val:.4f}" if last_val is not None else "n/a (no step run)"
        tps = f"{summary['tok_per_s']:.0f}" if tokens_done else "0"
        log(f"done: step {step}, val bpb {vb}, {tps} tokens/s"
            + (f", MFU {summary['mfu']:.1%}" if "mfu" in summary else "")
            + f"; {out}/{{{CKPT},{METRICS},{PLOT}}}")
    return summary


def run_cli(args) -> int:
    try:
        summary = train(args)
    except ValueError as e:
        print(f"splitnet train: error: {e}", file=sys.stderr)
        return 2
    except TrainingError as e:
        print(f"splitnet train: {e}", file=sys.stderr)
        return 1
    sig = summary.get("signal")
    return 128 + sig if sig else 0


def main(argv=None) -> int:
    """``python -m splitnet.train`` (what torchrun launches)."""
    return run_cli(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
