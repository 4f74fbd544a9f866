"""GPT-NeoX-architecture models (the Pythia family) as SplitTransformers, and rotary positions.

Random small ``GPTNeoXConfig`` models (nothing is downloaded), float64: parallel residual ->
scheme ``parallel``, sequential -> ``lie-trotter``, partial rotary, untied head; equal logits,
equal greedy generation, and the analysis commands on a saved directory. Rotary attention on its
own (no transformers needed): cached generation equals uncached at the right positions."""

from __future__ import annotations

import json

import pytest
import torch

import splitnet as sn
from splitnet.cli import main

TEXT = "def f(x):\n    return x * 2\n" * 6


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("transformers")


def _neox(tf, parallel=True, rotary_pct=0.25, seed=0, **kw):
    """A random GPT-NeoX in float64 with every parameter moved off its initial value."""
    torch.manual_seed(seed)
    cfg = {"vocab_size": 300, "hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4,
           "intermediate_size": 48, "max_position_embeddings": 48, "rotary_pct": rotary_pct,
           "rotary_emb_base": 10000, "use_parallel_residual": parallel,
           "tie_word_embeddings": False, "attn_implementation": "sdpa", **kw}
    m = tf.GPTNeoXForCausalLM(tf.GPTNeoXConfig(**cfg)).double().eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return m


@pytest.mark.parametrize("parallel,scheme", [(True, "parallel"), (False, "lie-trotter")])
@pytest.mark.parametrize("rotary_pct", [0.25, 1.0])
def test_neox_imports_with_equal_logits(tf, parallel, scheme, rotary_pct):
    src = _neox(tf, parallel, rotary_pct)
    m = sn.interop.from_hf(src)
    c = m.config
    assert m.scheme.name == scheme and c.positions == "none" and not c.tie_head
    assert c.rotary_pct == rotary_pct and m.pos_emb is None
    assert m.n_params() == sum(p.numel() for p in src.parameters())
    assert sn.cost.describe(c, seq_len=8).params == m.n_params()
    idx = torch.randint(0, 300, (2, 40))
    torch.testing.assert_close(m(idx), src(idx).logits, rtol=0, atol=1e-6)


def test_neox_tied_head_and_greedy_generation_agree(tf):
    src = _neox(tf, tie_word_embeddings=True, rotary_pct=0.5)
    m = sn.interop.from_hf(src)
    assert m.config.tie_head and m.head.weight is m.tok_emb.weight
    idx = torch.randint(0, 300, (1, 7))
    torch.testing.assert_close(m(idx), src(idx).logits, rtol=0, atol=1e-6)
    theirs = src.generate(idx, max_new_tokens=10, do_sample=False, pad_token_id=0)
    assert torch.equal(m.generate(idx, 10, temperature=0), theirs)    # cached, rotary


def test_neox_without_attention_biases_imports_with_equal_logits(tf):
    """attention_bias=False (no bias on query_key_value nor dense) maps to attention_bias
    'none': refused before splitnet had the option (issue 46), exact now."""
    src = _neox(tf, attention_bias=False, parallel=False)
    m = sn.interop.from_hf(src)
    att = m.layers[0].field_modules("diffusion")[0]
    assert m.config.attention_bias == "none" and att.qkv.bias is None and att.proj.bias is None
    assert m.n_params() == sum(p.numel() for p in src.parameters())
    idx = torch.randint(0, 300, (2, 20))
    torch.testing.assert_close(m(idx), src(idx).logits, rtol=0, atol=1e-6)


def test_neox_that_cannot_map_exactly_is_refused(tf):
    with pytest.raises(ValueError, match="activation"):
        sn.interop.from_hf(_neox(tf, hidden_act="gelu_fast"))


@pytest.fixture(scope="module")
def neox_dir(tf, tmp_path_factory):
    d = tmp_path_factory.mktemp("pythia")
    _neox(tf, vocab_size=256).save_pretrained(d)      # no tokenizer: bytes
    return d


@pytest.mark.heavy
def test_refine_and_trajectories_commands_on_a_neox_directory(neox_dir, tmp_path, capsys):
    """Is a Pythia-architecture model an ODE solver of its fields? One command each."""
    text = tmp_path / "t.txt"
    text.write_text(TEXT * 4)
    js = tmp_path / "r.json"
    assert main(["refine", "--hf", str(neox_dir), "--text", str(text), "--windows", "2",
                 "--schemes", "own,parallel,strang", "--substeps", "1,2", "--methods",
                 "euler,rk4", "--out", str(tmp_path / "r.png"), "--json", str(js),
                 "--no-progress"]) == 0
    from splitnet import refine as R

    res = R.RefinementResult.from_dict(json.loads(js.read_text()))
    assert res.scheme == "parallel"
    own = {(p.scheme, p.method, p.substeps): p.loss for p in res.points}
    assert own["own", "euler", 1] == pytest.approx(res.own.loss, rel=1e-12)
    assert own["parallel", "euler", 1] == pytest.approx(res.own.loss, rel=1e-12)
    assert main(["trajectories", "--hf", str(neox_dir), "--prompt", "for i in range(n):",
                 "--out", str(tmp_path / "t.png"), "--points-per-layer", "2"]) == 0
    assert (tmp_path / "t.png").is_file()
    capsys.readouterr()


# ---------------------------------------------------------------------------------------------
# rotary attention without transformers


def _rotary_model(**kw):
    torch.manual_seed(1)
    opts = {"positions": "none", "rotary_pct": 0.5, "tie_head": False, "max_len": 24, **kw}
    m = sn.models.SplitTransformer(64, 16, 2, 2, **opts).double().eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return m


@pytest.mark.parametrize("scheme,method", [("parallel", "rk4"), ("strang", "euler")])
def test_rotary_generation_with_a_cache_equals_without(scheme, method):
    """The cache path rotates new keys and queries at their absolute positions."""
    m = _rotary_model(scheme=scheme, method=method)
    idx = torch.randint(0, 64, (2, 5))
    a = m.generate(idx, 12, temperature=0, use_cache=True)
    b = m.generate(idx, 12, temperature=0, use_cache=False)
    assert torch.equal(a, b)
    from splitnet.nets.generation import GenerationCache, forward_cached

    cache = GenerationCache(m, 24)
    with torch.no_grad():
        head = forward_cached(m, a[:, :9], cache)
        tail = forward_cached(m, a[:, 9:15], cache)
    torch.testing.assert_close(torch.cat([head, tail], 1), m(a[:, :15]), rtol=0, atol=1e-12)


def test_rotary_scores_depend_on_relative_positions_only_and_options_are_checked():
    from splitnet.fields import Rotary

    rot = Rotary(4, 100.0)
    q, k = torch.randn(2, 3, 7, 6, dtype=torch.float64).unbind(0)
    q0, k0 = rot(q, k)
    q5, k5 = rot(q, k, start=5)
    # (angles in float32, as GPT-NeoX: equal to ~1e-7)
    torch.testing.assert_close(q0 @ k0.transpose(-1, -2), q5 @ k5.transpose(-1, -2),
                               rtol=0, atol=1e-5)
    assert torch.equal(q0[..., 4:], q[..., 4:]) and not torch.allclose(q0[..., 1:, :4],
                                                                       q[..., 1:, :4])
    torch.testing.assert_close(q0[..., 0, :], q[..., 0, :])          # position 0: no turn
    with pytest.raises(ValueError, match="even"):
        sn.models.SplitConfig(d_model=24, n_heads=4, rotary_pct=0.5)     # 3 channels
    with pytest.raises(ValueError, match="conv"):
        sn.models.SplitConfig(diffusion_field="conv", rotary_pct=0.5)
    with pytest.raises(ValueError, match="rotary_pct"):
        sn.models.SplitConfig(rotary_pct=1.5)


def test_a_rotary_model_with_an_untied_head_exports_and_loads_back(tf, tmp_path):
    m = _rotary_model(scheme="parallel")
    assert sn.interop.gpt2_mismatch(m) and sn.interop.to_hf(m, tmp_path) == "splitnet"
    back = sn.interop.from_hf(tmp_path)
    assert back.head.weight is not back.tok_emb.weight
    idx = torch.randint(0, 64, (1, 9))
    torch.testing.assert_close(back(idx), m(idx), rtol=0, atol=1e-12)
