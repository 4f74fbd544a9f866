"""Gemma 2 and Gemma 3 (text) in (issue 61), and their parts as options of every network:
attention and final-logit soft-caps, the attention scalar (``query_pre_attn_scalar``), local
(sliding-window) and global layers, each kind with its rotary base.

transformers computes parts of Gemma in float32 even in a float64 model: its RMSNorm casts its
input (``x.float()``), Gemma 2's eager attention takes the softmax in float32, and the embedding
scale sqrt(d) is a float32 buffer. The float64 comparisons (``exact_gemma``) replace those three
by their formulas in float64 (the same code without the casts), so they check the map rather
than float32 rounding; one comparison without the patch checks the import against the library
as shipped. The planted bugs (the ``(1 + w)`` dropped, q and k norms swapped, a window one token
wider, each soft-cap dropped) are each caught by the quick logits test's own check."""

import json

import pytest
import torch

import splitnet as sn
from splitnet.configs.config import SplitConfig
from splitnet.fields.attention import Attention

tf = pytest.importorskip("transformers")
from transformers.models.gemma2 import modeling_gemma2 as g2  # noqa: E402
from transformers.models.gemma3 import modeling_gemma3 as g3  # noqa: E402


def _rms(self, x):                    # Gemma's RMSNorm without its float32 round trip
    return self._norm(x) * (1.0 + self.weight)


def _embed(self, ids):                # the scale sqrt(d) exact, not a float32 buffer
    return torch.nn.Embedding.forward(self, ids) * self.scalar_embed_scale


def _eager(module, query, key, value, attention_mask, dropout=0.0, scaling=None, softcap=None,
           **kwargs):
    """Gemma 2's eager_attention_forward with its softmax in the input's dtype."""
    k = g2.repeat_kv(key, module.num_key_value_groups)
    v = g2.repeat_kv(value, module.num_key_value_groups)
    w = torch.matmul(query, k.transpose(2, 3)) * scaling
    if softcap is not None:
        w = torch.tanh(w / softcap) * softcap
    if attention_mask is not None:
        w = w + attention_mask
    w = torch.softmax(w, dim=-1)
    return torch.matmul(w, v).transpose(1, 2).contiguous(), w


@pytest.fixture
def exact_gemma(monkeypatch):
    for mod, name in ((g2, "Gemma2"), (g3, "Gemma3")):
        monkeypatch.setattr(getattr(mod, f"{name}RMSNorm"), "forward", _rms)
        monkeypatch.setattr(getattr(mod, f"{name}TextScaledWordEmbedding"), "forward", _embed)
    monkeypatch.setattr(g2, "eager_attention_forward", _eager)


GEMMA3_ROPE = {"sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
               "full_attention": {"rope_type": "default", "rope_theta": 5000.0}}
MODELS = {
    # Gemma 2: local and global layers alternating (local first), both soft-caps
    "gemma2": (tf.Gemma2ForCausalLM, tf.Gemma2Config,
               {"attn_logit_softcapping": 5.0, "final_logit_softcapping": 8.0}),
    "gemma2-untied-biased": (tf.Gemma2ForCausalLM, tf.Gemma2Config,
                             {"attn_logit_softcapping": 5.0, "final_logit_softcapping": None,
                              "tie_word_embeddings": False, "attention_bias": True}),
    # Gemma 3: q/k norms per head, two local layers to one global, each kind its own base
    "gemma3": (tf.Gemma3ForCausalLM, tf.Gemma3TextConfig,
               {"rope_parameters": GEMMA3_ROPE, "sliding_window_pattern": 3}),
    "gemma3-untied": (tf.Gemma3ForCausalLM, tf.Gemma3TextConfig,
                      {"rope_parameters": GEMMA3_ROPE, "tie_word_embeddings": False,
                       "final_logit_softcapping": 8.0,
                       "layer_types": ["full_attention", "sliding_attention",
                                       "sliding_attention", "full_attention"]}),
}


def _tiny(name, seed=0, **extra):
    """A random tiny model of the family in float64 (4 layers, a window of 4 of 64 positions,
    heads 16 wide, logits scaled by 1/sqrt(12)), its norms and biases moved off zero, its
    queries and keys 8 times their initial size."""
    cls, cfg_cls, kw = MODELS[name]
    torch.manual_seed(seed)
    c = cfg_cls(**{"vocab_size": 97, "hidden_size": 32, "intermediate_size": 48,
                   "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "head_dim": 16, "max_position_embeddings": 64, "sliding_window": 4,
                   "query_pre_attn_scalar": 12, **kw, **extra})
    m = cls(c).double().eval()
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "norm" in n:
                p.add_(0.3 * torch.randn_like(p))
            elif n.endswith("bias"):
                p.add_(0.2 * torch.randn_like(p))
            elif n.endswith(("q_proj.weight", "k_proj.weight")):
                p.mul_(8.0)            # attention logits of order 1: the soft-cap bites
    return m


def _idx(n=11, rows=2, seed=1):
    return torch.randint(0, 97, (rows, n), generator=torch.Generator().manual_seed(seed))


def _gap(src, m, idx=None) -> float:
    """max |ours - theirs| / max |theirs| of the logits: the quick test's check (and the
    planted bugs')."""
    idx = _idx() if idx is None else idx
    with torch.no_grad():
        ref = src(idx).logits
        return float((m(idx) - ref).abs().max() / ref.abs().max())


# ---------------------------------------------------------------------------------------------
# the field against transformers' module


def test_softcap_scalar_and_window_are_gemma2s_attention(exact_gemma):
    """Attention with a soft-cap 2, scalar 3 (not d_h = 8) and a window of 3, grouped keys, on
    states x equals Gemma2Attention (a local layer) in float64 under the band mask, built here
    from its definition (key j seen by query i iff i - 3 < j <= i); and a global layer (no
    window) equals it under the causal mask."""
    c = tf.Gemma2Config(hidden_size=24, num_attention_heads=3, num_key_value_heads=1, head_dim=8,
                        query_pre_attn_scalar=3, attn_logit_softcapping=2.0, sliding_window=3,
                        num_hidden_layers=2)
    c._attn_implementation = "eager"
    torch.manual_seed(0)
    n = 9
    x = torch.randn(2, n, 24, dtype=torch.float64)
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    for layer, window in ((0, 3), (1, None)):
        theirs = g2.Gemma2Attention(c, layer).double()
        assert theirs.sliding_window == window
        ours = Attention(24, 3, causal=True, n_kv_heads=1, bias="none", head_dim=8,
                         rotary_dims=8, attention_softcap=2.0, attention_scalar=3.0,
                         window=window).double()
        ours.norm = torch.nn.Identity()
        with torch.no_grad():
            ours.qkv.weight.copy_(torch.cat([theirs.q_proj.weight, theirs.k_proj.weight,
                                             theirs.v_proj.weight]))
            ours.proj.weight.copy_(theirs.o_proj.weight)
            seen = (j <= i) & ((j > i - window) if window else True)
            mask = torch.zeros(n, n, dtype=torch.float64).masked_fill(~seen, float("-inf"))
            cos, sin = (a[None] for a in ours.rotary.angles(0, n, x.device, x.dtype))
            ref = theirs(x, (cos, sin), mask[None, None])[0]
            got = ours(0.0, x)
        assert (got - ref).abs().max() <= 1e-14 * ref.abs().max(), layer


# ---------------------------------------------------------------------------------------------
# from_hf: logits, folders, generation


@pytest.mark.parametrize("name", list(MODELS))
def test_equal_logits_in_float64_from_the_object(name, exact_gemma):
    src = _tiny(name)
    m = sn.interop.from_hf(src)
    c, s = m.config, src.config
    assert (c.norm, c.norm_position, c.convection_field, c.scale_embedding, c.head_dim) == \
        ("rms_offset", "sandwich", "geglu", True, 16)
    assert c.qk_norm == ("head" if name.startswith("gemma3") else "none")
    assert c.window_layers == tuple(k for k, t in enumerate(s.layer_types)
                                    if t == "sliding_attention") and c.sliding_window == 4
    assert c.attention_scalar == 12.0 and c.tie_head == s.tie_word_embeddings
    if name.startswith("gemma3"):
        assert (c.rotary_base, c.local_rotary_base) == (5000.0, 100.0)
    assert _gap(src, m) <= 1e-13


def test_equal_logits_against_transformers_as_shipped():
    """Without the patch: transformers' float32 norms, softmax and embedding scale against
    splitnet's float64 (the gap measured here is ~1e-7)."""
    for name in ("gemma2", "gemma3"):
        src = _tiny(name)
        assert _gap(src, sn.interop.from_hf(src)) <= 1e-5, name


@pytest.mark.parametrize("name", ["gemma2", "gemma3-untied"])
def test_equal_logits_from_a_sharded_safetensors_folder(name, tmp_path, exact_gemma):
    src = _tiny(name, seed=2)
    src.save_pretrained(tmp_path, max_shard_size="20KB")
    assert (tmp_path / "model.safetensors.index.json").is_file()
    m = sn.interop.from_hf(tmp_path)
    assert m.config.window_layers == sn.interop.from_hf(src).config.window_layers
    assert _gap(src, m, _idx(seed=3)) <= 1e-13


@pytest.mark.parametrize("name", ["gemma2", "gemma3"])
@pytest.mark.parametrize("prompt,new", [(3, 12), (1, 9), (7, 3)])
def test_greedy_generation_equals_transformers_past_the_window(name, prompt, new, exact_gemma):
    """A window of 4 tokens, sequences of up to 15: cached and uncached greedy tokens are
    transformers' (its sliding cache), token for token, far past the window."""
    src = _tiny(name, seed=4)
    m = sn.interop.from_hf(src)
    idx = _idx(prompt, rows=1, seed=5)
    theirs = src.generate(idx, max_new_tokens=new, do_sample=False, pad_token_id=0)
    assert new < 9 or len(set(theirs[0, prompt:].tolist())) > 1     # not one token repeated
    assert torch.equal(m.generate(idx, new, temperature=0, use_cache=True), theirs)
    assert torch.equal(m.generate(idx, new, temperature=0, use_cache=False), theirs)


# ---------------------------------------------------------------------------------------------
# refused by name


def _multimodal():
    vision = tf.SiglipVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                   num_attention_heads=2, image_size=28, patch_size=14)
    text = tf.Gemma3TextConfig(vocab_size=97, hidden_size=32, intermediate_size=48,
                               num_hidden_layers=1, num_attention_heads=4,
                               num_key_value_heads=2, head_dim=8)
    return tf.Gemma3ForConditionalGeneration(tf.Gemma3Config(
        vision_config=vision, text_config=text, mm_tokens_per_image=4))


REFUSED = [
    ("gemma3", {"rope_parameters": {**GEMMA3_ROPE, "full_attention": {
        "rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}}},
     r"scales its rotary positions on full_attention layers \(rope_type 'linear'\)"),
    ("gemma2", {"rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e4}},
     r"scales its rotary positions on every layer \(rope_type 'dynamic'\)"),
    ("gemma2", {"hidden_activation": "gelu"}, r"hidden_activation 'gelu'"),
    ("gemma3", {"use_bidirectional_attention": True}, r"use_bidirectional_attention=True"),
    ("gemma3", {"attn_logit_softcapping": 50.0},
     r"attn_logit_softcapping 50.0 \(transformers' Gemma 3 attention does not apply it\)"),
]


@pytest.mark.parametrize("name,extra,says", REFUSED, ids=[s.split()[0] for _, _, s in REFUSED])
def test_what_cannot_be_mapped_exactly_is_refused_by_name(name, extra, says):
    with pytest.raises(ValueError, match=says):
        sn.interop.from_hf(_tiny(name, **extra))


def test_multimodal_gemma3_is_refused_by_name(tmp_path):
    src = _multimodal()
    with pytest.raises(ValueError, match="Gemma3ForConditionalGeneration is Gemma 3 with its "
                                         "vision tower"):
        sn.interop.from_hf(src)
    src.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=r"holds a 'gemma3' model: Gemma 3 with its vision "
                                         r"tower .* as a Gemma3ForCausalLM"):
        sn.interop.from_hf(tmp_path)


def test_an_unmappable_gemma_folder_is_refused_before_its_weights_are_read(tmp_path):
    _tiny("gemma3").save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["rope_parameters"]["full_attention"] = {"rope_type": "yarn", "factor": 4.0,
                                                "rope_theta": 1e6}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "model.safetensors").write_bytes(b"not read")
    with pytest.raises(ValueError, match="rope_type 'yarn'"):
        sn.interop.from_hf(tmp_path)


# ---------------------------------------------------------------------------------------------
# planted bugs: each one moves the quick test's gap far above its bound of 1e-13


def _planted_gap(name, monkeypatch) -> float:
    src = _tiny(name)
    return _gap(src, sn.interop.from_hf(src))


def test_planted_dropping_the_offset_is_caught(monkeypatch, exact_gemma):
    from splitnet.fields.norms import OffsetRMSNorm

    monkeypatch.setattr(OffsetRMSNorm, "forward", lambda self, x: x * torch.rsqrt(
        x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight)
    assert _planted_gap("gemma3", monkeypatch) > 1e-6


def test_planted_swapping_the_q_and_k_norms_is_caught(monkeypatch, exact_gemma):
    from splitnet.interop import llama

    copy = llama._copy_block

    def swapped(layer, block, prefix):
        copy(layer, block, prefix)
        att = layer.field_modules("diffusion")[0]
        q = att.q_norm.weight.clone()
        att.q_norm.weight.copy_(att.k_norm.weight)
        att.k_norm.weight.copy_(q)

    monkeypatch.setattr(llama, "_copy_block", swapped)
    assert _planted_gap("gemma3", monkeypatch) > 1e-6


@pytest.mark.parametrize("name", ["gemma2", "gemma3"])
def test_planted_a_window_one_token_wider_is_caught(name, monkeypatch, exact_gemma):
    from splitnet.interop import gemma

    windows = gemma.layer_windows
    monkeypatch.setattr(gemma, "layer_windows", lambda c: {
        **windows(c), "sliding_window": windows(c)["sliding_window"] + 1})
    assert _planted_gap(name, monkeypatch) > 1e-6


@pytest.mark.parametrize("cap", ["attention_softcap", "logit_softcap"])
def test_planted_a_soft_cap_dropped_is_caught(cap, monkeypatch, exact_gemma):
    from splitnet.interop import gemma

    options = gemma.gemma_options
    monkeypatch.setattr(gemma, "gemma_options", lambda c: {**options(c), cap: None})
    from splitnet.interop import llama

    monkeypatch.setattr(llama, "gemma_options", gemma.gemma_options)
    assert _planted_gap("gemma2", monkeypatch) > 1e-6


# ---------------------------------------------------------------------------------------------
# the parts in a network trained from scratch


GEMMA_PARTS = {"norm": "rms_offset", "norm_position": "sandwich", "qk_norm": "head",
               "convection_field": "geglu", "scale_embedding": True, "positions": "none",
               "rotary_pct": 1.0, "head_dim": 12, "n_kv_heads": 2, "attention_scalar": 10.0,
               "attention_softcap": 3.0, "logit_softcap": 4.0, "sliding_window": 3,
               "window_layers": (0, 1), "local_rotary_base": 50.0}


@pytest.mark.parametrize("scheme", ["lie-trotter", "strang"])
def test_the_parts_generate_with_a_cache_as_without_past_the_window(scheme):
    c = SplitConfig(d_model=32, n_heads=4, n_layers=3, max_len=24, scheme=scheme, **GEMMA_PARTS)
    torch.manual_seed(0)
    m = sn.SplitTransformer.from_config(c).double().eval()
    att = [layer.field_modules("diffusion")[0] for layer in m.layers]
    assert [(a.window, a.rotary.base) for a in att] == [(3, 50.0), (3, 50.0), (None, 10000.0)]
    idx = torch.randint(0, 256, (2, 5), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a = m.generate(idx, 10, temperature=0, use_cache=True)
        b = m.generate(idx, 10, temperature=0, use_cache=False)
        logits = m(a)
    assert torch.equal(a, b)
    assert logits.abs().max() < 4.0                       # capped: 4 tanh(z / 4)


def test_the_chunked_loss_soft_caps_as_the_model():
    """The chunked loss (reads head.weight itself) equals the plain one on the capped logits,
    in value and in both gradients; without the cap it would not."""
    from splitnet.tasks.losses import LMLoss

    c = SplitConfig(d_model=16, n_heads=2, n_layers=1, max_len=8, logit_softcap=0.5)
    torch.manual_seed(0)
    m = sn.SplitTransformer.from_config(c).double()
    with torch.no_grad():
        m.tok_emb.weight.mul_(30.0)        # logits of order 1 (the head is tied): the cap bites
    idx = torch.randint(0, 256, (3, 8))
    tgt = torch.randint(0, 256, (3, 8))
    out = []
    for impl in ("plain", "chunked"):
        m.zero_grad()
        loss = LMLoss(m, impl, chunk_size=5)(idx, tgt)
        loss.backward()
        out.append((float(loss.detach()), [p.grad.clone() for p in m.parameters()]))
    assert abs(out[0][0] - out[1][0]) <= 1e-13
    assert all(torch.allclose(a, b, rtol=0, atol=1e-13) for a, b in zip(out[0][1], out[1][1]))
    with torch.no_grad():
        uncapped = torch.nn.functional.cross_entropy(m.head(m.features(idx)).flatten(0, 1),
                                                     tgt.flatten())
    assert abs(float(uncapped) - out[0][0]) > 1e-2


def test_prolong_and_coarsen_carry_the_local_layers():
    c = SplitConfig(d_model=16, n_heads=2, n_layers=2, max_len=8, sliding_window=2,
                    window_layers=(0,))
    m = sn.SplitTransformer.from_config(c)
    big = sn.depth.prolong(m, 2)
    assert big.config.window_layers == (0, 1)
    assert [la.field_modules("diffusion")[0].window for la in big.layers] == [2, 2, None, None]
    assert sn.depth.coarsen(big, 2).config.window_layers == (0,)
    with pytest.raises(ValueError, match=r"layers 0..1 are local \(windowed\) and not local"):
        sn.depth.coarsen(m, 2)


@pytest.mark.parametrize("options,says", [
    ({"window_layers": (0,)}, "window_layers given without sliding_window"),
    ({"sliding_window": 4, "causal": False}, "sliding_window is a causal window"),
    ({"local_rotary_base": 10.0}, "local_rotary_base is the rotary base of the local layers"),
    ({"local_rotary_base": 10.0, "sliding_window": 2}, r"and rotary_pct > 0 too"),
    ({"sliding_window": 4, "window_layers": (5,)}, r"window_layers \[5\] outside 0..1"),
    ({"attention_softcap": 0.0}, "attention_softcap must be > 0"),
    ({"sliding_window": 2, "window_layers": (0,), "depth_basis": "legendre:2"},
     "depth_basis runs the same fields in every layer: attention windows on some layers"),
    ({"diffusion_field": "conv", "logit_softcap": 1.0, "attention_softcap": 2.0},
     r"attention_softcap=2.0 \(--attention-softcap\) is read only with --diffusion-field "
     r"attention"),
])
def test_the_options_are_refused_where_they_mean_nothing(options, says):
    with pytest.raises(ValueError, match=says):
        SplitConfig(d_model=16, n_heads=2, n_layers=2, **options)


# ---------------------------------------------------------------------------------------------
# training parity (the copy task and its loop are test_llama's)


@pytest.mark.heavy
def test_gemma3s_parts_train_as_fast_as_transformers_gemma3_from_their_own_inits():
    """A SplitTransformer with Gemma 3's parts (sandwich (1 + w) RMSNorms, q/k norms per head,
    GeGLU, the scaled embedding, a local layer with its own rotary base and a global one) from
    its own default initialisation, and transformers' Gemma3ForCausalLM of the same shape from
    its own, learn the copy task (which needs attention across 11 positions: the window of 16
    covers it) in as many steps (within 1.5x)."""
    from test_llama import _steps_to

    torch.manual_seed(0)
    c = tf.Gemma3TextConfig(vocab_size=64, hidden_size=64, intermediate_size=128,
                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                            head_dim=16, max_position_embeddings=32, sliding_window=16,
                            query_pre_attn_scalar=16, sliding_window_pattern=2,
                            pad_token_id=None, eos_token_id=None, bos_token_id=None,
                            tie_word_embeddings=False)
    ref = tf.Gemma3ForCausalLM(c)
    torch.manual_seed(0)
    opts = sn.interop.from_hf(ref).config.to_dict()     # the same parts, then our own init
    ours = sn.SplitTransformer.from_config(SplitConfig.from_dict(opts))
    theirs = _steps_to(ref, lambda x: ref(x).logits)
    mine = _steps_to(ours, ours)
    assert theirs is not None and mine is not None and mine <= 1.5 * theirs, (mine, theirs)


def test_an_export_refuses_the_gemma_options_it_has_no_counterpart_for():
    """A Llama-parts network with a window, a scalar or a soft-cap is no Llama (nor a GPT-2):
    the exporters name each option instead of writing a model with other logits."""
    from splitnet.interop.llama import llama_mismatch

    llama = {"norm": "rms", "convection_field": "swiglu", "attention_bias": "none",
             "positions": "none", "rotary_pct": 1.0}
    plain = sn.SplitTransformer(vocab_size=11, d_model=16, n_heads=2, n_layers=2, **llama)
    assert llama_mismatch(plain, "llama") is None
    for opt, says in (({"sliding_window": 4}, "sliding_window 4"),
                      ({"attention_softcap": 5.0}, "attention_softcap 5"),
                      ({"logit_softcap": 3.0}, "logit_softcap 3"),
                      ({"attention_scalar": 7.0}, "attention_scalar 7")):
        m = sn.SplitTransformer(vocab_size=11, d_model=16, n_heads=2, n_layers=2, **llama, **opt)
        assert says in llama_mismatch(m, "llama")
        assert says in sn.interop.gpt2_mismatch(m)
