"""Field kinds: what a network builds for each field of its scheme, and what that costs.

A *field* is a name in a scheme (``diffusion``, ``convection``, ``cross``); a *kind* is the
module a network builds for it. A :class:`FieldKind` says, from a
:class:`~splitnet.configs.config.SplitConfig`:

* how it is built (:meth:`FieldKind.build`: the module :attr:`FieldKind.module` names, imported
  on first use, with :meth:`FieldKind.arguments`), and what it checks of the config;
* its parameters and forward matmul FLOPs per token in closed form (:meth:`FieldKind.params`,
  :meth:`FieldKind.flops`), in ``torch.utils.flop_counter.FlopCounterMode``'s convention:
  2 per multiply-add, attention's ``QK^T`` and ``AV`` dense (no 1/2 for a causal mask),
  element-wise work (norms, activations, softmax, GLU, residual adds) not counted;
* what generation needs: ``mixes_tokens`` (a token's update depends on the other tokens) and
  :meth:`FieldKind.cacheable` (a key/value cache makes generation exact);
* the field it serves by default (:attr:`FieldKind.serves`).

==========  ==========  ===========================  ===================================
kind        serves      parameters                   forward FLOPs per token
==========  ==========  ===========================  ===================================
attention   diffusion   2 d q + 2 d e + 4 d + N      4 d q + 4 d e + 4 n q
conv        diffusion   (2 k + 1) d^2 + 3 d + N      (4 k + 2) d^2
  convs2s   diffusion   2 k d^2 + 2 d + N            4 k d^2
feedforward convection  2 d w + w + d + N            4 d w
swiglu      convection  3 d w + N                    6 d w
geglu       convection  3 d w + N                    6 d w
cross       cross       4 d^2 + 4 d + N              4 d^2 + 4 m d + 4 d^2 m / n
multistep   cross       2 d^2 + 2 d + N              4 d^2 + 4 m d
none        convection  0                            0
==========  ==========  ===========================  ===================================

(``convs2s``: the conv kind under ``init="convs2s"``, ConvS2S's block without an output
projection.) d = d_model, n = tokens per sequence, w = the feed-forward width, k = conv_kernel,
m = memory tokens, q = d_h n_heads the queries' width and e = d_h n_kv_heads the keys' (d_h =
head_dim, default d / n_heads: q = d, and e = d without grouped-query attention), N = the
norm's 2 d (LayerNorm) or d (RMSNorm). Attention's biases d + q + 2 e are the "4 d" when all
are kept (``attention_bias="qkv"`` drops the output's d, ``"none"`` all); ``qk_norm`` adds a
norm over d_h channels twice (``"head"``) or over q + e (``"projection"``); Gemma's
attention options (``attention_softcap``, ``attention_scalar``, ``sliding_window`` on
``window_layers`` with ``local_rotary_base``) add neither (a window is a mask, counted dense). A
self-dependency gate (:class:`GatedKind`, any kind) adds ``2 d^2 + 2 d`` parameters and
``4 d^2`` FLOPs. Tests check every closed form against the real modules' parameter counts
and against FlopCounterMode.

Pure Python: the configs' choices, ``splitnet describe`` and ``--help`` read it without torch.
A network asks :func:`splitnet.configs.plan.layer_fields` what one layer is made of;
:mod:`splitnet.nets.models` builds it and :mod:`splitnet.nets.cost` counts it from that answer.
Each kind declares its ``residual_outputs`` (the matrices whose output a residual sub-layer
adds, which GPT-2's initialisation scales, :mod:`splitnet.nets.init`) and ``gpt2``, its map
onto a GPT-2 block (``None``: none, :func:`splitnet.interop.convert.gpt2_mismatch` says so),
and ``reads``: the options only some kinds read that it reads (options.check_read).

**Adding a kind**: an ``nn.Module`` with ``forward(t, x)`` in ``splitnet/fields/``, a
:class:`FieldKind` subclass here, its line in :data:`KINDS`, nothing else: each config's
``<field>_field`` option (:func:`splitnet.configs.options.kind_options`) has :class:`Serving`,
a live view of this registry, as its choices (the first kind registered is the default).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from ..names import unknown_name
from ..stagelists.stages import CONVECTION, CROSS, DIFFUSION
from .fieldkind import HALF, FieldKind, convs2s, norm_arguments, norm_params


def present(config, fields: Sequence[str]) -> tuple[str, ...]:
    """``fields`` without those whose kind is ``none`` in ``config`` (left out of the network)."""
    return tuple(f for f in fields
                 if not getattr(KINDS.get(getattr(config, option_name(f), None)), "absent",
                                False))


class AttentionKind(FieldKind):
    """Multi-head self-attention (:class:`splitnet.fields.Attention`), causal as the config."""

    name, serves, module = "attention", DIFFUSION, "splitnet.fields.attention:Attention"
    summary = "self-attention"
    mixes_tokens = True
    reads = ("n_kv_heads", "attention_bias", "rotary_pct", "rotary_base", "attention_softcap",
             "attention_scalar", "sliding_window", "window_layers", "local_rotary_base")
    residual_outputs = ("proj.weight",)
    gpt2 = (("norm", "ln_1"), ("qkv", "attn.c_attn"), ("proj", "attn.c_proj"))

    def cacheable(self, config) -> bool:
        return bool(config.causal)   # a cache is exact only when earlier tokens never change

    @staticmethod
    def head_width(config) -> int:                 # head_dim, or d_model / n_heads
        return getattr(config, "head_dim", None) or config.d_model // config.n_heads

    @classmethod
    def rotary_dims(cls, config) -> int:
        """Channels per head that rotary position embeddings turn: ``int(head_dim *
        rotary_pct)`` (GPT-NeoX's rounding), 0 when off."""
        return int(cls.head_width(config) * config.rotary_pct)

    def check(self, config) -> None:
        r = self.rotary_dims(config)
        if config.rotary_pct > 0 and (r < 2 or r % 2):
            raise ValueError(f"rotary_pct {config.rotary_pct:g} of head_dim "
                             f"{self.head_width(config)} gives {r} rotary channels; "
                             f"rotary needs an even number >= 2 of them")
        if getattr(config, "qk_norm", "none") != "none" == getattr(config, "norm", "layer"):
            raise ValueError(f"qk_norm {config.qk_norm!r} normalises queries and keys with "
                             f"the norm kind, and norm is 'none': give --norm rms or layer")

    def arguments(self, config, width):
        return {"d_model": config.d_model, "n_heads": config.n_heads, "causal": config.causal,
                "dropout": config.dropout, "bias": getattr(config, "attention_bias", "all"),
                "rotary_dims": self.rotary_dims(config), "rotary_base": config.rotary_base,
                **norm_arguments(config), **{k: getattr(config, k, None) for k in (
                    "n_kv_heads", "head_dim", "attention_softcap", "attention_scalar")},
                "qk_norm": getattr(config, "qk_norm", "none")}

    @staticmethod
    def windowed(config, layer: int) -> bool:
        """Whether layer ``layer``'s attention is local (``sliding_window`` set, the layer in
        ``window_layers``: all of them when that is None)."""
        if getattr(config, "sliding_window", None) is None:
            return False
        listed = getattr(config, "window_layers", None)
        return listed is None or layer in listed

    def layer_arguments(self, config, layer):
        """A local layer's window and rotary base (``local_rotary_base``, else the global one):
        Gemma's pattern of local and global layers, each with its own base."""
        if not self.windowed(config, layer):
            return {}
        base = getattr(config, "local_rotary_base", None)
        return {"window": config.sliding_window,
                **({} if base is None else {"rotary_base": base})}

    @classmethod
    def widths(cls, config) -> tuple[int, int]:
        """The queries' width ``q = d_h n_heads``, the keys' (values') ``e = d_h n_kv_heads``."""
        kv = getattr(config, "n_kv_heads", None) or config.n_heads
        return cls.head_width(config) * config.n_heads, cls.head_width(config) * kv

    def params(self, config, width=None):
        d, (q, e) = config.d_model, self.widths(config)
        bias = getattr(config, "attention_bias", "all")
        biases = {"all": d + q + 2 * e, "qkv": q + 2 * e, "none": 0}[bias]
        qk = {"none": 0, "head": 2 * self.head_width(config), "projection": q + e}[
            getattr(config, "qk_norm", "none")]
        # q and out d q; k, v d e
        return 2 * d * q + 2 * d * e + biases + norm_params(config, qk) + norm_params(config)

    def flops(self, config, width=None, seq_len=1, memory_len=0):
        d, (q, e) = config.d_model, self.widths(config)
        return 4.0 * d * q + 4.0 * d * e + 4.0 * seq_len * q   # projections; QK^T, AV 2 n q


class ConvKind(FieldKind):
    """The GLU convolution over ``config.conv_kernel`` positions (:class:`splitnet.fields.GLUConv`,
    ConvS2S): local interaction, causal as the config, a cache of its window's inputs when
    causal. Under ``init="convs2s"`` ConvS2S's block: no output projection, the step scaled by
    sqrt(1/2)."""

    name, serves, module = "conv", DIFFUSION, "splitnet.fields.conv:GLUConv"
    summary = "a GLU convolution over conv_kernel positions (ConvS2S)"
    mixes_tokens, reads = True, ("conv_kernel",)
    residual_outputs = ("proj.weight",)

    def cacheable(self, config) -> bool:
        return bool(config.causal)   # the window reads earlier tokens only

    def check(self, config) -> None:      # (rotary_pct: not read here, options.check_read)
        if not config.causal and config.conv_kernel % 2 == 0:
            raise ValueError(f"a non-causal conv field needs an odd conv_kernel (a window "
                             f"centred on the token), got {config.conv_kernel}")

    def arguments(self, config, width):
        return {"d_model": config.d_model, "kernel_size": config.conv_kernel,
                "causal": config.causal, "dropout": config.dropout, "norm_eps": config.norm_eps,
                "norm": getattr(config, "norm", "layer"), "convs2s": convs2s(config)}

    def params(self, config, width=None):
        d, k = config.d_model, config.conv_kernel
        # conv 2k d^2 + 2d, out d^2 + d (ConvS2S's block: no out)
        out = 0 if convs2s(config) else d * d + d
        return 2 * k * d * d + 2 * d + out + norm_params(config)

    def flops(self, config, width=None, seq_len=1, memory_len=0):
        d, k = config.d_model, config.conv_kernel
        return (4.0 * k + (0.0 if convs2s(config) else 2.0)) * d * d   # conv 4k d^2, out 2 d^2


class FeedForwardKind(FieldKind):
    """The position-wise feed-forward network (:class:`splitnet.fields.FeedForward`), width
    ``config.d_ff`` unless a network scales it (the Macaron matching)."""

    name, serves, module = "feedforward", CONVECTION, "splitnet.fields.feedforward:FeedForward"
    summary = "the position-wise feed-forward network, width d_ff"
    mixes_tokens, reads = False, ("d_ff", "activation")
    residual_outputs = ("fc2.weight",)
    gpt2 = (("norm", "ln_2"), ("fc1", "mlp.c_fc"), ("fc2", "mlp.c_proj"))

    def default_width(self, config):
        return config.d_ff

    def arguments(self, config, width):
        return {"d_model": config.d_model, "d_ff": self._width(config, width), **norm_arguments(
            config), "activation": config.activation, "dropout": config.dropout}

    def params(self, config, width=None):
        d, w = config.d_model, self._width(config, width)
        return 2 * d * w + w + d + norm_params(config)     # fc1 d w + w, fc2 w d + d

    def flops(self, config, width=None, seq_len=1, memory_len=0):
        return 4.0 * config.d_model * self._width(config, width)


class SwiGLUKind(FieldKind):
    """The gated feed-forward network of Llama, Qwen2 and Mistral
    (:class:`splitnet.fields.feedforward.SwiGLU`): ``down(silu(gate(x)) * up(x))``, no biases,
    width ``config.d_ff`` (Llama's intermediate_size)."""

    name, serves, module = "swiglu", CONVECTION, "splitnet.fields.feedforward:SwiGLU"
    summary = "the gated feed-forward network of Llama (SwiGLU, no biases), width d_ff"
    mixes_tokens, gate = False, "silu"          # gate: the activation of the gate branch
    residual_outputs, reads = ("down.weight",), ("d_ff",)   # not activation: its gate

    def default_width(self, config):
        return config.d_ff

    def arguments(self, config, width):
        return {"d_model": config.d_model, "d_ff": self._width(config, width),
                "dropout": config.dropout, **norm_arguments(config), "activation": self.gate}

    def params(self, config, width=None):
        return 3 * config.d_model * self._width(config, width) + norm_params(config)

    def flops(self, config, width=None, seq_len=1, memory_len=0):
        return 6.0 * config.d_model * self._width(config, width)   # gate, up, down


class GeGLUKind(SwiGLUKind):
    """Gemma's gated feed-forward network: ``down(gelu_tanh(gate(x)) * up(x))``, no biases."""

    name, gate, summary = "geglu", "gelu_tanh", "Gemma's gated feed-forward (GeGLU), width d_ff"


class CrossKind(FieldKind):
    """Attention to a memory (:class:`splitnet.fields.CrossAttention`): each call projects the
    memory's ``m`` tokens to keys and values, shared by the ``n`` tokens of the sequence."""

    name, serves, module = "cross", CROSS, "splitnet.fields.cross:CrossAttention"
    summary = "attention to the encoder's output"
    mixes_tokens, uses_memory = False, True
    residual_outputs = ("proj.weight",)

    def arguments(self, config, width):
        return {"d_model": config.d_model, "n_heads": config.n_heads, "dropout": config.dropout,
                "norm_eps": config.norm_eps, "norm": getattr(config, "norm", "layer")}

    def params(self, config, width=None):
        d = config.d_model
        return 4 * d * d + 4 * d + norm_params(config)   # q d^2 + d, kv 2d^2 + 2d, out d^2 + d

    def flops(self, config, width=None, seq_len=1, memory_len=0):
        d, m = config.d_model, memory_len
        return 4.0 * d * d + 4.0 * m * d + 4.0 * d * d * m / seq_len


class MultiStepKind(FieldKind):
    """ConvS2S's multi-step attention (:class:`splitnet.fields.MultiStepAttention`): one head,
    query ``W_d x + g`` with the target embedding, keys the encoder output, values it plus the
    source embedding (the memory ``[z | e]``); its step scaled by sqrt(1/2) under
    ``init="convs2s"``."""

    name, serves, module = "multistep", CROSS, "splitnet.fields.multistep:MultiStepAttention"
    summary = ("ConvS2S's multi-step attention (query plus the target embedding, values plus "
               "the source embedding)")
    mixes_tokens, uses_memory = False, True
    reads_embedding, memory_parts = True, 2
    reversible = False          # a reversible decoder's pair carries no target embedding
    residual_outputs = ("proj.weight",)

    def arguments(self, config, width):
        return {"d_model": config.d_model, "dropout": config.dropout,
                "norm_eps": config.norm_eps, "norm": getattr(config, "norm", "layer"),
                "residual_scale": HALF if convs2s(config) else 1.0}

    def params(self, config, width=None):
        d = config.d_model
        return 2 * d * d + 2 * d + norm_params(config)    # q d^2 + d, out d^2 + d

    def flops(self, config, width=None, seq_len=1, memory_len=0):
        d, m = config.d_model, memory_len
        return 4.0 * d * d + 4.0 * m * d                    # q, out; q z^T and a v: 2 m d each


class NoneKind(FieldKind):
    """No field: ``<field>_field="none"`` leaves the field out of the network, so a layer is a
    splitting of the fields left (ConvS2S's layers have no feed-forward). A scheme over one
    field is a plain residual step of it (:func:`splitnet.integrators.schemes.network_scheme`)."""

    name, serves, module = "none", CONVECTION, ""
    summary = "no feed-forward (a layer of the other fields alone: ConvS2S)"
    mixes_tokens = False
    absent = True

    def build(self, config, width=None):
        raise ValueError("the field kind 'none' builds nothing (the network leaves the field "
                         "out)")

    def arguments(self, config, width):
        return {}

    def params(self, config, width=None):
        return 0

    def flops(self, config, width=None, seq_len=1, memory_len=0):
        return 0.0


class GatedKind(FieldKind):
    """Any kind plus a self-dependency gate (:class:`splitnet.fields.Gated`, the Highway
    Transformer): ``f(t, x) + SDU(x)``, ``SDU`` two ``d x d`` linear maps."""

    module = "splitnet.fields.gates:Gated"

    def __init__(self, inner: FieldKind, gate: str):
        self.inner, self.gate = inner, gate
        self.name, self.serves = inner.name, inner.serves
        self.mixes_tokens, self.uses_memory = inner.mixes_tokens, inner.uses_memory
        self.reads_embedding, self.memory_parts = inner.reads_embedding, inner.memory_parts
        # the wrapped field's outputs (Gated holds it as .field); the gate's own W2 is a
        # correction the gate T(x) scales, initialised as every other matrix
        self.residual_outputs = tuple(f"field.{n}" for n in inner.residual_outputs)
        self.reads = inner.reads

    def cacheable(self, config) -> bool:
        return self.inner.cacheable(config)

    def default_width(self, config):
        return self.inner.default_width(config)

    def check(self, config) -> None:
        self.inner.check(config)

    def arguments(self, config, width, layer: int = 0):
        return {"field": self.inner.build(config, width, layer), "d_model": config.d_model,
                "gate": self.gate}

    def build(self, config, width=None, layer: int = 0):
        path, _, cls = self.module.partition(":")    # the inner module built for its layer
        return getattr(importlib.import_module(path), cls)(**self.arguments(config, width, layer))

    def params(self, config, width=None):
        d = config.d_model
        return self.inner.params(config, width) + 2 * d * d + 2 * d

    def flops(self, config, width=None, seq_len=1, memory_len=0):
        d = config.d_model
        return self.inner.flops(config, width, seq_len, memory_len) + 4.0 * d * d

    def __repr__(self) -> str:
        return f"GatedKind({self.inner!r}, {self.gate!r})"


# The registry: kind name -> class. The first kind registered for a field is its default.
KINDS: dict[str, type[FieldKind]] = {
    "attention": AttentionKind,
    "feedforward": FeedForwardKind,
    "cross": CrossKind,
    "conv": ConvKind,
    "swiglu": SwiGLUKind,
    "geglu": GeGLUKind,
    "multistep": MultiStepKind,
    "none": NoneKind,
}


def serving(field: str) -> tuple[str, ...]:
    """The kinds registered for ``field``, its default first."""
    return tuple(name for name, cls in KINDS.items() if cls.serves == field)


class Serving(Sequence):
    """The kinds serving ``field`` as a live view of :data:`KINDS`: the choices of a config's
    ``<field>_field`` option, so a kind registered later (a test, a plug-in) is a choice of the
    config and of the command line without touching either."""

    def __init__(self, field: str):
        self.field = field

    def __getitem__(self, i):
        return serving(self.field)[i]

    def __len__(self) -> int:
        return len(serving(self.field))

    def __repr__(self) -> str:
        return f"Serving({self.field!r}: {', '.join(self)})"


def option_name(field: str) -> str:
    """The config option that picks the kind of ``field``: ``<field>_field``."""
    return f"{field}_field"


def option_help(field: str) -> str:
    """Help text of ``<field>_field``: each kind serving the field with its summary."""
    return (f"the {field} field's kind (splitnet.configs.kinds): " +
            "; ".join(f"{n} = {KINDS[n].summary or KINDS[n].__doc__.split('.')[0]}"
                      for n in serving(field)))


def check_option(config, field: str) -> None:
    """``ValueError`` unless ``config.<field>_field`` names a kind serving ``field`` (checked
    against the registry now, which may have grown since the config class was made)."""
    name = getattr(config, option_name(field))
    if name in serving(field):
        return
    other = KINDS.get(name) if isinstance(name, str) else None
    raise ValueError(f"field kind {name!r} serves {other.serves}, not {field}"
                     if other is not None else
                     unknown_name(f"{field} field kind", name, serving(field),
                                  listed_by="splitnet train --help"))


def get_kind(name: str) -> FieldKind:
    """The kind called ``name`` (``ValueError`` naming the registered ones)."""
    if name not in KINDS:
        raise ValueError(f"unknown field kind {name!r}; registered: {', '.join(KINDS)}")
    return KINDS[name]()


def kind_of(config, field: str) -> FieldKind:
    """The kind a network built from ``config`` uses for ``field``: the config's option
    ``<field>_field`` if it has one, else the first kind registered for the field."""
    name = getattr(config, f"{field}_field", None)
    if name is None:
        names = serving(field)
        if not names:
            served = ", ".join(dict.fromkeys(c.serves for c in KINDS.values()))
            raise ValueError(f"no field kind is registered for the field {field!r} (the kinds "
                             f"serve {served})")
        name = names[0]
    return get_kind(name)


__all__ = ["KINDS", "AttentionKind", "ConvKind", "CrossKind", "FeedForwardKind", "GatedKind",
           "GeGLUKind", "MultiStepKind", "NoneKind", "Serving", "SwiGLUKind", "check_option",
           "get_kind", "kind_of", "option_help", "option_name", "present", "serving"]
