"""The Llama family in: ``LlamaForCausalLM``, ``Qwen2ForCausalLM``, ``MistralForCausalLM`` and
``Qwen3ForCausalLM`` as SplitTransformers with equal logits
(:func:`splitnet.interop.convert.from_hf` dispatches here).

A Llama block is a Lie–Trotter step of two fields, pre-norm inside each::

    x = x + attn(rms(x))          diffusion: grouped-query attention, rotary on every channel
    x = x + swiglu(rms(x))        convection: down(silu(gate(x)) * up(x))

so the map is ``scheme="lie-trotter"``, ``norm="rms"``, ``convection_field="swiglu"``,
``n_kv_heads``, ``positions="none"``, ``rotary_pct=1`` at the model's ``rope_theta`` (the
rotate-half convention of GPT-NeoX, which ``splitnet.fields.rotary`` implements), the
projections' biases as the family has them (Llama: ``attention_bias`` for q, k, v and the output;
Qwen2: q, k, v; Mistral: none; Qwen3: all four by ``attention_bias``), the head tied or not, a
head width of the config's own (``head_dim``, Qwen3-0.6B's 128 of 1024 / 16 = 64). q, k and v
stack into one ``qkv`` matrix. Qwen3 normalises each head's queries and keys (RMSNorm over
``head_dim``, one weight shared by the heads, before rotary): ``qk_norm="head"``. OLMo 2
normalises the queries and keys over the whole projection (``qk_norm="projection"``) and puts
each block's norms on the sub-layers' outputs, inside the residual (``norm_position="post"``):
``x += N(attn(x)); x += N(mlp(x))``, still a Lie–Trotter step, of the fields ``N o attn`` and
``N o mlp``. Phi-3 fuses q, k, v into ``qkv_proj`` (rows in splitnet's order) and gate and up
into ``gate_up_proj`` (gate first), which are split on the way in.

Sliding-window attention is splitnet's own (``sliding_window``, ``window_layers``), so the
import is exact on every context and cached generation past a window is too. Each family's
window is the one its transformers model applies: Mistral's and Phi-3's ``sliding_window`` on
every layer (their masks ignore ``layer_types``), Qwen2's and Qwen3's on the layers
``layer_types`` names (their configs derive it, ``sliding_attention`` from layer
``max_window_layers`` on when ``use_sliding_window``), Llama's and OLMo 2's never (their
models read no window). A window no shorter than ``max_position_embeddings`` binds nowhere
within the context and is left out.

Anything the map would not reproduce exactly is a one-line ValueError naming it, never an
approximation: rotary scaling (Llama 3's ``llama3``, ``linear``, ``dynamic``, ``yarn``...),
partial rotary, MLP biases, an activation other than SiLU, a layer type other than
``sliding_attention`` and ``full_attention``, sliding layers without a window (Qwen2's
``layer_types`` with ``use_sliding_window`` False)."""

from __future__ import annotations

import torch

from ..configs.options import FAMILY_FORMATS
from ..nets.models import SplitTransformer
from ..stagelists.stages import CONVECTION, DIFFUSION
from .gemma import GEMMA, gemma_mismatch, gemma_options, layer_windows

# model_type -> which of self-attention's projections have biases (Llama: by its config)
FAMILIES = {"llama": None, "qwen2": "qkv", "mistral": "none", "qwen3": None, "olmo2": None,
            "phi3": "none", "gemma2": None, "gemma3_text": None}
# model_type -> (qk_norm, norm_position) where not Llama's ("none", "pre")
PARTS = {"qwen3": ("head", "pre"), "olmo2": ("projection", "post")}
# model_type -> which layers transformers' model windows: "every" one (by its sliding_window,
# when set) or those its "layer_types" name; the rest never window
WINDOWED = {"mistral": "every", "phi3": "every", "qwen2": "layer_types", "qwen3": "layer_types"}


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


def _windows(c) -> dict:
    """``sliding_window`` and ``window_layers`` of the attention windows transformers' model
    applies (module docstring); none when the window is no shorter than the context."""
    rule = WINDOWED.get(c.model_type)
    if rule is None:
        return {}
    if rule == "layer_types":
        out = layer_windows(c)
    elif getattr(c, "sliding_window", None) is None:
        return {}
    else:
        out = {"sliding_window": int(c.sliding_window), "window_layers": None}
    if not out or out["sliding_window"] >= int(c.max_position_embeddings):
        return {}
    return out


def llama_options(c) -> dict:
    """The SplitConfig options of a Llama, Qwen2 or Mistral config; ValueError for anything the
    map would not reproduce exactly (module docstring)."""
    family = c.model_type
    if family not in FAMILIES:
        raise ValueError(f"{family!r} is not of the Llama family ({', '.join(FAMILIES)})")
    d, heads = c.hidden_size, c.num_attention_heads
    head_dim = getattr(c, "head_dim", None) or d // heads
    gemma = gemma_options(c) if family in GEMMA else {}    # its own activation, rope, windows
    bad = [why for why, wrong in (
        (f"hidden_act {getattr(c, 'hidden_act', None)!r} (the Llama family's SwiGLU gates with "
         f"silu)", not gemma and c.hidden_act != "silu"),
        ("mlp_bias=True (splitnet's SwiGLU has no biases)", bool(getattr(c, "mlp_bias", False))),
        ) if wrong]
    if bad:
        raise ValueError(f"this {family} cannot be mapped exactly: {'; '.join(bad)}")
    bias = FAMILIES[family] or ("all" if getattr(c, "attention_bias", False) else "none")
    return {
        "vocab_size": c.vocab_size, "d_model": d, "n_heads": heads,
        "n_kv_heads": c.num_key_value_heads or heads, "n_layers": c.num_hidden_layers,
        "scheme": "lie-trotter", "causal": True, "weights": "shared", "step_size": 1.0,
        "d_ff": c.intermediate_size, "convection_field": "swiglu",
        "max_len": int(c.max_position_embeddings), **({} if gemma else _windows(c)),
        "dropout": 0.0, "norm": "rms",     # (attention_dropout: training only, not mapped)
        "norm_eps": c.rms_norm_eps, "positions": "none", "rotary_pct": 1.0,
        "rotary_base": None if gemma else _rope(c), "attention_bias": bias,
        "tie_head": bool(c.tie_word_embeddings), "head_dim": head_dim,   # (SwiGLU: no activation)
        **dict(zip(("qk_norm", "norm_position"), PARTS.get(family, ("none", "pre")))), **gemma}


def _param(dst: torch.nn.Parameter, src: torch.Tensor, name: str) -> None:
    if tuple(src.shape) != tuple(dst.shape):
        raise ValueError(f"{name} has shape {tuple(src.shape)}, the config needs "
                         f"{tuple(dst.shape)}")
    dst.copy_(src)


def from_llama(src) -> SplitTransformer:
    """A ``LlamaForCausalLM`` / ``Qwen2ForCausalLM`` / ``MistralForCausalLM`` /
    ``Qwen3ForCausalLM`` (a model object) as
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
    if hasattr(block, "pre_feedforward_layernorm"):    # Gemma: a norm on both sides of each
        for ours, theirs in ((att.norm, "input_layernorm"),
                             (att.post_norm, "post_attention_layernorm"),
                             (ffn.norm, "pre_feedforward_layernorm"),
                             (ffn.post_norm, "post_feedforward_layernorm")):
            _param(ours.weight, getattr(block, theirs).weight, f"{prefix}.{theirs}.weight")
    elif att.post_norm is None:        # pre-norm: the block's input norm is the field's
        _param(att.norm.weight, block.input_layernorm.weight,
               f"{prefix}.input_layernorm.weight")
        _param(ffn.norm.weight, block.post_attention_layernorm.weight,
               f"{prefix}.post_attention_layernorm.weight")
    else:                              # OLMo 2: norms on the sub-layers' outputs only
        _param(att.post_norm.weight, block.post_attention_layernorm.weight,
               f"{prefix}.post_attention_layernorm.weight")
        _param(ffn.post_norm.weight, block.post_feedforward_layernorm.weight,
               f"{prefix}.post_feedforward_layernorm.weight")
    if hasattr(a, "qkv_proj"):          # Phi-3: q, k, v fused in this order already
        _param(att.qkv.weight, a.qkv_proj.weight, f"{prefix}.self_attn.qkv_proj.weight")
    else:
        _param(att.qkv.weight, torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]),
               f"{prefix}.self_attn.q_proj/k_proj/v_proj.weight")
    if att.qkv.bias is not None:
        _param(att.qkv.bias, torch.cat([a.q_proj.bias, a.k_proj.bias, a.v_proj.bias]),
               f"{prefix}.self_attn.q_proj/k_proj/v_proj.bias")
    _param(att.proj.weight, a.o_proj.weight, f"{prefix}.self_attn.o_proj.weight")
    if att.qk_norm != "none":
        _param(att.q_norm.weight, a.q_norm.weight, f"{prefix}.self_attn.q_norm.weight")
        _param(att.k_norm.weight, a.k_norm.weight, f"{prefix}.self_attn.k_norm.weight")
    if att.proj.bias is not None:
        _param(att.proj.bias, a.o_proj.bias, f"{prefix}.self_attn.o_proj.bias")
    if hasattr(m, "gate_up_proj"):      # Phi-3: [gate; up] fused (its forward chunks it so)
        gate, up = m.gate_up_proj.weight.chunk(2)
        _param(ffn.gate.weight, gate, f"{prefix}.mlp.gate_up_proj.weight[:d_ff]")
        _param(ffn.up.weight, up, f"{prefix}.mlp.gate_up_proj.weight[d_ff:]")
        _param(ffn.down.weight, m.down_proj.weight, f"{prefix}.mlp.down_proj.weight")
        return
    for ours, theirs in (("gate", "gate_proj"), ("up", "up_proj"), ("down", "down_proj")):
        _param(getattr(ffn, ours).weight, getattr(m, theirs).weight,
               f"{prefix}.mlp.{theirs}.weight")


# ---------------------------------------------------------------------------------------------
# out: a SplitTransformer with exactly a family's block as that family's transformers model

# export format (its model_type) -> (config class, model class, the attention biases it holds,
# qk_norm, norm_position): the inverse of the import's map
OUT = dict(zip(FAMILY_FORMATS, (
    ("LlamaConfig", "LlamaForCausalLM", ("none", "all"), "none", "pre"),
    ("Qwen2Config", "Qwen2ForCausalLM", ("qkv",), "none", "pre"),
    ("Qwen3Config", "Qwen3ForCausalLM", ("none", "all"), "head", "pre"),
    ("Olmo2Config", "Olmo2ForCausalLM", ("none", "all"), "projection", "post"))))


def llama_mismatch(model, family: str) -> str | None:
    """Why ``model`` (a SplitTransformer) is not exactly a ``family`` model (:data:`OUT`), or
    None when it is: a causal Lie–Trotter step at h = 1 with Euler sub-steps of attention
    (RMSNorm, rotary on every channel, no position table) and SwiGLU, nothing else, and the
    family's biases, q/k norm and norm position."""
    from ..configs.kinds import GatedKind
    from ..nets.init import embed_scale
    from ..stagelists.stages import Stage

    c, (_, _, biases, qk, where) = model.config, OUT[family]
    kinds = {(lf.field, lf.kind.name, isinstance(lf.kind, GatedKind))
             for k in range(c.n_layers) for lf in c.plan.layer(k)}
    lt = (Stage(DIFFUSION, 1.0), Stage(CONVECTION, 1.0))
    bad = [why for why, wrong in (
        (f"scheme {model.scheme.name!r} is not Lie–Trotter (a {family} block is x += attn; "
         f"x += mlp)", tuple(model.scheme.stages) != lt),
        (f"step size {c.step_size:g} (a residual block: 1)", c.step_size != 1.0),
        (f"sub-flow method {c.method!r} (a residual block: euler)", c.method != "euler"),
        ("bidirectional attention", not c.causal),
        ("fields other than attention and swiglu, or gated ones", kinds != {
            (DIFFUSION, "attention", False), (CONVECTION, "swiglu", False)}),
        (f"norm {c.norm!r} (RMSNorm)", c.norm != "rms"),
        ("learned positions or partial rotary (rotary on every channel, no position table)",
         c.positions != "none" or c.rotary_pct != 1.0),
        (f"attention_bias {c.attention_bias!r} ({family}: {' or '.join(biases)})",
         c.attention_bias not in biases),
        (f"qk_norm {c.qk_norm!r} ({family}: {qk})", c.qk_norm != qk),
        (f"norm_position {c.norm_position!r} ({family}: {where})", c.norm_position != where),
        ("the token embedding scaled by sqrt(d_model)", embed_scale(c) != 1.0),
        *gemma_mismatch(c),
        ("learned stage coefficients", c.learn_coefficients),
        (f"the {c.stack} stack (a Llama's layers are a plain residual stack)",
         c.stack not in ("plain", "checkpointed")),
        (f"depth_basis {c.depth_basis!r}", c.depth_basis is not None)) if wrong]
    return "; ".join(bad) or None


def to_llama(model, transformers, family: str):
    """The ``family`` model of ``transformers`` with ``model``'s weights (an exact one:
    :func:`llama_mismatch` None)."""
    c = model.config
    cfg_name, cls_name, *_ = OUT[family]
    cfg = getattr(transformers, cfg_name)(
        vocab_size=c.vocab_size, hidden_size=c.d_model, intermediate_size=c.d_ff,
        num_hidden_layers=c.n_layers, num_attention_heads=c.n_heads,
        num_key_value_heads=c.n_kv_heads or c.n_heads,
        head_dim=c.head_dim or c.d_model // c.n_heads, max_position_embeddings=c.max_len,
        rms_norm_eps=c.norm_eps, hidden_act="silu", tie_word_embeddings=c.tie_head,
        rope_parameters={"rope_type": "default", "rope_theta": c.rotary_base},
        bos_token_id=None, eos_token_id=None, pad_token_id=None,
        **({} if family == "qwen2" else {"attention_bias": c.attention_bias == "all"}))
    out = getattr(transformers, cls_name)(cfg).to(next(model.parameters()).dtype)
    body = out.model
    with torch.no_grad():
        body.embed_tokens.weight.copy_(model.tok_emb.weight)
        body.norm.weight.copy_(model.norm.weight)
        if not c.tie_head:
            out.lm_head.weight.copy_(model.head.weight)
        for layer, block in zip(model.layers, body.layers):
            _export_block(layer, block)
    return out.eval()


def _export_block(layer, block) -> None:
    att, ffn = layer.field_modules(DIFFUSION)[0], layer.field_modules(CONVECTION)[0]
    a, m = block.self_attn, block.mlp
    q, k, v = att.qkv.weight.split((att.q_width, att.kv_width, att.kv_width))
    pairs = [(a.q_proj.weight, q), (a.k_proj.weight, k), (a.v_proj.weight, v),
             (a.o_proj.weight, att.proj.weight)]
    if att.qkv.bias is not None:
        qb, kb, vb = att.qkv.bias.split((att.q_width, att.kv_width, att.kv_width))
        pairs += [(a.q_proj.bias, qb), (a.k_proj.bias, kb), (a.v_proj.bias, vb)]
    if att.proj.bias is not None:
        pairs.append((a.o_proj.bias, att.proj.bias))
    if att.qk_norm != "none":
        pairs += [(a.q_norm.weight, att.q_norm.weight), (a.k_norm.weight, att.k_norm.weight)]
    if att.post_norm is None:
        pairs += [(block.input_layernorm.weight, att.norm.weight),
                  (block.post_attention_layernorm.weight, ffn.norm.weight)]
    else:
        pairs += [(block.post_attention_layernorm.weight, att.post_norm.weight),
                  (block.post_feedforward_layernorm.weight, ffn.post_norm.weight)]
    pairs += [(getattr(m, f"{n}_proj").weight, getattr(ffn, n).weight)
              for n in ("gate", "up", "down")]
    for theirs, ours in pairs:
        theirs.copy_(ours)


__all__ = ["FAMILIES", "OUT", "PARTS", "WINDOWED", "from_llama", "llama_mismatch", "llama_options",
           "to_llama"]
