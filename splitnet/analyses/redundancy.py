"""Which layers a trained network can lose: each layer dropped, each adjacent pair run as one
step, measured, and ShortGPT's Block Influence beside them.

For a network of ``L`` layers at step ``h`` and a held-out loss ``evaluate(m)``::

    drop k:        the loss of the network without layer k (L - 1 layers; :func:`drop_layer`),
                   less the loss as it is
    pair k, k+1:   the same for the two layers run as one step of 2 h (:func:`coarsen_pair`):
                   their weights' mean, or layer k's
    BI_k:          1 - mean over every token of cos(x_k, x_{k+1}), x_k the state entering layer
                   k and x_{k+1} the state it hands on, on the same tokens the loss is measured
                   on (Men et al. 2024, *ShortGPT: Layers in Large Language Models are More
                   Redundant Than You Expect*, arXiv 2403.03853, eq. 1)

ShortGPT removes the layers of lowest BI. Whether BI ranks the layers as their measured cost
does is the Spearman rank correlation of BI and the drop cost (:meth:`LayerStudy.spearman`).
A network that is an ODE solver of its fields loses little by a pair run as one step of 2 h
(the step's local error); dropping a layer removes a piece ``h`` of its time.
``splitnet refine`` prints the table beside its re-integration study (:func:`layer_study`,
:meth:`LayerStudy.table`).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import sys
from typing import Callable

import torch

from ..configs.options import check_real
from ..nets.depth import LAYER_SETS, RESTRICTIONS, stack_names, with_layers
from ..nets.stack import build_layer
from .depth import loss_of


def _one_stack(model, what: str):
    """The layers of a decoder of one set of weights per layer (``what``: for the error)."""
    c = model.config
    if stack_names(model) != ("layers",) or c.depth_basis is not None or \
            c.stack == "reversible":
        raise ValueError(f"{what} takes a decoder of one set of weights per layer and a stack "
                         f"that hands the state from layer to layer (not an encoder-decoder, "
                         f"depth_basis or a reversible stack)")
    return model.layers


def _layer_sets(c, keep) -> dict:
    """The per-layer index lists of ``c`` (``gate_layers``; ``window_layers`` where the config
    has it) for a network of the layers ``keep`` (tuples of old layers, each one new layer); a
    group of listed and unlisted layers: ValueError. None (every layer) stays None."""
    out = {}
    for name, _ in LAYER_SETS:
        listed = getattr(c, name, None)
        if listed is None:
            continue
        on, new = set(listed), []
        for k, group in enumerate(keep):
            if len({j in on for j in group}) > 1:
                raise ValueError(f"layers {group} are in {name} and not: they cannot be one "
                                 f"layer")
            new += [k] if group[0] in on else []
        out[name] = tuple(new)
    return out


def drop_layer(model, k: int):
    """``model`` without its layer ``k``: ``L - 1`` layers at the same step ``h``, a view over
    the model's own modules (nothing copied; ShortGPT's layer removal). ``k`` outside
    ``0..L-1`` or a network of one layer: ValueError."""
    layers, c = _one_stack(model, "drop_layer"), model.config
    L = len(layers)
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < L or L < 2:
        raise ValueError(f"drop_layer: layer k in 0..{L - 1} of a network of at least 2 "
                         f"layers, got k={k!r} of {L}")
    keep = [(j,) for j in range(L) if j != k]
    return with_layers(model, [layers[j] for (j,) in keep], **_layer_sets(c, keep))


def _fields(layer) -> dict:
    return {f: getattr(layer, f) for f in layer.field_names}


def coarsen_pair(model, k: int, restriction: str = "mean"):
    """``model`` with layers ``k`` and ``k + 1`` run as one step of ``2 h``
    (:func:`splitnet.nets.depth.coarsen` of that pair alone): its fields the mean of the two
    layers' weights (``"mean"``, averaged in float64, a new module) or layer ``k``'s own
    (``"first"``, shared); every other layer the model's own. ``L - 1`` layers; the stack's
    step stays ``h`` (the merged layer steps ``2 h``), so this is a view to evaluate, not a
    config to save. Learned coefficients: not supported."""
    layers, c = _one_stack(model, "coarsen_pair"), model.config
    L = len(layers)
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < L - 1:
        raise ValueError(f"coarsen_pair: the pair k, k + 1 with k in 0..{L - 2}, got k={k!r} "
                         f"of {L} layers")
    if restriction not in RESTRICTIONS:
        raise ValueError(f"restriction must be one of {', '.join(RESTRICTIONS)}, got "
                         f"{restriction!r}")
    if getattr(c, "learn_coefficients", False):
        raise ValueError("coarsen_pair of a network with learned coefficients is not "
                         "supported yet")
    keep = [(j,) for j in range(k)] + [(k, k + 1)] + [(j,) for j in range(k + 2, L)]
    sets = _layer_sets(c, keep)
    fields = _fields(layers[k])
    if restriction == "mean":
        fields = copy.deepcopy(fields)
        other = {f"{f}.{n}": p for f, m in _fields(layers[k + 1]).items()
                 for n, p in m.named_parameters()}
        with torch.no_grad():
            for f, m in fields.items():
                for n, p in m.named_parameters():
                    p.copy_(((p.double() + other[f"{f}.{n}"].double()) / 2).to(p.dtype))
    merged = build_layer(c.replace(step_size=2 * c.step_size), model.scheme, fields)
    return with_layers(model, [merged if g == (k, k + 1) else layers[g[0]] for g in keep],
                       **sets)


def block_influence(model, evaluate: Callable) -> tuple[float, list[float]]:
    """``(evaluate(model), [BI_k for each layer])``: one evaluation, with a hook on each layer
    summing ``cos(input, output)`` (float64) over every token the evaluation runs through it
    (module docstring). A layer never called (a stack that does not call its layers one by
    one): ValueError."""
    sums = [torch.zeros((), dtype=torch.float64) for _ in model.layers]
    counts = [0] * len(model.layers)

    def hook(k):
        def record(module, args, out):
            a, b = args[0].detach().double(), out.detach().double()
            cos = torch.nn.functional.cosine_similarity(a, b, dim=-1)
            sums[k] += cos.sum().cpu()
            counts[k] += cos.numel()
        return record

    handles = [la.register_forward_hook(hook(k)) for k, la in enumerate(model.layers)]
    try:
        with torch.no_grad():
            loss = loss_of(evaluate, model.eval())
    finally:
        for h in handles:
            h.remove()
    if not all(counts):
        raise ValueError("block influence: the stack did not run its layers one by one (no "
                         "input and output state per layer)")
    return loss, [1.0 - float(s) / n for s, n in zip(sums, counts)]


def ranks(values) -> list[int]:
    """1 for the smallest of ``values``, ``len`` for the largest (ties in order; NaN last)."""
    order = sorted(range(len(values)),
                   key=lambda i: (math.isnan(values[i]), values[i] if not
                                  math.isnan(values[i]) else 0.0, i))
    out = [0] * len(values)
    for r, i in enumerate(order, 1):
        out[i] = r
    return out


@dataclasses.dataclass
class LayerStudy:
    """A network's layers, measured: ``loss`` as it is; ``drop[k]`` the loss without layer
    k; ``pairs[r][k]`` the loss with layers k, k+1 as one step of 2 h under restriction ``r``
    (``"mean"``, ``"first"``); ``bi[k]`` layer k's Block Influence (module docstring)."""

    loss: float
    bi: list[float]
    drop: list[float]
    pairs: dict[str, list[float]]      # NaN: a pair that cannot be one layer (:func:`mergeable`)

    def drop_costs(self) -> list[float]:
        return [v - self.loss for v in self.drop]

    def pair_costs(self, restriction: str = "mean") -> list[float]:
        return [v - self.loss for v in self.pairs[restriction]]

    def spearman(self) -> tuple[float, float]:
        """``(rho, p)``: Spearman's rank correlation of BI and the drop cost over the layers
        (scipy; NaN with fewer than 3 layers or a constant column)."""
        import warnings

        from scipy.stats import spearmanr

        if len(self.bi) < 3:
            return math.nan, math.nan
        with warnings.catch_warnings():        # a constant column: NaN, said in the table
            warnings.simplefilter("ignore")
            r = spearmanr(self.bi, self.drop_costs(), nan_policy="omit")
        return float(r.statistic), float(r.pvalue)

    def to_dict(self) -> dict:
        rho, p = self.spearman()
        return {**dataclasses.asdict(self), "drop_cost": self.drop_costs(),
                "pair_cost": {r: self.pair_costs(r) for r in self.pairs},
                "bi_rank": ranks(self.bi), "drop_rank": ranks(self.drop_costs()),
                "spearman": {"rho": rho, "p": p}}

    def table(self, unit: str = "bpb", scale: float = 1.0) -> str:
        """The study as text: per layer its BI, its drop cost and the rank of each (1: the
        least: what ShortGPT removes first, what costs least), then per pair its costs, then
        Spearman's rho (losses times ``scale`` in ``unit``)."""
        scale = check_real("scale", scale, lo=0.0, lo_open=True)
        dc = self.drop_costs()
        br, dr = ranks(self.bi), ranks(dc)
        lines = [f"layers dropped and merged ({unit}, change against the network as it is, "
                 f"{self.loss * scale:.4f}; BI: ShortGPT's block influence, 1 - mean "
                 f"cos(input, output); rank 1: the least)",
                 f"{'layer':>5} {'BI':>9} {'BI rank':>7} {'drop':>10} {'rank':>5}"]
        lines += [f"{k:>5} {self.bi[k]:>9.4g} {br[k]:>7} {dc[k] * scale:>+10.4f} {dr[k]:>5}"
                  for k in range(len(dc))]
        by = lambda rk: ", ".join(str(k) for k in sorted(range(len(rk)), key=rk.__getitem__))  # noqa: E731
        lines += [f"cheapest first: by the measured drop cost {by(dr)}; by BI {by(br)}"]
        rho, p = self.spearman()
        lines.append(f"Spearman rank correlation of BI and the drop cost: {rho:+.3f} (p "
                     f"{p:.3g}, {len(dc)} layers)" if not math.isnan(rho) else
                     "Spearman rank correlation of BI and the drop cost: - (fewer than 3 "
                     "layers, or a constant column)")
        rs = list(self.pairs)
        if rs:
            lines.append(f"{'pair':>7} " + " ".join(f"{r + ' (2h)':>12} {'rank':>5}" for r in rs))
            cs = {r: self.pair_costs(r) for r in rs}
            rk = {r: ranks(cs[r]) for r in rs}
            lines += [f"{f'{k}-{k + 1}':>7} " + " ".join(
                f"{cs[r][k] * scale:>+12.4f} {rk[r][k]:>5}" if not math.isnan(cs[r][k]) else
                f"{'cannot merge':>12} {'-':>5}" for r in rs) for k in range(len(dc) - 1)]
        return "\n".join(lines)


def layer_study(model, evaluate: Callable, restrictions=RESTRICTIONS,
                progress: bool = False) -> LayerStudy:
    """``evaluate(m) -> mean loss`` of ``model`` as it is (with each layer's Block Influence,
    :func:`block_influence`), of ``model`` without each layer (:func:`drop_layer`) and with each
    adjacent pair as one step of 2 h under each of ``restrictions`` (:func:`coarsen_pair`).
    ``L + 1 + len(restrictions) (L - 1)`` evaluations; eval mode, no gradients; ``model`` is
    left as it was (every variant is a view over its modules)."""
    if not callable(evaluate):
        raise TypeError(f"evaluate must be a function model -> mean loss, got "
                        f"{type(evaluate).__name__}")
    restrictions = (restrictions,) if isinstance(restrictions, str) else tuple(restrictions)
    for r in restrictions:
        if r not in RESTRICTIONS:
            raise ValueError(f"restriction must be one of {', '.join(RESTRICTIONS)}, got {r!r}")
    drop_layer(model, 0)           # a network these take (ValueError before any evaluation)
    L = len(model.layers)
    todo = [("drop", k, None) for k in range(L)]
    todo += [("pair", k, r) for r in restrictions for k in range(L - 1)]
    it = todo
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(todo, desc="layers", unit="model", file=sys.stderr)
    loss, bi = block_influence(model, evaluate)
    drop, pairs = [], {r: [] for r in restrictions}
    with torch.no_grad():
        for what, k, r in it:
            if what == "pair" and not mergeable(model, k):     # e.g. a local and a global layer
                pairs[r].append(math.nan)
                continue
            m = drop_layer(model, k) if what == "drop" else coarsen_pair(model, k, r)
            (drop if what == "drop" else pairs[r]).append(loss_of(evaluate, m.eval()))
    return LayerStudy(loss, bi, drop, pairs)


def mergeable(model, k: int) -> bool:
    """Whether layers ``k`` and ``k + 1`` can be one layer: both or neither listed in each of
    the config's layer lists (:data:`splitnet.nets.depth.LAYER_SETS`: a gated and an ungated
    layer, a local and a global one cannot); a pair that cannot is NaN in a
    :class:`LayerStudy`."""
    L = len(model.layers)
    keep = [(j,) for j in range(k)] + [(k, k + 1)] + [(j,) for j in range(k + 2, L)]
    try:
        _layer_sets(model.config, keep)
    except ValueError:
        return False
    return True


__all__ = ["LayerStudy", "block_influence", "coarsen_pair", "drop_layer", "layer_study",
           "mergeable", "ranks"]
