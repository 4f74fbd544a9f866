"""A training run's options in sections (torchtitan's job config groups its options so), each a
frozen dataclass that checks its own fields: where the run writes and how it continues
(:class:`RunOptions`), its data (:class:`DataOptions`), optimiser and schedule
(:class:`OptimOptions`), the integrator in training (:class:`IntegratorOptions`), evaluation
(:class:`EvalOptions`), parallelism (:class:`ParallelOptions`), acceleration
(:class:`AccelOptions`) and logging (:class:`LogOptions`). What a task reads of its own
(a language model's corpus, a translation's beam) is the task's options dataclass
(:attr:`splitnet.tasks.task.Task.options`), and
:class:`~splitnet.training.config.TrainConfig` holds one of each and checks what spans them.

Each field carries its help text and its ``--resume`` behaviour (:func:`~splitnet.configs.
options.option`); the command line shows one group per section (:data:`SECTIONS`). Pure
Python: ``splitnet train --help`` starts without torch.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import ClassVar

from .config import (
    ADAMW_IMPLS,
    COMPILE_MODES,
    COMPILE_SCOPES,
    DEVICES,
    LAYER_DROP_RULES,
    LOSSES,
    PARALLEL,
    PARAM_DTYPES,
    SCHEDULES,
    SDPA_BACKENDS,
)
from .options import (
    FREE,
    SESSION,
    check_bools,
    check_choice,
    check_int,
    check_real,
    int_list,
    positive_ints,
)
from .options import option as _opt


def _ints(obj, names, lo: int = 1, none: bool = False) -> None:
    for n in names:
        object.__setattr__(obj, n, check_int(n, getattr(obj, n), lo=lo, none=none))


@dataclass(frozen=True)
class RunOptions:
    """Where the run writes and how it continues (session options are never stored)."""

    TITLE: ClassVar[str] = "run"
    out: str = _opt("runs/train", "output directory", resume=SESSION, metavar="DIR")
    resume: bool = _opt(False, "continue from OUT/checkpoint.pt (every option not given is "
                        "restored from it)", resume=SESSION)
    overwrite: bool = _opt(False, "start afresh even if OUT holds a run (the old run is moved "
                           "to a new OUT/previous-N/ first; nothing is deleted)", resume=SESSION)
    stop_at: int | None = _opt(None, "save and exit after STEP steps, keeping the --steps "
                               "schedule (time-sliced jobs; continue with --resume)",
                               resume=SESSION, metavar="STEP")
    ckpt_every: int = _opt(100, "checkpoint every N steps", resume=FREE)
    allow_data_change: bool = _opt(False, "on --resume: go on although the corpus changed "
                                   "since the checkpoint", resume=SESSION)
    trust_checkpoint: bool = _opt(False, "load a checkpoint that holds Python objects (an old "
                                  "format); only for files from a trusted source",
                                  resume=SESSION)

    def __post_init__(self) -> None:
        check_bools(self)
        _ints(self, ("ckpt_every",))
        _ints(self, ("stop_at",), none=True)
        if self.resume and self.overwrite:
            raise ValueError("--resume and --overwrite contradict each other: choose one")
        object.__setattr__(self, "out", str(self.out))


@dataclass(frozen=True)
class DataOptions:
    """What every task's data is cut to."""

    TITLE: ClassVar[str] = "data"
    context: int = _opt(128, "sequence length in bytes (translate: the longest source or target "
                        "in tokens; longer ones are cut)")

    def __post_init__(self) -> None:
        _ints(self, ("context",))


@dataclass(frozen=True)
class OptimOptions:
    """The optimiser (AdamW), its schedule, the batch and the seed."""

    TITLE: ClassVar[str] = "optimisation and schedule"
    steps: int = _opt(600, "total optimiser steps (on --resume: may be raised)", resume=FREE)
    batch_size: int = _opt(16, "global sequences per optimiser step")
    grad_accum: int = _opt(1, "micro-batches per step")
    lr: float = _opt(2e-3, "peak learning rate")
    min_lr_ratio: float = _opt(0.1, "cosine floor as a fraction of --lr, in [0, 1]")
    schedule: str = _opt("cosine", "after the warmup: cosine to --min-lr-ratio, or inverse-sqrt "
                         "(Vaswani et al.: lr sqrt(warmup / step))", choices=SCHEDULES)
    warmup: int = _opt(50, "linear warmup steps")
    weight_decay: float = _opt(0.1, "AdamW weight decay on matrices")
    beta1: float = _opt(0.9, "AdamW beta1")
    beta2: float = _opt(0.99, "AdamW beta2")
    clip: float = _opt(1.0, "gradient-norm clip, 0 = off")
    seed: int = _opt(0, "seed of weights and batches")

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        _ints(self, ("steps", "batch_size", "grad_accum"))
        _ints(self, ("warmup", "seed"), lo=0)
        check_choice("schedule", self.schedule, SCHEDULES)
        set_(self, "lr", check_real("lr", self.lr, lo=0.0, lo_open=True))
        set_(self, "min_lr_ratio", check_real("min_lr_ratio", self.min_lr_ratio, 0.0, 1.0))
        set_(self, "weight_decay", check_real("weight_decay", self.weight_decay, lo=0.0))
        for b in ("beta1", "beta2"):
            set_(self, b, check_real(b, getattr(self, b), 0.0, 1.0, hi_open=True))
        set_(self, "clip", check_real("clip", self.clip, lo=0.0))
        if self.batch_size % self.grad_accum:
            raise ValueError(f"batch_size {self.batch_size} must be divisible by grad_accum "
                             f"{self.grad_accum}")


@dataclass(frozen=True)
class IntegratorOptions:
    """What training does with the network as an integrator: ODE-consistent refinement
    (:mod:`splitnet.analyses.refine`), the order penalty of learned coefficients, growth."""

    TITLE: ClassVar[str] = "the integrator in training"
    refine_prob: float = _opt(0.0, "ODE-consistent training: probability that a step's forward "
                              "pass runs the model's own scheme refined into K substeps (K "
                              "drawn from --refine-substeps; by (seed, step))")
    refine_substeps: tuple[int, ...] = _opt((1, 2, 4), "substep counts K that --refine-prob "
                                            "draws from", metavar="K,K,...", parse=int_list)
    order_penalty: float = _opt(0.0, "λ: add λ x the squared order conditions of every layer's "
                                "learned coefficients up to the scheme's declared order (needs "
                                "--learn-coefficients)", metavar="λ")
    grow_at: tuple[int, ...] = _opt((), "double the depth after each of these steps (each layer "
                                    "copied at half the step size, its AdamW moments with it)",
                                    metavar="STEP,...", parse=int_list)
    train_depths: tuple[int, ...] = _opt((), "train at several depths: each step runs the "
                                         "finest (the network's own depth) and one other drawn "
                                         "by (seed, step) (the sandwich rule; "
                                         "splitnet.training.elastic)", metavar="N,N,...",
                                         parse=int_list)
    depth_distill: bool = _opt(False, "with --train-depths: each coarser depth also learns the "
                               "finest's next-token distribution (KL, the finest detached)")
    layer_drop: float = _opt(0.0, "LayerDrop (Fan et al. 2019): each step skips each layer "
                             "with probability P, drawn by (seed, step); --at-depth N then "
                             "prunes to every (L/N)-th layer", metavar="P")
    layer_drop_rule: str = _opt("uniform", "--layer-drop's probability by layer k of L: uniform "
                                "P, or linear P k / (L - 1) (LayerSkip's rise)",
                                choices=LAYER_DROP_RULES)
    early_exit: tuple[int, ...] = _opt((), "LayerSkip's early-exit loss: the loss after each of "
                                       "these layer counts (the last the network's depth) "
                                       "through the final norm and head, weighted by depth; "
                                       "--at-depth N then exits after N layers",
                                       metavar="N,N,...", parse=int_list)
    ONLY_WITH: ClassVar[dict] = {
        "refine_substeps": ("with --refine-prob > 0 (ODE-consistent training)",
                            lambda c: c.refine_prob > 0),
        "layer_drop_rule": ("with --layer-drop > 0 (LayerDrop)", lambda c: c.layer_drop > 0),
        "depth_distill": ("with --train-depths (training at several depths)",
                          lambda c: bool(c.train_depths)),
    }

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "refine_prob", check_real("refine_prob", self.refine_prob, 0.0, 1.0))
        set_(self, "refine_substeps", positive_ints("refine_substeps", self.refine_substeps))
        set_(self, "order_penalty", check_real("order_penalty", self.order_penalty, lo=0.0))
        g = () if self.grow_at is None else self.grow_at
        g = (g,) if isinstance(g, int) else g
        if isinstance(g, str) or not all(isinstance(s, int) and not isinstance(s, bool)
                                         for s in g):
            raise ValueError(f"grow_at must be step numbers (ints), got {self.grow_at!r}")
        g = tuple(g)
        if any(b <= a for a, b in itertools.pairwise(g)):
            raise ValueError(f"--grow-at {','.join(map(str, g))} must be strictly increasing "
                             f"(sorted, no step twice)")
        set_(self, "grow_at", g)
        d = () if not self.train_depths else positive_ints("train_depths", self.train_depths)
        if len(set(d)) != len(d):
            raise ValueError(f"--train-depths {','.join(map(str, d))} names a depth twice")
        set_(self, "train_depths", tuple(sorted(d)))
        set_(self, "layer_drop", check_real("layer_drop", self.layer_drop, 0.0, 1.0,
                                            hi_open=True))
        check_choice("layer_drop_rule", self.layer_drop_rule, LAYER_DROP_RULES)
        e = () if not self.early_exit else positive_ints("early_exit", self.early_exit)
        if len(set(e)) != len(e):
            raise ValueError(f"--early-exit {','.join(map(str, e))} names an exit twice")
        set_(self, "early_exit", tuple(sorted(e)))
        check_bools(self)


@dataclass(frozen=True)
class EvalOptions:
    """How often the held-out score is taken, and on how many held-out windows (what it is
    scored on is the task's)."""

    TITLE: ClassVar[str] = "evaluation"
    eval_windows: int = _opt(256, "fixed validation windows per evaluation")
    eval_every: int = _opt(100, "validation every N steps", resume=FREE)

    def __post_init__(self) -> None:
        _ints(self, ("eval_windows", "eval_every"))


@dataclass(frozen=True)
class ParallelOptions:
    """The device and how several processes share the run."""

    TITLE: ClassVar[str] = "parallelism"
    device: str = _opt("auto", "auto = cuda when available", resume=FREE, choices=DEVICES)
    parallel: str = _opt("ddp", "how torchrun's processes share the run: ddp (each holds the "
                         "whole model) or fsdp (parameters, gradients and AdamW state sharded "
                         "over the ranks: PyTorch's FSDP2)", resume=FREE, choices=PARALLEL)
    tp: int = _opt(1, "tensor parallelism (with --parallel fsdp): each field split over N "
                   "ranks, FSDP over world/N (this launch's: not restored)", resume=SESSION,
                   metavar="N")
    threads: int | None = _opt(None, "CPU threads (default: the cores other processes leave "
                               "free, at least 1)", resume=FREE)
    sync_every: int | None = _opt(None, "read losses back to the host every N steps (fewer "
                                  "syncs; default 10 on CUDA, 1 on the CPU)", resume=FREE)

    def __post_init__(self) -> None:
        check_choice("device", self.device, DEVICES)
        check_choice("parallel", self.parallel, PARALLEL)
        if isinstance(self.tp, bool) or not isinstance(self.tp, int) or self.tp < 1:
            raise ValueError(f"--tp must be a whole number >= 1, got {self.tp!r}")
        if self.tp > 1 and self.parallel != "fsdp":
            raise ValueError(f"--tp {self.tp} needs --parallel fsdp (FSDP over world/tp ranks)")
        _ints(self, ("threads", "sync_every"), none=True)


@dataclass(frozen=True)
class AccelOptions:
    """Speed levers: none changes the function computed, only rounding (free on --resume)."""

    TITLE: ClassVar[str] = "acceleration"
    compile: bool = _opt(False, "torch.compile the model and its loss", resume=FREE)
    compile_mode: str = _opt("default", "torch.compile mode (reduce-overhead / max-autotune "
                             "capture CUDA graphs)", resume=FREE, choices=COMPILE_MODES)
    compile_scope: str = _opt("auto", "model+loss: one graph of network and loss; regional: "
                              "each distinct field module once plus the head and loss, so "
                              "compile time does not grow with stages; auto: regional when a "
                              "layer has more than 3 stages and the network more than one "
                              "layer", resume=FREE, choices=COMPILE_SCOPES)
    loss: str = _opt("plain", "plain: cross-entropy of the full float32 logits; chunked: head "
                     "and cross-entropy fused per chunk of rows (no full logits)", resume=FREE,
                     choices=LOSSES)
    loss_chunk: int = _opt(4096, "rows (tokens) per chunk of --loss chunked", resume=FREE)
    sdpa: str = _opt("auto", "scaled-dot-product attention backend (auto: torch's choice)",
                     resume=FREE, choices=SDPA_BACKENDS)
    adamw: str = _opt("auto", "AdamW implementation (auto: fused on CUDA, torch's default "
                      "elsewhere)", resume=FREE, choices=ADAMW_IMPLS)
    param_dtype: str = _opt("float32", "bfloat16: forward and backward on a bf16 copy of the "
                            "weights (no autocast), AdamW on the float32 master weights",
                            resume=FREE, choices=PARAM_DTYPES)
    amp: bool = _opt(True, "on CUDA: bf16 autocast (--no-amp: float32)", resume=FREE)
    peak_tflops: float | None = _opt(None, "accelerator peak for MFU (default: dense bf16 of "
                                     "known GPUs)", resume=FREE)
    ONLY_WITH: ClassVar[dict] = {
        "loss_chunk": ("with --loss chunked", lambda c: c.loss == "chunked"),
        "compile_mode": ("with --compile", lambda c: c.compile),
        "compile_scope": ("with --compile", lambda c: c.compile),
    }

    def __post_init__(self) -> None:
        check_bools(self)
        for name, options in (("compile_mode", COMPILE_MODES), ("compile_scope", COMPILE_SCOPES),
                              ("loss", LOSSES), ("sdpa", SDPA_BACKENDS), ("adamw", ADAMW_IMPLS),
                              ("param_dtype", PARAM_DTYPES)):
            check_choice(name, getattr(self, name), options)
        _ints(self, ("loss_chunk",))
        object.__setattr__(self, "peak_tflops", check_real(
            "peak_tflops", self.peak_tflops, lo=0.0, lo_open=True, none=True))


@dataclass(frozen=True)
class LogOptions:
    """What the run shows and writes besides its checkpoint."""

    TITLE: ClassVar[str] = "logging"
    progress: bool = _opt(True, "progress bar (--no-progress: none)", resume=FREE)
    plot: bool = _opt(True, "write loss.png (--no-plot: do not)", resume=FREE)
    tensorboard: str | bool | None = _opt(
        None, "write TensorBoard events (loss, bpb, lr, throughput, MFU) to DIR; bare "
        "--tensorboard: OUT/tensorboard; off: none (needs pip install 'splitnet[tensorboard]')",
        resume=FREE, metavar="DIR", const=True)

    def __post_init__(self) -> None:
        check_bools(self)
        tb = self.tensorboard
        if tb is None or isinstance(tb, bool):
            object.__setattr__(self, "tensorboard", tb or None)
        elif not isinstance(tb, str) or not tb.strip():
            raise ValueError(f"tensorboard must be a directory, True (OUT/tensorboard) or None, "
                             f"got {tb!r}")
        else:
            object.__setattr__(self, "tensorboard", None if tb.strip().lower() == "off" else
                               os.path.abspath(os.path.expanduser(tb)))


# attribute of TrainConfig -> its section, in the order the command line shows them
SECTIONS = {"run": RunOptions, "data": DataOptions, "optim": OptimOptions,
            "integrator": IntegratorOptions, "evaluation": EvalOptions,
            "parallelism": ParallelOptions, "accel": AccelOptions, "logging": LogOptions}

__all__ = ["SECTIONS", "AccelOptions", "DataOptions", "EvalOptions", "IntegratorOptions",
           "LogOptions", "OptimOptions", "ParallelOptions", "RunOptions"]
