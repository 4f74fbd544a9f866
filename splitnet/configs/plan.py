"""A network config's plan, resolved once: the scheme over the fields its network has
(:func:`resolve_scheme`, one resolution of the name) and what each layer is made of -- its fields,
each with its kind, width and stage count (:func:`layer_fields`), planned by the field kinds
(:mod:`splitnet.configs.kinds`).

A config computes its :class:`Plan` when it is validated and holds it (``config.plan``); every
later question -- the network's layers (:mod:`splitnet.nets.models`, :mod:`splitnet.nets.seq2seq`),
its cost (:mod:`splitnet.nets.cost`), the initialisation's residual outputs, the memory
estimate, ``splitnet describe``, the run's task -- reads the held plan instead of deriving the
scheme from its name again. ``config.replace(...)`` with the scheme and the fields unchanged
keeps the resolved scheme (:func:`replaced`). Pure Python: no torch.
"""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from ..stagelists.stages import CONVECTION, DIFFUSION, FIELDS
from .fieldkind import FieldKind
from .kinds import KINDS, GatedKind, kind_of, serving


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


class Plan:
    """What a validated network config resolves to, computed once: ``scheme`` (the
    :class:`~splitnet.integrators.splitting.SplittingScheme` over the network's ``fields``, by
    the one rule every network follows, :func:`splitnet.integrators.schemes.network_scheme`),
    ``spec`` (what the config stores for it) and each layer's fields (:meth:`layer`, planned
    once per kind of layer: gated or not)."""

    def __init__(self, config, spec, scheme, fields: tuple[str, ...], network: str):
        self.config, self.spec, self.scheme = config, spec, scheme
        self.fields, self.network = tuple(fields), network
        self._layers: dict[bool, tuple[LayerField, ...]] = {}

    def layer(self, k: int) -> tuple[LayerField, ...]:
        """What layer ``k`` is made of (:func:`layer_fields`); layers alike share one answer."""
        gated = k in self.config.gated_layers
        if gated not in self._layers:
            self._layers[gated] = layer_fields(self.config, self.scheme, k, self.fields,
                                               self.network)
        return self._layers[gated]

    def layers(self) -> list[tuple[LayerField, ...]]:
        """:meth:`layer` of every layer, in order."""
        return [self.layer(k) for k in range(self.config.n_layers)]

    def __repr__(self) -> str:
        return f"Plan({self.scheme.name!r}: {self.scheme.diagram()}, fields={self.fields})"


# The plans of the config being replaced (:func:`replaced`), by the option naming each scheme,
# read by the new config's validation.
_CARRY: contextvars.ContextVar[dict | None] = contextvars.ContextVar("carry", default=None)


def replaced(config, changes: dict, plans: dict):
    """``dataclasses.replace(config, **changes)``, the new config keeping ``config``'s
    resolved schemes (``plans``: option name -> :class:`Plan`) where a scheme and its fields
    are unchanged (:func:`resolve_scheme`)."""
    token = _CARRY.set(plans)
    try:
        return dataclasses.replace(config, **changes)
    finally:
        _CARRY.reset(token)


def resolve_scheme(scheme, fields: Sequence[str], option: str = "scheme"):
    """``(spec, network scheme)`` of a config's ``scheme`` option over its network's
    ``fields``: the scheme resolved once (:func:`~splitnet.integrators.schemes.network_scheme`),
    and what the config stores for it -- a registry name or pattern as given, else the plain
    data of :meth:`~splitnet.integrators.splitting.SplittingScheme.to_dict` (so a checkpoint
    rebuilds it without pickling). A config replaced with the same scheme and fields reuses
    the resolved one (``option``: the config's name for the scheme)."""
    from ..integrators import schemes as _schemes

    fields = tuple(fields)
    carry = (_CARRY.get() or {}).get(option)
    if carry is not None and carry.fields == fields and _same_spec(carry.spec, scheme):
        return carry.spec, carry.scheme
    if isinstance(scheme, _schemes.SplittingScheme):
        spec = scheme.to_dict()
        try:
            if _schemes.get(scheme.name) == scheme:
                spec = scheme.name
        except ValueError:
            pass
        return spec, _schemes.network_scheme(scheme, fields)
    if not isinstance(scheme, (str, dict)):
        raise TypeError(f"scheme must be a name, a pattern or a SplittingScheme, got "
                        f"{type(scheme).__name__}")
    net = _schemes.network_scheme(scheme, fields)       # raises ValueError naming the problem
    if isinstance(scheme, str) and ":" not in scheme:
        return scheme.strip(), net
    return net.to_dict() if len(fields) > 1 or isinstance(scheme, str) else scheme, net


def _same_spec(spec, scheme) -> bool:
    return type(spec) is type(scheme) and spec == scheme


__all__ = ["LayerField", "Plan", "check_fields", "layer_fields", "replaced", "resolve_scheme"]
