"""The Llama family in (issue 46): Llama, Qwen2 and Mistral checkpoints as splitting networks with
equal logits, their parts (RMSNorm, SwiGLU, grouped-query attention, q/k/v biases) as ordinary
options of every network, and the refusals of what cannot be mapped exactly.

transformers' RMSNorm casts its input to float32 even from float64; the float64 comparisons
patch that cast out (``exact_norms``), so they check the map rather than float32 rounding, and
one comparison without the patch checks the imported model against the library as shipped."""

import json

import pytest
import torch

import splitnet as sn
from splitnet.configs.config import SplitConfig
from splitnet.nets.cost import count_params

tf = pytest.importorskip("transformers")

FAMILIES = {
    "llama": (tf.LlamaForCausalLM, tf.LlamaConfig, {"rope_theta": 5000.0}),
    "llama-biased-tied": (tf.LlamaForCausalLM, tf.LlamaConfig,
                          {"attention_bias": True, "tie_word_embeddings": True}),
    "qwen2": (tf.Qwen2ForCausalLM, tf.Qwen2Config, {"rope_theta": 1e6}),
    "mistral": (tf.MistralForCausalLM, tf.MistralConfig, {"sliding_window": None}),
    # issue 61: heads of their own width (16, not 32 / 4), q/k RMSNorm per head
    "llama-wide-heads": (tf.LlamaForCausalLM, tf.LlamaConfig, {"head_dim": 16}),
    "qwen3": (tf.Qwen3ForCausalLM, tf.Qwen3Config, {"head_dim": 16, "rope_theta": 1e6}),
    "qwen3-biased-tied": (tf.Qwen3ForCausalLM, tf.Qwen3Config,
                          {"attention_bias": True, "tie_word_embeddings": True}),
    # q/k RMSNorm over the whole projection, the block's norms on the sub-layers' outputs
    "olmo2": (tf.Olmo2ForCausalLM, tf.Olmo2Config, {"rope_theta": 5e5}),
    "olmo2-biased": (tf.Olmo2ForCausalLM, tf.Olmo2Config, {"attention_bias": True}),
    # q, k, v fused in one matrix, gate and up in another
    "phi3": (tf.Phi3ForCausalLM, tf.Phi3Config, {"rope_theta": 2e4, "pad_token_id": 0,
                                                  "eos_token_id": 1, "bos_token_id": 2}),
}
# the parts beyond Llama's: (qk_norm, norm_position)
PARTS = {"qwen3": ("head", "pre"), "qwen3-biased-tied": ("head", "pre"),
         "olmo2": ("projection", "post"), "olmo2-biased": ("projection", "post")}
EXPECT = {"llama": "none", "llama-biased-tied": "all", "qwen2": "qkv", "mistral": "none",
          "llama-wide-heads": "none", "qwen3": "none", "qwen3-biased-tied": "all",
          "olmo2": "none", "olmo2-biased": "all", "phi3": "none"}


def _tiny(name, seed=0, **extra):
    """A random tiny model of the family, float64, with norms and biases moved off their
    initial ones / zeros (an import that dropped them would show)."""
    cls, cfg_cls, kw = FAMILIES[name]
    torch.manual_seed(seed)
    c = cfg_cls(**{"vocab_size": 97, "hidden_size": 32, "intermediate_size": 48,
                   "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "max_position_embeddings": 64, "rms_norm_eps": 1e-5, **kw, **extra})
    m = cls(c).double().eval()
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "norm" in n:
                p.add_(0.3 * torch.randn_like(p))
            elif n.endswith("bias"):
                p.add_(0.2 * torch.randn_like(p))
    return m


def _idx(n=11, rows=2, seed=1):
    return torch.randint(0, 97, (rows, n), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", list(FAMILIES))
def test_equal_logits_in_float64_from_the_object(name, exact_norms):
    src = _tiny(name)
    m = sn.interop.from_hf(src)
    c = m.config
    assert (c.norm, c.convection_field, c.n_kv_heads, c.positions, c.rotary_pct) == \
        ("rms", "swiglu", 2, "none", 1.0)
    assert c.attention_bias == EXPECT[name] and c.tie_head == src.config.tie_word_embeddings
    assert (c.qk_norm, c.norm_position) == PARTS.get(name, ("none", "pre"))
    width = getattr(src.config, "head_dim", None) or 8                # 32 / 4 by default
    assert c.head_dim == (None if width == 8 else width)
    idx = _idx()
    with torch.no_grad():
        ref = src(idx).logits
        assert (m(idx) - ref).abs().max() <= 1e-10 * ref.abs().max()


def test_equal_logits_against_transformers_as_shipped():
    """Without the patch: transformers' float32 RMSNorm against splitnet's float64 one."""
    src = _tiny("llama")
    with torch.no_grad():
        torch.testing.assert_close(sn.interop.from_hf(src)(_idx()), src(_idx()).logits,
                                   rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", ["llama", "qwen2", "mistral", "qwen3", "olmo2", "phi3"])
def test_equal_logits_from_a_sharded_safetensors_folder(name, tmp_path, exact_norms):
    src = _tiny(name, seed=2)
    src.save_pretrained(tmp_path, max_shard_size="20KB")       # several safetensors files
    assert (tmp_path / "model.safetensors.index.json").is_file()
    m = sn.interop.from_hf(tmp_path)
    idx = _idx(seed=3)
    with torch.no_grad():
        ref = src(idx).logits
        assert (m(idx) - ref).abs().max() <= 1e-10 * ref.abs().max()


@pytest.mark.parametrize("name", ["llama", "qwen2", "qwen3", "qwen3-biased-tied", "olmo2",
                                  "phi3"])
def test_greedy_cached_generation_equals_transformers(name, exact_norms):
    src = _tiny(name, seed=4)
    m = sn.interop.from_hf(src)
    idx = _idx(7, rows=1, seed=5)
    theirs = src.generate(idx, max_new_tokens=12, do_sample=False, pad_token_id=0)
    assert torch.equal(m.generate(idx, 12, temperature=0), theirs)     # prompt + 12 tokens


@pytest.mark.parametrize("extra,says", [
    ({"rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5, "factor": 8.0,
                          "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 32}}, "rope_type 'llama3'"),
    ({"mlp_bias": True}, "mlp_bias=True"),
    ({"hidden_act": "gelu"}, "hidden_act 'gelu'"),
])
def test_what_cannot_be_mapped_exactly_is_refused_by_name(extra, says):
    with pytest.raises(ValueError, match=says):
        sn.interop.from_hf(_tiny("llama", **extra))


def _damage(folder, how):
    from safetensors.torch import load_file, save_file

    f = folder / "model.safetensors"
    state = load_file(f)
    if how == "missing":
        del state["model.layers.1.mlp.up_proj.weight"]
    else:
        state["model.layers.0.self_attn.k_proj.weight"] = torch.zeros(8, 32, dtype=torch.float64)
    save_file(state, f, metadata={"format": "pt"})


@pytest.mark.parametrize("how,says", [("missing", "the file has no model.layers.1.mlp.up_proj"),
                                      ("shape", "k_proj.weight has shape")])
def test_a_missing_or_misshapen_tensor_is_a_one_line_refusal(how, says, tmp_path, capsys):
    _tiny("qwen2").save_pretrained(tmp_path)
    _damage(tmp_path, how)
    with pytest.raises(ValueError, match=says):
        sn.interop.from_hf(tmp_path)
    from splitnet.cli import main

    capsys.readouterr()                   # save_pretrained's own bar
    assert main(["refine", "--hf", str(tmp_path), "--text", "x"]) == 2
    err = capsys.readouterr().err
    assert says.split()[0] in err and err.count("\n") == 1, err


def test_an_unmappable_folder_is_refused_before_its_weights_are_read(tmp_path):
    _tiny("llama").save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["rope_parameters"] = {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "model.safetensors").write_bytes(b"not read")
    with pytest.raises(ValueError, match="rope_type 'yarn'"):
        sn.interop.from_hf(tmp_path)


def test_the_llama_parts_are_options_of_every_network():
    """RMSNorm, SwiGLU, grouped-query attention and the bias choice build, count their
    parameters in closed form, generate with a cache as without, and refuse bad values."""
    c = SplitConfig(d_model=32, n_heads=4, n_layers=2, norm="rms", convection_field="swiglu",
                    n_kv_heads=2, attention_bias="qkv", positions="none", rotary_pct=1.0,
                    scheme="strang", max_len=24)
    torch.manual_seed(0)
    m = sn.SplitTransformer.from_config(c).eval()
    assert count_params(c)[0] == m.n_params()
    assert isinstance(m.norm, torch.nn.RMSNorm)
    idx = _idx(9, seed=6) % 256
    full = m(idx)
    with torch.no_grad():
        out = m.generate(idx[:, :5], 4, temperature=0)
        assert torch.equal(out, m.generate(idx[:, :5], 4, temperature=0))
    assert full.shape == (2, 9, 256)
    s2s = sn.Seq2SeqConfig(d_model=32, n_heads=4, norm="rms")
    s2s_model = sn.SplitSeq2Seq.from_config(s2s)
    assert isinstance(s2s_model.decoder_norm, torch.nn.RMSNorm)
    # every field's norm too (a stack's fields were built with LayerNorm before issue 47)
    assert all(isinstance(m, torch.nn.RMSNorm) for n, m in s2s_model.named_modules()
               if n.endswith(".norm"))
    with pytest.raises(ValueError, match="n_kv_heads 3 must divide n_heads 4"):
        SplitConfig(d_model=32, n_heads=4, n_kv_heads=3)
    with pytest.raises(ValueError, match="norm must be one of layer, rms"):
        SplitConfig(norm="batch")
    reason = sn.interop.gpt2_mismatch(m)
    assert all(w in reason for w in ("norm 'rms'", "grouped-query", "attention_bias 'qkv'",
                                      "swiglu"))


def test_a_splitting_network_with_llamas_parts_trains_from_the_command_line(tmp_path):
    from splitnet.cli import main

    text = tmp_path / "c.txt"
    text.write_text("def f(x):\n    return x + 1\n" * 300)
    out = tmp_path / "run"
    assert main(["train", "--text", str(text), "--out", str(out), "--norm", "rms",
                 "--convection-field", "swiglu", "--n-kv-heads", "2", "--attention-bias",
                 "none", "--positions", "none", "--rotary-pct", "1", "--d-model", "32",
                 "--n-heads", "4", "--n-layers", "2", "--context", "32", "--batch-size", "8",
                 "--steps", "60", "--warmup", "5", "--eval-every", "60", "--eval-windows", "8",
                 "--no-progress", "--no-plot", "--threads", "1"]) == 0
    recs = sn.checkpoint.read_metrics(out / "metrics.jsonl")
    assert recs[-1]["loss"] < 0.6 * recs[0]["loss"]
    state = sn.checkpoint.load(out)
    assert state["model_config"]["convection_field"] == "swiglu"


@pytest.mark.heavy
def test_the_commands_take_a_llama_folder(tmp_path, capsys, exact_norms):
    """describe, sample, refine and trajectories --hf DIR on a Llama folder with a tokenizer;
    sample's greedy text is transformers' greedy continuation."""
    from splitnet.cli import main
    from splitnet.interop.convert import byte_tokenizer

    torch.manual_seed(0)
    c = tf.LlamaConfig(vocab_size=256, hidden_size=32, intermediate_size=48,
                       num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                       max_position_embeddings=64)
    src = tf.LlamaForCausalLM(c).double().eval()
    src.save_pretrained(tmp_path / "ll")
    byte_tokenizer().save_pretrained(tmp_path / "ll")
    capsys.readouterr()
    assert main(["describe", "--hf", str(tmp_path / "ll")]) == 0
    assert "2 layers imported" in capsys.readouterr().out
    assert main(["sample", "--hf", str(tmp_path / "ll"), "--prompt", "def f", "--temperature",
                 "0", "--max-new-tokens", "8"]) == 0
    got = capsys.readouterr().out.encode("utf-8", "surrogateescape")
    want = src.generate(torch.tensor([list(b"def f")]), max_new_tokens=8, do_sample=False,
                        pad_token_id=0)[0, 5:]
    tok = byte_tokenizer()
    assert got == tok.decode(want.tolist()).encode("utf-8", "replace")
    text = tmp_path / "t.txt"
    text.write_text("def f(x):\n    return x * 2\n" * 20)
    assert main(["refine", "--hf", str(tmp_path / "ll"), "--text", str(text), "--windows", "2",
                 "--substeps", "1,2", "--schemes", "strang", "--methods", "euler",
                 "--out", str(tmp_path / "r.png")]) == 0
    assert main(["trajectories", "--hf", str(tmp_path / "ll"), "--prompt", "def f(x): return x",
                 "--out", str(tmp_path / "t.png")]) == 0


def _copy_batch(step: int, rows: int = 32, n: int = 10, vocab: int = 64):
    """``n`` random tokens of 62, a separator, the same tokens again: the second half is
    predictable only by attending to the first (targets of the first half ignored)."""
    g = torch.Generator().manual_seed(100_003 + step)
    x = torch.randint(2, vocab, (rows, n), generator=g)
    seq = torch.cat([x, torch.ones(rows, 1, dtype=torch.long), x], 1)
    tgt = seq[:, 1:].clone()
    tgt[:, :n] = -100
    return seq[:, :-1], tgt


def _steps_to(model, logits, threshold: float = 0.1, max_steps: int = 300, every: int = 20):
    """AdamW steps until the held-out copy loss is under ``threshold`` (None: never)."""
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    v_in, v_t = _copy_batch(10**6)
    for s in range(max_steps):
        x, y = _copy_batch(s)
        loss = torch.nn.functional.cross_entropy(logits(x).flatten(0, 1), y.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (s + 1) % every == 0:
            with torch.no_grad():
                v = torch.nn.functional.cross_entropy(logits(v_in).flatten(0, 1), v_t.flatten())
            if v < threshold:
                return s + 1
    return None


@pytest.mark.heavy
def test_llamas_parts_train_as_fast_as_transformers_llama_from_their_own_inits():
    """Training parity: a SplitTransformer with Llama's parts from its own default
    initialisation, and transformers' LlamaForCausalLM of the same shape from its own, learn a
    copy task that needs attention (10 tokens of 62) in as many steps (within 1.5x)."""
    torch.manual_seed(0)
    c = tf.LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
    ref = tf.LlamaForCausalLM(c)
    torch.manual_seed(0)
    ours = sn.SplitTransformer(vocab_size=64, d_model=64, n_heads=4, n_layers=2, n_kv_heads=2,
                               d_ff=128, norm="rms", convection_field="swiglu",
                               attention_bias="none", positions="none", rotary_pct=1.0,
                               tie_head=False, max_len=32, norm_eps=1e-6)
    theirs = _steps_to(ref, lambda x: ref(x).logits)
    mine = _steps_to(ours, ours)
    assert theirs is not None and mine is not None and mine <= 1.5 * theirs, (mine, theirs)


@pytest.mark.heavy
def test_olmo2s_parts_train_as_fast_as_transformers_olmo2_from_their_own_inits():
    """Training parity (issue 61): a SplitTransformer with OLMo 2's parts (q/k RMSNorm over the
    projection, the norms after each sub-layer) from its own default initialisation, and
    transformers' Olmo2ForCausalLM of the same shape from its own, learn the copy task in as
    many steps (within 1.5x)."""
    torch.manual_seed(0)
    c = tf.Olmo2Config(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                       pad_token_id=None, eos_token_id=None)
    ref = tf.Olmo2ForCausalLM(c)
    torch.manual_seed(0)
    ours = sn.SplitTransformer(vocab_size=64, d_model=64, n_heads=4, n_layers=2, n_kv_heads=2,
                               d_ff=128, norm="rms", convection_field="swiglu",
                               attention_bias="none", positions="none", rotary_pct=1.0,
                               tie_head=False, max_len=32, qk_norm="projection",
                               norm_position="post")
    theirs = _steps_to(ref, lambda x: ref(x).logits)
    mine = _steps_to(ours, ours)
    assert theirs is not None and mine is not None and mine <= 1.5 * theirs, (mine, theirs)
