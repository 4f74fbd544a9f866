"""The pieces every config dataclass is made of (pure Python, no torch): :func:`option` (a field
with its help text, command-line and ``--resume`` behaviour), the checks that turn a bad value
into a one-line error naming the option (:func:`check_int`, :func:`check_real`,
:func:`check_choice`, bounded by :data:`LIMITS`), and the option tables more than one config
reads (:data:`WEIGHTS`, :data:`ACTIVATIONS`). :mod:`splitnet.configs.config` and
:mod:`splitnet.configs.seq2seq` build on it."""

from __future__ import annotations

import dataclasses
import inspect
import math
import numbers

from ..integrators.subflows import METHODS
from . import kinds as _kinds
from .depth import DEPTH_BASIS_HELP

WEIGHTS = ("shared", "per-stage")
# Feed-forward activations, the one list: name -> (torch.nn.functional function, keywords);
# splitnet.fields builds the function from it (this module stays free of torch).
ACTIVATIONS = {"gelu": ("gelu", ()), "gelu_tanh": ("gelu", (("approximate", "tanh"),)),
               "relu": ("relu", ()), "silu": ("silu", ()), "tanh": ("tanh", ())}
# Initialisation rules (splitnet.nets.init), the one list: gpt2 = GPT-2 / nanoGPT (matrices
# N(0, 0.02), declared residual outputs N(0, 0.02 / sqrt(n))); xavier = Vaswani et al. /
# fairseq / torch.nn.Transformer (xavier-uniform matrices, embeddings N(0, d^-1/2) whose token
# part the network scales by sqrt(d)); convs2s = Gehring et al. 2017 (matrices N(0, sqrt(1/n)),
# those feeding a GLU N(0, sqrt(4/n)), dropout-corrected; embeddings N(0, 0.1); and ConvS2S's
# sqrt(1/2) scaling of its fields' residual steps).
INITS = ("gpt2", "xavier", "convs2s")
# Normalisations inside every field and at the end (splitnet.fields.norms), the one list:
# layer = LayerNorm (GPT-2, GPT-NeoX), rms = RMSNorm (Llama, Qwen2, Mistral: no mean, no bias),
# none = no normalisation at all (ConvS2S, which keeps its activations' variance by scaling).
# Each with the options only some norms read that it reads (check_read, as the field kinds'
# FieldKind.reads).
NORMS = {"layer": ("norm_eps",), "rms": ("norm_eps",), "rms_offset": ("norm_eps",), "none": ()}
# self-attention's query/key normalisation (splitnet.fields.attention): none, per head (Qwen3,
# Gemma 3) or over the whole projection (OLMo 2)
QK_NORMS = ("none", "head", "projection")
# where a field's norm sits (splitnet.fields.norms.make_norms): on its input (pre, GPT-2,
# Llama), on its output inside the residual (post, OLMo 2), or both (sandwich, Gemma 2 / 3)
NORM_POSITIONS = ("pre", "post", "sandwich")
# what splitnet.interop.to_hf and `splitnet export --format` write: the Llama family's formats
# (splitnet.interop.llama.OUT, in this order), and all of them
FAMILY_FORMATS = ("llama", "qwen2", "qwen3", "olmo2")
EXPORT_FORMATS = ("auto", "gpt2", "splitnet", *FAMILY_FORMATS)
INIT_HELP = ("initialisation: gpt2 (every matrix N(0, 0.02), the residual outputs each field "
             "kind declares N(0, 0.02/sqrt(n)); language models' default) or xavier "
             "(xavier-uniform matrices, zero biases, embeddings N(0, d^-1/2) scaled by sqrt(d) "
             "in forward: torch.nn.Transformer / fairseq; the default of masked LMs and "
             "translation) or convs2s (Gehring et al. 2017: matrices N(0, sqrt(1/n)), those "
             "feeding a GLU N(0, sqrt(4/n)), dropout-corrected, embeddings N(0, 0.1), and the "
             "conv and multistep fields' steps scaled by sqrt(1/2)); not given: the task's")
# The two options of a reversible network, declared once for every network config (a language
# model's SplitConfig and a translation model's Seq2SeqConfig, whose --reversible is one flag).
REVERSIBLE_HELP = ("a partitioned state (x1, x2): attention writes x1 reading x2 (cross-attention "
                   "also reading the memory), the feed-forward x2 reading x1; exactly "
                   "invertible, the scheme's order kept with residual sub-layers, training "
                   "stores no activations per layer (splitnet.reversible)")
REVERSIBLE_GRID_HELP = ("with --reversible: every increment rounded to a multiple of 2^-K, so "
                        "the inverse is exact in float32 at any depth (off by default)")
# What a config dict written before an option existed meant: a checkpoint without the key
# rebuilds the function it was trained as (xavier's sqrt(d) embedding scale changes it).
LEGACY = {"init": "gpt2"}


def init_rule(cfg) -> str:
    """The initialisation a network config ``cfg`` gets: its ``init``, or when None its
    network's rule: gpt2 for a language model, xavier for an encoder–decoder
    (torch.nn.Transformer's rule). A training run's task sets its own first
    (:attr:`splitnet.tasks.task.Task.init`: xavier for a masked LM, an encoder)."""
    if cfg.init is not None:
        return cfg.init
    return "xavier" if hasattr(cfg, "n_encoder_layers") else "gpt2"

# How an option behaves on --resume: "fixed" options define the run (a different explicit value
# is an error); "free" ones may be changed by an explicit flag (they do not alter the maths);
# every option not given is restored from the checkpoint.
# "session" options belong to one invocation and are never stored.
FIXED, FREE, SESSION = "fixed", "free", "session"


def option(default, help: str, resume: str = FIXED, cli: bool = True, metavar: str | None = None,
           choices=None, parse=None, const=None):
    """A dataclass field with its help text and command-line/resume behaviour in metadata
    (``const``: the value of the flag given bare, without a value)."""
    meta = {"help": help, "resume": resume, "cli": cli, "metavar": metavar, "choices": choices,
            "parse": parse, "const": const}
    if isinstance(default, (list, dict, set)):
        raise TypeError("mutable defaults are not allowed in configs")
    return dataclasses.field(default=default, metadata=meta)


# The options every network config shares, declared once: name -> (default, help, extras).
# Each config names them by network_option(name) (a fresh field), with its own default where
# its network differs (an encoder–decoder's init), so the help texts cannot drift apart.
NETWORK_OPTIONS = {
    "d_model": (128, "model width", {}),
    "n_heads": (4, "attention heads", {}),
    "weights": ("shared", "one sub-layer per field per layer (shared) or one per stage "
                "(per-stage, feed-forward width scaled: Macaron matching)", {"choices": WEIGHTS}),
    "step_size": (1.0, "h: each layer integrates [k h, (k+1) h]", {}),
    "d_ff": (None, "feed-forward width (default 4 d_model)", {}),
    "dropout": (0.0, "dropout probability", {}),
    "method": ("euler", "sub-flow method of every stage (euler = residual sub-layers)",
               {"choices": METHODS}),
    "activation": ("gelu", "feed-forward activation (gelu_tanh: GPT-2's)",
                   {"choices": ACTIVATIONS}),
    "norm": ("layer", "normalisation inside every field and before the head: layer "
             "(LayerNorm, GPT-2), rms (RMSNorm, Llama), rms_offset (RMSNorm with scale 1 + w, "
             "w from zero: Gemma) or none (ConvS2S)", {"choices": NORMS}),
    "norm_eps": (1e-5, "epsilon of the norms", {}),
    "conv_kernel": (3, "kernel width of the conv diffusion field: token i sees i-k+1..i (odd "
                    "when not causal: i-(k-1)/2..i+(k-1)/2)", {}),
    "init": (None, INIT_HELP, {"choices": INITS}),
    "reversible": (False, REVERSIBLE_HELP, {}),
    "reversible_grid": (None, REVERSIBLE_GRID_HELP, {"metavar": "K"}),
    "depth_basis": (None, DEPTH_BASIS_HELP, {"metavar": "KIND:K"}),
}
_SAME = object()


def network_option(name: str, default=_SAME):
    """The field of the shared network option ``name`` (:data:`NETWORK_OPTIONS`), with
    ``default`` in place of the shared one when given."""
    d, help, extras = NETWORK_OPTIONS[name]
    return option(d if default is _SAME else default, help, **extras)


# Upper bounds of the numbers a config takes: far beyond any real run, low enough that sizes,
# seeds and step counts stay in int64 and torch's allocators (a bigger value is a one-line
# error naming the option, not an overflow deep inside torch).
MAX_SEED = 2**63 - 1
LIMITS = {"vocab_size": 2**24, "d_model": 2**16, "n_heads": 2**12, "head_dim": 2**14,
          "n_layers": 2**14,
          "src_vocab": 2**24, "tgt_vocab": 2**24, "n_encoder_layers": 2**14,
          "n_decoder_layers": 2**14,
          "max_len": 2**24, "d_ff": 2**20, "context": 2**24, "steps": 2**40,
          "batch_size": 2**24, "grad_accum": 2**24, "eval_windows": 2**24, "eval_every": 2**40,
          "ckpt_every": 2**40, "warmup": 2**40, "seed": MAX_SEED, "loss_chunk": 2**31 - 1,
          "threads": 2**10, "sync_every": 2**40, "stop_at": 2**40, "refine_substeps": 2**10,
          "reversible_grid": 20,
          # reals: a step, a learning rate or a peak beyond these overflows float32 at once
          "step_size": 1e3, "lr": 10.0, "weight_decay": 1e3, "clip": 1e30, "norm_eps": 1.0,
          "peak_tflops": 1e6, "rotary_base": 1e12, "order_penalty": 1e6}


def check_flag(name: str, v) -> bool:
    """``v`` as a bool if it is one (numpy's too); ValueError naming ``name`` otherwise
    (``bool("no")`` is True: a string would switch the option on silently)."""
    if isinstance(v, bool) or (type(v).__module__ == "numpy" and type(v).__name__ in ("bool",
                                                                                      "bool_")):
        return bool(v)
    raise ValueError(f"{name} must be True or False, got {v!r}")


def type_name(f: dataclasses.Field) -> str:
    """A field's annotation as written (``"int | None"``), whether the module that declared it
    postponed its annotations (strings) or not (``int``, ``int | None``)."""
    t = f.type
    return t if isinstance(t, str) else getattr(t, "__name__", None) if isinstance(t, type) \
        else str(t).replace("NoneType", "None")


def check_bools(cfg) -> None:
    """Every ``bool`` field of the dataclass ``cfg`` holds a bool (numpy's too), set back as a
    Python bool; ValueError naming the field otherwise: ``bool("no")`` is True, so a string
    would switch an option on silently. A field typed ``bool | None`` may also be None."""
    for f in dataclasses.fields(cfg):
        t = type_name(f)
        if t not in ("bool", "bool | None"):
            continue
        v = getattr(cfg, f.name)
        if v is None and t == "bool | None":
            continue
        object.__setattr__(cfg, f.name, check_flag(f.name, v))


def check_int(name: str, v, lo: int = 1, none: bool = False):
    if v is None and none:
        return None
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    hi = LIMITS.get(name)
    if hi is not None and v > hi:
        raise ValueError(f"{name} must be <= {hi:,}, got {v:,}")
    return int(v)


def check_real(name: str, v, lo: float | None = None, hi: float | None = None, lo_open=False,
          hi_open=False, none: bool = False):
    if v is None and none:
        return None
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {v!r}")
    v = float(v)
    hi = LIMITS.get(name, hi) if hi is None else hi
    if lo is not None and (v < lo or (lo_open and v == lo)):
        raise ValueError(f"{name} must be {'>' if lo_open else '>='} {lo:g}, got {v:g}")
    if hi is not None and (v > hi or (hi_open and v == hi)):
        raise ValueError(f"{name} must be {'<' if hi_open else '<='} {hi:g}, got {v:g}")
    return v


def check_choice(name: str, v, options, none: bool = False):
    if v is None and none:
        return None
    if v not in options:
        raise ValueError(f"{name} must be one of {', '.join(map(str, options))}; got {v!r}")
    return v


def int_list(text: str) -> tuple[int, ...]:
    """``"0,1,3"`` -> ``(0, 1, 3)``; a clear error for anything else."""
    items = [x.strip() for x in str(text).split(",") if x.strip()]
    if not items:
        raise ValueError(f"expected comma-separated integers, got {text!r}")
    try:
        return tuple(int(x) for x in items)
    except ValueError:
        raise ValueError(f"expected comma-separated integers, got {text!r}") from None


def positive_ints(name: str, v) -> tuple[int, ...]:
    """A non-empty tuple of ints >= 1 from a tuple, a list or ``"1,2,4"``."""
    items = int_list(v) if isinstance(v, str) else v
    if not isinstance(items, (tuple, list)) or not items:
        raise ValueError(f"{name} must be a non-empty list of ints >= 1, got {v!r}")
    return tuple(check_int(name, i) for i in items)


def config_from_dict(cls, d):
    """``cls(**d)``; unknown keys are an error naming them, and an option of :data:`LEGACY`
    missing from ``d`` (a dict written before it existed) takes its legacy value, not today's
    default."""
    if not isinstance(d, dict):
        raise TypeError(f"a {cls.__name__} is read from a dict, got {type(d).__name__}")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - names)
    if unknown:
        raise ValueError(f"unknown {cls.__name__} option(s) {unknown}")
    legacy = {k: v for k, v in LEGACY.items() if k in names and k not in d}
    return cls(**legacy, **reset_unread(cls, d))


def kind_options(*fields: str):
    """Class decorator, applied before ``@dataclass``: the option ``<field>_field`` for each of
    ``fields`` that some kind serves (:mod:`splitnet.configs.kinds`) and that the class does
    not declare itself -- choices the kinds serving the field (a live view of the registry),
    default the first one registered. So a kind added to ``KINDS`` is a choice of every config
    and of the command line, and a field a kind starts to serve gets its option."""
    def add(cls):
        ann = dict(inspect.get_annotations(cls))   # the class's own, in order
        for f in fields:
            name = _kinds.option_name(f)
            if name in ann or not _kinds.serving(f):
                continue
            ann[name] = "str"
            setattr(cls, name, option(_kinds.serving(f)[0], _kinds.option_help(f),
                                      choices=_kinds.Serving(f)))
        cls.__annotations__ = ann                  # what @dataclass reads next
        return cls
    return add


def kind_option_fields(cfg) -> tuple[str, ...]:
    """The fields whose kind ``cfg`` (a config or its class) picks by an option (those whose
    choices are the registry's live view, :class:`~splitnet.configs.kinds.Serving`)."""
    return tuple(f.metadata["choices"].field for f in dataclasses.fields(cfg)
                 if isinstance(f.metadata.get("choices"), _kinds.Serving))


# the highest degree of conditions the projection of learned coefficients reaches (order 8:
# yoshida8's 71 conditions on 45 coefficients stalled at 7.9e-07 after 60 damped steps, 130 s,
# from perturbations of 0.01; order 6: 5-6 steps from 0.01, 3 from 0.001)
MAX_PROJECTED_ORDER = 6


def check_projection(cfg, scheme) -> None:
    """``project_coefficients`` of a network config: a bool, only with ``learn_coefficients``,
    and a scheme whose conditions the projection reaches (declared order <= 6, or exact)."""
    from ..stagelists.stages import EXACT_ORDER

    object.__setattr__(cfg, "project_coefficients", bool(cfg.project_coefficients))
    if not cfg.project_coefficients:
        return
    if not cfg.learn_coefficients:
        raise ValueError("project_coefficients needs learned coefficients: add "
                         "--learn-coefficients")
    if MAX_PROJECTED_ORDER < scheme.order < EXACT_ORDER:
        raise ValueError(f"project_coefficients: {scheme.name} declares order {scheme.order}, "
                         f"and the projection onto the order conditions reaches order "
                         f"{MAX_PROJECTED_ORDER} at most (order 8: yoshida8's 71 conditions on "
                         f"45 coefficients stall at 8e-07 from perturbations of 0.01)")


def flag(name: str) -> str:
    """``loss_chunk`` -> ``--loss-chunk`` (how the command line spells an option)."""
    return "--" + name.replace("_", "-")


def check_applicable(obj, given, table) -> None:
    """The one check of options that only apply alongside others: ``table`` maps an option's
    name to ``(needs, applies)``, ``needs`` the words after "only applies" (``"with --loss
    chunked"``) and ``applies(obj)`` whether it is read by ``obj`` (a config, or a command's
    parsed arguments); each name in ``given`` (the options the user gave: typed on the command
    line, whatever the value) whose option does not apply is a ValueError, one line naming
    every such option, instead of being recorded and ignored. Options not given are never
    refused (a default, or a value ``--resume`` restored, is not the user's)."""
    wrong: dict[str, list[str]] = {}
    for name, (needs, applies) in table.items():
        if name in given and not applies(obj):
            wrong.setdefault(needs, []).append(flag(name))
    if wrong:
        needs, names = next(iter(wrong.items()))
        one = len(names) == 1
        raise ValueError(f"{', '.join(names)} only appl{'ies' if one else 'y'} {needs}; here "
                         f"{'it' if one else 'they'} would be ignored: drop "
                         f"{'it' if one else 'them'}")



def check_network(cfg) -> None:
    """The options every network config shares -- ``d_model`` / ``n_heads``, ``weights``,
    ``step_size``, ``d_ff`` (default ``4 d_model``), ``dropout``, ``method``, ``activation``,
    ``init``, ``norm_eps``, the field kinds (``<field>_field``) -- checked and normalised in
    place on the frozen dataclass ``cfg``."""
    set_ = object.__setattr__
    if getattr(cfg, "head_dim", None) is None and cfg.d_model % cfg.n_heads:
        raise ValueError(f"d_model={cfg.d_model} is not divisible by n_heads={cfg.n_heads}")
    check_choice("weights", cfg.weights, WEIGHTS)
    if isinstance(cfg.step_size, bool) or not isinstance(cfg.step_size, numbers.Real):
        raise TypeError(f"step_size must be a real number, got {cfg.step_size!r}")
    set_(cfg, "step_size", check_real("step_size", cfg.step_size, lo=0.0, lo_open=True))
    set_(cfg, "dropout", check_real("dropout", cfg.dropout, lo=0.0, hi=1.0, hi_open=True))
    check_choice("method", cfg.method, METHODS)
    check_choice("activation", cfg.activation, ACTIVATIONS)
    check_choice("init", cfg.init, INITS, none=True)
    check_choice("norm", cfg.norm, NORMS)
    for field in kind_option_fields(cfg):
        _kinds.check_option(cfg, field)
    check_read(cfg)
    # (filled in after check_read, which sees it as given; reset_unread and carried put a
    # filled-in d_ff that nothing reads back to None when a config is read or replaced)
    set_(cfg, "d_ff", 4 * cfg.d_model if cfg.d_ff is None else check_int("d_ff", cfg.d_ff))
    set_(cfg, "norm_eps", check_real("norm_eps", cfg.norm_eps, lo=0.0, lo_open=True))


# ---------------------------------------------------------------------------------------------
# options only some kinds read: each field kind (FieldKind.reads) and each norm (NORMS) declares
# those it reads; one set away from its default that nothing in the network reads is refused


def readers() -> dict[str, list[tuple[str, str]]]:
    """Every option some field kind or norm reads -> who reads it, as ``(the option choosing
    it, its name)``: ``("convection_field", "feedforward")``, ``("norm", "layer")``; from the
    declarations, a kind registered later included."""
    out: dict[str, list[tuple[str, str]]] = {}
    for name, cls in _kinds.KINDS.items():
        for option_ in cls.reads:
            out.setdefault(option_, []).append((_kinds.option_name(cls.serves), name))
    for name, reads in NORMS.items():
        for option_ in reads:
            out.setdefault(option_, []).append(("norm", name))
    return out


def read_options(cfg) -> set[str]:
    """The options of :func:`readers` that the kinds of ``cfg``'s fields and its norm read."""
    read = set(NORMS.get(cfg.norm, ()))
    for field in kind_option_fields(cfg):
        read.update(_kinds.KINDS[getattr(cfg, _kinds.option_name(field))].reads)
    return read


def _default(cfg, name: str):
    return next(f.default for f in dataclasses.fields(cfg) if f.name == name)


def unread(cfg, given=None) -> dict[str, str]:
    """The options of ``cfg`` that no kind of its network nor its norm reads, of those away
    from their defaults (or of ``given``, names: the options a user typed) -> the options that
    would make them read (``"--convection-field feedforward"``)."""
    read, fields = read_options(cfg), {f.name for f in dataclasses.fields(cfg)}
    out = {}
    for name, who in readers().items():
        off = name in given if given is not None else (
            name in fields and getattr(cfg, name) != _default(cfg, name))
        if name in fields and name not in read and off:
            out[name] = " or ".join(f"{flag(o)} {k}" for o, k in who if o in fields)
    return out


def check_read(cfg) -> None:
    """ValueError, one sentence, for an option set away from its default that no kind of
    ``cfg``'s network reads (``activation`` with a SwiGLU or no feed-forward, ``n_kv_heads``
    with a conv diffusion field, ``norm_eps`` with ``norm="none"``, ...): it would change
    nothing."""
    bad = unread(cfg)
    if bad:
        name, who = next(iter(bad.items()))
        raise ValueError(f"{name}={getattr(cfg, name)!r} ({flag(name)}) is read only with "
                         f"{who}, and this network has {network_kinds(cfg)}: it would change "
                         f"nothing, so leave it out")


def network_kinds(cfg) -> str:
    """``--diffusion-field conv, --convection-field none, --norm layer``: what reads options."""
    return ", ".join(f"{flag(o)} {getattr(cfg, o)}" for o in (
        *(_kinds.option_name(f) for f in kind_option_fields(cfg)), "norm"))


def only_with(cfg) -> dict:
    """:func:`check_applicable`'s table of the options some kind or norm reads, for a command
    line's check of what was typed (whatever the value): name -> (needs, applies)."""
    return {name: (f"with {who} (this network has {network_kinds(cfg)})",
                   lambda c, n=name: n in read_options(c))
            for name, who in unread(cfg, set(readers())).items()}


def carried(cfg, changes: dict) -> dict:
    """``changes`` of ``cfg.replace`` plus, for each option no kind of the new network reads
    that the changes do not set, its default: ``replace(convection_field="none")`` of a config
    whose ``d_ff`` was filled in is not a ``d_ff`` the user gave (one given is checked)."""
    merged = {**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}, **changes}
    reset = reset_unread(type(cfg), merged)
    return {**changes, **{k: v for k, v in reset.items() if k not in changes and v != merged[k]}}


def reset_unread(cls, d: dict) -> dict:
    """A stored config dict with the options no kind of its network reads at their defaults:
    a config written before such options were refused (they changed nothing) still loads."""
    fields = {f.name: f.default for f in dataclasses.fields(cls)}
    norm = d.get("norm", fields.get("norm"))
    read = set(NORMS.get(norm, readers())) if isinstance(norm, str) else set(readers())
    for field in kind_option_fields(cls):
        name = d.get(_kinds.option_name(field), fields[_kinds.option_name(field)])
        kind = _kinds.KINDS.get(name) if isinstance(name, str) else None
        read.update(kind.reads if kind is not None else readers())   # a bad name: its error
    return {k: (fields[k] if k in readers() and k not in read else v) for k, v in d.items()}


__all__ = ["ACTIVATIONS", "EXPORT_FORMATS", "FAMILY_FORMATS", "FIXED", "FREE", "INITS",
           "INIT_HELP", "LEGACY", "LIMITS", "MAX_PROJECTED_ORDER", "MAX_SEED",
           "NETWORK_OPTIONS", "NORMS", "NORM_POSITIONS", "QK_NORMS",
           "REVERSIBLE_GRID_HELP", "REVERSIBLE_HELP", "SESSION", "WEIGHTS", "carried",
           "check_applicable", "check_bools", "check_choice", "check_flag", "check_int",
           "check_network", "check_projection", "check_read", "check_real",
           "config_from_dict", "flag", "init_rule", "int_list", "kind_option_fields",
           "kind_options", "network_kinds", "network_option", "only_with", "option",
           "positive_ints", "read_options", "readers", "reset_unread", "type_name",
           "unread"]
