"""Models in and out: GPT-2 and GPT-NeoX ``transformers`` models as SplitTransformers, and back.

Needs the optional extra ``pip install 'splitnet[hf]'`` (transformers, safetensors); without it
every function here raises :class:`~splitnet.configs.config.MissingDependency` (an ``ImportError``
that
names the pip command). Nothing is ever downloaded: directories are read with
``local_files_only=True``.

* :func:`from_hf` -- a ``GPT2LMHeadModel`` (object or ``save_pretrained`` directory) as a
  :class:`~splitnet.nets.models.SplitTransformer` with the same logits. GPT-2 *is* the Lie–Trotter
  scheme with Euler sub-steps at h = 1, shared weights, learned positions and a tied head::

      x = wte[idx] + wpe[pos]
      x = x + c_proj(attn(ln_1(x)))        # stage (diffusion, 1)
      x = x + mlp(ln_2(x))                 # stage (convection, 1)
      logits = ln_f(x) @ wte^T

  The map is exact: Conv1D stores ``W`` as (in, out) and computes ``x W + b``; a Linear stores
  ``W^T``; everything else (biases, LayerNorm epsilon, tanh-GELU, positions) is copied.

  A ``GPTNeoXForCausalLM`` (the Pythia family) maps too: with ``use_parallel_residual`` its
  layer ``x + attn(LN1 x) + mlp(LN2 x)`` is one Euler step of the unsplit ODE (scheme
  ``parallel``), without it ``x += attn(LN1 x); x += mlp(LN2 x)`` is Lie–Trotter; no position
  table (``positions="none"``), rotary embeddings on ``rotary_pct`` of each head
  (``partial_rotary_factor``), an untied head unless ``tie_word_embeddings``. Its fused
  ``query_key_value`` rows are laid out per head as ``(heads, 3, head_dim)`` and are permuted
  into splitnet's ``(3, heads, head_dim)``. Export of such models is not provided.
* :func:`to_hf` -- the way back. A model that is exactly a GPT-2 (:func:`gpt2_mismatch` returns
  None) is written as a standard GPT-2 directory; every other scheme and weights mode as a
  ``splitnet`` directory (:mod:`splitnet.interop.hf`), which ``AutoModelForCausalLM`` loads once
  ``splitnet.interop.hf`` is imported. A byte-level model (vocabulary 256) gets a byte tokenizer.
* :func:`load_hf_for_analysis` -- a directory's model, its tokenizer (else bytes) and a loss
  evaluator: what the analyses (``splitnet trajectories --hf``, re-discretisation) need.

See ``docs/interop.md`` for the mapping and what is exact.
"""

from __future__ import annotations

import operator
from pathlib import Path

import torch

from ..configs.kinds import KINDS, GatedKind
from ..configs.options import EXPORT_FORMATS
from ..nets.init import embed_scale
from ..nets.models import SplitTransformer
from ..stagelists.stages import CONVECTION, DIFFUSION, Stage
from .agree import check_object, follow_head, warn_unused
from .folder import MULTIMODAL, llama_classes, load_pretrained, require_hf
from .gemma import gemma_mismatch
from .llama import OUT, from_llama, llama_mismatch, to_llama

# splitnet activation <-> transformers ACT2FN name computing the same function with the same
# kernel (gelu_pytorch_tanh is F.gelu(approximate="tanh"), exactly what splitnet runs).
ACT_TO_HF = {"gelu_tanh": "gelu_pytorch_tanh", "gelu": "gelu", "relu": "relu", "silu": "silu",
             "tanh": "tanh"}
# transformers names splitnet reads: the same function (gelu_new is GPT-2's tanh-GELU written
# out in Python: equal to F.gelu(approximate="tanh") up to rounding).
HF_TO_ACT = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
             "gelu_python_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu", "silu": "silu",
             "swish": "silu", "tanh": "tanh"}
LIE_TROTTER = (Stage(DIFFUSION, 1.0), Stage(CONVECTION, 1.0))


# ---------------------------------------------------------------------------------------------
# in


def from_hf(model_or_path, dtype: torch.dtype | None = None) -> SplitTransformer:
    """A SplitTransformer with the logits of a ``transformers`` GPT-2 (``GPT2LMHeadModel``, or a
    directory written by ``save_pretrained``), or the SplitTransformer inside a ``splitnet``
    directory written by :func:`to_hf`. In eval mode, on the CPU, in the source's dtype (or
    ``dtype``). Raises ValueError for a model it cannot map exactly, naming why. Where the
    source's config and tensors disagree it imports what transformers runs and warns
    (:mod:`splitnet.interop.agree`): a head the config calls tied but that is another tensor
    is kept untied; tensors the config does not use are named and not imported."""
    transformers, hf = require_hf()
    src, where = model_or_path, None
    if isinstance(src, (str, Path)):
        src, unused, weights = load_pretrained(src)      # its missing tensors refused
        warn_unused(unused, weights)
        where = f"{Path(model_or_path).expanduser() / 'config.json'}"
    elif isinstance(src, torch.nn.Module) and hasattr(src, "config"):
        check_object(src)                 # the object's tensors against its own config
    if isinstance(src, hf.SplitTransformerForCausalLM):
        model = src.model
    elif isinstance(src, transformers.GPT2LMHeadModel):
        model = _from_gpt2(src)
    elif isinstance(src, transformers.GPTNeoXForCausalLM):
        model = _from_neox(src)
    elif isinstance(src, llama_classes(transformers)):
        model = from_llama(src)
    elif type(src).__name__ in MULTIMODAL:
        raise ValueError(f"{type(src).__name__} is {MULTIMODAL[type(src).__name__]}")
    else:
        raise TypeError(f"from_hf takes a GPT2LMHeadModel, a GPTNeoXForCausalLM, a "
                        f"LlamaForCausalLM, a Qwen2ForCausalLM, a MistralForCausalLM, a "
                        f"Qwen3ForCausalLM, an Olmo2ForCausalLM, a Phi3ForCausalLM, a "
                        f"Gemma2ForCausalLM, a Gemma3ForCausalLM, a "
                        f"SplitTransformerForCausalLM or a directory, got {type(src).__name__}")
    model = follow_head(src, model, where)     # a head its config calls tied, kept as it is
    model = model.cpu().eval()
    return model.to(dtype) if dtype is not None else model


def _gpt2_config_check(c) -> str:
    """The splitnet activation of a GPT2Config; ValueError for anything that would change the
    logits under the map."""
    if c.activation_function not in HF_TO_ACT:
        raise ValueError(f"GPT-2 activation {c.activation_function!r} has no exact splitnet "
                         f"counterpart (supported: {', '.join(HF_TO_ACT)})")
    bad = [name for name, ok in (
        ("scale_attn_weights=False", c.scale_attn_weights),
        ("scale_attn_by_inverse_layer_idx=True", not c.scale_attn_by_inverse_layer_idx),
        ("add_cross_attention=True", not c.add_cross_attention)) if not ok]
    if bad:
        raise ValueError(f"this GPT-2 differs from a pre-norm Transformer layer: "
                         f"{', '.join(bad)}")
    return HF_TO_ACT[c.activation_function]


def _from_gpt2(src) -> SplitTransformer:
    c = src.config
    activation = _gpt2_config_check(c)
    gpt = src.transformer                 # an untied head: from_hf's follow_head copies it
    drops = {c.resid_pdrop, c.embd_pdrop, c.attn_pdrop}
    model = SplitTransformer(
        vocab_size=c.vocab_size, d_model=c.n_embd, n_heads=c.n_head, n_layers=c.n_layer,
        scheme="lie-trotter", causal=True, weights="shared", step_size=1.0,
        d_ff=c.n_inner or 4 * c.n_embd, max_len=c.n_positions, activation=activation,
        # dropout acts in training only; one value when GPT-2 uses one, else none
        dropout=float(drops.pop()) if len(drops) == 1 else 0.0, norm_eps=c.layer_norm_epsilon)
    model.to(gpt.wte.weight.dtype)
    with torch.no_grad():
        for dst, src_mod in _gpt2_pairs(model, gpt):
            _copy(dst, src_mod)
    return model


def _gpt2_pairs(model: SplitTransformer, gpt) -> list[tuple]:
    """(splitnet module, GPT-2 module) pairs that hold the same parameters: the embeddings and
    final norm, then per layer what each field's kind declares (:attr:`FieldKind.gpt2
    <splitnet.configs.kinds.FieldKind.gpt2>`)."""
    pairs = [(model.tok_emb, gpt.wte), (model.pos_emb, gpt.wpe), (model.norm, gpt.ln_f)]
    for k, (layer, block) in enumerate(zip(model.layers, gpt.h)):
        for lf in model.config.plan.layer(k):
            module = layer.field_modules(lf.field)[0]
            pairs += [(getattr(module, ours), operator.attrgetter(theirs)(block))
                      for ours, theirs in lf.kind.gpt2]
    return pairs


def _copy(dst, src) -> None:
    """Parameters of ``src`` into ``dst``; a Conv1D's weight (in, out) becomes a Linear's
    (out, in) and back."""
    conv = type(src).__name__ == "Conv1D" or type(dst).__name__ == "Conv1D"
    for name, p in dst.named_parameters(recurse=False):
        q = getattr(src, name)
        q = q.t() if conv and name == "weight" else q
        if tuple(q.shape) != tuple(p.shape):
            raise ValueError(f"shape mismatch copying {type(src).__name__}.{name}: "
                             f"{tuple(q.shape)} into {tuple(p.shape)}")
        p.copy_(q)


def _neox_options(c) -> dict:
    """The SplitConfig options of a GPTNeoXConfig; ValueError for anything the map would not
    reproduce exactly."""
    if c.hidden_act not in HF_TO_ACT:
        raise ValueError(f"GPT-NeoX activation {c.hidden_act!r} has no exact splitnet "
                         f"counterpart (supported: {', '.join(HF_TO_ACT)})")
    rope = dict(c.rope_parameters or {})
    bad = [why for why, wrong in (
        (f"rope_type {rope.get('rope_type')!r} (splitnet has the default RoPE only)",
         rope.get("rope_type", "default") != "default"),)
        if wrong]
    if bad:
        raise ValueError(f"this GPT-NeoX cannot be mapped exactly: {', '.join(bad)}")
    drops = {c.hidden_dropout, c.attention_dropout}
    return {
        "vocab_size": c.vocab_size, "d_model": c.hidden_size, "n_heads": c.num_attention_heads,
        "n_layers": c.num_hidden_layers,
        "scheme": "parallel" if c.use_parallel_residual else "lie-trotter", "causal": True,
        "weights": "shared", "step_size": 1.0, "d_ff": c.intermediate_size,
        "max_len": c.max_position_embeddings, "activation": HF_TO_ACT[c.hidden_act],
        "dropout": float(drops.pop()) if len(drops) == 1 else 0.0,
        "norm_eps": c.layer_norm_eps, "positions": "none",
        "rotary_pct": float(rope.get("partial_rotary_factor", 1.0)),
        "rotary_base": float(rope.get("rope_theta", 10000.0)),
        "tie_head": bool(c.tie_word_embeddings),
        "attention_bias": "all" if c.attention_bias else "none"}


def _from_neox(src) -> SplitTransformer:
    """A GPTNeoXForCausalLM as a SplitTransformer (scheme parallel or lie-trotter)."""
    model = SplitTransformer(**_neox_options(src.config))
    neox = src.gpt_neox
    model.to(neox.embed_in.weight.dtype)
    heads, d = model.config.n_heads, model.config.d_model
    with torch.no_grad():
        pairs = [(model.tok_emb, neox.embed_in), (model.norm, neox.final_layer_norm)]
        if not model.config.tie_head:
            pairs.append((model.head, src.lm_head))
        for layer, block in zip(model.layers, neox.layers):
            att, ffn = layer.field_modules(DIFFUSION)[0], layer.field_modules(CONVECTION)[0]
            pairs += [(att.norm, block.input_layernorm), (att.proj, block.attention.dense),
                      (ffn.norm, block.post_attention_layernorm),
                      (ffn.fc1, block.mlp.dense_h_to_4h), (ffn.fc2, block.mlp.dense_4h_to_h)]
            qkv = block.attention.query_key_value    # rows (heads, 3, head_dim) -> (3, heads, ..)
            att.qkv.weight.copy_(qkv.weight.view(heads, 3, d // heads, d).transpose(0, 1)
                                 .reshape(3 * d, d))
            if att.qkv.bias is not None:       # attention_bias=False: neither side has one
                att.qkv.bias.copy_(qkv.bias.view(heads, 3, d // heads).transpose(0, 1)
                                   .reshape(-1))
        for dst, src_mod in pairs:
            _copy(dst, src_mod)
    return model


# ---------------------------------------------------------------------------------------------
# out


def gpt2_mismatch(model: SplitTransformer) -> str | None:
    """Why ``model`` is not exactly a GPT-2 (then :func:`to_hf` writes a splitnet directory), or
    None when it is: Lie–Trotter stages (diffusion 1, convection 1) with Euler sub-steps at
    h = 1, every field of a kind that declares its GPT-2 map (causal self-attention and the
    feed-forward; no gates), an activation transformers has, GPT-2's embedding."""
    _check_model(model)
    c = model.config
    reasons = _kind_mismatch(model)
    if tuple(model.scheme.stages) != LIE_TROTTER:
        reasons.append(f"scheme {model.scheme.name!r} is not Lie–Trotter (diffusion 1, "
                       f"convection 1)")
    if c.step_size != 1.0:
        reasons.append(f"step size {c.step_size:g} (GPT-2: 1)")
    if c.method != "euler":
        reasons.append(f"sub-flow method {c.method!r} (GPT-2: euler, the residual sub-layer)")
    if not c.causal:
        reasons.append("bidirectional attention")
    if embed_scale(c) != 1.0:
        who = "scale_embedding" if c.scale_embedding else f"init {c.init!r}"
        reasons.append(f"{who} scales the token embedding by sqrt(d_model) (GPT-2: unscaled)")
    if c.activation not in ACT_TO_HF:
        reasons.append(f"activation {c.activation!r}")
    if c.positions != "learned" or c.rotary_pct > 0:
        reasons.append("rotary or no position embeddings (GPT-2: learned positions)")
    if not c.tie_head:
        reasons.append("an untied head")
    if c.depth_basis is not None:
        reasons.append(f"depth_basis {c.depth_basis!r}: weights that are functions of depth")
    if c.norm != "layer":
        reasons.append(f"norm {c.norm!r} (GPT-2: LayerNorm)")
    if c.n_kv_heads is not None:
        reasons.append(f"grouped-query attention ({c.n_kv_heads} key/value heads)")
    if c.attention_bias != "all":
        reasons.append(f"attention_bias {c.attention_bias!r} (GPT-2: every projection biased)")
    if c.head_dim is not None:
        reasons.append(f"head_dim {c.head_dim} (GPT-2's heads are d_model / n_heads wide)")
    if c.norm_position != "pre":
        reasons.append(f"norm_position {c.norm_position!r} (GPT-2 normalises inputs only)")
    if c.qk_norm != "none":
        reasons.append(f"qk_norm {c.qk_norm!r} (GPT-2 normalises no queries or keys)")
    reasons += [why for why, wrong in gemma_mismatch(c) if wrong]
    if c.learn_coefficients:
        reasons.append("learned stage coefficients")
    if c.reversible:
        reasons.append("a reversible network (a partitioned state (x1, x2); GPT-2 has one "
                       "residual stream)")
    return "; ".join(reasons) or None


def _kind_mismatch(model: SplitTransformer) -> list[str]:
    """The fields whose kind has no GPT-2 map (a gated field, a convolution, any kind
    registered without ``gpt2``), each named once: refused before any weight is copied."""
    mapped = [n for n, cls in KINDS.items() if cls.gpt2 is not None]
    out = {}
    for k in range(model.config.n_layers):
        for lf in model.config.plan.layer(k):
            if isinstance(lf.kind, GatedKind):
                out[lf.field, "gate"] = f"SDU gates on the {lf.field} field"
            elif lf.kind.gpt2 is None:
                out[lf.field, lf.kind.name] = (
                    f"{lf.field} field kind {lf.kind.name!r} has no GPT-2 counterpart (GPT-2 "
                    f"maps {', '.join(mapped)})")
    return list(out.values())


def _check_model(model) -> None:
    if not isinstance(model, SplitTransformer):
        raise TypeError(f"expected a SplitTransformer, got {type(model).__name__}")


FORMATS = EXPORT_FORMATS          # gpt2, splitnet, auto and the Llama family's (OUT)


def to_hf(model: SplitTransformer, directory, format: str = "auto",
          tokenizer="auto") -> str:
    """Write ``model`` as a Hugging Face directory (config.json + model.safetensors) that
    ``AutoModelForCausalLM.from_pretrained(directory)`` loads with the same logits.

    format : ``"gpt2"`` -- a standard GPT-2 (only for a model that is one: :func:`gpt2_mismatch`
        is None; otherwise ValueError naming why); ``"llama"``, ``"qwen2"``, ``"qwen3"``,
        ``"olmo2"`` -- that family's own model (only for a model whose layers are exactly its
        blocks: :func:`splitnet.interop.llama.llama_mismatch` is None; a Strang network is not
        a Llama); ``"splitnet"`` -- :mod:`splitnet.interop.hf`'s classes, any scheme and weights
        mode (load with ``splitnet.interop.hf`` imported); ``"auto"`` (default) -- the first
        of gpt2 and the Llama family's formats that is exact, else splitnet.
    tokenizer : ``"auto"`` -- the byte tokenizer (:func:`byte_tokenizer`) for a vocabulary of
        256, else none; a ``transformers`` tokenizer to save alongside (an imported model's,
        ``Imported.tokenizer``), or splitnet's byte-level BPE (``kind == "bpe"``: mlm and
        translate's ``--bpe``) written as one (:func:`hf_tokenizer`); None -- none.

    Returns the format written."""
    _check_model(model)
    if not model.config.causal:       # issue 49 D12: AutoModelForCausalLM would generate from it
        raise ValueError("the model is bidirectional (causal=False: a masked language model), "
                         "not a causal LM; it is not exported as one (score it with 'splitnet "
                         "evaluate')")
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
    out = Path(directory).expanduser()
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} exists and is not a directory")
    fmt = _format(model, format)
    transformers, hf = require_hf()      # after the model's own faults, which need no library
    tok = byte_tokenizer() if tokenizer == "auto" and model.vocab_size == 256 else (
        None if tokenizer in ("auto", None) else hf_tokenizer(tokenizer))
    if tok is not None and len(tok) > model.vocab_size:
        raise ValueError(f"the tokenizer has {len(tok)} tokens, more than the model's "
                         f"vocabulary of {model.vocab_size}")
    dtype = next(model.parameters()).dtype
    hf_model = (_to_gpt2(model, transformers) if fmt == "gpt2" else
                to_llama(model, transformers, fmt) if fmt in OUT else _to_splitnet(model, hf))
    hf_model.to(dtype).save_pretrained(out)
    if tok is not None:
        tok.save_pretrained(out)
    return fmt


def _format(model: SplitTransformer, format: str) -> str:
    """The format ``to_hf`` writes: ``format`` when the model is exactly one (ValueError naming
    why not), or under ``"auto"`` the first exact one of gpt2 and :data:`OUT`, else splitnet."""
    if format == "splitnet":
        return format
    if format == "gpt2" or format in OUT:
        why = gpt2_mismatch(model) if format == "gpt2" else llama_mismatch(model, format)
        if why:
            name = "GPT-2" if format == "gpt2" else f"{format} model"
            raise ValueError(f"this model is not a {name} ({why}); export it with "
                             f"format='splitnet'")
        return format
    if gpt2_mismatch(model) is None:
        return "gpt2"
    return next((f for f in OUT if llama_mismatch(model, f) is None), "splitnet")


def _to_gpt2(model: SplitTransformer, transformers):
    c = model.config
    cfg = transformers.GPT2Config(
        vocab_size=c.vocab_size, n_positions=c.max_len, n_embd=c.d_model, n_layer=c.n_layers,
        n_head=c.n_heads, n_inner=c.d_ff, activation_function=ACT_TO_HF[c.activation],
        resid_pdrop=c.dropout, embd_pdrop=c.dropout, attn_pdrop=c.dropout,
        layer_norm_epsilon=c.norm_eps, bos_token_id=None, eos_token_id=None,
        tie_word_embeddings=True)
    out = transformers.GPT2LMHeadModel(cfg).to(next(model.parameters()).dtype)
    with torch.no_grad():
        for ours, theirs in _gpt2_pairs(model, out.transformer):
            _copy(theirs, ours)
    return out.eval()


def _to_splitnet(model: SplitTransformer, hf):
    cfg = hf.SplitTransformerConfig(split_config=model.config.to_dict())
    out = hf.SplitTransformerForCausalLM(cfg).to(next(model.parameters()).dtype)
    out.model.load_state_dict(model.state_dict())
    return out.eval()


def byte_tokenizer():
    """A ``transformers`` tokenizer whose ids are the UTF-8 bytes of the text (splitnet's own
    byte encoding, vocabulary 256): token i is byte i, decoding joins the bytes."""
    require_hf()
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    to_char = bytes_to_unicode()         # byte -> the printable character ByteLevel uses
    tok = Tokenizer(models.BPE(vocab={to_char[b]: b for b in range(256)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok)


def hf_tokenizer(tokenizer):
    """``tokenizer`` as a ``transformers`` tokenizer: a splitnet byte-level BPE (``kind ==
    "bpe"``, :class:`splitnet.translate.batches.BPETokenizer`) as a ``PreTrainedTokenizerFast``
    over the same ``tokenizers`` model (so ``encode`` gives the same ids, no specials added),
    its ``<pad>``, ``<s>``, ``</s>`` named; anything else as it is."""
    if getattr(tokenizer, "kind", None) != "bpe":
        return tokenizer
    require_hf()
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(
        tokenizer.tokenizer.to_str()), pad_token="<pad>", bos_token="<s>", eos_token="</s>")


__all__ = [
    "ACT_TO_HF",
    "FORMATS",
    "HF_TO_ACT",
    "LIE_TROTTER",
    "byte_tokenizer",
    "from_hf",
    "gpt2_mismatch",
    "hf_tokenizer",
    "require_hf",
    "to_hf",
]
