"""Is a trained network an ODE solver? Its loss when the same fields are integrated another way.

:func:`~splitnet.nets.rediscretize.rediscretize` keeps every weight of a network and replaces
its integrator (layer k: ``n = substeps`` steps of a scheme of size ``h/n``, each sub-flow
advanced by a method; :func:`~splitnet.nets.rediscretize.ode_model`: the exact flow of each
layer's unsplit ODE ``dx/dt = D_k(t, x) + C_k(t, x)``). As n grows every choice converges to the
exact flow of the layer's ODE. A network whose loss stays where it is under refinement computes
(a good approximation of) the flow of its fields: it is an ODE solver; one whose loss degrades
relies on its own discretisation.

:func:`refinement_study` evaluates a grid of (scheme, substeps, method) on any model source (a
model and a function model -> mean loss);
:func:`~splitnet.analyses.sources.checkpoint_source` is the source for ``splitnet train``
checkpoints. This module also serves the re-discretisation's names
(:data:`splitnet.ALSO_SERVED`).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from ..configs.options import check_real
from ..integrators.schemes import resolve
from ..integrators.subflows import METHODS, STUDY_METHODS
from ..names import unknown_name
from ..nets import rediscretize as rd

DEFAULT_SCHEMES = ("lie-trotter", "strang", "yoshida4")
DEFAULT_SUBSTEPS = (1, 2, 4, 8)
DEFAULT_METHODS = STUDY_METHODS


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
        return max(exact, key=lambda p: (p.substeps, p.scheme in (rd.OWN, self.scheme)))

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
        d.pop("layers", None)         # and the layers dropped and merged
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
    schs = [None if s is None or s == rd.OWN else resolve(s) for s in schemes]
    for m in methods:
        if m not in METHODS:
            raise ValueError(unknown_name("method", m, METHODS))
    per = dict(substeps) if isinstance(substeps, dict) else dict.fromkeys(methods, substeps)
    if exact_substeps is not None:
        per["exact"] = exact_substeps
    missing = [m for m in methods if m not in per]
    if missing:
        raise ValueError(f"no substeps given for method(s) {missing}")
    per = {m: [rd.check_substeps(k) for k in per[m]] for m in methods}
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
        for layer in (lay for attr in rd.stacks(model) for lay in getattr(model, attr)):
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

    m = rd.ode_model(model) if scheme == "ode" else rd.rediscretize(model, scheme, k, method)
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
    fields = {getattr(model, rd.SCHEME_OF[a]).fields for a in rd.stacks(model)}
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
    named = [s for s in schemes if s is not None and s != rd.OWN]
    if f is not None and named:
        shown = ", ".join(s if isinstance(s, str) else s.name for s in named)
        fix = fix or (f"give '{rd.OWN}' or leave {flag} out (substeps, methods and the exact "
                      f"ODE still apply)")
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
    rd.check_model(model)
    if schemes is None:
        schemes = (rd.OWN,) if one_field(model) else DEFAULT_SCHEMES
    one_field_schemes(model, schemes)
    grid = study_grid(schemes, substeps, methods, exact_substeps)
    check_real("scale", scale, lo=0.0, lo_open=True)
    if not (callable(evaluate) and isinstance(unit, str) and isinstance(label, str)):
        raise TypeError(f"evaluate must be a function model -> mean loss, unit and label "
                        f"strings; got {evaluate!r:.40}, {unit!r:.40}, {label!r:.40}")
    own_stacks = [getattr(model, a) for a in rd.stacks(model)]
    refused = [next(filter(None, (st.refuses(g[2]) for st in own_stacks)), None) for g in grid]
    if grid and all(refused):        # a reversible network: on shears only Euler is exact
        raise ValueError(f"{refused[0]}; add euler to the methods")
    grid = [g for g, why in zip(grid, refused) if not why]
    model.eval()
    own = _point(model, evaluate, None, 1, model.config.method)
    name = rd.scheme_label(model)
    res = RefinementResult(label or name, name, model.config.weights, model.config.method, own,
                           unit=unit, scale=scale)
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


__all__ = ["DEFAULT_METHODS", "DEFAULT_SCHEMES", "DEFAULT_SUBSTEPS", "RefinePoint",
           "RefinementResult", "one_field", "one_field_schemes", "refinement_study",
           "study_grid"]


def __getattr__(name: str):
    """The re-discretisation's names, served here too (``splitnet.ALSO_SERVED``)."""
    from .. import served

    return served(__name__, name)
