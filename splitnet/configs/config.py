"""Configuration: every option named once, validated once.

* :class:`SplitConfig` -- everything that defines a :class:`~splitnet.nets.models.SplitTransformer`
  (``sn.models.SplitConfig``). Checkpoints store it as a plain dict (:meth:`SplitConfig.to_dict`).
* :class:`TrainConfig` -- a training run: its model, data, optimisation and run options
  (``splitnet.training.train.TrainConfig``).

Both are frozen dataclasses that check themselves in ``__post_init__`` (a bad value is a
``ValueError`` / ``TypeError`` naming the option). Each field carries its help text and how it
behaves on ``--resume`` in its metadata; the command line (:mod:`splitnet.cli.train`) and the
checkpoint derive from the fields, so nothing is spelled out twice. Pure Python: no torch, so
``splitnet train --help`` starts fast.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
from dataclasses import dataclass
from typing import Any

from ..integrators import schemes as _schemes
from ..integrators.subflows import METHODS
from ..stagelists.stages import CONVECTION, DIFFUSION
from . import kinds as _kinds
from .options import (
    ACTIVATIONS,
    FIXED,
    FREE,
    LIMITS,
    MAX_SEED,
    SESSION,
    WEIGHTS,
    check_growth,
    check_network,
    check_parallel,
    check_projection,
    check_reversible,
    check_tensorboard,
    init_rule,
    int_list,
    kind_options,
    network_option,
    option,
)
from .options import check_choice as _choice
from .options import check_int as _int
from .options import check_real as _real
from .options import config_from_dict as _from_dict
from .options import positive_ints as _positive_ints
from .options import scheme_spec as _scheme_spec
from .seq2seq import Seq2SeqConfig
from .signature import config_from_call, config_signature  # served here too

GATES = ("sigmoid", "tanh")
GATE_FIELDS = ("both", DIFFUSION, CONVECTION)
POSITIONS = ("learned", "none")     # how tokens know their position besides rotary attention
DEVICES = ("auto", "cpu", "cuda")
# Speed levers (splitnet.training.accel, splitnet.training.losses): none changes the function
# computed, only
# rounding, so all are free on --resume.
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")   # the modes that capture CUDA graphs
COMPILE_SCOPES = ("auto", "model+loss", "regional")
SDPA_BACKENDS = ("auto", "flash", "efficient", "cudnn", "math")
LOSSES = ("plain", "chunked")
ADAMW_IMPLS = ("auto", "fused", "foreach", "for-loop")
PARAM_DTYPES = ("float32", "bfloat16")
TASKS = ("lm", "mlm", "translate")
# --task mlm (splitnet.mlm): bytes 0..255 and the mask token (--bpe N: N + 1 ids); bidirectional
MLM_MASK_ID = 256
MLM_VOCAB = 257
PARALLEL = ("ddp", "fsdp")   # how torchrun's processes share a run (splitnet.training.sharding)
SCHEDULES = ("cosine", "inverse-sqrt")
# The one check of options per task. The run options that only one task reads: given to a run
# of the other task they are refused (check_task_options), never recorded and ignored. A
# translation run's pairs are split by a fixed rule (splitnet.translate.pairs: 10% of the groups
# valid, 10% test), so its test scores compare across runs and stored checkpoints keep their
# split: --val-fraction is the language model's alone. The model options of one network only
# (--scheme, --n-encoder-layers, ...) follow from the fields of the two model configs.
TASK_OPTIONS = {"lm": ("text", "corpus", "val_fraction"),
                "translate": ("pairs", "src_lang", "tgt_lang", "bpe", "label_smoothing", "beam",
                              "length_penalty", "bleu_sentences")}
TRANSLATE_ONLY = TASK_OPTIONS["translate"]
# the widest beam: each source holds beam rows, each with its key/value caches (decoding
# memory grows linearly; splitnet.nets.decoding estimates it before a search)
MAX_BEAM = 1024
# --pairs values that name a source rather than a path (translate.pairs.NAMED_SOURCES, kept
# equal by tests/test_hostile_files.py): every other value is stored resolved, as --text is
PAIR_NAMES = ("gettext", "bible", "copy", "reverse")
# --corpus: named corpora of the language-model tasks (splitnet.mlm.corpora; tests/test_corpora)
CORPORA = ("stdlib", "austen", "wordnet")
# ---------------------------------------------------------------------------------------------
# the model


@dataclass(frozen=True)
@kind_options(DIFFUSION, CONVECTION)     # convection_field; diffusion_field is declared below
class SplitConfig:
    """Everything that defines a SplitTransformer; see its docstring for the meaning."""

    vocab_size: int = option(256, "vocabulary size (256: bytes)", cli=False)
    d_model: int = network_option("d_model")
    n_heads: int = network_option("n_heads")
    n_layers: int = option(4, "layers = steps of the scheme")
    scheme: Any = option("lie-trotter", "scheme name (lie-trotter, strang, yoshida4, ...), s/f "
                         "sublayer pattern such as ssfsff, or a stage string c:0.5,d:1,c:0.5")
    causal: bool = option(True, "mask the future in attention", cli=False)
    weights: str = network_option("weights")
    step_size: float = network_option("step_size")
    d_ff: int | None = network_option("d_ff")
    max_len: int = option(1024, "longest sequence (learned positions)", cli=False)
    dropout: float = network_option("dropout")
    gate: str | None = option(None, "SDU self-dependency gates (Highway Transformer)",
                              choices=GATES)
    gate_layers: tuple[int, ...] | None = option(
        None, "0-based layers that get gates, e.g. 0,1 (default: all, with --gate)",
        metavar="K,K,...", parse=int_list)
    gate_fields: str = option("both", "which fields get the gates", choices=GATE_FIELDS)
    method: str = network_option("method")
    diffusion_field: str = option("attention", "the diffusion field's kind "
                                  "(splitnet.configs.kinds): attention = self-attention; "
                                  "conv = a GLU convolution over conv_kernel positions "
                                  "(ConvS2S)",
                                  choices=_kinds.Serving(DIFFUSION))
    conv_kernel: int = option(3, "kernel width of the conv diffusion field: token i sees "
                              "i-k+1..i (odd when not causal: i-(k-1)/2..i+(k-1)/2)")
    activation: str = network_option("activation")
    norm_eps: float = network_option("norm_eps")
    init: str | None = network_option("init")       # None: the task's rule (init_rule)
    positions: str = option("learned", "token positions: learned absolute embeddings added to "
                            "the input (GPT-2), or none (GPT-NeoX: rotary attention carries "
                            "them)", choices=POSITIONS)
    rotary_pct: float = option(0.0, "share of each attention head's channels rotated by "
                               "rotary position embeddings (RoPE, GPT-NeoX's convention; "
                               "Pythia: 0.25); 0 = off")
    rotary_base: float = option(10000.0, "RoPE base (theta) of rotary_pct")
    tie_head: bool = option(True, "output head tied to the token embedding (default for a "
                            "language model, as GPT-2; --no-tie-head: a matrix of its own, as "
                            "GPT-NeoX; a translation model's head is its own unless --tie-head)")
    learn_coefficients: bool = option(False, "every stage coefficient of every layer a "
                                      "trainable parameter, initialised from the scheme "
                                      "(model.coefficients(); --order-penalty keeps them a "
                                      "method)")
    project_coefficients: bool = option(False, "learned coefficients kept exactly a method of "
                                        "the scheme's order: float64, projected onto the order "
                                        "conditions after every optimiser step")
    reversible: bool = network_option("reversible")
    reversible_grid: int | None = network_option("reversible_grid")

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        for name in ("vocab_size", "d_model", "n_heads", "n_layers", "max_len"):
            set_(self, name, _int(name, getattr(self, name)))
        spec, scheme = _scheme_spec(self.scheme)
        set_(self, "scheme", spec)
        check_network(self)
        _choice("gate", self.gate, GATES, none=True)
        _choice("gate_fields", self.gate_fields, GATE_FIELDS)
        set_(self, "conv_kernel", _int("conv_kernel", self.conv_kernel))
        _choice("positions", self.positions, POSITIONS)
        set_(self, "rotary_pct", _real("rotary_pct", self.rotary_pct, lo=0.0, hi=1.0))
        set_(self, "rotary_base", _real("rotary_base", self.rotary_base, lo=0.0, lo_open=True))
        set_(self, "tie_head", bool(self.tie_head))
        set_(self, "learn_coefficients", bool(self.learn_coefficients))
        check_projection(self, scheme)
        set_(self, "causal", bool(self.causal))
        self._check_gates()
        self._check_reversible()
        for f in _kinds.layer_fields(self, scheme, 0):     # fields the model has kinds for
            f.kind.check(self)

    def _check_reversible(self) -> None:
        """:func:`~splitnet.configs.options.check_reversible`, and no learned coefficients."""
        check_reversible(self, [("scheme", self.resolved_scheme())])
        if self.reversible and self.learn_coefficients:
            raise ValueError("reversible networks with learned coefficients are not supported "
                             "yet: choose one of the two")

    def _check_gates(self) -> None:
        gl = self.gate_layers
        if gl is None:
            return
        if isinstance(gl, str):
            gl = int_list(gl)
        if any(isinstance(i, bool) or not isinstance(i, numbers.Integral) for i in gl):
            raise ValueError(f"gate_layers must be layer indices (ints), got {gl!r}")
        gl = tuple(sorted({int(i) for i in gl}))
        if gl and self.gate is None:
            raise ValueError("gate_layers given without gate='sigmoid' or 'tanh'")
        bad = [i for i in gl if not 0 <= i < self.n_layers]
        if bad:
            raise ValueError(f"gate_layers {bad} outside 0..{self.n_layers - 1}")
        object.__setattr__(self, "gate_layers", gl)

    # -- derived ---------------------------------------------------------------------------
    def resolved_scheme(self):
        """The :class:`~splitnet.integrators.schemes.SplittingScheme` this config names, over a
        language model's fields by the rule every network follows
        (:func:`splitnet.integrators.schemes.network_scheme`)."""
        return _schemes.network_scheme(self.scheme, (DIFFUSION, CONVECTION))

    @property
    def gated_layers(self) -> tuple[int, ...]:
        """Layers that carry SDU gates (all of them when ``gate`` is set without a list)."""
        if self.gate is None:
            return ()
        return tuple(range(self.n_layers)) if self.gate_layers is None else self.gate_layers

    # -- plain data ------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """Plain data (str, numbers, lists, dicts): safe in a ``weights_only`` checkpoint and in
        JSON."""
        d = dataclasses.asdict(self)
        if d["gate_layers"] is not None:
            d["gate_layers"] = list(d["gate_layers"])
        return d

    @classmethod
    def from_dict(cls, d: dict) -> SplitConfig:
        """The config of :meth:`to_dict`; unknown keys are an error naming them."""
        return _from_dict(cls, d)

    def replace(self, **changes) -> SplitConfig:
        return dataclasses.replace(self, **changes)


# ---------------------------------------------------------------------------------------------
# training


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
                       choices=TASKS)
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

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        _choice("task", self.task, TASKS)
        _choice("schedule", self.schedule, SCHEDULES)
        want = Seq2SeqConfig if self.task == "translate" else SplitConfig
        if isinstance(self.model, dict):
            set_(self, "model", want.from_dict(self.model))
        if want is Seq2SeqConfig and self.model == SplitConfig():   # the default model
            set_(self, "model", Seq2SeqConfig())
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
        self._check_task()
        if self.task == "lm" and self.model.vocab_size != 256:
            raise ValueError(f"a byte-level model needs vocab_size 256, got "
                             f"{self.model.vocab_size}")
        if self.task != "translate" and self.model.init is None:   # the task's rule (one for
            set_(self, "model", self.model.replace(init=init_rule(self.model, self.task)))  # all)
        if self.task == "mlm":        # bytes and the mask token, every token sees every other
            vocab = self.model.vocab_size if self.bpe else MLM_VOCAB    # a BPE's: plan_run's
            set_(self, "model", self.model.replace(vocab_size=vocab, causal=False))
        if self.model.max_len != self.context:
            set_(self, "model", self.model.replace(max_len=self.context))
        if self.batch_size % self.grad_accum:
            raise ValueError(f"batch_size {self.batch_size} must be divisible by grad_accum "
                             f"{self.grad_accum}")

    def _check_task(self) -> None:
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
        if self.task == "mlm" and self.loss == "chunked":
            raise ValueError("--task mlm does not take --loss chunked (its loss counts masked "
                             "tokens only)")
        if self.bpe and not 260 <= self.bpe <= 2**20:
            raise ValueError(f"bpe must be 0 (bytes) or a vocabulary of 260 .. 2**20 tokens, "
                             f"got {self.bpe}")
        if self.task != "translate":
            return
        clash = [n for n, v in (("refine_prob", self.refine_prob > 0),
                                ("loss chunked", self.loss == "chunked"),
                                ("compile", self.compile)) if v]
        if clash:
            raise ValueError(f"--task translate does not take {', '.join(clash)} (language-"
                             f"model features)")

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


def _flags(names) -> str:
    return ", ".join("--" + n.replace("_", "-") for n in names)


def foreign_options(task: str, names) -> list[str]:
    """The options among ``names`` that a run of ``task`` does not read: the run options of the
    other task (:data:`TASK_OPTIONS`) and the options of the other task's model only
    (``model.x`` or ``x``: a field of one model config and not of the other). In the order
    given."""
    _choice("task", task, TASKS)
    names = [n for n in names if not (task == "mlm" and n == "bpe")]   # mlm reads --bpe too
    task = "translate" if task == "translate" else "lm"     # mlm reads what lm reads
    other = "translate" if task == "lm" else "lm"
    lm_model = {f.name for f in cli_fields(SplitConfig)}
    s2s_model = {f.name for f in cli_fields(Seq2SeqConfig)}
    wrong_model = s2s_model - lm_model if task == "lm" else lm_model - s2s_model
    out = []
    for n in names:
        bare = n[6:] if n.startswith("model.") else n
        if (bare in TASK_OPTIONS[other] and bare == n) or bare in wrong_model:
            out.append(bare)
    return out


def check_task_options(task: str, names, resumed: bool = False) -> None:
    """The one check of options per task: a ValueError naming every option of ``names`` that a
    run of ``task`` would not read (:func:`foreign_options`), one line, instead of recording
    and ignoring them. ``resumed``: the task is the checkpoint's (said in the message)."""
    wrong = foreign_options(task, names)
    if not wrong:
        return
    s, it = ("", "it") if len(wrong) == 1 else ("s", "them")
    if task != "translate":
        how = ("resumed from its checkpoint" if resumed else
               "--task lm, the default" if task == "lm" else "--task mlm")
        fix = f"drop {it}" if resumed else f"add --task translate, or drop {it}"
        kind = "language model" if task == "lm" else "masked language model"
        raise ValueError(f"{_flags(wrong)}: encoder–decoder option{s} (read by --task translate "
                         f"only), but this run is a {kind} ({how}): {fix}")
    hint = ""
    if "val_fraction" in wrong:
        hint = ("; a translation run splits its pairs by a fixed rule, 10% of the groups valid "
                "and 10% test, so its test scores compare across runs")
    elif "text" in wrong:
        hint = "; its corpus is --pairs"
    raise ValueError(f"{_flags(wrong)}: language-model option{s} (read by --task lm and mlm), but "
                     f"this run is --task translate"
                     f"{' (resumed from its checkpoint)' if resumed else ''}{hint}")


class MissingDependency(ImportError, ValueError):
    """An optional dependency is not installed: an ImportError for Python callers, and a
    ValueError so the command line prints it as one line (exit status 2)."""


def require(*modules: str, extra: str, feature: str) -> None:
    """Raise :class:`MissingDependency` naming the pip extra unless ``modules`` import."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingDependency(f"{feature} needs {' and '.join(missing)}, which is not "
                                f"installed: pip install 'splitnet[{extra}]'")


def cli_fields(cls) -> list[dataclasses.Field]:
    """The fields of ``cls`` that the command line exposes."""
    return [f for f in dataclasses.fields(cls) if f.metadata.get("cli", True)]


__all__ = ["ACTIVATIONS", "ADAMW_IMPLS", "COMPILE_MODES", "COMPILE_SCOPES", "CORPORA",
           "CUDAGRAPH_MODES", "DEVICES", "FIXED", "FREE", "GATES", "GATE_FIELDS", "LIMITS",
           "LOSSES", "MAX_BEAM", "MAX_SEED", "METHODS", "MLM_MASK_ID", "MLM_VOCAB", "PAIR_NAMES",
           "PARALLEL", "PARAM_DTYPES", "POSITIONS", "SCHEDULES", "SDPA_BACKENDS", "SESSION",
           "TASKS", "TASK_OPTIONS", "TRANSLATE_ONLY", "WEIGHTS", "MissingDependency", "SplitConfig",
           "TrainConfig", "check_task_options", "cli_fields", "config_from_call",
           "config_signature", "foreign_options", "int_list", "option", "require"]
