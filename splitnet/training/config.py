"""A training run's configuration: :class:`TrainConfig` (``from splitnet.train import
TrainConfig``), its model, data, optimisation and run options.

A frozen dataclass that checks itself in ``__post_init__`` (a bad value is a ``ValueError`` /
``TypeError`` naming the option). Each field carries its help text and how it behaves on
``--resume`` in its metadata (:mod:`splitnet.configs.options`); the command line
(:mod:`splitnet.cli.commands.cmd_train`) and the checkpoint derive from the fields. What
depends on the task -- its network's config class and initialisation, the options it reads,
its own checks -- the task says (:mod:`splitnet.tasks`): this module compares no task names.
Pure Python: no torch, so ``splitnet train --help`` starts fast.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import ClassVar

from ..configs.config import (
    ADAMW_IMPLS,
    COMPILE_MODES,
    COMPILE_SCOPES,
    CORPORA,
    CUDAGRAPH_MODES,
    DEVICES,
    LOSSES,
    MAX_BEAM,
    PAIR_NAMES,
    PARALLEL,
    PARAM_DTYPES,
    SCHEDULES,
    SDPA_BACKENDS,
    SplitConfig,
)
from ..configs.options import (
    FREE,
    SESSION,
    check_applicable,
    check_bools,
    check_growth,
    check_parallel,
    check_tensorboard,
    int_list,
    option,
)
from ..configs.options import check_choice as _choice
from ..configs.options import check_int as _int
from ..configs.options import check_real as _real
from ..configs.options import config_from_dict as _from_dict
from ..configs.options import positive_ints as _positive_ints
from ..configs.seq2seq import Seq2SeqConfig
from ..tasks.task import TASKS, check_task_options, get_task

# The sections of a run's options (torchtitan's job config groups its options so): each field
# of TrainConfig but the model in exactly one (tests/test_tasks.py checks it). The command line
# shows one group per section; TrainConfig.section(name) reads one. The constructor and the
# checkpoint stay flat (TrainConfig(lr=...), and every stored run), so no caller changes.
SECTIONS = {
    "task and data": ("task", "text", "corpus", "val_fraction", "context", "pairs", "src_lang",
                      "tgt_lang", "bpe"),
    "optimisation": ("steps", "batch_size", "grad_accum", "lr", "min_lr_ratio", "schedule",
                     "warmup", "weight_decay", "beta1", "beta2", "clip", "seed",
                     "label_smoothing"),
    "the integrator in training": ("refine_prob", "refine_substeps", "order_penalty",
                                   "grow_at"),
    "evaluation": ("eval_windows", "eval_every", "beam", "length_penalty", "bleu_sentences"),
    "parallelism and speed": ("device", "parallel", "tp", "threads", "sync_every", "compile",
                              "compile_mode", "compile_scope", "loss", "loss_chunk", "sdpa",
                              "adamw", "param_dtype", "amp", "peak_tflops"),
    "run": ("ckpt_every", "progress", "plot", "tensorboard", "out", "resume", "overwrite",
            "stop_at", "allow_data_change", "trust_checkpoint"),
}


def _default_model() -> SplitConfig:
    return SplitConfig()


@dataclass(frozen=True)
class TrainConfig:
    """A training run (``splitnet train``; ``train(cfg)``): a byte-level language model
    (``task="lm"``) or an encoder–decoder translating sentence pairs (``task="translate"``).

    ``model`` is the network: a :class:`SplitConfig` (``vocab_size`` 256) for a language model,
    a :class:`~splitnet.configs.seq2seq.Seq2SeqConfig` for translation (its vocabulary and
    special ids are set from the tokenizer); its ``max_len`` is set to ``context``. Options
    marked ``free`` may change on ``--resume``; the rest define the run.
    """

    model: SplitConfig | Seq2SeqConfig = dataclasses.field(default_factory=_default_model,
                                                           metadata={"cli": False})
    task: str = option("lm", "lm: a byte-level language model of --text; mlm: a masked "
                       "language model of --text (a bidirectional encoder, 15%% of the bytes "
                       "masked); translate: an encoder–decoder on sentence pairs (--pairs)",
                       choices=tuple(TASKS))
    # data
    text: str | None = option(None, "corpus: a text file, a directory, a glob pattern or a "
                              ".tar.gz/.zip archive (default: the Python standard library's "
                              ".py files)", metavar="PATH")
    corpus: str | None = option(None, "a named corpus instead of --text: stdlib (default), austen "
                                "(Jane Austen's novels, Persuasion held out; r-cran-janeaustenr)"
                                ", wordnet (WordNet's glosses; wordnet-base)", choices=CORPORA)
    val_fraction: float = option(0.05, "validation share of the language model's corpus (a "
                                 "translation run splits its pairs by a fixed rule)")
    context: int = option(128, "sequence length in bytes (translate: the longest source or "
                          "target in tokens; longer ones are cut)")
    # translation (--task translate: splitnet.translate.translation)
    pairs: str | None = option(None, "translate: sentence pairs, a TSV file 'source<TAB>target', "
                               "a folder of gettext catalogues (.po/.mo), 'bible' (the SWORD "
                               "modules) or 'copy' / 'reverse' (synthetic alignment tasks over "
                               "400 words); default: this machine's gettext catalogues",
                               metavar="PATH")
    src_lang: str | None = option(None, "translate: source language (default en)", metavar="L")
    tgt_lang: str | None = option(None, "translate: target language (default de for the "
                                  "catalogues)", metavar="L")
    bpe: int = option(0, "translate, mlm: a byte-level BPE of N tokens trained on the training "
                      "pairs or text (tokenizers; 0 = byte tokens)", metavar="N")
    label_smoothing: float = option(0.1, "translate: label smoothing of the training loss")
    beam: int = option(4, "translate: beam width of the BLEU and chrF at the end", resume=FREE)
    length_penalty: float = option(0.6, "translate: beam search ranks log p / length^A",
                                   resume=FREE, metavar="A")
    bleu_sentences: int = option(500, "translate: test pairs translated for BLEU and chrF at "
                                 "the end (0 = none)", resume=FREE)
    # optimisation
    steps: int = option(600, "total optimiser steps (on --resume: may be raised)", resume=FREE)
    batch_size: int = option(16, "global sequences per optimiser step")
    grad_accum: int = option(1, "micro-batches per step")
    lr: float = option(2e-3, "peak learning rate")
    min_lr_ratio: float = option(0.1, "cosine floor as a fraction of --lr, in [0, 1]")
    schedule: str = option("cosine", "after the warmup: cosine to --min-lr-ratio, or "
                           "inverse-sqrt (Vaswani et al.: lr sqrt(warmup / step))",
                           choices=SCHEDULES)
    warmup: int = option(50, "linear warmup steps")
    weight_decay: float = option(0.1, "AdamW weight decay on matrices")
    beta1: float = option(0.9, "AdamW beta1")
    beta2: float = option(0.99, "AdamW beta2")
    clip: float = option(1.0, "gradient-norm clip, 0 = off")
    seed: int = option(0, "seed of weights and batches")
    eval_windows: int = option(256, "fixed validation windows per evaluation")
    # ODE-consistent training (splitnet.analyses.refine): off unless refine_prob > 0
    refine_prob: float = option(0.0, "ODE-consistent training: probability that a step's "
                                "forward pass runs the model's own scheme refined into K "
                                "substeps (K drawn from --refine-substeps; by (seed, step))")
    refine_substeps: tuple[int, ...] = option((1, 2, 4), "substep counts K that --refine-prob "
                                              "draws from", metavar="K,K,...", parse=int_list)
    # learned coefficients (splitnet.nets.learned): off unless order_penalty > 0
    order_penalty: float = option(0.0, "λ: add λ x the squared order conditions of every "
                                  "layer's learned coefficients up to the scheme's declared "
                                  "order (needs --learn-coefficients)", metavar="λ")
    # depth as a step size (splitnet.training.growth): none unless grow_at is given
    grow_at: tuple[int, ...] = option((), "double the depth after each of these steps (each "
                                      "layer copied at half the step size, its AdamW moments "
                                      "with it)", metavar="STEP,...", parse=int_list)
    # run (free on --resume)
    eval_every: int = option(100, "validation every N steps", resume=FREE)
    ckpt_every: int = option(100, "checkpoint every N steps", resume=FREE)
    device: str = option("auto", "auto = cuda when available", resume=FREE, choices=DEVICES)
    parallel: str = option("ddp", "how torchrun's processes share the run: ddp (each holds the "
                           "whole model) or fsdp (parameters, gradients and AdamW state sharded "
                           "over the ranks: PyTorch's FSDP2)", resume=FREE, choices=PARALLEL)
    tp: int = option(1, "tensor parallelism (with --parallel fsdp): each field split over N "
                     "ranks, FSDP over world/N (this launch's: not restored)", resume=SESSION,
                     metavar="N")
    sync_every: int | None = option(None, "read losses back to the host every N steps (fewer "
                                    "syncs; default 10 on CUDA, 1 on the CPU)", resume=FREE)
    compile: bool = option(False, "torch.compile the model and its loss", resume=FREE)
    compile_mode: str = option("default", "torch.compile mode (reduce-overhead / max-autotune "
                               "capture CUDA graphs)", resume=FREE, choices=COMPILE_MODES)
    compile_scope: str = option("auto", "model+loss: one graph of network and loss; regional: "
                                "each distinct field module once plus the head and loss, so "
                                "compile time does not grow with stages; auto: regional when a "
                                "layer has more than 3 stages and the network more than one "
                                "layer", resume=FREE, choices=COMPILE_SCOPES)
    loss: str = option("plain", "plain: cross-entropy of the full float32 logits; chunked: "
                       "head and cross-entropy fused per chunk of rows (no full logits)",
                       resume=FREE, choices=LOSSES)
    loss_chunk: int = option(4096, "rows (tokens) per chunk of --loss chunked", resume=FREE)
    sdpa: str = option("auto", "scaled-dot-product attention backend (auto: torch's choice)",
                       resume=FREE, choices=SDPA_BACKENDS)
    adamw: str = option("auto", "AdamW implementation (auto: fused on CUDA, torch's default "
                        "elsewhere)", resume=FREE, choices=ADAMW_IMPLS)
    param_dtype: str = option("float32", "bfloat16: forward and backward on a bf16 copy of the "
                              "weights (no autocast), AdamW on the float32 master weights",
                              resume=FREE, choices=PARAM_DTYPES)
    amp: bool = option(True, "on CUDA: bf16 autocast (--no-amp: float32)", resume=FREE)
    threads: int | None = option(None, "CPU threads (default: the cores other processes leave "
                                 "free, at least 1)", resume=FREE)
    peak_tflops: float | None = option(None, "accelerator peak for MFU (default: dense bf16 "
                                       "of known GPUs)", resume=FREE)
    progress: bool = option(True, "progress bar (--no-progress: none)", resume=FREE)
    plot: bool = option(True, "write loss.png (--no-plot: do not)", resume=FREE)
    tensorboard: str | bool | None = option(
        None, "write TensorBoard events (loss, bpb, lr, throughput, MFU) to DIR; bare "
        "--tensorboard: OUT/tensorboard; off: none (needs pip install 'splitnet[tensorboard]')",
        resume=FREE, metavar="DIR", const=True)
    # this invocation only (never stored)
    out: str = option("runs/train", "output directory", resume=SESSION, metavar="DIR")
    resume: bool = option(False, "continue from OUT/checkpoint.pt (every option not given is "
                          "restored from it)", resume=SESSION)
    overwrite: bool = option(False, "start afresh even if OUT holds a run (the old run is moved "
                             "to a new OUT/previous-N/ first; nothing is deleted)",
                             resume=SESSION)
    stop_at: int | None = option(None, "save and exit after STEP steps, keeping the --steps "
                                 "schedule (time-sliced jobs; continue with --resume)",
                                 resume=SESSION, metavar="STEP")
    allow_data_change: bool = option(False, "on --resume: go on although the corpus changed "
                                     "since the checkpoint", resume=SESSION)
    trust_checkpoint: bool = option(False, "load a checkpoint that holds Python objects (an "
                                    "old format); only for files from a trusted source",
                                    resume=SESSION)

    # options that only apply alongside another, refused when given without it (by
    # :meth:`check_given`, which the command line calls with the options typed; a value
    # restored on --resume, or a default, is never refused)
    ONLY_WITH: ClassVar[dict] = {
        "loss_chunk": ("with --loss chunked", lambda c: c.loss == "chunked"),
        "refine_substeps": ("with --refine-prob > 0 (ODE-consistent training)",
                            lambda c: c.refine_prob > 0),
        "compile_mode": ("with --compile", lambda c: c.compile),
        "compile_scope": ("with --compile", lambda c: c.compile),
        "eval_windows": ("to a run scored on held-out windows (a language model's; a "
                         "translation run scores its validation pairs)",
                         lambda c: "eval_windows" not in get_task(c.task).ignores),
    }

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        check_bools(self)
        task = get_task(self.task)
        _choice("schedule", self.schedule, SCHEDULES)
        want = task.model_config
        if isinstance(self.model, dict):
            set_(self, "model", want.from_dict(self.model))
        if type(self.model) is not want and self.model == _default_model():   # the default
            set_(self, "model", want())
        if not isinstance(self.model, want):
            raise TypeError(f"task {self.task} trains a {want.__name__} model, got "
                            f"{type(self.model).__name__}")
        set_(self, "val_fraction", _real("val_fraction", self.val_fraction, 0.0, 1.0, True, True))
        for name in ("context", "steps", "batch_size", "grad_accum", "eval_windows",
                     "eval_every", "ckpt_every"):
            set_(self, name, _int(name, getattr(self, name)))
        set_(self, "warmup", _int("warmup", self.warmup, lo=0))
        set_(self, "seed", _int("seed", self.seed, lo=0))
        set_(self, "lr", _real("lr", self.lr, lo=0.0, lo_open=True))
        set_(self, "min_lr_ratio", _real("min_lr_ratio", self.min_lr_ratio, 0.0, 1.0))
        set_(self, "weight_decay", _real("weight_decay", self.weight_decay, lo=0.0))
        for b in ("beta1", "beta2"):
            set_(self, b, _real(b, getattr(self, b), 0.0, 1.0, hi_open=True))
        set_(self, "clip", _real("clip", self.clip, lo=0.0))
        set_(self, "refine_prob", _real("refine_prob", self.refine_prob, 0.0, 1.0))
        set_(self, "refine_substeps", _positive_ints("refine_substeps", self.refine_substeps))
        set_(self, "order_penalty", _real("order_penalty", self.order_penalty, lo=0.0))
        self._check_learned()
        set_(self, "grow_at", check_growth(self))
        _choice("device", self.device, DEVICES)
        check_parallel(self, PARALLEL)
        for name, options in (("compile_mode", COMPILE_MODES), ("compile_scope", COMPILE_SCOPES),
                              ("loss", LOSSES), ("sdpa", SDPA_BACKENDS), ("adamw", ADAMW_IMPLS),
                              ("param_dtype", PARAM_DTYPES)):
            _choice(name, getattr(self, name), options)
        set_(self, "loss_chunk", _int("loss_chunk", self.loss_chunk))
        if self.compile_mode in CUDAGRAPH_MODES and self.grad_accum > 1:
            raise ValueError(f"compile_mode {self.compile_mode} captures CUDA graphs, whose "
                             f"outputs (the gradients) a second micro-batch's replay may "
                             f"overwrite before they are accumulated: it needs grad_accum 1, "
                             f"got {self.grad_accum}")
        set_(self, "threads", _int("threads", self.threads, none=True))
        set_(self, "sync_every", _int("sync_every", self.sync_every, none=True))
        set_(self, "stop_at", _int("stop_at", self.stop_at, none=True))
        if self.resume and self.overwrite:
            raise ValueError("--resume and --overwrite contradict each other: choose one")
        set_(self, "out", str(self.out))
        set_(self, "peak_tflops", _real("peak_tflops", self.peak_tflops, lo=0.0, lo_open=True,
                                        none=True))
        if self.text is not None:
            if not str(self.text).strip():
                raise ValueError("text is empty: give a file, a directory, a glob or an archive")
            set_(self, "text", os.path.abspath(os.path.expanduser(str(self.text))))
        if self.text is not None and self.corpus is not None:
            raise ValueError("--text and --corpus both name the corpus: give one")
        if self.corpus is not None:
            _choice("corpus", self.corpus, CORPORA)
        if self.corpus == "austen" and self.val_fraction != 0.05:     # never ignored silently
            raise ValueError("--val-fraction does not apply to --corpus austen: its validation "
                             "text is the held-out novel (Persuasion); drop it")
        if self.pairs is not None and str(self.pairs) not in PAIR_NAMES:
            if not str(self.pairs).strip():
                raise ValueError("pairs is empty: give a TSV file, a folder of catalogues or "
                                 f"one of {', '.join(PAIR_NAMES)}")
            set_(self, "pairs", os.path.abspath(os.path.expanduser(str(self.pairs))))
        check_tensorboard(self)
        self._check_task(task)
        set_(self, "model", task.configure(self))     # the network this task trains
        if self.model.max_len != self.context:
            set_(self, "model", self.model.replace(max_len=self.context))
        if self.batch_size % self.grad_accum:
            raise ValueError(f"batch_size {self.batch_size} must be divisible by grad_accum "
                             f"{self.grad_accum}")

    def _check_task(self, task) -> None:
        set_ = object.__setattr__
        set_(self, "bpe", _int("bpe", self.bpe, lo=0))
        set_(self, "beam", _int("beam", self.beam))
        set_(self, "bleu_sentences", _int("bleu_sentences", self.bleu_sentences, lo=0))
        set_(self, "label_smoothing", _real("label_smoothing", self.label_smoothing, 0.0, 1.0,
                                            hi_open=True))
        set_(self, "length_penalty", _real("length_penalty", self.length_penalty, -10.0, 10.0))
        if self.beam > MAX_BEAM:
            raise ValueError(f"beam must be <= {MAX_BEAM:,} (each source decodes beam rows at "
                             f"once), got {self.beam:,}")
        check_task_options(self.task, [f.name for f in dataclasses.fields(self)
                                       if f.name != "model" and getattr(self, f.name) !=
                                       _field_default(f)])
        if self.bpe and not 260 <= self.bpe <= 2**20:
            raise ValueError(f"bpe must be 0 (bytes) or a vocabulary of 260 .. 2**20 tokens, "
                             f"got {self.bpe}")
        task.check(self)

    def _check_learned(self) -> None:
        if isinstance(self.model, Seq2SeqConfig):
            if self.order_penalty > 0:
                raise ValueError("order_penalty needs learned coefficients, which encoder–"
                                 "decoder models do not have")
            return
        if self.order_penalty > 0 and not self.model.learn_coefficients:
            raise ValueError("order_penalty needs learned coefficients: add "
                             "--learn-coefficients")
        if self.refine_prob > 0 and self.model.learn_coefficients:
            raise ValueError("refine_prob with learned coefficients: the refined layers would "
                             "hold the coefficients fixed; choose one of the two")

    def check_given(self, given) -> None:
        """The options ``given`` (their names; ``model.x`` for the network's) that this run
        would not read, each only applying alongside another (:attr:`ONLY_WITH`, the model
        config's ``ONLY_WITH``): a ValueError naming them, before any work. ``self`` is the
        run's whole config (on ``--resume``, the checkpoint's with the given ones applied), so
        ``--resume --loss-chunk N`` of a chunked run is taken."""
        given = set(given)
        check_applicable(self, given, self.ONLY_WITH)
        check_applicable(self.model, {n[6:] for n in given if n.startswith("model.")},
                         getattr(self.model, "ONLY_WITH", {}))

    def section(self, name: str) -> dict:
        """The options of section ``name`` of :data:`SECTIONS` and their values."""
        if name not in SECTIONS:
            raise ValueError(f"section must be one of {', '.join(SECTIONS)}; got {name!r}")
        return {n: getattr(self, n) for n in SECTIONS[name]}

    def tensorboard_dir(self) -> str | None:
        """Where TensorBoard events go: None (off), OUT/tensorboard (True) or the directory."""
        return os.path.join(self.out, "tensorboard") if self.tensorboard is True else \
            self.tensorboard

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["model"] = self.model.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> TrainConfig:
        return _from_dict(cls, d)

    def replace(self, **changes) -> TrainConfig:
        return dataclasses.replace(self, **changes)



def _field_default(f: dataclasses.Field):
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default



__all__ = ["SECTIONS", "TrainConfig"]
