"""Configuration: every option named once, validated once.

* :class:`SplitConfig` -- everything that defines a :class:`~splitnet.nets.models.SplitTransformer`
  (``sn.models.SplitConfig``). Checkpoints store it as a plain dict (:meth:`SplitConfig.to_dict`).
A training run's :class:`~splitnet.training.config.TrainConfig` lives above the tasks it
names (:mod:`splitnet.tasks`); the names of its choices are declared here.

Configs are frozen dataclasses that check themselves in ``__post_init__`` (a bad value is a
``ValueError`` / ``TypeError`` naming the option). Each field carries its help text and how it
behaves on ``--resume`` in its metadata; the command line (:mod:`splitnet.cli.train`) and the
checkpoint derive from the fields, so nothing is spelled out twice. Pure Python: no torch, so
``splitnet train --help`` starts fast.
"""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass
from typing import Any, ClassVar

from ..stagelists.stages import CONVECTION, DIFFUSION
from . import kinds as _kinds
from . import plan as _plan
from .depth import check_depth_basis
from .options import (
    NORM_POSITIONS,
    QK_NORMS,
    carried,
    check_bools,
    check_network,
    check_projection,
    int_list,
    kind_options,
    network_option,
    option,
)
from .options import check_choice as _choice
from .options import check_int as _int
from .options import check_real as _real
from .options import config_from_dict as _from_dict
from .stacks import resolve_stack, stack_changes, stack_option

GATES = ("sigmoid", "tanh")
GATE_FIELDS = ("both", DIFFUSION, CONVECTION)
POSITIONS = ("learned", "none")     # how tokens know their position besides rotary attention
ATTENTION_BIASES = ("all", "qkv", "none")   # which of self-attention's projections have biases
DEVICES = ("auto", "cpu", "cuda")
# Speed levers (splitnet.training.accel, splitnet.tasks.losses): none changes the function
# computed, only rounding, so all are free on --resume (TrainConfig's choices).
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")   # the modes that capture CUDA graphs
COMPILE_SCOPES = ("auto", "model+loss", "regional")
SDPA_BACKENDS = ("auto", "flash", "efficient", "cudnn", "math")
LOSSES = ("plain", "chunked")
ADAMW_IMPLS = ("auto", "fused", "foreach", "for-loop")
PARAM_DTYPES = ("float32", "bfloat16")
# --task mlm (splitnet.mlm): bytes 0..255 and the mask token (--bpe N: N + 1 ids); bidirectional
MLM_MASK_ID = 256
MLM_VOCAB = 257
PARALLEL = ("ddp", "fsdp")   # how torchrun's processes share a run (splitnet.training.sharding)
SCHEDULES = ("cosine", "inverse-sqrt")
# how --layer-drop's probability varies with depth (splitnet.training.elastic)
LAYER_DROP_RULES = ("uniform", "linear")
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
    context_slides: bool = option(True, "generation past max_len slides the context (the last "
                                  "max_len tokens, nanoGPT's crop); False: it is refused (a "
                                  "context that must never slide: a Mistral imported before "
                                  "issue 61 with its window as max_len)", cli=False)
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
    conv_kernel: int = network_option("conv_kernel")
    activation: str = network_option("activation")
    norm: str = network_option("norm")
    norm_eps: float = network_option("norm_eps")
    init: str | None = network_option("init")       # None: the task's rule (init_rule)
    positions: str = option("learned", "token positions: learned absolute embeddings added to "
                            "the input (GPT-2), or none (GPT-NeoX: rotary attention carries "
                            "them)", choices=POSITIONS)
    rotary_pct: float = option(0.0, "share of each attention head's channels rotated by "
                               "rotary position embeddings (RoPE, GPT-NeoX's convention; "
                               "Pythia: 0.25); 0 = off")
    rotary_base: float = option(10000.0, "RoPE base (theta) of rotary_pct")
    n_kv_heads: int | None = option(None, "key/value heads of self-attention, each shared by "
                                    "n_heads / n_kv_heads query heads (grouped-query "
                                    "attention: Llama 2 70B, Mistral, Qwen2); default n_heads")
    attention_bias: str = option("all", "biases of self-attention's projections: all (q, k, v "
                                 "and output: GPT-2), qkv (Qwen2) or none (Llama, Mistral)",
                                 choices=ATTENTION_BIASES)
    head_dim: int | None = option(None, "width of each attention head when it is not d_model "
                                  "/ n_heads (Qwen3, Gemma): queries n_heads head_dim wide, "
                                  "keys and values n_kv_heads head_dim; default d_model / "
                                  "n_heads")
    qk_norm: str = option("none", "queries and keys normalised (the norm kind) before rotary: "
                          "head (over each head, one weight shared by the heads: Qwen3, Gemma "
                          "3), projection (over the whole projection: OLMo 2) or none",
                          choices=QK_NORMS)
    norm_position: str = option("pre", "where each field's norm sits: pre (on its input: GPT-2, "
                                "Llama), post (on its output, inside the residual: OLMo 2's x + "
                                "N(f(x))) or sandwich (both, two norms: Gemma 2 / 3's x + "
                                "N2(f(N1(x))))", choices=NORM_POSITIONS)
    scale_embedding: bool = option(False, "the token embedding multiplied by sqrt(d_model) "
                                   "in forward (Gemma; init xavier does it too)")
    attention_softcap: float | None = option(
        None, "attention logits soft-capped, c tanh(z / c), before the mask and the softmax "
        "(Gemma 2: 50); default none")
    attention_scalar: float | None = option(
        None, "attention logits Q K^T / sqrt(S) (Gemma's query_pre_attn_scalar); default "
        "head_dim")
    sliding_window: int | None = option(
        None, "local attention: each query sees its last W positions, itself included "
        "(Gemma 2 / 3), in the layers --window-layers names; default none (global)",
        metavar="W")
    window_layers: tuple[int, ...] | None = option(
        None, "0-based layers whose attention is local, e.g. 0,2 (default: all, with "
        "--sliding-window); the others attend globally", metavar="K,K,...", parse=int_list)
    local_rotary_base: float | None = option(
        None, "RoPE base (theta) of the local layers (Gemma 3: 10000, its global layers' 1e6); "
        "default rotary_base")
    logit_softcap: float | None = option(
        None, "final logits soft-capped, c tanh(z / c) (Gemma 2: 30): in forward, the chunked "
        "loss and generation; default none")
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
    stack: str = stack_option()
    reversible: bool = network_option("reversible")
    reversible_grid: int | None = network_option("reversible_grid")
    depth_basis: str | None = network_option("depth_basis")     # splitnet.configs.depth
    # options that only apply alongside another: given without it, a command refuses them
    # (:func:`~splitnet.configs.options.check_applicable`; the config itself takes any value,
    # so a model built in Python or restored from a checkpoint is never refused for them).
    # Those only some field kinds or norms read are declared with the kinds (FieldKind.reads,
    # options.NORMS) and refused by the config itself when set (options.check_read); a stored
    # config's are reset to their defaults on reading (options.reset_unread: they changed
    # nothing)
    ONLY_WITH: ClassVar[dict] = {
        "gate_fields": ("with --gate sigmoid or tanh", lambda c: c.gate is not None),
        "rotary_base": ("with --rotary-pct > 0 (rotary positions on)",
                        lambda c: c.rotary_pct > 0),
        **dict.fromkeys(("head_dim", "qk_norm"), ("with --diffusion-field attention",
                                                  lambda c: c.diffusion_field == "attention")),
    }

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        check_bools(self)
        for name in ("vocab_size", "d_model", "n_heads", "n_layers", "max_len"):
            set_(self, name, _int(name, getattr(self, name)))
        check_network(self)
        fields = _kinds.present(self, (DIFFUSION, CONVECTION))
        spec, scheme = _plan.resolve_scheme(self.scheme, fields)
        set_(self, "scheme", spec)
        _choice("gate", self.gate, GATES, none=True)
        _choice("gate_fields", self.gate_fields, GATE_FIELDS)
        set_(self, "conv_kernel", _int("conv_kernel", self.conv_kernel))
        _choice("positions", self.positions, POSITIONS)
        set_(self, "rotary_pct", _real("rotary_pct", self.rotary_pct, lo=0.0, hi=1.0))
        set_(self, "rotary_base", _real("rotary_base", self.rotary_base, lo=0.0, lo_open=True))
        set_(self, "tie_head", bool(self.tie_head))
        set_(self, "context_slides", bool(self.context_slides))
        self._check_heads()
        set_(self, "learn_coefficients", bool(self.learn_coefficients))
        check_projection(self, scheme)
        set_(self, "causal", bool(self.causal))
        self._check_gates()
        self._check_windows()
        set_(self, "_plan", _plan.Plan(self, spec, scheme, fields, "a SplitTransformer"))
        self._check_stack()
        for f in self.plan.layer(0):                   # fields the model has kinds for
            f.kind.check(self)
        check_depth_basis(self)

    def _check_heads(self) -> None:
        """``n_kv_heads`` (None: ``n_heads``) divides ``n_heads``; ``attention_bias`` a choice."""
        set_ = object.__setattr__
        kv = self.n_heads if self.n_kv_heads is None else _int("n_kv_heads", self.n_kv_heads)
        if self.n_heads % kv:
            raise ValueError(f"n_kv_heads {kv} must divide n_heads {self.n_heads} (each key/value "
                             f"head serves n_heads / n_kv_heads query heads)")
        set_(self, "n_kv_heads", None if kv == self.n_heads else kv)
        _choice("attention_bias", self.attention_bias, ATTENTION_BIASES)
        _choice("qk_norm", self.qk_norm, QK_NORMS)
        _choice("norm_position", self.norm_position, NORM_POSITIONS)
        if self.norm_position != "pre" and self.diffusion_field == "conv":
            raise ValueError(f"norm_position {self.norm_position!r} is read by attention and "
                             f"the feed-forward kinds; the conv field normalises its input only")
        hd = _int("head_dim", self.head_dim, none=True)   # the default width is None, one way
        set_(self, "head_dim", None if hd is not None and hd * self.n_heads == self.d_model
             else hd)

    def _check_stack(self) -> None:
        """The stack kind (:mod:`splitnet.configs.stacks`): ``reversible=True`` is
        ``stack="reversible"``; a stack option its kind does not read refused; its checks."""
        resolve_stack(self).check(self, [("scheme", self._plan.scheme)])

    def _check_gates(self) -> None:
        object.__setattr__(self, "gate_layers", layer_indices(
            self, "gate_layers", self.gate_layers, "gate='sigmoid' or 'tanh'", self.gate))

    def _check_windows(self) -> None:
        """The soft-caps, the attention scalar and the local rotary base positive numbers or
        None; ``sliding_window`` an int >= 1 on a causal network; ``window_layers`` layer
        indices, only with a window (:func:`layer_indices`)."""
        set_ = object.__setattr__
        for name in ("attention_softcap", "logit_softcap", "attention_scalar",
                     "local_rotary_base"):
            set_(self, name, _real(name, getattr(self, name), lo=0.0, lo_open=True, none=True))
        set_(self, "sliding_window", _int("sliding_window", self.sliding_window, none=True))
        if self.sliding_window is not None and not self.causal:
            raise ValueError("sliding_window is a causal window (the last W positions); this "
                             "network is bidirectional (causal=False)")
        set_(self, "window_layers", layer_indices(self, "window_layers", self.window_layers,
                                                  "sliding_window", self.sliding_window))
        if self.local_rotary_base is not None and (self.sliding_window is None or
                                                   self.rotary_pct == 0):
            raise ValueError("local_rotary_base is the rotary base of the local layers; give "
                             "sliding_window (and window_layers) and rotary_pct > 0 too")

    # -- derived ---------------------------------------------------------------------------
    @property
    def plan(self) -> _plan.Plan:
        """The resolved plan (:class:`~splitnet.configs.plan.Plan`), computed once when the
        config was validated: the scheme and what each layer is made of."""
        return self._plan

    def resolved_scheme(self):
        """The :class:`~splitnet.integrators.schemes.SplittingScheme` this config names, over a
        language model's fields by the rule every network follows
        (:func:`splitnet.integrators.schemes.network_scheme`); without a feed-forward
        (``convection_field="none"``) a plain residual step of the diffusion field. Held by
        the plan: resolved once."""
        return self._plan.scheme

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
        for name in ("gate_layers", "window_layers"):
            if d[name] is not None:
                d[name] = list(d[name])
        return d

    @classmethod
    def from_dict(cls, d: dict) -> SplitConfig:
        """The config of :meth:`to_dict`; unknown keys are an error naming them."""
        return _from_dict(cls, d)

    def replace(self, **changes) -> SplitConfig:
        """A copy with ``changes``, checked again (the resolved scheme kept when the scheme and
        the fields are unchanged)."""
        return _plan.replaced(self, carried(self, stack_changes(self, changes)),
                              {"scheme": self._plan})


def layer_indices(cfg, name: str, given, needs: str, switch):
    """``given`` (layer indices, or ``"0,2"``; None: all) as a sorted tuple of distinct
    layers of ``cfg``; ValueError for anything else, or a non-empty list while ``switch``,
    the option it refines (``needs`` names it), is None."""
    if given is None:
        return None
    gl = int_list(given) if isinstance(given, str) else given
    if any(isinstance(i, bool) or not isinstance(i, numbers.Integral) for i in gl):
        raise ValueError(f"{name} must be layer indices (ints), got {gl!r}")
    gl = tuple(sorted({int(i) for i in gl}))
    if gl and switch is None:
        raise ValueError(f"{name} given without {needs}")
    bad = [i for i in gl if not 0 <= i < cfg.n_layers]
    if bad:
        raise ValueError(f"{name} {bad} outside 0..{cfg.n_layers - 1}")
    return gl


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


__all__ = ["ADAMW_IMPLS", "ATTENTION_BIASES", "COMPILE_MODES", "COMPILE_SCOPES", "CORPORA",
           "CUDAGRAPH_MODES", "DEVICES", "GATES", "GATE_FIELDS", "LAYER_DROP_RULES", "LOSSES",
           "MAX_BEAM", "MLM_MASK_ID", "MLM_VOCAB", "PAIR_NAMES", "PARALLEL", "PARAM_DTYPES",
           "POSITIONS", "SCHEDULES", "SDPA_BACKENDS", "MissingDependency", "SplitConfig",
           "cli_fields", "layer_indices", "require"]


def __getattr__(name: str):
    """The names this public module also serves, defined elsewhere (``splitnet.ALSO_SERVED``:
    0.3's ``splitnet.configs.config.LIMITS`` and the like), looked up on first use."""
    from .. import served

    return served(__name__, name)
