"""Depth is a step size: a network prolonged or coarsened by its scheme.

Layer k of a network with step h covers ``[k h, (k + 1) h]``. A network whose layer k holds one
set of fields ``F_k`` is a step of the ODE ``dx/dt = F_k(x)`` on that piece (piecewise constant
in time), so its depth is a step size::

    prolong(model, f):   f L layers at step h / f; layers f k, ..., f k + f - 1 are copies of
                         layer k (new tensors): each piece integrated by f steps of h / f
    coarsen(model, f):   L / f layers at step f h; layer k is restricted from layers
                         f k, ..., f k + f - 1: ``"mean"`` (default) the mean of their weights,
                         ``"first"`` the first of them (every f-th layer)

``coarsen(prolong(m, f), f)`` is ``m`` under both restrictions.

**Any number of steps** (:func:`at_depth`): a network whose weights are functions of depth
(``depth_basis``, :mod:`splitnet.fields.depthfield`) runs its ODE over ``[0, T]``, ``T = L h``,
with any ``n`` steps of ``T / n``: a view over the same field modules (no copy). A layered
network is prolonged or coarsened (n a multiple or a divisor of L); with ``view=True`` into a
view whose layers are functions of the network's own (a prolonged layer is the layer itself at
the finer step; a coarsened one a :class:`~splitnet.fields.depthfield.MeanField` of the layers
it merges), so a loss at another depth trains every layer. :func:`to_basis` projects a layered
network onto K functions of depth. Prolonging again and again
converges to the exact flow of the piecewise ODE at the network's order: a reversible network's
stages are shears whose Euler step is exact, so it converges at its scheme's order (Lie–Trotter
1, Strang 2, Yoshida4 4); a plain network of Euler sub-layers at order 1 whatever its scheme
(``tests/test_depth.py``, the table of docs/depth.md). Both work for
:class:`~splitnet.nets.models.SplitTransformer` (plain, reversible, shared or per-stage weights,
learned coefficients: the coefficients are relative to h and copied or averaged with the rest)
and both stacks of :class:`~splitnet.nets.seq2seq.SplitSeq2Seq`. The model given is left as it
was; the new one has its dtype, device and training mode, and a config that says its depth and
step (so it saves, loads and trains as any other).
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from ..configs.options import check_flag
from ..fields.depthfield import Basis, DepthField, MeanField
from .models import SplitTransformer
from .seq2seq import SplitSeq2Seq
from .stack import build_layer

RESTRICTIONS = ("mean", "first")
# the layer lists of each network and the config field counting each one's layers
_DEPTHS = {SplitTransformer: {"layers": "n_layers"},
           SplitSeq2Seq: {"encoder_layers": "n_encoder_layers",
                          "decoder_layers": "n_decoder_layers"}}


def _factor(f) -> int:
    if isinstance(f, bool) or not isinstance(f, int) or f < 1:
        raise ValueError(f"the depth factor must be an int >= 1, got {f!r}")
    return f


def stack_names(model) -> tuple[str, ...]:
    """The attributes holding ``model``'s stacks (``layers``; ``encoder_layers``,
    ``decoder_layers``)."""
    return tuple(_stacks(model))


def _stacks(model) -> dict:
    for cls, stacks in _DEPTHS.items():
        if isinstance(model, cls):
            if getattr(model, "refinement", None) is not None:
                raise ValueError("a re-discretised view (rediscretize, ode_model) shares its "
                                 "weights with a model: change the depth of the model itself")
            return stacks
    raise TypeError(f"prolong and coarsen take a SplitTransformer or a SplitSeq2Seq, got "
                    f"{type(model).__name__}")


# options listing layers that differ from the others: (option, what a listed layer is)
LAYER_SETS = (("gate_layers", "gated"), ("window_layers", "local (windowed)"))


def _layer_set(c, f: int, finer: bool, name: str = "gate_layers", what: str = "gated"):
    """``name`` (``gate_layers``, ``window_layers``) of the new depth: each listed layer's
    copies, or the coarse layers all of whose merged layers are listed (a mixed group cannot
    be one layer: ValueError)."""
    gl = getattr(c, name, None)
    if gl is None:
        return None
    if finer:
        return tuple(f * k + j for k in gl for j in range(f))
    on = set(gl)
    out = []
    for k in range(c.n_layers // f):
        group = {f * k + j in on for j in range(f)}
        if len(group) > 1:
            raise ValueError(f"layers {f * k}..{f * k + f - 1} are {what} and not {what} "
                             f"({name} {tuple(gl)}): they cannot be one layer")
        if group == {True}:
            out.append(k)
    return tuple(out)


def _sets(c, f: int, finer: bool) -> dict:
    """The layer lists of ``c`` (:data:`LAYER_SETS`) at the new depth."""
    return {name: _layer_set(c, f, finer, name, what) for name, what in LAYER_SETS
            if getattr(c, name, None) is not None}


def depths(c) -> dict:
    """The config fields counting the layers of each stack of a network config ``c``."""
    return {"n_layers": c.n_layers} if hasattr(c, "n_layers") else \
        {"n_encoder_layers": c.n_encoder_layers, "n_decoder_layers": c.n_decoder_layers}


def prolonged_config(c, f: int):
    """The config of ``prolong(model, f)`` for a model of config ``c``."""
    f = _factor(f)
    changes = {n: L * f for n, L in depths(c).items()}
    return c.replace(step_size=c.step_size / f, **changes, **_sets(c, f, finer=True))


def coarsened_config(c, f: int):
    """The config of ``coarsen(model, f)`` for a model of config ``c`` (ValueError: a depth not
    divisible by ``f``, a group of gated and plain layers)."""
    f = _factor(f)
    for n, L in depths(c).items():
        if L % f:
            raise ValueError(f"{n}={L} is not divisible by the factor {f}")
    changes = {n: L // f for n, L in depths(c).items()}
    return c.replace(step_size=c.step_size * f, **changes, **_sets(c, f, finer=False))


def _rebuilt(model, cfg, state: dict):
    """A new network of ``model``'s class, dtype, device and mode with config ``cfg``, holding
    ``state``."""
    ref = model.tok_emb.weight if hasattr(model, "tok_emb") else model.src_emb.weight
    with torch.device(ref.device):
        new = type(model).from_config(cfg)
    new = new.to(ref.dtype)              # float64 coefficients stay float64 (their _apply)
    new.load_state_dict(state)
    return new.train(model.training)


def _layer_keys(state: dict, attr: str):
    """``{k: {rest: tensor}}``: the weights of layer k of the stack ``attr``."""
    out: dict = {}
    head = attr + "."
    for key, v in state.items():
        if key.startswith(head):
            k, _, rest = key[len(head):].partition(".")
            out.setdefault(int(k), {})[rest] = v
    return out


def source_layer(name: str, stacks, f: int) -> str:
    """The weight of ``model`` that weight ``name`` of ``prolong(model, f)`` copies (layer
    ``f k + j`` of a stack in ``stacks``: layer k)."""
    attr, _, rest = name.partition(".")
    if attr not in stacks:
        return name
    k, _, rest = rest.partition(".")
    return f"{attr}.{int(k) // f}.{rest}"


def prolong(model, f: int):
    """``model`` with ``f`` times the layers at step ``h / f``: layers ``f k .. f k + f - 1``
    copies of layer k (module docstring). ``f = 1``: an equal copy."""
    f, stacks = _factor(f), _stacks(model)
    cfg, state = prolonged_config(model.config, f), model.state_dict()
    new_state = {}
    for attr in stacks:
        layers = _layer_keys(state, attr)
        for n in range(len(layers) * f):
            new_state.update({f"{attr}.{n}.{r}": v.clone() for r, v in layers[n // f].items()})
    new_state.update({k: v.clone() for k, v in state.items()
                      if not any(k.startswith(a + ".") for a in stacks)})
    return _rebuilt(model, cfg, new_state)


def _restrict(tensors: list, how: str) -> torch.Tensor:
    first = tensors[0]
    if how == "first" or not first.is_floating_point():
        return first.clone()
    # averaged in float64 (a bf16 model's mean is not rounded once per term)
    return torch.stack([t.double() for t in tensors]).mean(0).to(first.dtype)


def coarsen(model, f: int, restriction: str = "mean"):
    """``model`` with ``1 / f`` of its layers at step ``f h``: layer k restricted from layers
    ``f k .. f k + f - 1`` (``restriction``: ``"mean"`` or ``"first"``; module docstring). A
    depth not divisible by ``f``: ValueError. Learned coefficients kept exact
    (``project_coefficients``) are projected again after the mean."""
    f, stacks = _factor(f), _stacks(model)
    if restriction not in RESTRICTIONS:
        raise ValueError(f"restriction must be one of {', '.join(RESTRICTIONS)}, got "
                         f"{restriction!r}")
    cfg, state = coarsened_config(model.config, f), model.state_dict()
    new_state = {k: v.clone() for k, v in state.items()
                 if not any(k.startswith(a + ".") for a in stacks)}
    for attr in stacks:
        layers = _layer_keys(state, attr)
        for k in range(len(layers) // f):
            for r in layers[f * k]:
                new_state[f"{attr}.{k}.{r}"] = _restrict(
                    [layers[f * k + j][r] for j in range(f)], restriction)
    new = _rebuilt(model, cfg, new_state)
    if getattr(cfg, "project_coefficients", False) and f > 1 and restriction == "mean":
        new.project_coefficients()
    return new


FITS = ("steps", "mean")


def _evaluations(model, stacks) -> dict:
    """``{id(depth field): [(layer k, t), ...]}``: the times at which each depth field of
    ``model`` is evaluated, layer by layer, in one forward (on a one-token input)."""
    from ..fields.depthfield import as_time, recording

    calls: dict = {}
    where = [None]
    hooks = [layer.register_forward_pre_hook(lambda m, a, k=k: where.__setitem__(0, k))
             for attr in stacks for k, layer in enumerate(getattr(model, attr))]
    dev = next(model.parameters()).device
    try:
        with torch.no_grad(), recording(lambda f, t: calls.setdefault(id(f), []).append(
                (where[0], as_time(t)))):
            if isinstance(model, SplitSeq2Seq):
                tok = torch.tensor([[1 if model.config.pad_id == 0 else 0]], device=dev)
                model(tok, tok)
            else:
                model(torch.zeros(1, 1, dtype=torch.long, device=dev))
    finally:
        for h in hooks:
            h.remove()
    return calls


def _design(df: DepthField, rows, fit: str, L: int) -> np.ndarray:
    """The least-squares matrix of one depth field over the layers: a row per evaluation
    (``fit="steps"``: ``phi(t / T)`` at every time the network at its own depth evaluates
    it, the target the weight of the layer evaluating it) or per layer (``"mean"``: the mean
    of ``phi`` over layer k's interval)."""
    if fit == "mean":
        return L * df.basis.integrals(np.arange(L + 1) / L)
    return np.array([df.basis.values(t / df.T) for _, t in rows])


def _project(df: DepthField, Y: np.ndarray, A, old: Basis | None) -> tuple:
    """``(coefficients, |error|^2, |weights|^2)`` of one weight ``Y`` (by layer or, ``old``,
    by coefficient of the old basis): least squares, or the L2 projection on [0, 1] (its error
    integrated by a rule exact for both bases)."""
    if old is None:
        W = np.linalg.lstsq(A, Y, rcond=None)[0]
        return W, float(((A @ W - Y) ** 2).sum()), float((Y ** 2).sum())
    G = df.basis.integrals([0.0, 1.0], df.basis)[0]             # (K, K)
    C = df.basis.integrals([0.0, 1.0], old)[0]                  # (K, K0)
    W = np.linalg.solve(G, C @ Y)
    s, w = df.basis.rule([0.0, 1.0], old)[0]
    before = old.matrix(s) @ Y
    err = float(w @ ((before - df.basis.matrix(s) @ W) ** 2).sum(1))
    return W, err, float(w @ (before ** 2).sum(1))


def to_basis(model, basis, return_residual: bool = False, fit: str = "steps"):
    """``model`` as a network whose weights are functions of depth over ``basis``
    (``"legendre:K"``, ``"linear:K"``): a new network with ``depth_basis=basis``, every other
    weight copied.

    Layered (layer k holding its own weights): each weight's K coefficients by least squares
    over the layers. ``fit="steps"`` (default): ``W(t)`` at every time the new network at the
    model's own depth evaluates the field (stage clocks, sub-steps, quadrature nodes) against
    the weight of the layer evaluating it, so at its own depth the new network is the model as
    nearly as K functions allow (exactly, for Lie–Trotter with ``K = L``); ``"mean"``: the mean
    of ``W(t)`` over layer k's interval against layer k's weight. K > L functions from L layers:
    ``ValueError``. Already a function of depth over another basis: the L2 projection on [0, 1]
    (a change of basis, Stateful ODE-Nets' compression). Learned coefficients: not supported
    yet. ``return_residual``: also ``{"relative": |fit - target| / |target| over every weight of
    the stacks, "per_weight": {name: the same per weight}}``."""
    stacks, c = _stacks(model), model.config
    b = Basis(basis)
    return_residual = check_flag("return_residual", return_residual)   # "no" is truthy
    if fit not in FITS:
        raise ValueError(f"fit must be one of {', '.join(FITS)}, got {fit!r}")
    if getattr(c, "learn_coefficients", False):
        raise ValueError("to_basis of a network with learned coefficients is not supported yet")
    old = None if c.depth_basis is None else Basis(c.depth_basis)
    if old is None and b.K > min(getattr(c, d) for d in stacks.values()):
        raise ValueError(f"{b.spec}: {b.K} functions of depth cannot be fitted to "
                         f"{min(getattr(c, d) for d in stacks.values())} layers (at most one "
                         f"per layer)")
    ref = model.tok_emb.weight if hasattr(model, "tok_emb") else model.src_emb.weight
    with torch.device(ref.device):
        new = type(model).from_config(c.replace(depth_basis=b.spec))
    new = new.to(ref.dtype).train(model.training)
    new.load_state_dict({k: v for k, v in model.state_dict().items()
                         if not any(k.startswith(a + ".") for a in stacks)}, strict=False)
    calls = _evaluations(new, stacks) if old is None and fit == "steps" else {}
    per, tot = {}, [0.0, 0.0]
    with torch.no_grad():
        for attr in stacks:
            layers = getattr(model, attr)
            for path, df in getattr(new, attr)[0].named_modules():
                if not isinstance(df, DepthField):
                    continue
                rows = calls.get(id(df), [(k, None) for k in range(len(layers))])
                A = None if old is not None else _design(df, rows, fit, len(layers))
                for name, p in df.inner.named_parameters():
                    Y = layers[0].get_submodule(path).inner.get_parameter(name) if old else \
                        torch.stack([layers[k].get_submodule(path).get_parameter(name)
                                     for k, _ in rows])
                    Y = Y.detach().double().cpu().reshape(Y.shape[0], -1).numpy()
                    W, err, norm = _project(df, Y, A, old)
                    p.copy_(torch.from_numpy(W.reshape(p.shape)).to(p))
                    per[f"{attr}.{path}.{name}"] = (err / norm) ** 0.5 if norm else 0.0
                    tot[0], tot[1] = tot[0] + err, tot[1] + norm
    if not return_residual:
        return new
    return new, {"relative": (tot[0] / tot[1]) ** 0.5 if tot[1] else 0.0, "per_weight": per}


# the attribute of each stack's StackConfig on an encoder–decoder (its layers' settings)
_SIDES = {"encoder_layers": "encoder", "decoder_layers": "decoder"}


def _steps(model, n) -> dict:
    """The steps each stack runs at depth ``n``: an int (every stack), or for an encoder–decoder
    a pair (encoder, decoder); every stack's step ``T / n`` must be the one step size of its
    config."""
    stacks = _stacks(model)
    ns = tuple(n) if isinstance(n, (tuple, list)) else (n,) * len(stacks)
    if len(ns) != len(stacks) or any(isinstance(v, bool) or not isinstance(v, int) or v < 1
                                     for v in ns):
        raise ValueError(f"the number of steps must be an int >= 1"
                         f"{' or a pair (encoder, decoder)' if len(stacks) > 1 else ''}, "
                         f"got {n!r}")
    out = dict(zip(stacks, ns))
    c = model.config
    hs = {getattr(c, stacks[a]) * c.step_size / v for a, v in out.items()}
    if max(hs) - min(hs) > 1e-12 * max(hs):
        raise ValueError(f"an encoder–decoder has one step size: its stacks' times "
                         f"{[getattr(c, d) * c.step_size for d in stacks.values()]} need steps "
                         f"in the ratio of their depths, got {ns}")
    return out


def _field_modules(layer) -> dict:
    """Layer's fields as :func:`~splitnet.nets.stack.build_layer` takes them (name -> module,
    or the list of per-stage modules)."""
    return {f: getattr(layer, f) for f in layer.field_names}


def _view(model, cfg, layers: dict):
    """A shallow copy of ``model`` (every module shared) with config ``cfg`` and new layer
    lists (attribute -> layers), each in its stack's kind at ``cfg``'s step."""
    new = copy.copy(model)
    for reg in ("_parameters", "_buffers", "_modules"):
        new.__dict__[reg] = type(model.__dict__[reg])(model.__dict__[reg])
    new.__dict__["_config"] = cfg
    for attr, ls in layers.items():
        setattr(new, attr, getattr(model, attr).like(ls, step_size=cfg.step_size))
        if attr in _SIDES:
            setattr(new, f"{_SIDES[attr]}_stack", cfg.stack_config(_SIDES[attr]))
    return new


def _settings(model, cfg, attr: str):
    """What builds a layer of stack ``attr`` under ``cfg``: the config (a stack's for an
    encoder–decoder) and the scheme."""
    if attr in _SIDES:
        side = _SIDES[attr]
        return cfg.stack_config(side), getattr(model, f"{side}_scheme")
    return cfg, model.scheme


def _views(model, cfg, ns: dict, fields_of) -> object:
    """The view of ``model`` at ``cfg`` whose stack ``attr`` has ``ns[attr]`` layers, layer k
    over ``fields_of(attr, k)``."""
    layers = {}
    for attr, n in ns.items():
        c, scheme = _settings(model, cfg, attr)
        layers[attr] = [build_layer(c, scheme, fields_of(attr, k)) for k in range(n)]
    return _view(model, cfg, layers)


def _mean_fields(layers) -> dict:
    """One layer's fields from ``layers``: each a :class:`MeanField` of theirs."""
    groups = [_field_modules(la) for la in layers]
    out = {}
    for f, first in groups[0].items():
        if isinstance(first, torch.nn.ModuleList):     # per-stage: stage by stage
            out[f] = [MeanField([g[f][i] for g in groups]) for i in range(len(first))]
        else:
            out[f] = MeanField([g[f] for g in groups])
    return out


def with_layers(model, layers, **changes):
    """A view of ``model`` (every other module shared) whose stack is ``layers`` in its kind at
    its step, with the config ``model.config.replace(n_layers=len(layers), **changes)``: the
    networks of one layer dropped or one pair merged (:mod:`splitnet.analyses.redundancy`)."""
    cfg = model.config.replace(n_layers=len(layers), **changes)
    return _view(model, cfg, {"layers": list(layers)})


# at_depth below the depth: coarsened (mean, first), every (L/n)-th layer (drop), the first n (exit)
AT_DEPTH = RESTRICTIONS + ("drop", "exit")


def _keepable(model):      # a layered SplitTransformer's config, else ValueError
    _stacks(model)
    if not isinstance(model, SplitTransformer) or model.config.depth_basis is not None:
        raise ValueError("keeping some layers (LayerDrop's pruning, an early exit) takes a "
                         "layered SplitTransformer (no depth_basis, not an encoder–decoder)")
    return model.config


def kept_layers(model, layers, view: bool = True):
    """``model`` with only the layers ``layers`` (increasing indices), each at its own step
    ``h``, then the final norm and head: what LayerDrop trains and prunes (``[0, f, 2f, ...]``,
    Fan et al.'s every-other) and the early exit after n layers (``[0, ..., n - 1]``). ``view``:
    sharing the layers; else new tensors. A layered :class:`SplitTransformer` only."""
    c = _keepable(model)
    ks = [int(k) for k in layers]
    if not ks or ks != sorted(set(ks)) or not 0 <= ks[0] <= ks[-1] < c.n_layers:
        raise ValueError(f"the layers kept must be one or more increasing indices in "
                         f"0..{c.n_layers - 1}, got {ks}")
    lists = {name: tuple(i for i, k in enumerate(ks) if k in set(getattr(c, name)))
             for name, _ in LAYER_SETS if getattr(c, name, None) is not None}
    new = with_layers(model, [model.layers[k] for k in ks], **lists)
    if check_flag("view", view):
        return new
    return _rebuilt(model, new.config, {k: v.clone() for k, v in new.state_dict().items()})


def _restricted(model, n: int, restriction: str, view: bool):
    """``at_depth`` with ``restriction`` ``"drop"`` or ``"exit"`` (its docstring)."""
    L = _keepable(model).n_layers
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= L or (
            restriction == "drop" and L % n):
        raise ValueError(f"restriction {restriction!r} keeps n of a layered network's {L} "
                         f"layers, n in 1..{L}{' dividing it' * (restriction == 'drop')}, "
                         f"not {n!r}")
    return kept_layers(model, range(n) if restriction == "exit" else range(0, L, L // n), view)


def at_depth(model, n, view: bool = False, restriction: str = "mean"):
    """``model`` with ``n`` steps over its time ``T = L h`` (step ``T / n``); for an
    encoder–decoder ``n`` for both stacks or a pair (encoder, decoder).

    ``restriction`` (:data:`AT_DEPTH`): ``"mean"`` (default) or ``"first"``: coarsened
    (:func:`coarsen`); ``"drop"``: layers ``0, L/n, 2L/n, ...`` (LayerDrop's pruning);
    ``"exit"``: the first n layers (both :func:`kept_layers`: n steps of ``h``, not ``T / n``).

    With ``depth_basis`` a view: the same depth fields, evaluated at the new layers' clock
    times (nothing copied; training the view trains the model). A layered network: ``n`` a
    multiple of ``L`` is :func:`prolong`, a divisor :func:`coarsen` (mean), anything else a
    ``ValueError``; new tensors, unless ``view=True``: then a view whose prolonged layers are
    the model's own at the finer step and whose coarsened layers evaluate the mean of the
    layers they merge (:class:`~splitnet.fields.depthfield.MeanField`), so its gradients reach
    every layer of the model (learned coefficients: not supported yet)."""
    stacks, c = _stacks(model), model.config
    view = check_flag("view", view)            # "no" is truthy: a copy asked, a view given
    if restriction not in AT_DEPTH:
        raise ValueError(f"restriction must be one of {', '.join(AT_DEPTH)}, got "
                         f"{restriction!r}")
    if restriction in ("drop", "exit"):
        return _restricted(model, n, restriction, view)
    ns = _steps(model, n)
    if c.depth_basis is not None:
        if restriction != "mean":
            raise ValueError(f"restriction {restriction!r} restricts layers: a network with "
                             f"depth_basis runs at any depth by its clock")
        cfg = c.replace(step_size=c.step_size * getattr(c, next(iter(stacks.values()))) /
                        next(iter(ns.values())), **{stacks[a]: v for a, v in ns.items()})
        return _views(model, cfg, ns, lambda a, k: _field_modules(getattr(model, a)[0]))
    a0, n0 = next(iter(ns.items()))
    L = getattr(c, stacks[a0])
    if n0 % L and L % n0:
        raise ValueError(f"a layered network of {L} layers runs at a multiple or a divisor of "
                         f"its depth (prolong, coarsen), not at {n0} steps; with depth_basis "
                         f"any number of steps")
    finer, f = (True, n0 // L) if n0 % L == 0 else (False, L // n0)
    if not view:
        return prolong(model, f) if finer else coarsen(model, f, restriction)
    if getattr(c, "learn_coefficients", False):
        raise ValueError("a view at another depth of a network with learned coefficients is "
                         "not supported yet (at_depth without view=True copies them)")
    cfg = prolonged_config(c, f) if finer else coarsened_config(c, f)
    if finer:
        return _views(model, cfg, ns, lambda a, k: _field_modules(getattr(model, a)[k // f]))
    if restriction == "first":
        return _views(model, cfg, ns, lambda a, k: _field_modules(getattr(model, a)[f * k]))
    return _views(model, cfg, ns,
                  lambda a, k: _mean_fields(getattr(model, a)[f * k:f * k + f]))


__all__ = ["AT_DEPTH", "FITS", "LAYER_SETS", "RESTRICTIONS", "at_depth", "coarsen",
           "coarsened_config", "depths", "kept_layers", "prolong", "prolonged_config",
           "source_layer", "stack_names", "to_basis", "with_layers"]
