"""What one layer of a network is made of: its fields, each with its kind, width and stage
count (:func:`layer_fields`), planned from a config and a scheme by the field kinds
(:mod:`splitnet.configs.kinds`). :mod:`splitnet.nets.models` and :mod:`splitnet.nets.seq2seq`
build a layer from the answer, :mod:`splitnet.nets.cost` counts it, and the initialisation
reads each kind's residual outputs from it. Pure Python: no torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..stagelists.stages import CONVECTION, DIFFUSION, FIELDS
from .kinds import KINDS, FieldKind, GatedKind, kind_of, serving


def check_fields(scheme, fields: Sequence[str] = FIELDS,
                 network: str = "a SplitTransformer") -> None:
    """Refuse (one ``ValueError``) a scheme that advances a field the network does not have."""
    present = scheme.fields
    extra = [f for f in present if f not in fields]
    if not extra:
        return
    why = []
    for f in extra:
        names = serving(f)
        if not names:
            why.append(f"no field kind serves {f!r}")
        elif KINDS[names[0]].uses_memory:
            why.append(f"{f} reads a memory (an encoder's output) and needs an encoder–decoder "
                       f"network, SplitSeq2Seq")
        else:
            why.append(f"{f} is not one of them")
    raise ValueError(f"{network} has the fields {' and '.join(fields)}; scheme "
                     f"{scheme.name!r} ({scheme.diagram()}) advances {', '.join(extra)}: "
                     f"{'; '.join(why)}")


@dataclass(frozen=True)
class LayerField:
    """One field of one layer: its kind, the width it is built with, how many stages advance
    it (``calls``, components of sum stages included) and whether one module serves them all
    (``shared``) or each stage has its own."""

    field: str
    kind: FieldKind
    width: int | None
    calls: int
    shared: bool

    @property
    def n_modules(self) -> int:
        return 1 if self.shared else self.calls


def layer_fields(config, scheme, layer: int, fields: Sequence[str] = FIELDS,
                 network: str = "a SplitTransformer") -> tuple[LayerField, ...]:
    """What layer ``layer`` of a network built from ``config`` is made of, field by field (in
    ``fields`` order): the kind (gated when the config gates this layer and field), the width,
    the stage count. With ``weights="per-stage"`` the convection width is scaled by (diffusion
    stages / convection stages): a Strang layer then has the parameters of a Transformer layer
    (the Macaron matching) and a sandwich pattern those of its sublayers."""
    check_fields(scheme, fields, network)
    shared = config.weights == "shared"
    gated = layer in config.gated_layers
    present = scheme.fields
    calls = {f: scheme.n_stages(f) for f in fields if f in present}
    out = []
    for f, n in calls.items():
        kind = kind_of(config, f)
        width = kind.default_width(config)
        if not shared and f == CONVECTION and width is not None and DIFFUSION in calls:
            width = max(1, round(width * calls[DIFFUSION] / n))
        if gated and config.gate_fields in ("both", f):
            kind = GatedKind(kind, config.gate)
        out.append(LayerField(f, kind, width, n, shared))
    return tuple(out)


__all__ = ["LayerField", "check_fields", "layer_fields"]
