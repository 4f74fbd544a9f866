"""A network re-discretised: the same fields, integrated another way.

Layer k of a :class:`~splitnet.nets.models.SplitTransformer` with step size h is one step of its
scheme over ``[k h, (k + 1) h]`` for the ODE of its own fields

    dx/dt = D_k(t, x) + C_k(t, x),

``D_k = layer.field("diffusion")``, ``C_k = layer.field("convection")`` (every field of the layer)
(:meth:`~splitnet.integrators.layers.SplitLayer.field`: the module itself with shared weights, the
coefficient-weighted sum ``sum_i c_i X_{k,i}`` of the stage modules with per-stage weights --
the definition the discretization gap uses). :func:`rediscretize` keeps every weight and
replaces the integrator: layer k becomes ``n = substeps`` steps of ``scheme`` of size ``h/n``,
each sub-flow advanced by ``method``::

    x <- S_{h/n}(t_k + (n-1) h/n) o ... o S_{h/n}(t_k + h/n) o S_{h/n}(t_k) (x),   t_k = k h

(one :class:`~splitnet.integrators.layers.SplitLayer` whose stages are the scheme's, repeated n
times with coefficients c/n; each field keeps its own clock, so sub-step j starts at
``t_k + j h/n``). As n grows, or with ``method="exact"`` and n growing, every choice converges to
the exact flow of the layer's ODE.

``scheme=None`` keeps the layer's own stages *and their own callables*: with per-stage weights
each stage keeps its sub-layer, so ``rediscretize(model)`` is the model itself, bit for bit.
Those stage modules split the same ODE into more fields (``sum_i c_i X_{k,i}``), so refining
them also converges to the layer's ODE (to first order in h/n in general). A scheme given by
name integrates the layer's fields ``D_k``, ``C_k`` (for a shared-weight model the two coincide
when the name is its own scheme). :func:`ode_model` replaces every layer by the exact flow of
its unsplit ODE.

:func:`refinement_at` and :func:`refined` are the hook of ODE-consistent training
(``TrainConfig.refine_prob``); the study of a trained network's loss under re-discretisation is
:mod:`splitnet.analyses.refine` (which serves these names too).
"""

from __future__ import annotations

import copy
import numbers
import random
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from ..configs.options import check_int, check_real
from ..integrators.layers import SplitLayer
from ..integrators.schemes import CustomScheme, SplittingScheme, resolve
from ..integrators.splitting import OneField
from ..integrators.subflows import METHODS, SubflowMethod, get_method
from ..names import unknown_name
from ..stagelists.stages import Stage

OWN = "own"                    # the layers' own stages (scheme=None), in a Refinement and a study

@dataclass(frozen=True)
class Refinement:
    """How a re-discretised model integrates each layer (``model.refinement``)."""

    scheme: str         # the scheme's name; "own" = the layers' own stages and callables
    substeps: int
    method: str
    fields: str         # "own stages" or "layer fields" (D_k, C_k)


MAX_SUBSTEPS = 4096     # = splitnet refine's: each substep one more pass over the fields


def check_substeps(substeps) -> int:
    """``substeps`` as an int in [1, :data:`MAX_SUBSTEPS`], else a ValueError naming it (a
    billion substeps would build a billion stages before the first evaluation)."""
    if isinstance(substeps, bool) or not isinstance(substeps, numbers.Integral) or substeps < 1:
        raise ValueError(f"substeps must be an int >= 1, got {substeps!r}")
    if substeps > MAX_SUBSTEPS:
        raise ValueError(f"substeps must be <= {MAX_SUBSTEPS:,}, got {substeps:,}")
    return int(substeps)


def repeated(scheme: SplittingScheme, n: int) -> SplittingScheme:
    """``scheme`` taken ``n`` times with step h/n, as one scheme: its stages repeated with
    coefficients c/n (same classical order; ``n = 1`` returns ``scheme`` itself)."""
    n = check_substeps(n)
    if n == 1:
        return scheme
    if isinstance(scheme, OneField):          # one field: n plain steps of h/n
        return OneField(scheme.fields[0], name=f"{scheme.name} x{n}", steps=n)
    stages = tuple(Stage(st.field, st.coeff / n) for _ in range(n) for st in scheme.stages)
    return CustomScheme(stages, order=scheme.order, name=f"{scheme.name} x{n}")


def _own_callables(layer: SplitLayer, name: str, n: int):
    mods = layer.field_modules(name)
    return mods[0] if all(m is mods[0] for m in mods) else list(mods) * n


def refined_layer(layer: SplitLayer, scheme: SplittingScheme | None, substeps: int, method,
                  own_scheme: SplittingScheme) -> SplitLayer:
    """One layer re-discretised (see :func:`rediscretize`); shares the layer's modules. A named
    scheme over other fields than the layer's is taken over the layer's fields
    (:meth:`~splitnet.integrators.splitting.SplittingScheme.over`). A layer with learned
    coefficients
    (``current_stages``) is refined with them as they are now, not normalised."""
    names = layer.field_names
    if len(names) == 1:          # one field: nothing to split, whatever the scheme
        scheme = None if scheme is None else own_scheme
    if scheme is None:
        now = getattr(layer, "current_stages", None)
        sch = repeated(own_scheme, substeps) if now is None else \
            tuple(Stage(st.field, st.coeff / substeps) for _ in range(substeps) for st in now())
        fields = {f: _own_callables(layer, f, substeps) for f in names}
    else:
        if set(scheme.fields) != set(names):
            scheme = scheme.over(names)
        sch = repeated(scheme, substeps)
        fields = {f: layer.field(f) for f in names}
    return layer.rebuilt(sch, fields, method)     # of its own kind (a reversible one: shears)


# the layer lists a network may have, and the attribute holding each one's scheme
SCHEME_OF = {"layers": "scheme", "encoder_layers": "encoder_scheme",
           "decoder_layers": "decoder_scheme"}


def stacks(model) -> tuple[str, ...]:
    """The layer lists of ``model``: ``("layers",)`` for a SplitTransformer, the encoder's and
    the decoder's for a :class:`~splitnet.nets.seq2seq.SplitSeq2Seq` (both are re-discretised)."""
    mods = getattr(model, "_modules", {})
    return tuple(a for a in SCHEME_OF if a in mods and hasattr(model, SCHEME_OF[a]))


def scheme_label(model) -> str:
    """``strang``; an encoder–decoder: ``lie-trotter / strang`` (encoder / decoder)."""
    return " / ".join(getattr(model, SCHEME_OF[a]).name for a in stacks(model))


def check_model(model) -> None:
    """A TypeError unless ``model`` is a network of split layers (a SplitTransformer or a
    SplitSeq2Seq)."""
    if not stacks(model) or not hasattr(model, "config"):
        raise TypeError(f"rediscretize needs a SplitTransformer or a SplitSeq2Seq, got "
                        f"{type(model).__name__}")


def rediscretize(model, scheme=None, substeps: int = 1, method="euler"):
    """``model`` with every layer advanced by ``substeps`` steps of ``scheme`` (default: the
    model's own, with its own stage callables) with sub-flows ``method`` (a name of
    :data:`splitnet.integrators.subflows.METHODS` or a
    :class:`~splitnet.integrators.subflows.SubflowMethod` instance).

    Returns a :class:`~splitnet.nets.models.SplitTransformer` that shares every module and parameter
    of ``model`` (no copy: training one trains the other; ``eval()`` on one reaches the shared
    modules of both). Its layers are new :class:`~splitnet.integrators.layers.SplitLayer` objects;
    its
    ``scheme`` is the repeated scheme (so ``state_times`` matches ``forward(...,
    return_states=True)``), ``refinement`` says what was done, and ``config`` is still the
    trained model's (it describes the weights). ``rediscretize(model)`` computes exactly what
    ``model`` computes (for a model built with ``method="euler"``, the default)."""
    check_model(model)
    k = check_substeps(substeps)
    if not isinstance(method, SubflowMethod) and method not in METHODS:
        raise ValueError(unknown_name("method", method, METHODS))
    m = get_method(method)
    for attr in stacks(model):
        why = getattr(model, attr).refuses(m)
        if why:
            raise ValueError(why)
    sch = None if scheme is None else resolve(scheme)
    layers, schemes = {}, {}
    for attr in stacks(model):                     # an encoder–decoder: both stacks
        own = getattr(model, SCHEME_OF[attr])
        layers[attr] = [refined_layer(layer, sch, k, m, own) for layer in getattr(model, attr)]
        target = own if sch is None or len(own.fields) == 1 else \
            (sch if set(sch.fields) == set(own.fields) else sch.over(own.fields))
        schemes[SCHEME_OF[attr]] = repeated(target, k)
    return _with_layers(model, layers, schemes,
                        Refinement(OWN if sch is None else sch.name, k, m.name,
                                   "own stages" if sch is None else "layer fields"))


def _with_layers(model, layers: dict, schemes: dict, refinement: Refinement):
    """A shallow copy of ``model`` (every module shared) with new layer lists (attribute ->
    layers) and their schemes (attribute -> scheme)."""
    new = copy.copy(model)            # same attributes; rebind the registries, then the layers
    for reg in ("_parameters", "_buffers", "_modules"):
        new.__dict__[reg] = type(model.__dict__[reg])(model.__dict__[reg])
    for attr, ls in layers.items():
        setattr(new, attr, getattr(model, attr).like(ls))
    for attr, sch in schemes.items():
        setattr(new, attr, sch)
    new.refinement = refinement
    return new


@contextmanager
def refined(model, substeps: int, scheme=None, method: str | None = None):
    """Within the block, ``model`` itself runs the layers of ``rediscretize(model, scheme,
    substeps, method)`` (default method: the model's own). Used by ODE-consistent training:
    the model object stays the one the optimiser, DDP and ``torch.compile`` know, and the
    layers are put back on exit, also on an exception."""
    new = rediscretize(model, scheme, substeps, method or model.config.method)
    old = model.layers
    model.layers = new.layers
    try:
        yield model
    finally:
        model.layers = old


def ode_model(model, method="exact"):
    """``model`` with every layer replaced by the exact flow of its own ODE (each layer's
    :meth:`~splitnet.integrators.layers.SplitLayer.ode_layer`;
    weights shared, as :func:`rediscretize`): the network an ODE solver of its fields would
    converge to. ``method``: the solver (``"exact"`` or a configured
    :class:`~splitnet.integrators.flows.Exact`)."""
    check_model(model)
    layers, schemes = {}, {}
    for attr in stacks(model):
        ls = getattr(model, attr)
        layers[attr] = [layer.ode_layer(method) for layer in ls]
        names = ls[0].field_names
        # one field (ConvS2S's encoder, a model without a feed-forward): its ODE is that
        # field's flow, the step of OneField; two or more: their sum in one stage each
        schemes[SCHEME_OF[attr]] = OneField(names[0], name="ode") if len(names) == 1 else \
            CustomScheme([(f, 1.0) for f in names], order=1, name="ode")
    return _with_layers(model, layers, schemes,
                        Refinement("ode", 1, get_method(method).name, "layer fields"))


def refinement_at(seed: int, step: int, prob: float, substeps: Sequence[int]) -> int | None:
    """The substep count of training step ``step`` under ODE-consistent training: with
    probability ``prob`` one of ``substeps`` (uniformly), else None (the model as built).

    Drawn from a generator seeded by ``(seed, step)`` alone (not torch's global RNG), so the
    choice is the same on ``--resume`` and on every process, and ``prob = 0`` changes nothing.
    ``prob`` a number in [0, 1], ``substeps`` a non-empty list of ints >= 1, ``seed`` and
    ``step`` ints: ValueError naming the one that is not (a NaN ``prob`` refined every step)."""
    seed, step = check_int("seed", seed, lo=0), check_int("step", step, lo=0)
    prob = check_real("prob", prob, lo=0.0, hi=1.0)
    if isinstance(substeps, (str, bytes)) or not substeps:
        raise ValueError(f"substeps must be a non-empty list of ints >= 1, got {substeps!r}")
    substeps = [check_substeps(k) for k in substeps]
    if prob == 0:
        return None
    # the seed string names the module this lived in first: kept, so a resumed run draws alike
    r = random.Random(f"splitnet.analyses.refine:{int(seed)}:{int(step)}")
    if r.random() >= prob:
        return None
    return int(r.choice(substeps))



__all__ = [
    "MAX_SUBSTEPS",
    "OWN",
    "SCHEME_OF",
    "Refinement",
    "check_model",
    "check_substeps",
    "ode_model",
    "rediscretize",
    "refined",
    "refined_layer",
    "refinement_at",
    "repeated",
    "scheme_label",
    "stacks",
]
