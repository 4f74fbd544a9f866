"""Configuration of an encoder–decoder network: :class:`Seq2SeqConfig`
(``sn.models.Seq2SeqConfig``).

One frozen dataclass, every option named once with its help text (the command line of
``splitnet train --task translate`` and the checkpoint derive from the fields, as for
:class:`~splitnet.configs.config.SplitConfig`). Pure Python: no torch.

A network has two stacks, each a sequence of steps of a splitting scheme over its fields
(:meth:`Seq2SeqConfig.stack_config` describes one, :class:`StackConfig`):

* the **encoder**: ``diffusion`` (non-causal self-attention, source padding masked) and
  ``convection`` (the feed-forward network), ``n_encoder_layers`` steps of ``encoder_scheme``;
* the **decoder**: ``diffusion`` (causal self-attention), ``cross`` (attention to the encoder's
  output, the fixed memory particles) and ``convection``, ``n_decoder_layers`` steps of
  ``decoder_scheme``. A registry name is taken over the three fields in that order
  (``lie-trotter`` = self, cross, feed-forward: the standard decoder layer; ``strang`` =
  ``s/2 x/2 f x/2 s/2``); a stage string names its fields itself (``c:0.5,d:1,x:1,c:0.5`` with
  ``weights="per-stage"`` is the Macaron decoder, feed-forward width halved).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from ..integrators import schemes as _schemes
from ..stagelists.stages import CONVECTION, CROSS, DIFFUSION
from . import kinds as _kinds
from . import plan as _plan
from .depth import check_depth_basis
from .options import (
    carried,
    check_bools,
    check_network,
    kind_option_fields,
    kind_options,
    network_option,
    option,
)
from .options import check_int as _int
from .options import config_from_dict as _from_dict
from .stacks import get as get_stack
from .stacks import resolve_stack, stack_changes, stack_option

ENCODER_FIELDS = (DIFFUSION, CONVECTION)
DECODER_FIELDS = (DIFFUSION, CROSS, CONVECTION)


@dataclass(frozen=True)
@kind_options(DIFFUSION, CONVECTION, CROSS)
class StackConfig:
    """One stack of a :class:`Seq2SeqConfig` as the field kinds read it (the attributes
    :func:`splitnet.configs.plan.layer_fields` and the kinds' ``arguments`` use): which fields, how
    many layers of which scheme, causal or not, reversible or not (a partitioned state,
    :mod:`splitnet.reversible`). No gates, no rotary. ``fields``: those the stack has (a field
    whose kind is ``none`` is left out)."""

    name: str                     # "encoder" / "decoder"
    fields: tuple[str, ...]
    n_layers: int
    scheme: Any                   # the resolved SplittingScheme
    spec: Any                     # what the Seq2SeqConfig stores for it
    causal: bool
    d_model: int
    n_heads: int
    d_ff: int
    dropout: float
    norm_eps: float
    activation: str
    weights: str
    step_size: float
    method: str
    stack: str = "plain"
    reversible: bool = False
    reversible_grid: int | None = None
    depth_basis: str | None = None
    norm: str = "layer"
    init: str | None = None
    conv_kernel: int = 3
    # what a SplitConfig has and a stack keeps fixed
    gate: None = None
    gate_fields: str = "both"
    gated_layers: tuple = ()
    rotary_pct: float = 0.0
    rotary_base: float = 10000.0

    @property
    def plan(self) -> _plan.Plan:
        """The stack's plan (:class:`~splitnet.configs.plan.Plan`), made once."""
        p = self.__dict__.get("_plan")
        if p is None:
            network = f"the {self.name} of a SplitSeq2Seq" + \
                (" (cross-attention belongs to the decoder_scheme)" if self.name == "encoder"
                 else "")
            p = _plan.Plan(self, self.spec, self.scheme, self.fields, network)
            object.__setattr__(self, "_plan", p)
        return p

    def layer_fields(self, k: int) -> tuple:
        """What layer ``k`` is made of (:func:`splitnet.configs.plan.layer_fields`)."""
        return self.plan.layer(k)


def _legacy_arrangement(spec, fields: tuple[str, ...]):
    """A registry name as splitnet 0.2 built it in a stack: over ``fields`` in their listed
    order (self-attention outermost), as explicit stages; anything else unchanged."""
    if _schemes.registry_name(spec) is not None:
        return {**_schemes.get(spec, fields=fields).to_dict(), "name": f"{spec} (0.2 nesting)"}
    return spec


@dataclass(frozen=True)
# diffusion_field (attention or conv, both masking the source padding), convection_field
# (feedforward, swiglu or none), cross_field (cross or multistep)
@kind_options(DIFFUSION, CONVECTION, CROSS)
class Seq2SeqConfig:
    """Everything that defines a :class:`~splitnet.nets.seq2seq.SplitSeq2Seq`; see its docstring."""

    src_vocab: int = option(259, "source vocabulary size (259: bytes and pad/bos/eos)", cli=False)
    tgt_vocab: int = option(259, "target vocabulary size", cli=False)
    d_model: int = network_option("d_model")
    n_heads: int = network_option("n_heads")
    n_encoder_layers: int = option(3, "encoder layers = steps of the encoder scheme")
    n_decoder_layers: int = option(3, "decoder layers = steps of the decoder scheme")
    encoder_scheme: Any = option("lie-trotter", "encoder scheme over diffusion (self-attention) "
                                 "and convection (feed-forward): a name, s/f pattern or stage "
                                 "string")
    decoder_scheme: Any = option("lie-trotter", "decoder scheme over diffusion (causal "
                                 "self-attention), cross (attention to the encoder) and "
                                 "convection: a name (lie-trotter = the standard decoder "
                                 "layer) or a stage string such as c:0.5,d:1,x:1,c:0.5 (with "
                                 "--weights per-stage: the Macaron decoder)")
    weights: str = network_option("weights")
    step_size: float = network_option("step_size")
    d_ff: int | None = network_option("d_ff")
    max_len: int = option(256, "longest source or target sequence (learned positions)",
                          cli=False)
    dropout: float = network_option("dropout")
    method: str = network_option("method")
    activation: str = network_option("activation")
    norm: str = network_option("norm")
    norm_eps: float = network_option("norm_eps")
    conv_kernel: int = network_option("conv_kernel")
    init: str = network_option("init", "xavier")
    shared_embeddings: bool = option(True, "one token embedding for source and target (needs "
                                     "equal vocabularies; --no-shared-embeddings: two)")
    # Untied by default: with the xavier rule a head tied to the embedding learns the copy and
    # reversal tasks up to 1.5x slower than torch.nn.Transformer with its own nn.Linear head;
    # untied, within 1.06x (benchmarks/parity.py, docs/benchmarks.md).
    tie_head: bool = option(False, "output head tied to the target embedding (--tie-head; "
                                   "default an nn.Linear head of its own, as torch's)")
    pad_id: int = option(256, "padding token id", cli=False)
    bos_id: int = option(257, "beginning-of-sequence id: decoder inputs start with it",
                         cli=False)
    eos_id: int = option(258, "end-of-sequence id: targets end with it", cli=False)
    # both stacks reversible: the encoder's self-attention and the decoder's self- and
    # cross-attention write x1, the feed-forward x2 (splitnet.reversible)
    stack: str = stack_option()
    reversible: bool = network_option("reversible")
    reversible_grid: int | None = network_option("reversible_grid")
    depth_basis: str | None = network_option("depth_basis")     # splitnet.configs.depth
    # options that only apply alongside another (:func:`~splitnet.configs.options.
    # check_applicable`: a command refuses them typed alone); those only some field kinds or
    # norms read are declared with the kinds (FieldKind.reads, options.NORMS: check_read)
    ONLY_WITH: ClassVar[dict] = {}

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        check_bools(self)
        for name in ("src_vocab", "tgt_vocab", "d_model", "n_heads", "n_encoder_layers",
                     "n_decoder_layers", "max_len", "conv_kernel"):
            set_(self, name, _int(name, getattr(self, name)))
        check_network(self)
        resolve_stack(self)              # reversible=True is stack="reversible", for both
        check_depth_basis(self)          # normalised before the stacks take it
        set_(self, "_stacks", {side: self._make_stack(side) for side in ("encoder", "decoder")})
        for name in ("shared_embeddings", "tie_head"):
            set_(self, name, bool(getattr(self, name)))
        if self.shared_embeddings and self.src_vocab != self.tgt_vocab:
            raise ValueError(f"shared_embeddings needs equal vocabularies, got src_vocab="
                             f"{self.src_vocab} and tgt_vocab={self.tgt_vocab}")
        self._check_specials()
        for side in ("encoder", "decoder"):        # every field has a kind, every scheme fits
            stack = self.stack_config(side)
            for f in stack.layer_fields(0):
                try:
                    f.kind.check(stack)
                except ValueError as e:
                    raise ValueError(f"the {side}'s {f.field} field: {e}") from None
        dec = self.stack_config("decoder").scheme
        if CROSS not in dec.fields:
            raise ValueError(f"decoder_scheme {dec.name!r} ({dec.diagram()}) never advances the "
                             f"cross field: the decoder would not read the encoder (add an "
                             f"x stage, e.g. d:1,x:1,c:1)")
        self._check_stack()

    def _check_stack(self) -> None:
        """The stack kind of both stacks (:mod:`splitnet.configs.stacks`) and its checks."""
        get_stack(self.stack).check(self, [(f"{side}_scheme", self.stack_config(side).scheme)
                                for side in ("encoder", "decoder")])

    def _check_specials(self) -> None:
        ids = {}
        for name in ("pad_id", "bos_id", "eos_id"):
            v = _int(name, getattr(self, name), lo=0)
            if v >= min(self.src_vocab, self.tgt_vocab):
                raise ValueError(f"{name}={v} must lie below both vocabulary sizes "
                                 f"({self.src_vocab}, {self.tgt_vocab})")
            if v in ids.values():
                raise ValueError(f"pad_id, bos_id and eos_id must differ, got "
                                 f"{self.pad_id}, {self.bos_id}, {self.eos_id}")
            ids[name] = v
            object.__setattr__(self, name, v)

    # -- derived ---------------------------------------------------------------------------
    def stack_config(self, side: str) -> StackConfig:
        """The encoder's or the decoder's :class:`StackConfig` (made once, when the config was
        validated: its scheme resolved then)."""
        if side not in ("encoder", "decoder"):
            raise ValueError(f"side must be 'encoder' or 'decoder', got {side!r}")
        return self._stacks[side]

    def _make_stack(self, side: str) -> StackConfig:
        enc = side == "encoder"
        fields = _kinds.present(self, ENCODER_FIELDS if enc else DECODER_FIELDS)
        option = f"{side}_scheme"
        spec, scheme = _plan.resolve_scheme(getattr(self, option), fields, option)
        object.__setattr__(self, option, spec)
        return StackConfig(name=side, fields=fields,
                     n_layers=self.n_encoder_layers if enc else self.n_decoder_layers,
                     scheme=scheme, spec=spec, causal=not enc, d_model=self.d_model,
                     n_heads=self.n_heads,
                     d_ff=self.d_ff, dropout=self.dropout, norm_eps=self.norm_eps,
                     activation=self.activation, weights=self.weights,
                     step_size=self.step_size, method=self.method,
                     stack=self.stack, reversible=self.reversible,
                     reversible_grid=self.reversible_grid, depth_basis=self.depth_basis,
                     norm=self.norm, init=self.init, conv_kernel=self.conv_kernel,
                     **self.field_kinds())

    def field_kinds(self) -> dict[str, str]:
        """The kind options, ``{"<field>_field": kind}`` (:func:`~splitnet.configs.options.
        kind_options`), which every :class:`StackConfig` takes over."""
        return {f"{f}_field": getattr(self, f"{f}_field") for f in kind_option_fields(self)}

    # -- plain data ------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """Plain data (str, numbers, dicts): safe in a ``weights_only`` checkpoint and JSON."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Seq2SeqConfig:
        """The config :meth:`to_dict` wrote (unknown keys are an error naming them). A dict
        written before 0.3 (it has no ``init``) built a registry name over its stack's fields
        in the order listed (an encoder's ``strang`` was ``d/2 c d/2``); it gets those stages
        spelled out, so an old checkpoint rebuilds the network it was trained as."""
        if isinstance(d, dict) and "init" not in d:
            d = {**d, **{f"{side}_scheme": _legacy_arrangement(d[f"{side}_scheme"], fields)
                         for side, fields in (("encoder", ENCODER_FIELDS),
                                              ("decoder", DECODER_FIELDS))
                         if f"{side}_scheme" in d}}
        return _from_dict(cls, d)

    def replace(self, **changes) -> Seq2SeqConfig:
        """A copy with ``changes`` (checked again; a stack's resolved scheme kept when its
        scheme and fields are unchanged)."""
        return _plan.replaced(self, carried(self, stack_changes(self, changes)),
                              {f"{side}_scheme": st.plan for side, st in self._stacks.items()})


__all__ = ["DECODER_FIELDS", "ENCODER_FIELDS", "Seq2SeqConfig", "StackConfig"]
