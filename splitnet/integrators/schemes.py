"""Splitting schemes: the registry and the front door.

A scheme is data (:class:`~splitnet.integrators.splitting.SplittingScheme`: stages, a declared
order, the
verbs ``step`` / ``integrate`` / ``layer``); :mod:`splitnet.integrators.core` holds the seven core
methods
and :mod:`splitnet.stagelists.zoo` the published coefficient sets. This module names them: the
registry (:func:`available`, :func:`get` -- with ``fields=`` for any number of fields --,
:func:`register`), :func:`from_pattern` (sandwich strings), :func:`resolve` (any description of
a scheme) and :func:`check_order`, the measured order of anything that describes a stage list.
Everything of ``splitting`` and ``core`` is served here too (``sn.schemes.Strang``, ...).
"""

from __future__ import annotations

import functools
import math
import numbers
import warnings
from collections.abc import Callable, Sequence

from ..names import LISTED_BY, unknown_name
from ..stagelists import stages as _st
from ..stagelists import zoo
from ..stagelists.stages import CONVECTION, CROSS, DIFFUSION, Stage, second_order_defect
from .core import (
    BlanesMoan4,
    LieTrotter,
    Parallel,
    Strang,
    Suzuki4,
    Yoshida4,
    Yoshida6,
    Yoshida8,
    zoo_class,
)
from .splitting import EXACT_ORDER, CustomScheme, OneField, SplittingScheme

CORE = ("lie-trotter", "strang", "yoshida4", "suzuki4", "yoshida6", "yoshida8", "blanes-moan4")
_REGISTRY: dict[str, Callable[[], SplittingScheme]] = {
    "lie-trotter": LieTrotter,
    "strang": Strang,
    "yoshida4": Yoshida4,
    "suzuki4": Suzuki4,
    "yoshida6": Yoshida6,
    "yoshida8": Yoshida8,
    "blanes-moan4": BlanesMoan4,
}
_PROBLEM_CLASS: dict[str, str] = dict.fromkeys(_REGISTRY, zoo.GENERAL)
UNSPLIT = "unsplit"          # the problem class of schemes that are not splittings
_REGISTRY["parallel"] = Parallel
_PROBLEM_CLASS["parallel"] = UNSPLIT
for _m in zoo.PUBLISHED:
    _REGISTRY[_m.name] = zoo_class(_m)
    _PROBLEM_CLASS[_m.name] = _m.problem_class
_ALIASES = {"gpt-j": "parallel", "parallel-residual": "parallel",
            "macaron": "strang", "strang-marchuk": "strang", "lie": "lie-trotter",
            "transformer": "lie-trotter", "triple-jump": "yoshida4", "yoshida6a": "yoshida6",
            "yoshida8d": "yoshida8", "candy-rozmus4": "forest-ruth4",
            "s9odr6a": "kahan-li6", "s9odr6b": "kahan-li6b", "s15odr8": "mclachlan8",
            "s17odr8a": "kahan-li8", "s17odr8b": "kahan-li8b", "s33odr10a": "kahan-li10",
            "s33odr10c": "kahan-li10c"}
# The groups of names available(kind) lists (not field kinds: those are configs.kinds.KINDS).
LISTINGS = ("general", "core", "restricted", "splitting", UNSPLIT, "all")


def check_aliases(aliases: dict[str, str], registry) -> None:
    """Refuse an alias table that could mislead: an alias equal to a registered name (it would
    shadow that scheme, since aliases are looked up first), an alias to a name that is not
    registered, or an alias that is not lower case (lookups are case-insensitive)."""
    for alias, target in aliases.items():
        if alias != alias.lower():
            raise ValueError(f"scheme alias {alias!r} must be lower case (names are looked up "
                             f"case-insensitively)")
        if alias in registry:
            raise ValueError(f"scheme alias {alias!r} (for {target!r}) is also a registered "
                             f"scheme name: it would shadow that scheme; rename one of them")
        if target not in registry:
            raise ValueError(f"scheme alias {alias!r} points to {target!r}, which is not a "
                             f"registered scheme")


check_aliases(_ALIASES, _REGISTRY)      # at import: a zoo entry named like an alias fails here


def available(kind: str = "general") -> list[str]:
    """Names of the registered schemes. ``kind``: ``"general"`` (default: every splitting with
    its order for any two fields, the core and the zoo), ``"core"`` (the seven the theory
    documents: lie-trotter ... blanes-moan4), ``"restricted"`` (zoo methods whose order holds
    only in a problem class, e.g. Runge–Kutta–Nyström methods), ``"splitting"`` (general and
    restricted: every splitting method), ``"unsplit"`` (schemes whose step is the exact flow of
    the sum of the fields: ``parallel``), ``"all"``."""
    if kind not in LISTINGS:
        raise ValueError(f"kind must be one of {', '.join(LISTINGS)}, got {kind!r}")
    if kind == "core":
        return list(CORE)
    if kind == "all":
        return list(_REGISTRY)
    classes = {"general": {zoo.GENERAL}, "restricted": set(zoo.PROBLEM_CLASSES) - {zoo.GENERAL},
               "splitting": set(zoo.PROBLEM_CLASSES), UNSPLIT: {UNSPLIT}}[kind]
    return [n for n in _REGISTRY if _PROBLEM_CLASS[n] in classes]


def _registry_key(name: str) -> str | None:
    key = _ALIASES.get(name.lower(), name.lower())
    return key if key in _REGISTRY else None


def registry_name(name: str) -> str | None:
    """The registered name ``name`` means (case-insensitive; an alias such as ``macaron``
    gives ``strang``), or None when it names nothing in the registry."""
    return _registry_key(name) if isinstance(name, str) else None


def _instance(key: str, fields: Sequence[str] | None = None) -> SplittingScheme:
    """The registered scheme (over ``fields`` when given); a restricted one warns that its
    class order is not general."""
    s = _REGISTRY[key]()
    if fields is not None:
        s = s.over(fields)
    if s.problem_class != zoo.GENERAL:
        warnings.warn(f"scheme {key!r} has order {s.class_order} only for "
                      f"{zoo.PROBLEM_CLASSES[s.problem_class]}; as a general splitting (which "
                      f"is how it is used here) its order is {s.order}", UserWarning,
                      stacklevel=3)
    return s


def get(name: str, fields: Sequence[str] | None = None) -> SplittingScheme:
    """The registered scheme ``name`` (case-insensitive; aliases such as macaron, transformer,
    triple-jump, s17odr8a). Only registry names: :func:`resolve` also takes patterns, stage
    strings and scheme objects. A restricted-class method (``available("restricted")``) comes
    with a warning: its ``order`` is its general-splitting order, ``class_order`` the other.

    ``fields``: the method over these fields instead of diffusion and convection
    (:meth:`~splitnet.integrators.splitting.SplittingScheme.over`): ``get("strang",
    fields=("convection",
    "diffusion", "cross"))`` is ``(c .5)(d .5)(x 1)(d .5)(c .5)``, first name outermost;
    Lie–Trotter is ``(f_1 1) ... (f_k 1)``; composition methods compose that symmetric step and
    keep their order; a two-field splitting refuses other field counts (``ValueError``)."""
    if not isinstance(name, str):
        raise TypeError(f"scheme name must be a str, got {type(name).__name__}")
    key = _registry_key(name)
    if key is None:
        raise ValueError(unknown_name("scheme", name, available("all"), _ALIASES))
    return _instance(key, fields)


def register(name: str, factory: Callable[[], SplittingScheme]) -> None:
    """Add a scheme to the registry (``factory()`` must return a SplittingScheme)."""
    if not isinstance(name, str) or not name.strip():
        raise TypeError(f"scheme name must be a non-empty str, got {name!r}")
    name = name.lower()   # get() is case-insensitive
    if name in _ALIASES:  # aliases are looked up first: the new scheme could never be reached
        raise ValueError(f"scheme name {name!r} is an alias of {_ALIASES[name]!r}; choose "
                         f"another name")
    if name in _REGISTRY:
        raise ValueError(f"scheme {name!r} is already registered")
    s = factory()
    if not isinstance(s, SplittingScheme):
        raise TypeError("factory must return a SplittingScheme")
    _REGISTRY[name] = factory
    _PROBLEM_CLASS[name] = s.problem_class


PATTERN_LETTERS = {"s": DIFFUSION, "f": CONVECTION, "x": CROSS}


def from_pattern(pattern: str, name: str | None = None) -> SplittingScheme:
    """A whole-network composition from a sublayer string (Press et al. 2020): ``s`` =
    self-attention (diffusion), ``f`` = feed-forward (convection), ``x`` = cross-attention;
    e.g. ``"sssfsfsfff"``.

    Each of the n letters of a field gets coefficient 1/n, so one step of size T runs the whole
    network over [0, T]. Adjacent equal letters stay separate stages (they are separate sublayers).
    All coefficients are positive, so the order is at most 2 (Sheng 1989, Suzuki 1991): it is 2
    when the second-order conditions hold (e.g. palindromes such as ``fsf``), else 1.
    """
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a str, got {type(pattern).__name__}")
    p = pattern.replace(" ", "").lower()
    bad = sorted(set(p) - set(PATTERN_LETTERS))
    if bad:
        raise ValueError(f"pattern {pattern!r} has letters {bad}; use only 's' (self-attention, "
                         f"diffusion), 'f' (feed-forward, convection) and 'x' (cross-attention)")
    if len(set(p)) < 2:
        raise ValueError(f"pattern {pattern!r} must contain at least two of the letters s, f, x "
                         f"(e.g. both 's' and 'f')")
    n = {ch: p.count(ch) for ch in set(p)}
    st = tuple(Stage(PATTERN_LETTERS[ch], 1.0 / n[ch]) for ch in p)
    order = 2 if abs(second_order_defect(st)) < 1e-12 else 1
    return CustomScheme(st, order=order, name=name or p)


def network_scheme(scheme, fields: Sequence[str]) -> SplittingScheme:
    """The scheme a network builds over its ``fields`` from ``scheme``: the one rule every
    network class follows, so a registry name means one arrangement everywhere.

    A registry name keeps its registered two-field arrangement, ``get(name).fields``
    (Lie–Trotter: self-attention first, ``d c``, the Transformer layer; symmetric schemes: the
    feed-forward outermost, ``c/2 d c/2``, the Macaron layer), and a field the name does not
    advance (a decoder's ``cross``) is nested directly inside self-attention:

    ========  ===============  ============================
    name      encoder / LM     decoder (d, x, c)
    ========  ===============  ============================
    lie-t.    ``d c``          ``d x c``
    strang    ``c/2 d c/2``    ``c/2 d/2 x d/2 c/2``
    ========  ===============  ============================

    Composition methods compose that symmetric step. Anything else (a pattern, a stage string,
    a :class:`SplittingScheme`) is taken as it is (:func:`resolve`).

    Over **one field** (a network whose other fields are ``none``: ConvS2S's encoder) there is
    nothing to split, and every name means the plain residual step ``(f 1)``
    (:class:`~splitnet.integrators.splitting.OneField`); another stage list is refused."""
    fields = tuple(fields)
    if len(fields) == 1:
        return _one_field(scheme, fields[0])
    if not (isinstance(scheme, str) and _registry_key(scheme) is not None):
        return resolve(scheme)
    base = tuple(f for f in get(scheme).fields if f in fields)
    order: list[str] = []
    for f in base:
        order.append(f)
        if f == DIFFUSION:
            order += [g for g in fields if g not in base]
    if set(order) != set(fields):          # a network without self-attention: as listed
        order = list(base) + [g for g in fields if g not in base]
    return get(scheme, fields=tuple(order))


def _one_field(scheme, field: str) -> SplittingScheme:
    """What ``scheme`` means for a network layer of the one field ``field``: ``(field 1)``."""
    if isinstance(scheme, OneField) and scheme.fields == (field,):
        return scheme
    if isinstance(scheme, dict) and scheme.get("one_field"):
        return OneField(field, name=scheme.get("name", "one-field"))
    key = _registry_key(scheme) if isinstance(scheme, str) else None
    if key is None:
        raise ValueError(f"a layer of the one field {field} is the plain residual step "
                         f"({_st.diagram(((Stage(field, 1.0)),))}) whatever the scheme (nothing "
                         f"to split); give a registered name such as lie-trotter, not "
                         f"{scheme!r}")
    return OneField(field, name=key)


def resolve(scheme) -> SplittingScheme:
    """Any description of a scheme, as a SplittingScheme: a registered name, an s/f pattern
    (``"sfsf"``), a stage string (``"c:0.5,d:1,c:0.5"``, with the order its stages measure:
    :func:`measured_order`), the dict of
    :meth:`SplittingScheme.to_dict` (as stored in a model config), or a scheme (returned as is).
    """
    if isinstance(scheme, SplittingScheme):
        return scheme
    if isinstance(scheme, dict):
        if scheme.get("one_field") and scheme.get("stages"):
            return OneField(scheme["stages"][0][0], name=scheme.get("name", "one-field"),
                            steps=len(scheme["stages"]))
        missing = {"name", "order", "stages"} - set(scheme)
        if missing:
            raise ValueError(f"a scheme dict needs keys name, order, stages; missing "
                             f"{sorted(missing)}")
        return SplittingScheme.from_stages(scheme["stages"], order=scheme["order"],
                                           name=scheme["name"])
    if isinstance(scheme, str):
        text = scheme.strip()
        if not text:
            raise ValueError(f"empty scheme name; give a registered name ({LISTED_BY['scheme']} "
                             f"lists them), a pattern of 's'/'f'/'x' letters such as 'sfsf', or "
                             f"a stage string such as 'c:0.5,d:1,c:0.5'")
        key = _registry_key(text)
        if key is not None:
            return _instance(key)
        if set(text.lower()) <= set(PATTERN_LETTERS):
            return from_pattern(text)
        if ":" in text:         # a stage string declares the order its stages measure
            stages = CustomScheme(_st.parse(text), order=1, name="custom").stages
            return CustomScheme(stages, order=measured_order(stages), name="custom")
        raise ValueError(f"{unknown_name('scheme', scheme, available('all'), _ALIASES)}; "
                         f"a pattern has only the letters 's', 'f' and 'x', such as 'sfsf'")
    raise TypeError(f"scheme must be a name, a pattern or a SplittingScheme, got "
                    f"{type(scheme).__name__}")


@functools.lru_cache(maxsize=256)
def measured_order(stages: tuple[Stage, ...]) -> int:
    """The classical order of a consistent stage list as :func:`check_order` measures it
    (the nearest integer of the tail slope when the verdict is clean; at least 2 when the exact
    second-order conditions hold, else 1; :data:`~splitnet.integrators.splitting.EXACT_ORDER` for
    the exact
    flow of the sum of the fields). Cached: configs resolve their scheme often."""
    if abs(second_order_defect(stages)) > 1e-9:
        return 1
    res = check_order(stages, normalize=True)
    if res.ok and math.isinf(res.tail):
        return EXACT_ORDER          # one stage advancing every field: the exact flow
    return max(2, round(res.tail)) if res.ok else 2


def _raw_stages(scheme) -> tuple[tuple[Stage, ...], str, int | None]:
    """(stages as written, name, declared order) of any description of a scheme: stage strings,
    lists and dicts are not normalised (their sums are part of what is checked)."""
    if isinstance(scheme, SplittingScheme):
        return scheme.stages, scheme.name, scheme.order
    if isinstance(scheme, dict):
        if scheme.get("one_field") and scheme.get("stages"):
            return OneField(scheme["stages"][0][0], name=scheme.get("name", "one-field"),
                            steps=len(scheme["stages"]))
        missing = {"name", "order", "stages"} - set(scheme)
        if missing:
            raise ValueError(f"a scheme dict needs keys name, order, stages; missing "
                             f"{sorted(missing)}")
        return _st.as_stages(scheme["stages"]), str(scheme["name"]), scheme["order"]
    if isinstance(scheme, str):
        text = scheme.strip()
        if ":" in text and _registry_key(text) is None:
            return _st.parse(text), "custom", None
        s = resolve(text)
        return s.stages, s.name, s.order
    return _st.as_stages(scheme), "custom", None


def _per_layer(scheme):
    """The per-layer stage lists of a model (``coefficients()``) or of a sequence of stage
    lists; None for anything that describes one scheme."""
    if callable(getattr(scheme, "coefficients", None)):
        return tuple(_st.as_stages(layer) for layer in scheme.coefficients())
    if (isinstance(scheme, (tuple, list)) and scheme
            and all(isinstance(x, (tuple, list)) and x and _is_stage(x[0]) for x in scheme)):
        return tuple(_st.as_stages(layer) for layer in scheme)
    return None


def _encoder_decoder(model) -> list:
    """``[(label, per-layer stage lists, declared order)]`` of an encoder–decoder's two stacks
    (a model with ``encoder_layers`` and ``decoder_layers``); [] for anything else."""
    out = []
    for label in ("encoder", "decoder"):
        layers, scheme = (getattr(model, f"{label}_{a}", None) for a in ("layers", "scheme"))
        if layers is None or scheme is None:
            return []
        stages = tuple(_st.as_stages(layer.current_stages() if hasattr(layer, "current_stages")
                                     else layer.stages) for layer in layers)
        out.append((label, stages, scheme.order))
    return out


def _is_stage(x) -> bool:
    """A Stage or a ``(field, coeff)`` pair: the first item of a layer's stage list (a flat
    stage list's first item is a field name)."""
    return isinstance(x, Stage) or (isinstance(x, (tuple, list)) and len(x) == 2
                                    and isinstance(x[0], str))


CHECK_OPTIONS = ("seed", "dim", "step_sizes", "floor", "ceiling", "tolerance")


def check_order(scheme, order: int | None = None, normalize: bool = False, **options):
    """Measure the classical order of ``scheme`` on random non-commuting matrices with exact
    exponentials (:func:`splitnet.order.check.measure_order`) and compare it with ``order``.

    ``scheme``: a SplittingScheme, a registered name, a pattern, a stage string, a scheme dict,
    or a list of ``(field, coeff)`` stages. ``order`` defaults to the scheme's declared order
    (none for a bare stage list: then the verdict compares with the nearest integer).

    Consistency comes first: coefficients as written (a stage string, list or dict) must sum to
    1 per field (to 1e-12), else the verdict is ``"inconsistent"`` (``"not consistent:
    convection sums to 2.0"``); ``normalize=True`` rescales them first, as
    :meth:`SplittingScheme.from_stages` does. The step sizes adapt to the order (orders 1 to
    10); too few usable errors give ``"undetermined"`` with the reason. ``options``:
    ``seed``, ``dim``, ``step_sizes``, ``floor``, ``ceiling``, ``tolerance``.

    A trained model (anything with ``coefficients()``: a SplitTransformer, learned
    coefficients or not) or a sequence of per-layer stage lists (``model.coefficients()``, or
    lists of ``(field, coeff)`` pairs) gives a tuple of checks, one per layer (``layer 0``,
    ...), against ``order`` (default: the model's scheme's declared order; for a bare list,
    none): a :class:`~splitnet.order.check.LayerChecks`, which prints as a table, a verdict
    for each layer. An encoder–decoder (``SplitSeq2Seq``) gives its encoder's layers, then its
    decoder's (``encoder layer 0``, ..., ``decoder layer 0``, ...), each against its own
    stack's scheme. A layer of one field (``convection_field="none"``) is the exact flow of
    that field: ``"ok"``, order infinite.

    >>> check_order("yoshida4").ok
    True
    """
    if not isinstance(normalize, bool):   # bool("no") is True: never switch it on silently
        raise ValueError(f"normalize must be True or False, got {normalize!r}")
    unknown = sorted(set(options) - set(CHECK_OPTIONS))
    if unknown:
        raise TypeError(f"check_order got unknown option(s) {unknown}; it takes "
                        f"{', '.join(CHECK_OPTIONS)}")
    if scheme is None or isinstance(scheme, (bool, numbers.Number)) or not (
            isinstance(scheme, (str, dict, SplittingScheme)) or hasattr(scheme, "__iter__")
            or _encoder_decoder(scheme) or hasattr(scheme, "coefficients")):
        raise TypeError(f"check_order takes a scheme, a registered name, a pattern or stage "
                        f"string, a scheme dict, a list of (field, coeff) stages, per-layer "
                        f"lists or a model; got {type(scheme).__name__}")
    from ..order.check import measure_layers, measure_order

    stacks = _encoder_decoder(scheme)
    if stacks:              # an encoder–decoder: each stack's layers against its own scheme
        from ..order.check import LayerChecks

        return LayerChecks(c for label, layers, own in stacks for c in measure_layers(
            layers, order if order is not None else own, normalize=normalize,
            prefix=f"{label} layer", **options))
    layers = _per_layer(scheme)
    if layers is not None:
        default = getattr(getattr(scheme, "scheme", None), "order", None)
        return measure_layers(layers, order if order is not None else default,
                              normalize=normalize, **options)
    stages, name, declared = _raw_stages(scheme)
    declared = order if order is not None else declared
    return measure_order(stages, declared, name=name, normalize=normalize, **options)


__all__ = ["CHECK_OPTIONS", "CONVECTION", "CORE", "CROSS", "DIFFUSION", "EXACT_ORDER", "LISTINGS",
           "PATTERN_LETTERS", "UNSPLIT", "BlanesMoan4", "CustomScheme", "LieTrotter", "Parallel",
           "SplittingScheme", "Stage", "Strang", "Suzuki4", "Yoshida4", "Yoshida6", "Yoshida8",
           "available", "check_aliases", "check_order", "from_pattern", "get", "measured_order",
           "network_scheme", "register", "registry_name", "resolve", "second_order_defect",
           "zoo_class"]


def __getattr__(name: str):
    """The names this public module also serves, defined elsewhere (``splitnet.ALSO_SERVED``),
    looked up on first use: no module imports them through here."""
    from .. import served

    return served(__name__, name)

