"""Initialisation rules of the networks, stated per module (the rule beside the modules, as in
nanoGPT). A config's ``init`` option picks one (:data:`splitnet.configs.options.INITS`):

``"gpt2"`` -- GPT-2 / nanoGPT, the language models' default::

    W ~ N(0, 0.02)                  every matrix: linear weights, convolution kernels,
                                    token and position embeddings, an untied head
    W_out ~ N(0, 0.02 / sqrt(n))    the residual-output matrices each field kind declares
                                    (FieldKind.residual_outputs), n = residual sub-layers
                                    (stages) of the whole network: the initial residual
                                    stream x + sum of n updates does not grow with n
    b = 0                           biases; LayerNorm keeps its ones / zeros

``"xavier"`` -- Vaswani et al. 2017 / fairseq / ``torch.nn.Transformer``, the encoder–decoder's
default::

    W ~ U(-a, a), a = sqrt(6 / (fan_in + fan_out))   every matrix of every field (the fused
                                    q/k/v and k/v projections as one matrix each, as
                                    nn.MultiheadAttention's in_proj_weight; conv kernels with
                                    fan = channels x width)
    E ~ N(0, d^-1/2)                token embeddings, an untied head
    P ~ N(0, 1)                     learned positions
    b = 0, LayerNorm gamma = 1, beta = 0

  and the network multiplies the *token* embedding by ``sqrt(d)`` in forward
  (:func:`embed_scale`, fairseq's ``embed_scale``): tokens enter the residual stream with
  unit-size entries while a tied head, ``E^T``, gives logits of unit size at the start (with
  N(0, 1) embeddings and a tied head the first logits have std ``sqrt(d)``). Positions are
  drawn at the scaled tokens' size, as sinusoidal positions are, not fairseq's learned
  N(0, d^-1/2): on a copy task (d_model 64, 3 + 3 layers, 250 AdamW steps at 1e-3, batch 32)
  positions 8x smaller than the tokens leave the decoder unable to align, 3.56 bits per
  target token, against 0.13 with N(0, 1) positions (torch.nn.Transformer with N(0, 1)
  embeddings and an untied head: 0.09; the gpt2 rule: 4.57, a unigram model). The scale
  changes the function computed, so a config written before ``init`` existed loads as
  ``"gpt2"`` (:data:`splitnet.configs.options.LEGACY`).

``"convs2s"`` -- Gehring et al. 2017, section 3.5, as the authors' fairseq ``fconv`` draws it::

    E, P ~ N(0, 0.1)                token and position embeddings
    K ~ N(0, sqrt(4 (1 - p) / n))   convolution kernels, which feed a GLU (n = k x channels in)
    W ~ N(0, sqrt((1 - p) / n))     an untied head (its input passed dropout p)
    W ~ N(0, sqrt(1 / n))           every other matrix (attention's projections)
    b = 0, norms (if any) ones / zeros

  no embedding scale; the same option makes the conv and multistep fields ConvS2S's blocks,
  their steps scaled by sqrt(1/2) (:mod:`splitnet.fields.conv`). ConvS2S's weight
  normalisation is not reproduced (a reparametrisation of the same function).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from torch import nn

from ..configs.options import init_rule
from ..fields.depthfield import expand_depth_fields
from ..fields.norms import NORM_TYPES


def embed_scale(config) -> float:
    """The factor on the token embedding in forward: ``sqrt(d_model)`` under ``xavier`` or
    ``scale_embedding`` (Gemma), else 1 (the networks skip the multiply then)."""
    scaled = init_rule(config) == "xavier" or getattr(config, "scale_embedding", False)
    return math.sqrt(config.d_model) if scaled else 1.0


def residual_outputs(layers: Iterable, plans: Iterable) -> list[nn.Parameter]:
    """The residual-output matrices of a stack of split layers, as their kinds declare them:
    ``plans[k]`` is layer k's :func:`~splitnet.configs.plan.layer_fields` answer, and every
    module of field f in layer k contributes the parameters ``kind.residual_outputs`` names
    (a shared module once). A declared name the module lacks is a ``ValueError`` naming it."""
    out, seen = [], set()
    for layer, plan in zip(layers, plans):
        for lf in plan:
            for module in layer.field_modules(lf.field):
                if id(module) in seen:
                    continue
                seen.add(id(module))
                for name in lf.kind.residual_outputs:
                    if getattr(module, name.split(".")[0], True) is None:
                        continue    # left out by this module (ConvS2S's block: no projection)
                    try:
                        out.append(module.get_parameter(name))
                    except AttributeError:
                        raise ValueError(f"field kind {lf.kind.name!r} declares the residual "
                                         f"output {name!r}, which {type(module).__name__} "
                                         f"does not have") from None
    return out


def init_gpt2(model: nn.Module, n_residual: int, residual: Iterable[nn.Parameter]) -> None:
    """GPT-2's rule (module docstring): every matrix N(0, 0.02), the ``residual`` matrices
    N(0, 0.02 / sqrt(n_residual)), biases zero. Parameters are drawn in ``named_parameters``
    order, so a seed gives the weights it gave before the rule was declared per kind."""
    std_out = 0.02 / math.sqrt(max(1, n_residual))
    scaled = {id(p) for p in residual}
    for name, p in model.named_parameters():
        if p.dim() >= 2:
            nn.init.normal_(p, 0.0, std_out if id(p) in scaled else 0.02)
        elif name.endswith("bias"):
            nn.init.zeros_(p)


def init_xavier(model: nn.Module, embeddings: Iterable[nn.Module],
                positions: Iterable[nn.Module] = ()) -> None:
    """The Transformer's rule (module docstring): ``embeddings`` (token tables, an untied head:
    modules with a ``weight``) N(0, d^-1/2), ``positions`` N(0, 1), every other matrix
    xavier-uniform, biases zero, LayerNorms ones / zeros."""
    emb = {id(m.weight) for m in embeddings if m is not None}
    pos = {id(m.weight) for m in positions if m is not None}
    for name, p in model.named_parameters():
        if id(p) in pos:
            nn.init.normal_(p, 0.0, 1.0)
        elif id(p) in emb:
            nn.init.normal_(p, 0.0, p.shape[-1] ** -0.5)      # (rows, d): std d^-1/2
        elif p.dim() >= 2:
            nn.init.xavier_uniform_(p)
        elif name.endswith("bias"):
            nn.init.zeros_(p)
    for m in model.modules():
        if isinstance(m, NORM_TYPES) and m.elementwise_affine:
            nn.init.ones_(m.weight)
            if getattr(m, "bias", None) is not None:        # (an RMSNorm has none)
                nn.init.zeros_(m.bias)


def init_convs2s(model: nn.Module, dropout: float, embeddings: Iterable[nn.Module],
                 positions: Iterable[nn.Module] = ()) -> None:
    """ConvS2S's rule (module docstring): ``embeddings`` (token tables; an untied head, a
    ``Linear``, dropout-corrected) and ``positions`` N(0, 0.1), convolution kernels
    N(0, sqrt(4 (1 - p) / n)), other matrices N(0, sqrt(1 / n)), biases zero."""
    tables = {id(m.weight) for m in (*embeddings, *positions)
              if m is not None and not isinstance(m, nn.Linear)}
    heads = {id(m.weight) for m in embeddings if isinstance(m, nn.Linear)}
    kernels = {id(m.weight) for m in model.modules() if isinstance(m, nn.Conv1d)}
    for name, p in model.named_parameters():
        fan_in = p[0].numel() if p.dim() >= 2 else 1          # channels in x kernel width
        if id(p) in tables:
            nn.init.normal_(p, 0.0, 0.1)
        elif id(p) in kernels:
            nn.init.normal_(p, 0.0, math.sqrt(4.0 * (1.0 - dropout) / fan_in))
        elif id(p) in heads:
            nn.init.normal_(p, 0.0, math.sqrt((1.0 - dropout) / fan_in))
        elif p.dim() >= 2:
            nn.init.normal_(p, 0.0, math.sqrt(1.0 / fan_in))
        elif name.endswith("bias"):
            nn.init.zeros_(p)
    for m in model.modules():
        if isinstance(m, NORM_TYPES) and m.elementwise_affine:
            nn.init.ones_(m.weight)
            if getattr(m, "bias", None) is not None:
                nn.init.zeros_(m.bias)


def initialise(model: nn.Module, rule: str, *, n_residual: int, residual: Iterable,
               embeddings: Iterable[nn.Module], positions: Iterable[nn.Module],
               dropout: float = 0.0) -> None:
    """Initialise ``model`` by ``rule`` (``"gpt2"``, ``"xavier"`` or ``"convs2s"``):
    ``residual`` are the declared residual-output matrices (:func:`residual_outputs`),
    ``n_residual`` the residual sub-layers they are scaled by, ``embeddings`` the token tables
    and an untied head, ``positions`` the position tables, ``dropout`` the network's (ConvS2S
    corrects its variances for it)."""
    rule = rule or "gpt2"                  # a bare language model's (configs.options.init_rule)
    if rule == "gpt2":
        init_gpt2(model, n_residual, residual)
    elif rule == "xavier":
        init_xavier(model, embeddings, positions)
    elif rule == "convs2s":
        init_convs2s(model, dropout, embeddings, positions)
    else:
        raise ValueError(f"init must be 'gpt2', 'xavier' or 'convs2s', got {rule!r}")
    expand_depth_fields(model)      # depth fields start constant at the weights just drawn


__all__ = ["embed_scale", "init_convs2s", "init_gpt2", "init_xavier", "initialise",
           "residual_outputs"]
