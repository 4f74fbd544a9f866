"""Depth is a step size: a network prolonged or coarsened by its scheme.

Layer k of a network with step h covers ``[k h, (k + 1) h]``. A network whose layer k holds one
set of fields ``F_k`` is a step of the ODE ``dx/dt = F_k(x)`` on that piece (piecewise constant
in time), so its depth is a step size::

    prolong(model, f):   f L layers at step h / f; layers f k, ..., f k + f - 1 are copies of
                         layer k (new tensors): each piece integrated by f steps of h / f
    coarsen(model, f):   L / f layers at step f h; layer k is restricted from layers
                         f k, ..., f k + f - 1: ``"mean"`` (default) the mean of their weights,
                         ``"first"`` the first of them (every f-th layer)

``coarsen(prolong(m, f), f)`` is ``m`` under both restrictions. Prolonging again and again
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

import torch

from .models import SplitTransformer
from .seq2seq import SplitSeq2Seq

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


def _gates(c, f: int, finer: bool):
    """``gate_layers`` of the new depth: each gated layer's copies, or the coarse layers all of
    whose merged layers are gated (a mixed group cannot be one layer: ValueError)."""
    gl = getattr(c, "gate_layers", None)
    if gl is None:
        return None
    if finer:
        return tuple(f * k + j for k in gl for j in range(f))
    on = set(gl)
    out = []
    for k in range(c.n_layers // f):
        group = {f * k + j in on for j in range(f)}
        if len(group) > 1:
            raise ValueError(f"layers {f * k}..{f * k + f - 1} are gated and not gated "
                             f"(gate_layers {tuple(gl)}): they cannot be one layer")
        if group == {True}:
            out.append(k)
    return tuple(out)


def depths(c) -> dict:
    """The config fields counting the layers of each stack of a network config ``c``."""
    return {"n_layers": c.n_layers} if hasattr(c, "n_layers") else \
        {"n_encoder_layers": c.n_encoder_layers, "n_decoder_layers": c.n_decoder_layers}


def prolonged_config(c, f: int):
    """The config of ``prolong(model, f)`` for a model of config ``c``."""
    f = _factor(f)
    changes = {n: L * f for n, L in depths(c).items()}
    if getattr(c, "gate", None):
        changes["gate_layers"] = _gates(c, f, finer=True)
    return c.replace(step_size=c.step_size / f, **changes)


def coarsened_config(c, f: int):
    """The config of ``coarsen(model, f)`` for a model of config ``c`` (ValueError: a depth not
    divisible by ``f``, a group of gated and plain layers)."""
    f = _factor(f)
    for n, L in depths(c).items():
        if L % f:
            raise ValueError(f"{n}={L} is not divisible by the factor {f}")
    changes = {n: L // f for n, L in depths(c).items()}
    if getattr(c, "gate", None):
        changes["gate_layers"] = _gates(c, f, finer=False)
    return c.replace(step_size=c.step_size * f, **changes)


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


__all__ = ["RESTRICTIONS", "coarsen", "coarsened_config", "depths", "prolong",
           "prolonged_config", "source_layer", "stack_names"]
