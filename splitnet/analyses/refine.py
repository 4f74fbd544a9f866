"""Is a trained network an ODE solver? The same fields, integrated another way.

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
times with
coefficients c/n; each field keeps its own clock, so sub-step j starts at ``t_k + j h/n``).
As n grows, or with ``method="exact"`` and n growing, every choice converges to the exact flow
of the layer's ODE. A network whose loss stays where it is under refinement computes (a good
approximation of) the flow of its fields: it is an ODE solver; one whose loss degrades relies
on its own discretisation.

``scheme=None`` keeps the layer's own stages *and their own callables*: with per-stage weights
each stage keeps its sub-layer, so ``rediscretize(model)`` is the model itself, bit for bit.
Those stage modules split the same ODE into more fields (``sum_i c_i X_{k,i}``), so refining
them also converges to the layer's ODE (to first order in h/n in general). A scheme given by
name integrates the layer's fields ``D_k``, ``C_k`` (for a shared-weight model the two coincide
when the name is its own scheme).

:func:`refinement_study` evaluates a grid of (scheme, substeps, method) on any model source (a
model and a function model -> mean loss);
:func:`~splitnet.analyses.sources.checkpoint_source` is the source for ``splitnet train``
checkpoints. :func:`refinement_at` and :func:`refined` are the hook of ODE-consistent training
(``TrainConfig.refine_prob``).
"""

from __future__ import annotations

import copy
import math
import numbers
import random
import sys
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from ..configs.options import check_int, check_real
from ..integrators.layers import SplitLayer
from ..integrators.schemes import CustomScheme, SplittingScheme, resolve
from ..integrators.splitting import OneField
from ..integrators.subflows import METHODS, STUDY_METHODS, SubflowMethod, get_method
from ..names import unknown_name
from ..stagelists.stages import Stage

OWN = "own"                    # in a study's scheme list: the layers' own stages (scheme=None)
DEFAULT_SCHEMES = ("lie-trotter", "strang", "yoshida4")
DEFAULT_SUBSTEPS = (1, 2, 4, 8)
DEFAULT_METHODS = STUDY_METHODS


@dataclass(frozen=True)
class Refinement:
    """How a re-discretised model integrates each layer (``model.refinement``)."""

    scheme: str         # the scheme's name; "own" = the layers' own stages and callables
    substeps: int
    method: str
    fields: str         # "own stages" or "layer fields" (D_k, C_k)


# ---------------------------------------------------------------------------------------------
# re-discretisation


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
_STACKS = {"layers": "scheme", "encoder_layers": "encoder_scheme",
           "decoder_layers": "decoder_scheme"}


def stacks(model) -> tuple[str, ...]:
    """The layer lists of ``model``: ``("layers",)`` for a SplitTransformer, the encoder's and
    the decoder's for a :class:`~splitnet.nets.seq2seq.SplitSeq2Seq` (both are re-discretised)."""
    mods = getattr(model, "_modules", {})
    return tuple(a for a in _STACKS if a in mods and hasattr(model, _STACKS[a]))


def scheme_label(model) -> str:
    """``strang``; an encoder–decoder: ``lie-trotter / strang`` (encoder / decoder)."""
    return " / ".join(getattr(model, _STACKS[a]).name for a in stacks(model))


def _check_model(model) -> None:
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
    _check_model(model)
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
        own = getattr(model, _STACKS[attr])
        layers[attr] = [refined_layer(layer, sch, k, m, own) for layer in getattr(model, attr)]
        target = own if sch is None or len(own.fields) == 1 else \
            (sch if set(sch.fields) == set(own.fields) else sch.over(own.fields))
        schemes[_STACKS[attr]] = repeated(target, k)
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
    _check_model(model)
    layers, schemes = {}, {}
    for attr in stacks(model):
        ls = getattr(model, attr)
        layers[attr] = [layer.ode_layer(method) for layer in ls]
        names = ls[0].field_names
        # one field (ConvS2S's encoder, a model without a feed-forward): its ODE is that
        # field's flow, the step of OneField; two or more: their sum in one stage each
        schemes[_STACKS[attr]] = OneField(names[0], name="ode") if len(names) == 1 else \
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
    r = random.Random(f"splitnet.analyses.refine:{int(seed)}:{int(step)}")
    if r.random() >= prob:
        return None
    return int(r.choice(substeps))


# ---------------------------------------------------------------------------------------------
# a study: loss against the integration of the model's own fields


@dataclass
class RefinePoint:
    scheme: str        # scheme name, or "own" (the layers' own stages)
    method: str
    substeps: int
    evals: float       # field evaluations per layer and forward pass (measured)
    loss: float        # mean loss in nats (what the evaluation function returned)


@dataclass
class RefinementResult:
    """A model's loss under each re-discretisation. ``own``: the model as trained. ``unit`` /
    ``scale``: how losses are shown (``bpb`` = loss / ln 2 for byte-level models)."""

    label: str
    scheme: str                # the trained model's scheme
    weights: str
    method: str
    own: RefinePoint
    points: list = field(default_factory=list)
    unit: str = "bpb"
    scale: float = 1.0 / math.log(2.0)
    ode: RefinePoint | None = None      # the unsplit ODE of each layer, solved exactly

    def value(self, p: RefinePoint) -> float:
        return p.loss * self.scale

    def series(self) -> dict:
        """``(scheme, method) -> points`` sorted by substeps."""
        out: dict = {}
        for p in self.points:
            out.setdefault((p.scheme, p.method), []).append(p)
        return {k: sorted(v, key=lambda p: p.substeps) for k, v in out.items()}

    def limit(self) -> RefinePoint | None:
        """The loss of the ODE of the model's fields: the unsplit ODE solved exactly when it was
        computed, else the finest exact re-integration (most substeps; own scheme first)."""
        if self.ode is not None:
            return self.ode
        exact = [p for p in self.points if p.method == "exact"]
        if not exact:
            return None
        return max(exact, key=lambda p: (p.substeps, p.scheme in (OWN, self.scheme)))

    def table(self) -> str:
        ks = sorted({p.substeps for p in self.points})
        own = self.own
        lines = [f"{self.label}: {self.scheme} ({self.weights}, {self.method}) as trained: "
                 f"{self.value(own):.4f} {self.unit}, {own.evals:g} field evaluations per "
                 f"layer", f"{self.unit} by substeps (field evaluations per layer in brackets)",
                 f"{'scheme':<14} {'method':<9}" + "".join(f"{f'n={k}':>20}" for k in ks)]
        for (s, m), pts in self.series().items():
            by = {p.substeps: p for p in pts}
            cells = "".join(f"{self.value(by[k]):>11.4f} [{by[k].evals:>6.4g}]" if k in by
                            else f"{'':>20}" for k in ks)
            lines.append(f"{s:<14} {m:<9}{cells}")
        lim = self.limit()
        if lim is not None:
            how = "unsplit, exact" if lim is self.ode else f"exact {lim.scheme}, n={lim.substeps}"
            lines.append(f"ODE of the fields ({how}; {lim.evals:.4g} field evaluations per "
                         f"layer): {self.value(lim):.4f} {self.unit}, "
                         f"{self.value(lim) - self.value(own):+.4f} against the network as "
                         f"trained")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> RefinementResult:
        d = dict(d)
        d.pop("depth", None)          # splitnet refine's --json: the depth table beside it
        d["own"] = RefinePoint(**d["own"])
        d["points"] = [RefinePoint(**p) for p in d["points"]]
        d["ode"] = None if d.get("ode") is None else RefinePoint(**d["ode"])
        return cls(**d)


def study_grid(schemes=DEFAULT_SCHEMES, substeps=DEFAULT_SUBSTEPS, methods=DEFAULT_METHODS,
               exact_substeps=None) -> list[tuple]:
    """The validated grid ``[(scheme or None, substeps, method), ...]``: every input checked
    before any work (unknown scheme or method, substeps < 1: ValueError naming it).
    ``substeps``: a list for every method, or a dict ``method -> list``; ``exact_substeps``:
    the list for ``exact`` (default: as the others). ``"own"`` in ``schemes`` stands for the
    layers' own stages."""
    schs = [None if s is None or s == OWN else resolve(s) for s in schemes]
    for m in methods:
        if m not in METHODS:
            raise ValueError(unknown_name("method", m, METHODS))
    per = dict(substeps) if isinstance(substeps, dict) else dict.fromkeys(methods, substeps)
    if exact_substeps is not None:
        per["exact"] = exact_substeps
    missing = [m for m in methods if m not in per]
    if missing:
        raise ValueError(f"no substeps given for method(s) {missing}")
    per = {m: [check_substeps(k) for k in per[m]] for m in methods}
    if not (schs and methods and all(per.values())):
        raise ValueError("empty grid: give at least one scheme, substep count and method")
    return [(s, k, m) for s in schs for m in methods for k in per[m]]


class _CallCounter:
    """Counts calls of each refined layer and of its field callables (forward pre-hooks on the
    new layers and fields; hooks on a shared module are removed on exit)."""

    def __init__(self, model):
        self.layer_calls = self.field_calls = 0
        self._handles = []
        fields = {}
        for layer in (lay for attr in stacks(model) for lay in getattr(model, attr)):
            self._handles.append(layer.register_forward_pre_hook(self._layer))
            for name in layer.field_names:
                for f in layer.field_modules(name):
                    fields.setdefault(id(f), f)
        for f in fields.values():
            if not isinstance(f, nn.Module):
                raise TypeError("field evaluations can only be counted for nn.Module fields")
            self._handles.append(f.register_forward_pre_hook(self._field))

    def _layer(self, *_):
        self.layer_calls += 1

    def _field(self, *_):
        self.field_calls += 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for h in self._handles:
            h.remove()

    def per_layer(self) -> float:
        return self.field_calls / max(1, self.layer_calls)


def _point(model, evaluate, scheme, k, method) -> RefinePoint:
    from .depth import loss_of  # one rule for what evaluate returns

    m = ode_model(model) if scheme == "ode" else rediscretize(model, scheme, k, method)
    with torch.no_grad(), _CallCounter(m) as count:
        try:
            loss = loss_of(evaluate, m)
        except AssertionError as e:  # torchdiffeq: the adaptive step underflowed on fields
            if "underflow" not in str(e):   # that produce NaN/inf (a diverged network)
                raise
            loss = float("nan")
    return RefinePoint(m.refinement.scheme, m.refinement.method, k, count.per_layer(), loss)


def one_field(model) -> str | None:
    """The field of a network whose every stack has one field (a language model without a
    feed-forward, ``convection_field="none"``), as ``"diffusion (conv)"``; None when a stack
    has two or more (ConvS2S's decoder: self- and cross-attention). Works on a model built on
    the meta device, so a command can ask before it loads any weight."""
    fields = {getattr(model, _STACKS[a]).fields for a in stacks(model)}
    if len(fields) != 1 or len(next(iter(fields))) != 1:
        return None
    f = next(iter(fields))[0]
    kind = getattr(getattr(model, "config", None), f"{f}_field", None)
    return f"{f} ({kind})" if kind else f


def one_field_schemes(model, schemes, flag: str = "schemes", fix: str | None = None) -> None:
    """Refuse named schemes for a network of one field per layer (:func:`one_field`): with one
    field there is nothing to split, every scheme name is the same plain step, and a study of
    several would print equal rows under different names. ``fix``: what to do instead
    (default: refine's, ``"own"`` or no ``flag``)."""
    f = one_field(model)
    named = [s for s in schemes if s is not None and s != OWN]
    if f is not None and named:
        shown = ", ".join(s if isinstance(s, str) else s.name for s in named)
        fix = fix or (f"give '{OWN}' or leave {flag} out (substeps, methods and the exact ODE "
                      f"still apply)")
        raise ValueError(f"{flag} {shown}: this model's layers advance one field, {f}; a "
                         f"scheme splits a layer's fields, so with one there is nothing to "
                         f"split (every scheme is its plain step): {fix}")


def refinement_study(model, evaluate: Callable, schemes=None,
                     substeps=DEFAULT_SUBSTEPS, methods=DEFAULT_METHODS, exact_substeps=None,
                     label: str = "", unit: str = "bpb", scale: float = 1.0 / math.log(2.0),
                     ode: bool = True, progress: bool = True) -> RefinementResult:
    """``model``'s loss (``evaluate(model) -> mean loss``) as trained, under every
    re-discretisation of the grid (:func:`study_grid`) and, with ``ode``, with every layer
    replaced by the exact flow of its unsplit ODE (:func:`ode_model`). Any model source plugs
    in: a model and a function that evaluates it. The model is put in eval mode; its weights
    are untouched. A reversible network keeps the Euler points of the grid only.
    ``schemes=None``: :data:`DEFAULT_SCHEMES`, or ``("own",)`` for a network of one field per
    layer (:func:`one_field`), where schemes cannot differ; named schemes for such a network
    are a ValueError (:func:`one_field_schemes`)."""
    _check_model(model)
    if schemes is None:
        schemes = (OWN,) if one_field(model) else DEFAULT_SCHEMES
    one_field_schemes(model, schemes)
    grid = study_grid(schemes, substeps, methods, exact_substeps)
    check_real("scale", scale, lo=0.0, lo_open=True)
    if not (callable(evaluate) and isinstance(unit, str) and isinstance(label, str)):
        raise TypeError(f"evaluate must be a function model -> mean loss, unit and label "
                        f"strings; got {evaluate!r:.40}, {unit!r:.40}, {label!r:.40}")
    own_stacks = [getattr(model, a) for a in stacks(model)]
    refused = [next(filter(None, (st.refuses(g[2]) for st in own_stacks)), None) for g in grid]
    if grid and all(refused):        # a reversible network: on shears only Euler is exact
        raise ValueError(f"{refused[0]}; add euler to the methods")
    grid = [g for g, why in zip(grid, refused) if not why]
    model.eval()
    own = _point(model, evaluate, None, 1, model.config.method)
    res = RefinementResult(label or scheme_label(model), scheme_label(model), model.config.weights,
                           model.config.method, own, unit=unit, scale=scale)
    todo = grid + ([("ode", 1, "exact")] if ode else [])
    it = todo
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(todo, desc=f"refine {res.label}", unit="eval", file=sys.stderr)
    for s, k, m in it:
        p = _point(model, evaluate, s, k, m)
        if s == "ode":
            res.ode = p
        else:
            res.points.append(p)
        if progress:
            it.set_postfix_str(f"{p.scheme} {p.method} n={k}: {res.value(p):.3f} {unit}")
    return res


__all__ = ["DEFAULT_METHODS", "DEFAULT_SCHEMES", "DEFAULT_SUBSTEPS", "MAX_SUBSTEPS", "OWN",
           "RefinePoint", "Refinement", "RefinementResult", "check_substeps",
           "ode_model", "one_field", "one_field_schemes", "rediscretize", "refined",
           "refined_layer", "refinement_at", "refinement_study", "repeated", "scheme_label",
           "stacks", "study_grid"]
