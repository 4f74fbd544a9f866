"""The base of the field kinds (:mod:`splitnet.configs.kinds`): what every kind answers --
how it is built, what it checks, its parameters and FLOPs in closed form, what generation needs
-- and the norms every kind holds (:func:`norm_params`, :func:`norm_arguments`). Pure Python.

A kind is built per layer: :meth:`FieldKind.build` takes the layer's index, and a kind whose
module differs from layer to layer (attention's windows and rotary bases,
:meth:`FieldKind.layer_arguments`) says how; the others ignore it.
"""

from __future__ import annotations

import importlib

HALF = 0.5 ** 0.5       # ConvS2S's residual scale (splitnet.fields.conv.HALF)


def convs2s(config) -> bool:
    """Whether ``config`` asks for ConvS2S's blocks and scaling (``init="convs2s"``)."""
    return getattr(config, "init", None) == "convs2s"


def norm_params(config, channels: int | None = None) -> int:
    """The parameters of a field's norms of ``config`` (two under ``norm_position="sandwich"``),
    or of one over ``channels``: LayerNorm's scale and shift, RMSNorm's scale, none's nothing."""
    each = {"rms": 1, "rms_offset": 1, "none": 0}.get(getattr(config, "norm", "layer"), 2)
    sandwich = getattr(config, "norm_position", "pre") == "sandwich"
    return each * (config.d_model * (1 + sandwich) if channels is None else channels)


def norm_arguments(config) -> dict:
    """A field's norm: its kind, epsilon and position (pre, post or sandwich)."""
    return {"norm_eps": config.norm_eps, "norm": getattr(config, "norm", "layer"),
            "norm_position": getattr(config, "norm_position", "pre")}


class FieldKind:
    """A kind of field. Subclasses set ``name``, ``serves``, ``module`` (``"package.module:
    Class"``) and ``mixes_tokens``, and give :meth:`arguments`, :meth:`params`, :meth:`flops`.
    ``width`` is the kind's hidden width where it has one (the feed-forward's; ``None``: the
    kind's default from the config, :meth:`default_width`)."""

    name: str = ""
    serves: str = ""
    module: str = ""
    summary: str = ""          # one line for the <field>_field option's help
    mixes_tokens: bool = True
    uses_memory: bool = False
    reads_embedding: bool = False   # reads the decoder's embedded inputs (target_embedding=)
    memory_parts: int = 1           # the memory it reads: 1 = the encoder output, 2 = [z | e]
    absent: bool = False            # "none": the field is left out of the network
    reversible: bool = True         # its module runs in a reversible network's pair
    # the matrices whose output is the field's value (what a residual sub-layer adds; GPT-2's
    # initialisation scales them by 1/sqrt(n residual sub-layers), splitnet.nets.init)
    residual_outputs: tuple[str, ...] = ()
    # its map onto transformers' GPT2Block: (module attribute, block path) pairs of equal
    # parameters, e.g. ("qkv", "attn.c_attn"); None: none (format="gpt2" refused, naming it)
    gpt2: tuple[tuple[str, str], ...] | None = None
    reads: tuple[str, ...] = ()     # options only some kinds read that it reads (check_read)

    def cacheable(self, config) -> bool:
        """Whether a key/value cache makes generation with this field exact."""
        return False

    def default_width(self, config) -> int | None:
        return None

    def check(self, config) -> None:
        """Raise ``ValueError`` for a config this kind cannot be built from."""

    def arguments(self, config, width: int | None) -> dict:
        raise NotImplementedError

    def layer_arguments(self, config, layer: int) -> dict:
        """What differs in layer ``layer``'s module (none by default: every layer alike)."""
        return {}

    def build(self, config, width: int | None = None, layer: int = 0):
        """The ``nn.Module`` of this kind for layer ``layer`` of ``config`` (imports torch)."""
        path, _, cls = self.module.partition(":")
        return getattr(importlib.import_module(path), cls)(
            **{**self.arguments(config, width), **self.layer_arguments(config, layer)})

    def params(self, config, width: int | None = None) -> int:
        raise NotImplementedError

    def flops(self, config, width: int | None = None, seq_len: int = 1,
              memory_len: int = 0) -> float:
        """Forward matmul FLOPs per token of one evaluation, on sequences of ``seq_len`` tokens
        (``memory_len``: memory tokens, for a field that reads a memory)."""
        raise NotImplementedError

    def _width(self, config, width):
        return self.default_width(config) if width is None else width

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


__all__ = ["HALF", "FieldKind", "convs2s", "norm_arguments", "norm_params"]
