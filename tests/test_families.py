"""Issue 61's parts as options of every network, trained from scratch too: heads of their own
width (``head_dim``), q/k norms (per head, over the projection) and the norm's position (pre,
post, sandwich); each against the transformers module it reproduces, and cached generation equal
to uncached (the fields stay functions of the token states, so a cache stays exact)."""

import pytest
import torch

import splitnet as sn
from splitnet.configs.config import SplitConfig
from splitnet.fields.attention import Attention

tf = pytest.importorskip("transformers")


def _rms(self, x):
    """transformers' RMSNorm formula in its input's dtype (it casts to float32 inside)."""
    return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))


@pytest.mark.parametrize("family,qk_norm,head_dim", [("olmo2", "projection", None),
                                                     ("qwen3", "head", 10)])
def test_qk_norm_and_head_dim_are_transformers_attention(family, qk_norm, head_dim,
                                                         monkeypatch):
    """Attention with ``qk_norm`` (and ``head_dim`` 10, not 24 / 4) on states x equals
    transformers' Olmo2Attention / Qwen3Attention in float64 on the same weights and rotary
    angles (our pre-norm set to the identity: theirs has none)."""
    import importlib

    mod = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    name = {"olmo2": "Olmo2", "qwen3": "Qwen3"}[family]
    monkeypatch.setattr(getattr(mod, f"{name}RMSNorm"), "forward", _rms)
    kw = {"head_dim": head_dim} if head_dim else {}
    c = getattr(tf, f"{name}Config")(vocab_size=11, hidden_size=24, intermediate_size=32,
                                     num_hidden_layers=1, num_attention_heads=4,
                                     num_key_value_heads=2, max_position_embeddings=32,
                                     rms_norm_eps=1e-6, rope_theta=500.0, **kw)
    c._attn_implementation = "sdpa"      # eager's softmax runs in float32
    torch.manual_seed(0)
    theirs = getattr(mod, f"{name}Attention")(c, 0).double()
    hd = head_dim or 6
    ours = Attention(24, 4, causal=True, n_kv_heads=2, bias="none", norm="rms", norm_eps=1e-6,
                     rotary_dims=hd, rotary_base=500.0, head_dim=head_dim,
                     qk_norm=qk_norm).double()
    ours.norm = torch.nn.Identity()
    with torch.no_grad():
        for n, p in theirs.named_parameters():
            if "norm" in n:
                p.add_(0.3 * torch.randn_like(p))
        ours.qkv.weight.copy_(torch.cat([theirs.q_proj.weight, theirs.k_proj.weight,
                                         theirs.v_proj.weight]))
        ours.proj.weight.copy_(theirs.o_proj.weight)
        ours.q_norm.weight.copy_(theirs.q_norm.weight)
        ours.k_norm.weight.copy_(theirs.k_norm.weight)
        x = torch.randn(2, 9, 24, dtype=torch.float64)
        # the same angles on both sides (rotary itself is checked by the model tests)
        cos, sin = (a[None] for a in ours.rotary.angles(0, 9, x.device, x.dtype))
        ref = theirs(x, (cos, sin), None)[0]               # no mask: causal SDPA
        got = ours(0.0, x)
    assert (got - ref).abs().max() <= 1e-12 * ref.abs().max()
    assert ours.q_norm.weight.shape == ((hd,) if qk_norm == "head" else (24,))


@pytest.mark.parametrize("options", [
    {"head_dim": 12, "qk_norm": "head", "n_kv_heads": 2},
    {"qk_norm": "projection", "norm_position": "post"},
    {"norm_position": "sandwich", "convection_field": "swiglu", "head_dim": 6},
])
def test_the_parts_generate_with_a_cache_as_without(options):
    """From scratch, in float64: cached greedy tokens are the uncached ones, and the logits of
    the whole sequence equal the cached forward's last rows."""
    c = SplitConfig(d_model=32, n_heads=4, n_layers=2, norm="rms", positions="none",
                    rotary_pct=1.0, scheme="strang", max_len=24, **options)
    torch.manual_seed(0)
    m = sn.SplitTransformer.from_config(c).double().eval()
    idx = torch.randint(0, 256, (2, 6), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a = m.generate(idx, 8, temperature=0, use_cache=True)
        b = m.generate(idx, 8, temperature=0, use_cache=False)
    assert torch.equal(a, b)


def test_the_parts_are_named_where_they_do_not_apply():
    with pytest.raises(ValueError, match=r"qk_norm 'head' normalises .* norm is 'none'"):
        SplitConfig(d_model=32, n_heads=4, qk_norm="head", norm="none")
    with pytest.raises(ValueError, match="norm_position 'post' is read by attention"):
        SplitConfig(d_model=32, n_heads=4, norm_position="post", diffusion_field="conv")
    with pytest.raises(ValueError, match="qk_norm must be one of none, head, projection"):
        SplitConfig(qk_norm="heads")
    assert SplitConfig(d_model=32, n_heads=4, head_dim=8).head_dim is None   # the default, one way
    m = sn.SplitTransformer(vocab_size=11, d_model=32, n_heads=4, n_layers=1, head_dim=6,
                            qk_norm="head",
                            norm_position="sandwich")
    reason = sn.interop.gpt2_mismatch(m)
    assert all(w in reason for w in ("head_dim 6", "qk_norm 'head'", "norm_position 'sandwich'"))


def test_offset_rmsnorm_and_the_embedding_scale_are_gemmas():
    """``norm="rms_offset"`` is Gemma 3's RMSNorm ``(1 + w) x / rms(x)`` (its formula in float64:
    transformers casts to float32 inside), ``w`` from zero; ``scale_embedding`` multiplies the
    token embedding by sqrt(d) as Gemma's scaled embedding does; both counted in closed form."""
    from transformers.models.gemma3 import modeling_gemma3 as g

    from splitnet import cost
    from splitnet.fields.norms import OffsetRMSNorm

    theirs, ours = g.Gemma3RMSNorm(24, eps=1e-6).double(), OffsetRMSNorm(24, 1e-6).double()
    assert torch.equal(ours.weight, torch.zeros(24))
    with torch.no_grad():
        theirs.weight.copy_(0.3 * torch.randn(24))
        ours.weight.copy_(theirs.weight)
    x = torch.randn(3, 5, 24, dtype=torch.float64)

    def formula(x):          # Gemma3RMSNorm.forward without its float32 round trip
        return theirs._norm(x) * (1.0 + theirs.weight)

    assert (ours(x) - formula(x)).abs().max() <= 1e-15
    assert (ours(x.float()) - theirs(x.float())).abs().max() <= 1e-6        # as shipped
    emb = g.Gemma3TextScaledWordEmbedding(11, 24, padding_idx=0, embed_scale=24 ** 0.5).double()
    c = SplitConfig(vocab_size=11, d_model=24, n_heads=4, n_layers=1, max_len=8,
                    norm="rms_offset", scale_embedding=True, norm_position="sandwich",
                    qk_norm="head")
    m = sn.SplitTransformer.from_config(c).double()
    assert count_params_of(c) == m.n_params() and cost.describe(c, seq_len=8).params == m.n_params()
    with torch.no_grad():
        m.tok_emb.weight.copy_(emb.weight)
    idx = torch.randint(0, 11, (2, 7))
    assert m.embed_scale == 24 ** 0.5
    # Gemma holds sqrt(d) as a float32 buffer (rounded: 4.898979663848877 for d = 24), splitnet
    # as a Python float; the products differ by that rounding only
    scale32 = float(torch.tensor(24 ** 0.5))
    assert torch.equal(m.tok_emb(idx) * scale32, emb(idx))
    assert (m.tok_emb(idx) * m.embed_scale / emb(idx) - 1).abs().max() <= 4e-8
    assert "scale_embedding scales the token embedding" in sn.interop.gpt2_mismatch(m)
    norms = [mod for mod in m.modules() if isinstance(mod, OffsetRMSNorm)]
    assert len(norms) == 1 + 2 * 2 + 2       # the head's, two per field (sandwich), q and k
    fresh = sn.SplitTransformer.from_config(c)      # initialised: every offset at zero
    assert all(not mod.weight.any() for mod in fresh.modules() if isinstance(mod, OffsetRMSNorm))


def count_params_of(c):
    from splitnet.nets.cost import count_params

    return count_params(c)[0]


def test_geglu_is_gemmas_mlp():
    """``convection_field="geglu"`` is Gemma 3's MLP ``down(gelu_tanh(gate x) * up x)`` in float64
    on the same weights (our pre-norm set to the identity: the block holds theirs)."""
    from transformers.models.gemma3 import modeling_gemma3 as g

    from splitnet.configs.kinds import get_kind

    c = tf.Gemma3TextConfig(hidden_size=24, intermediate_size=40,
                            hidden_activation="gelu_pytorch_tanh")
    torch.manual_seed(0)
    theirs = g.Gemma3MLP(c).double()
    cfg = SplitConfig(d_model=24, n_heads=4, d_ff=40, convection_field="geglu", norm="rms")
    ours = get_kind("geglu").build(cfg).double()
    ours.norm = torch.nn.Identity()
    with torch.no_grad():
        for n in ("gate", "up", "down"):
            getattr(ours, n).weight.copy_(getattr(theirs, f"{n}_proj").weight)
    x = torch.randn(2, 5, 24, dtype=torch.float64)
    ref = theirs(x)
    assert (ours(0.0, x) - ref).abs().max() <= 1e-14 * ref.abs().max()
    silu = get_kind("swiglu").build(cfg.replace(convection_field="swiglu")).double()
    silu.load_state_dict(ours.state_dict(), strict=False)
    silu.norm = torch.nn.Identity()
    assert (silu(0.0, x) - ref).abs().max() > 1e-3       # the gate's activation matters


@pytest.mark.parametrize("make", [
    lambda: tf.Qwen3MoeForCausalLM(tf.Qwen3MoeConfig(
        vocab_size=11, hidden_size=16, intermediate_size=24, moe_intermediate_size=8,
        num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, num_experts=2,
        num_experts_per_tok=1)),
], ids=["qwen3-moe"])
def test_families_not_mapped_are_refused_by_name(make, tmp_path):
    """A mixture of experts is refused, never approximated: the object by its class, the
    folder by its model type (Gemma 3's multimodal model: tests/test_gemma.py)."""
    src = make()
    with pytest.raises(TypeError, match=f"got {type(src).__name__}"):
        sn.interop.from_hf(src)
    src.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=f"holds a '{src.config.model_type}' model"):
        sn.interop.from_hf(tmp_path)


def test_attentions_options_are_refused_where_no_attention_reads_them():
    from splitnet.configs.options import check_applicable

    c = SplitConfig(d_model=32, n_heads=4, diffusion_field="conv", qk_norm="head", head_dim=6)
    with pytest.raises(ValueError, match=r"--head-dim, --qk-norm only apply with "
                                         r"--diffusion-field attention"):
        check_applicable(c, {"head_dim", "qk_norm"}, SplitConfig.ONLY_WITH)
    check_applicable(c.replace(diffusion_field="attention"), {"head_dim", "qk_norm"},
                     SplitConfig.ONLY_WITH)
