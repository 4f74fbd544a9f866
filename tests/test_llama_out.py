"""Llama-family models out (issue 61): a SplitTransformer whose layers are exactly a family's
blocks written as that family's transformers model (``to_hf(format="llama" | "qwen2" |
"qwen3" | "olmo2")``), loaded by ``AutoModelForCausalLM`` with equal float64 logits and greedy
tokens, imported back with equal logits; ``format="auto"`` picks it when exact; anything else
refused with the reason, in Python and on the command line (one line, exit 2)."""

import pytest
import torch

import splitnet as sn

tf = pytest.importorskip("transformers")

PARTS = {"llama": {"attention_bias": "none"}, "qwen2": {"attention_bias": "qkv"},
         "qwen3": {"qk_norm": "head", "head_dim": 12, "attention_bias": "all"},
         "olmo2": {"qk_norm": "projection", "norm_position": "post", "attention_bias": "none"}}


def _llama_parts(seed=0, **extra):
    """A float64 Lie–Trotter network of Llama's parts with its norms moved off one and its
    biases off zero (an export that dropped them would show)."""
    torch.manual_seed(seed)
    options = {"vocab_size": 97, "d_model": 32, "n_heads": 4, "n_kv_heads": 2, "n_layers": 2,
               "d_ff": 48, "norm": "rms", "convection_field": "swiglu", "positions": "none",
               "rotary_pct": 1.0, "rotary_base": 5000.0, "max_len": 64, "tie_head": False,
               "norm_eps": 1e-6}
    m = sn.SplitTransformer(**{**options, **extra}).double().eval()
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "norm" in n or n.endswith("bias"):
                p.add_(0.3 * torch.randn_like(p))
    return m


@pytest.mark.parametrize("family", list(PARTS))
def test_out_and_back_in_with_equal_logits_and_tokens(family, tmp_path, exact_norms):
    m = _llama_parts(**PARTS[family])
    assert sn.interop.to_hf(m, tmp_path, format=family) == family
    back = tf.AutoModelForCausalLM.from_pretrained(tmp_path, local_files_only=True).eval()
    assert back.config.model_type == family
    idx = torch.randint(0, 97, (2, 13), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = m(idx)
        assert (back(idx).logits - ref).abs().max() <= 1e-10 * ref.abs().max()
        again = sn.interop.from_hf(tmp_path)
        assert (again(idx) - ref).abs().max() <= 1e-12 * ref.abs().max()
    p = idx[:1, :5]
    theirs = back.generate(p, max_new_tokens=10, do_sample=False, pad_token_id=0)
    assert torch.equal(m.generate(p, 10, temperature=0), theirs)


def test_auto_picks_the_family_when_exact_and_splitnet_otherwise(tmp_path):
    assert sn.interop.to_hf(_llama_parts(), tmp_path / "a") == "llama"
    assert sn.interop.to_hf(_llama_parts(attention_bias="qkv"), tmp_path / "b") == "qwen2"
    assert sn.interop.to_hf(_llama_parts(scheme="strang"), tmp_path / "c") == "splitnet"


@pytest.mark.parametrize("extra,says", [
    ({"scheme": "strang"}, "scheme 'strang' is not Lie–Trotter"),
    ({"attention_bias": "qkv"}, "attention_bias 'qkv' (llama: none or all)"),
    ({"qk_norm": "head"}, "qk_norm 'head' (llama: none)"),
    ({"rotary_pct": 0.5}, "partial rotary"),
    ({"gate": "tanh"}, "gated"),
    ({"step_size": 0.5}, "step size 0.5"),
])
def test_a_network_that_is_not_a_llama_is_refused_with_the_reason(extra, says, tmp_path):
    out = tmp_path / "hf"
    with pytest.raises(ValueError, match="this model is not a llama model") as info:
        sn.interop.to_hf(_llama_parts(**extra), out, format="llama")
    assert says in str(info.value) and "\n" not in str(info.value), info.value
    assert not out.exists()


def _train(tmp_path, name, scheme, steps=2):
    from splitnet.cli import main

    text = tmp_path / "c.txt"
    text.write_text("def f(x):\n    return x + 1\n" * 200)
    out = tmp_path / name
    assert main(["train", "--text", str(text), "--out", str(out), "--norm", "rms",
                 "--convection-field", "swiglu", "--n-kv-heads", "2", "--attention-bias",
                 "none", "--positions", "none", "--rotary-pct", "1", "--d-model", "32",
                 "--n-heads", "4", "--n-layers", "2", "--context", "32", "--batch-size", "8",
                 "--steps", str(steps), "--warmup", "1", "--eval-every", str(steps),
                 "--eval-windows", "2", "--no-progress", "--no-plot", "--threads", "1",
                 "--scheme", scheme]) == 0
    return out


def test_export_format_llama_on_the_command_line(tmp_path, capsys):
    """A trained Lie–Trotter network of Llama's parts exports as a Llama (read back equal);
    a Strang one is refused in one line, exit 2, nothing written."""
    from splitnet.cli import main

    lt, st = _train(tmp_path, "lt", "lie-trotter", 40), _train(tmp_path, "st", "strang")
    capsys.readouterr()
    assert main(["export", "--checkpoint", str(lt), "--out", str(tmp_path / "o"),
                 "--format", "llama"]) == 0
    out = capsys.readouterr().out
    assert "as a standard llama model" in out, out
    back = tf.AutoModelForCausalLM.from_pretrained(tmp_path / "o", local_files_only=True)
    assert type(back).__name__ == "LlamaForCausalLM"
    prompt = torch.tensor([list(b"def f")])
    ours = sn.checkpoint.load_model(lt).eval()
    theirs = back.eval().generate(prompt, max_new_tokens=12, do_sample=False, pad_token_id=0)
    assert torch.equal(ours.generate(prompt, 12, temperature=0), theirs)
    assert main(["export", "--checkpoint", str(st), "--out", str(tmp_path / "p"),
                 "--format", "llama"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a llama model (scheme 'strang'" in err, err
    assert not (tmp_path / "p").exists()


# -- the tokenizer written beside the model (issue 61, item 3) --------------------------------

TEXTS = ["def f(x):\n    return x + 1\n", "naïve café — 東京 🙂", "  two  spaces\tand a tab"]


def _greedy_text(tok, encode, decode, m, back, prompt):
    """splitnet's greedy continuation of ``prompt`` decoded, and transformers' from the ids
    its own AutoTokenizer gives."""
    ours = m.generate(torch.tensor([encode(prompt)]), 12, temperature=0)[0].tolist()
    ids = tok(prompt, return_tensors="pt", add_special_tokens=False).input_ids
    theirs = back.generate(ids, max_new_tokens=12, do_sample=False, pad_token_id=0)[0].tolist()
    return decode(ours), tok.decode(theirs)


def test_a_byte_level_llama_leaves_with_a_tokenizer_of_the_same_ids(tmp_path, exact_norms):
    m = _llama_parts(vocab_size=256)
    assert sn.interop.to_hf(m, tmp_path, format="llama") == "llama"
    tok = tf.AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    back = tf.AutoModelForCausalLM.from_pretrained(tmp_path, local_files_only=True).eval()
    for t in TEXTS:
        assert tok.encode(t, add_special_tokens=False) == list(t.encode("utf-8")), t
        assert tok.decode(list(t.encode("utf-8"))) == t
    ours, theirs = _greedy_text(tok, lambda s: list(s.encode()),
                                lambda ids: bytes(ids).decode("utf-8", "replace"), m, back,
                                "def f(x):")
    assert ours == theirs


def test_a_bpe_model_leaves_with_its_bpe(tmp_path, exact_norms):
    """A causal network over splitnet's byte-level BPE (the tokenizer of mlm and translate's
    --bpe): the folder's AutoTokenizer encodes every text to the same ids, decodes them back,
    and greedy text from transformers equals splitnet's; imported back, the folder's
    tokenizer is the one analyses use."""
    from splitnet.translate.batches import train_bpe

    bpe = train_bpe(["def f(x):\n    return x + 1\n" * 40, "naïve café 東京 " * 40] + TEXTS, 300)
    m = _llama_parts(vocab_size=bpe.vocab_size)
    assert sn.interop.to_hf(m, tmp_path, format="llama", tokenizer=bpe) == "llama"
    tok = tf.AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    back = tf.AutoModelForCausalLM.from_pretrained(tmp_path, local_files_only=True).eval()
    for t in TEXTS:
        ids = bpe.encode(t)
        assert len(ids) < len(t.encode()) or t == TEXTS[2]       # merges, not bytes
        assert tok.encode(t, add_special_tokens=False) == ids == tok.encode(t), t
        assert tok.decode(ids) == t
    assert (tok.pad_token, tok.bos_token, tok.eos_token) == ("<pad>", "<s>", "</s>")
    ours, theirs = _greedy_text(tok, bpe.encode, lambda ids: bpe.tokenizer.decode(ids), m, back,
                                "def f(x):")
    assert ours == theirs
    imp = sn.interop.load_hf_for_analysis(tmp_path)
    assert imp.encode(TEXTS[1]).tolist() == bpe.encode(TEXTS[1])


def test_a_tokenizer_larger_than_the_vocabulary_is_refused(tmp_path):
    from splitnet.translate.batches import train_bpe

    bpe = train_bpe(["def f(x):\n    return x + 1\n" * 40], 300)
    with pytest.raises(ValueError, match="more than the model's vocabulary of 97"):
        sn.interop.to_hf(_llama_parts(), tmp_path / "hf", format="llama", tokenizer=bpe)
    assert not (tmp_path / "hf").exists()
