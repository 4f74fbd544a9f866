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
