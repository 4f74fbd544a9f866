"""Gemma 2 and Gemma 3 (text) in: what their configs add to the Llama family's map
(:func:`splitnet.interop.llama.llama_options` reads :func:`gemma_options` for them).

A Gemma block is a Lie–Trotter step of two fields with a norm on both sides of each sub-layer
(``norm_position="sandwich"``), every norm Gemma's ``(1 + w)`` RMSNorm (``norm="rms_offset"``)::

    x = x + N2(attn(N1(x)))        diffusion: queries and keys RMS-normed per head (Gemma 3),
                                   logits Q K^T / sqrt(query_pre_attn_scalar), soft-capped
                                   c tanh(z / c) (Gemma 2), local or global by layer
    x = x + N4(geglu(N3(x)))       convection: down(gelu_tanh(gate x) * up x)

the token embedding multiplied by sqrt(d) (``scale_embedding``), the final logits soft-capped
(Gemma 2, ``logit_softcap``). ``layer_types`` names each layer's attention: the
``sliding_attention`` layers are ``window_layers`` with ``sliding_window`` W (each query sees
its last W positions, itself included), the ``full_attention`` ones global; Gemma 2 alternates
them (local first), Gemma 3 has five local layers to one global, the local ones with their own
rotary base (``rope_parameters["sliding_attention"]``, the old ``rope_local_base_freq``:
``local_rotary_base``). The windows are part of splitnet's attention, so long contexts and
cached generation past a window are exact.

Refused by name, never approximated: a rotary scaling (``rope_type`` other than default, on
either kind of layer: gemma-3-4b's ``linear`` global layers), partial rotary, an activation
other than tanh-GELU, bidirectional attention, a layer type other than the two, a local layer
without a window, and a Gemma 3 config with ``attn_logit_softcapping`` (transformers' Gemma 3
attention does not apply it, so what the checkpoint means is not what transformers runs).
"""

from __future__ import annotations

# model_type -> whether its attention normalises queries and keys per head
GEMMA = {"gemma2": False, "gemma3_text": True}
LAYER_TYPES = ("sliding_attention", "full_attention")


def _rope(c, params: dict, where: str) -> float:
    """The rotary base of one set of rope parameters; ValueError naming a scaling."""
    kind = params.get("rope_type", params.get("type", "default"))
    if kind != "default":
        raise ValueError(f"this {c.model_type} scales its rotary positions on {where} (rope_type "
                         f"{kind!r}); splitnet has the default RoPE only, so its logits would "
                         f"differ")
    if float(params.get("partial_rotary_factor", 1.0)) != 1.0:
        raise ValueError(f"this {c.model_type} rotates part of each head on {where} "
                         f"(partial_rotary_factor {params['partial_rotary_factor']}); Gemma "
                         f"rotates every channel")
    return float(params.get("rope_theta", 10000.0))


def _bases(c, local: bool) -> dict:
    """``rotary_base`` (global layers) and ``local_rotary_base`` (Gemma 3's local layers)."""
    rope = dict(getattr(c, "rope_parameters", None) or {})
    if not GEMMA[c.model_type]:                 # Gemma 2: one base for every layer
        return {"rotary_base": _rope(c, rope, "every layer")}
    out = {"rotary_base": _rope(c, dict(rope.get("full_attention") or {}), "full_attention "
                                "layers")}
    if local:
        out["local_rotary_base"] = _rope(c, dict(rope.get("sliding_attention") or {}),
                                         "sliding_attention layers")
    return out


def layer_windows(c) -> dict:
    """``sliding_window`` and ``window_layers`` of ``layer_types`` (Gemma 2 / 3, and Qwen2 /
    Qwen3, whose configs derive it: ``sliding_attention`` from layer ``max_window_layers`` on
    when ``use_sliding_window``); ValueError for a layer type it does not know or local layers
    without a window."""
    types = list(c.layer_types or ())
    other = sorted({t for t in types if t not in LAYER_TYPES})
    if other:
        raise ValueError(f"this {c.model_type} has layer_types {', '.join(map(repr, other))}; "
                         f"splitnet maps {' and '.join(LAYER_TYPES)}")
    if len(types) != c.num_hidden_layers:
        raise ValueError(f"this {c.model_type} lists {len(types)} layer_types for "
                         f"{c.num_hidden_layers} layers")
    local = [k for k, t in enumerate(types) if t == "sliding_attention"]
    if not local:
        return {}
    if c.sliding_window is None:
        off = " (use_sliding_window is False, which unsets it)" if getattr(
            c, "use_sliding_window", None) is False else ""
        raise ValueError(f"this {c.model_type} has sliding_attention layers and no "
                         f"sliding_window{off}; transformers cannot run it either")
    return {"sliding_window": int(c.sliding_window), "window_layers": tuple(local)}


def gemma_options(c) -> dict:
    """The SplitConfig options a Gemma 2 / Gemma 3 text config sets beyond the Llama family's
    map (:func:`splitnet.interop.llama.llama_options`); ValueError naming what cannot be mapped
    exactly (module docstring)."""
    family = c.model_type
    act = getattr(c, "hidden_activation", None) or getattr(c, "hidden_act", None)
    bad = [why for why, wrong in (
        (f"hidden_activation {act!r} (Gemma's GeGLU gates with gelu_pytorch_tanh)",
         act != "gelu_pytorch_tanh"),
        ("use_bidirectional_attention=True (splitnet's windows are causal)",
         bool(getattr(c, "use_bidirectional_attention", False))),
        (f"attn_logit_softcapping {getattr(c, 'attn_logit_softcapping', None)} (transformers' "
         f"Gemma 3 attention does not apply it)",
         GEMMA[family] and getattr(c, "attn_logit_softcapping", None) is not None),
        ) if wrong]
    if bad:
        raise ValueError(f"this {family} cannot be mapped exactly: {'; '.join(bad)}")
    windows = layer_windows(c)
    cap = None if GEMMA[family] else c.attn_logit_softcapping
    return {"convection_field": "geglu", "norm": "rms_offset", "norm_position": "sandwich",
            "scale_embedding": True, "qk_norm": "head" if GEMMA[family] else "none",
            "attention_scalar": float(c.query_pre_attn_scalar),
            "attention_softcap": None if cap is None else float(cap),
            "logit_softcap": (None if c.final_logit_softcapping is None else
                              float(c.final_logit_softcapping)),
            **windows, **_bases(c, bool(windows))}


def gemma_mismatch(c) -> list[tuple[str, bool]]:
    """(reason, applies) pairs for the Gemma options of a SplitConfig ``c`` that a Llama-family
    or GPT-2 export has no counterpart for (the exporters refuse the model naming them)."""
    return [
        (f"attention_softcap {c.attention_softcap:g} (soft-capped attention logits)"
         if c.attention_softcap else "", c.attention_softcap is not None),
        (f"logit_softcap {c.logit_softcap:g} (soft-capped final logits)"
         if c.logit_softcap else "", c.logit_softcap is not None),
        (f"attention_scalar {c.attention_scalar:g} (logits scaled by 1/sqrt of it, not of the "
         f"head width)" if c.attention_scalar else "", c.attention_scalar is not None),
        (f"sliding_window {c.sliding_window} (local attention layers)",
         c.sliding_window is not None)]


__all__ = ["GEMMA", "LAYER_TYPES", "gemma_mismatch", "gemma_options", "layer_windows"]
