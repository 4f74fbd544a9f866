"""The Llama family in: ``LlamaForCausalLM``, ``Qwen2ForCausalLM`` and ``MistralForCausalLM`` as
SplitTransformers with equal logits (:func:`splitnet.interop.convert.from_hf` dispatches here).

A Llama block is a Lie–Trotter step of two fields, pre-norm inside each::

    x = x + attn(rms(x))          diffusion: grouped-query attention, rotary on every channel
    x = x + swiglu(rms(x))        convection: down(silu(gate(x)) * up(x))

so the map is ``scheme="lie-trotter"``, ``norm="rms"``, ``convection_field="swiglu"``,
``n_kv_heads``, ``positions="none"``, ``rotary_pct=1`` at the model's ``rope_theta`` (the
rotate-half convention of GPT-NeoX, which ``splitnet.fields.rotary`` implements), the
projections' biases as the family has them (Llama: ``attention_bias`` for q, k, v and the output;
Qwen2: q, k, v; Mistral: none), the head tied or not. q, k and v stack into one ``qkv`` matrix.

Anything the map would not reproduce exactly is a one-line ValueError naming it, never an
approximation: rotary scaling (Llama 3's ``llama3``, ``linear``, ``dynamic``, ``yarn``...),
partial rotary, a head width other than ``hidden_size / num_attention_heads``, MLP biases, an
activation other than SiLU, sliding-window attention that binds within the context. A Mistral or
Qwen2 window ``W`` shorter than ``max_position_embeddings`` is exact on contexts of up to ``W``
tokens, so the model's ``max_len`` is ``W`` then (no token is ever out of another's window), and
its context may not slide (``context_slides=False``): generation that would run past ``W``
tokens is refused, since sliding a ``W``-token context over a longer sequence is not
sliding-window attention once there is more than one layer."""

from __future__ import annotations

import torch

from ..nets.models import SplitTransformer
from ..stagelists.stages import CONVECTION, DIFFUSION

# model_type -> which of self-attention's projections have biases (Llama: by its config)
FAMILIES = {"llama": None, "qwen2": "qkv", "mistral": "none"}


def _rope(c) -> float:
    """``rope_theta`` of a config whose RoPE is the default one; ValueError naming the rest."""
    rope = dict(getattr(c, "rope_parameters", None) or {})
    scaling = getattr(c, "rope_scaling", None)
    if isinstance(scaling, dict):
        rope = {**scaling, **rope}
    kind = rope.get("rope_type", rope.get("type", "default"))
    if kind != "default":
        raise ValueError(f"this {c.model_type} scales its rotary positions (rope_type "
                         f"{kind!r}); splitnet has the default RoPE only, so its logits would "
                         f"differ")
    if float(rope.get("partial_rotary_factor", 1.0)) != 1.0:
        raise ValueError(f"this {c.model_type} rotates part of each head "
                         f"(partial_rotary_factor {rope['partial_rotary_factor']}); the Llama "
                         f"family rotates every channel")
    return float(rope.get("rope_theta", getattr(c, "rope_theta", 10000.0)))


def _window(c) -> tuple[int, bool]:
    """The context splitnet can run exactly and whether it may slide: ``max_position_embeddings``
    (slides, as every splitnet model's context), or a sliding window that is shorter (within it
    the window never binds; past it no sliding of a ``W``-token context is the model's
    attention, since each of several layers reaches ``W`` tokens further back: it may not
    slide)."""
    n = int(c.max_position_embeddings)
    w = getattr(c, "sliding_window", None)
    used = w is not None and getattr(c, "use_sliding_window", True)
    if used and int(w) < n and any(t == "sliding_attention" for t in (
            getattr(c, "layer_types", None) or ("sliding_attention",))):
        return int(w), False
    return n, True


def llama_options(c) -> dict:
    """The SplitConfig options of a Llama, Qwen2 or Mistral config; ValueError for anything the
    map would not reproduce exactly (module docstring)."""
    family = c.model_type
    if family not in FAMILIES:
        raise ValueError(f"{family!r} is not of the Llama family ({', '.join(FAMILIES)})")
    d, heads = c.hidden_size, c.num_attention_heads
    head_dim = getattr(c, "head_dim", None) or d // heads
    bad = [why for why, wrong in (
        (f"hidden_act {c.hidden_act!r} (the Llama family's SwiGLU gates with silu)",
         c.hidden_act != "silu"),
        (f"head_dim {head_dim} (splitnet's heads are hidden_size / num_attention_heads = "
         f"{d // heads} wide)", head_dim * heads != d),
        ("mlp_bias=True (splitnet's SwiGLU has no biases)", bool(getattr(c, "mlp_bias", False))),
        ) if wrong]
    if bad:
        raise ValueError(f"this {family} cannot be mapped exactly: {'; '.join(bad)}")
    bias = FAMILIES[family] or ("all" if getattr(c, "attention_bias", False) else "none")
    context, slides = _window(c)
    return {
        "vocab_size": c.vocab_size, "d_model": d, "n_heads": heads,
        "n_kv_heads": c.num_key_value_heads or heads, "n_layers": c.num_hidden_layers,
        "scheme": "lie-trotter", "causal": True, "weights": "shared", "step_size": 1.0,
        "d_ff": c.intermediate_size, "convection_field": "swiglu", "max_len": context,
        "context_slides": slides,
        "dropout": 0.0, "norm": "rms",     # (attention_dropout: training only, not mapped)
        "norm_eps": c.rms_norm_eps, "positions": "none", "rotary_pct": 1.0,
        "rotary_base": _rope(c), "attention_bias": bias,
        "tie_head": bool(c.tie_word_embeddings)}     # (SwiGLU gates with SiLU: no activation)


def _param(dst: torch.nn.Parameter, src: torch.Tensor, name: str) -> None:
    if tuple(src.shape) != tuple(dst.shape):
        raise ValueError(f"{name} has shape {tuple(src.shape)}, the config needs "
                         f"{tuple(dst.shape)}")
    dst.copy_(src)


def from_llama(src) -> SplitTransformer:
    """A ``LlamaForCausalLM`` / ``Qwen2ForCausalLM`` / ``MistralForCausalLM`` (a model object) as
    a SplitTransformer with its weights, in its dtype."""
    model = SplitTransformer(**llama_options(src.config))
    body = src.model
    model.to(body.embed_tokens.weight.dtype)
    with torch.no_grad():
        _param(model.tok_emb.weight, body.embed_tokens.weight, "model.embed_tokens.weight")
        _param(model.norm.weight, body.norm.weight, "model.norm.weight")
        if not model.config.tie_head:
            _param(model.head.weight, src.lm_head.weight, "lm_head.weight")
        for k, (layer, block) in enumerate(zip(model.layers, body.layers)):
            _copy_block(layer, block, f"model.layers.{k}")
    return model


def _copy_block(layer, block, prefix: str) -> None:
    att, ffn = layer.field_modules(DIFFUSION)[0], layer.field_modules(CONVECTION)[0]
    a, m = block.self_attn, block.mlp
    _param(att.norm.weight, block.input_layernorm.weight, f"{prefix}.input_layernorm.weight")
    _param(att.qkv.weight, torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]),
           f"{prefix}.self_attn.q_proj/k_proj/v_proj.weight")
    if att.qkv.bias is not None:
        _param(att.qkv.bias, torch.cat([a.q_proj.bias, a.k_proj.bias, a.v_proj.bias]),
               f"{prefix}.self_attn.q_proj/k_proj/v_proj.bias")
    _param(att.proj.weight, a.o_proj.weight, f"{prefix}.self_attn.o_proj.weight")
    if att.proj.bias is not None:
        _param(att.proj.bias, a.o_proj.bias, f"{prefix}.self_attn.o_proj.bias")
    _param(ffn.norm.weight, block.post_attention_layernorm.weight,
           f"{prefix}.post_attention_layernorm.weight")
    for ours, theirs in (("gate", "gate_proj"), ("up", "up_proj"), ("down", "down_proj")):
        _param(getattr(ffn, ours).weight, getattr(m, theirs).weight,
               f"{prefix}.mlp.{theirs}.weight")


__all__ = ["FAMILIES", "from_llama", "llama_options"]
