"""Models in and out of Hugging Face transformers (splitnet.interop, splitnet.hf, splitnet export).

GPT-2 imports are checked against randomly initialised small GPT2Config models (no weights are
downloaded), exports by loading them back through AutoModelForCausalLM; all in float64. Tests
that need transformers skip cleanly without it; the missing-dependency message is tested
either way."""

from __future__ import annotations

import importlib.util
import math

import pytest
import torch

import splitnet as sn
from splitnet import checkpoint as ck
from splitnet.cli import main
from splitnet.configs.config import MissingDependency

TEXT = "def f(x):\n    return x * 2  # ünï\n" * 3


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("transformers")


def _gpt2(tf, seed=0, **kw):
    """A random small GPT-2 in float64 with non-trivial LayerNorms (so their map is tested)."""
    torch.manual_seed(seed)
    cfg = {"vocab_size": 300, "n_positions": 24, "n_embd": 32, "n_layer": 3, "n_head": 4,
           "bos_token_id": None, "eos_token_id": None}
    g = tf.GPT2LMHeadModel(tf.GPT2Config(**{**cfg, **kw})).double().eval()
    with torch.no_grad():
        for name, p in g.named_parameters():
            if "ln" in name:
                p.add_(0.3 * torch.randn_like(p))
    return g


def _perturbed(model: sn.SplitTransformer, seed=0) -> sn.SplitTransformer:
    """Every parameter moved off its initial value (norms, biases), float64, eval mode."""
    torch.manual_seed(seed)
    model = model.double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model


def _greedy(model, idx, n):
    """The plain greedy loop over splitnet's forward: append argmax of the last logits."""
    for _ in range(n):
        idx = torch.cat([idx, model(idx)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return idx


# ----------------------------------------------------------------------------------- import

@pytest.mark.parametrize("act", ["gelu_new", "gelu_pytorch_tanh", "gelu", "relu"])
def test_gpt2_import_gives_the_same_logits(tf, act):
    g = _gpt2(tf, activation_function=act, n_inner=48, layer_norm_epsilon=1e-3)
    m = sn.interop.from_hf(g)
    assert isinstance(m, sn.SplitTransformer)
    c = m.config
    assert (c.scheme, c.weights, c.step_size, c.d_ff, c.max_len, c.norm_eps) == (
        "lie-trotter", "shared", 1.0, 48, 24, 1e-3)
    assert m.head.weight is m.tok_emb.weight
    idx = torch.randint(0, 300, (2, 24), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref, ours = g(idx).logits, m(idx)
    assert ours.dtype == torch.float64
    assert (ours - ref).abs().max() < 1e-10 * ref.abs().max()
    # causal: changing the last token changes no earlier logit, in both
    idx2 = idx.clone()
    idx2[:, -1] = (idx2[:, -1] + 1) % 300
    with torch.no_grad():
        assert torch.equal(m(idx2)[:, :-1], ours[:, :-1])
        assert (m(idx2)[:, -1] - ours[:, -1]).abs().max() > 1e-3


def test_gpt2_directory_imports_offline_in_its_dtype(tf, tmp_path):
    g = _gpt2(tf)
    g.save_pretrained(tmp_path / "gpt2")
    m = sn.interop.from_hf(tmp_path / "gpt2")
    assert next(m.parameters()).dtype == torch.float64
    idx = torch.randint(0, 300, (1, 10))
    with torch.no_grad():
        assert (m(idx) - g(idx).logits).abs().max() < 1e-10
    m32 = sn.interop.from_hf(str(tmp_path / "gpt2"), dtype=torch.float32)
    assert next(m32.parameters()).dtype == torch.float32


@pytest.mark.parametrize("kw, pattern", [
    ({"scale_attn_by_inverse_layer_idx": True}, "scale_attn_by_inverse_layer_idx"),
    ({"scale_attn_weights": False}, "scale_attn_weights"),
    ({"activation_function": "quick_gelu"}, "no exact splitnet counterpart"),
])
def test_a_gpt2_that_is_not_a_pre_norm_transformer_is_refused(tf, kw, pattern):
    with pytest.raises(ValueError, match=pattern):
        sn.interop.from_hf(_gpt2(tf, **kw))


def test_an_untied_gpt2_imports_untied_and_exports_as_splitnet(tf, tmp_path):
    """tie_word_embeddings=False with its own head: the head is copied (was refused)."""
    import warnings

    g = _gpt2(tf, tie_word_embeddings=False)
    with torch.no_grad():
        g.lm_head.weight.add_(1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)   # the config says untied: nothing to say
        m = sn.interop.from_hf(g)
    assert not m.config.tie_head
    idx = torch.randint(0, 300, (2, 12), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert (m(idx) - g(idx).logits).abs().max() < 1e-10
    assert "an untied head" in sn.interop.gpt2_mismatch(m)
    assert sn.interop.to_hf(m, tmp_path / "out") == "splitnet"


def test_bad_directories_are_one_clear_error(tf, tmp_path):
    with pytest.raises(ValueError, match="not a directory"):
        sn.interop.from_hf(tmp_path / "nowhere")        # never tried on the Hub
    with pytest.raises(ValueError, match=r"no config\.json"):
        sn.interop.from_hf(tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(ValueError, match="'bert' model"):
        sn.interop.from_hf(tmp_path)
    with pytest.raises(TypeError, match="GPT2LMHeadModel"):
        sn.interop.from_hf(torch.nn.Linear(2, 2))


# ----------------------------------------------------------------------------------- export

MODELS = {   # the four round trips the issue names, and a custom scheme stored as data
    "lie-trotter": {"scheme": "lie-trotter", "weights": "shared", "activation": "gelu_tanh"},
    "strang per-stage": {"scheme": "strang", "weights": "per-stage"},
    "yoshida4 shared": {"scheme": "yoshida4", "weights": "shared", "step_size": 0.5},
    "pattern sssfsfff": {"scheme": "sssfsfff", "weights": "per-stage", "step_size": 4.0},
    "custom stages": {"scheme": sn.SplittingScheme.from_stages(
        [("convection", 0.3), ("diffusion", 1.0), ("convection", 0.7)], order=1, name="mine"),
        "weights": "per-stage", "gate": "tanh", "gate_layers": (1,)},
}


def _model(**kw):
    torch.manual_seed(0)
    base = {"vocab_size": 256, "d_model": 16, "n_heads": 2, "n_layers": 2, "max_len": 32}
    return _perturbed(sn.SplitTransformer(**{**base, **kw}))


@pytest.mark.parametrize("name", MODELS)
def test_export_round_trip_through_auto_model(tf, name, tmp_path):
    m = _model(**MODELS[name])
    fmt = sn.interop.to_hf(m, tmp_path / "hf")
    assert fmt == ("gpt2" if name == "lie-trotter" else "splitnet")
    assert (tmp_path / "hf" / "model.safetensors").is_file()
    back = tf.AutoModelForCausalLM.from_pretrained(tmp_path / "hf", local_files_only=True)
    assert type(back).__name__ == ("GPT2LMHeadModel" if fmt == "gpt2"
                                   else "SplitTransformerForCausalLM")
    assert back.dtype == torch.float64
    idx = torch.randint(0, 256, (2, 32), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        ref = m(idx)
        assert (back(idx).logits - ref).abs().max() < 1e-10 * ref.abs().max()
        # save_pretrained of what was loaded, loaded again: still the same model
        back.save_pretrained(tmp_path / "again")
        again = tf.AutoModelForCausalLM.from_pretrained(tmp_path / "again")
        assert (again(idx).logits - ref).abs().max() < 1e-10 * ref.abs().max()
        # and into splitnet again
        assert (sn.interop.from_hf(tmp_path / "again")(idx) - ref).abs().max() \
            < 1e-10 * ref.abs().max()
        # greedy generate() equals the plain greedy loop over splitnet's forward, and
        # splitnet's own cached generation
        prompt = idx[:, :6]
        out = back.generate(prompt, max_new_tokens=10, do_sample=False)
        assert torch.equal(out, _greedy(m, prompt, 10))
        assert torch.equal(out, m.generate(prompt, max_new_tokens=10, temperature=0))


def test_the_stored_config_is_the_split_config_as_data(tf, tmp_path):
    import json

    m = _model(**MODELS["custom stages"])
    sn.interop.to_hf(m, tmp_path)
    stored = json.loads((tmp_path / "config.json").read_text())
    assert stored["model_type"] == "splitnet"
    assert sn.models.SplitConfig.from_dict(stored["split_config"]) == m.config
    assert stored["split_config"]["scheme"]["stages"][0] == ["convection", 0.3]


@pytest.mark.parametrize("change, reason", [
    ({"step_size": 0.5}, "step size"), ({"scheme": "strang"}, "not Lie"),
    ({"method": "midpoint"}, "midpoint"), ({"gate": "sigmoid"}, "gates")])
def test_only_an_exact_gpt2_is_written_as_one(tf, change, reason, tmp_path):
    m = _model(**change)
    assert reason in sn.interop.gpt2_mismatch(m)
    with pytest.raises(ValueError, match="not a GPT-2"):
        sn.interop.to_hf(m, tmp_path / "x", format="gpt2")
    assert not (tmp_path / "x").exists()
    assert sn.interop.to_hf(m, tmp_path / "y") == "splitnet"
    assert sn.interop.gpt2_mismatch(_model(weights="per-stage")) is None


def test_a_masked_language_model_is_not_exported_as_a_causal_lm(tf, tmp_path):
    """Issue 49 D12: AutoModelForCausalLM would generate from a bidirectional model; every
    format refuses it, before anything is written."""
    m = _model(causal=False)
    assert "bidirectional" in sn.interop.gpt2_mismatch(m)
    for fmt in ("auto", "gpt2", "splitnet"):
        with pytest.raises(ValueError, match=r"bidirectional \(causal=False"):
            sn.interop.to_hf(m, tmp_path / fmt, format=fmt)
        assert not (tmp_path / fmt).exists()


@pytest.mark.parametrize("change, reason", [
    ({"diffusion_field": "conv"}, "diffusion field kind 'conv' has no GPT-2 counterpart (GPT-2 "
                                  "maps attention, feedforward)"),
    ({"gate": "tanh", "gate_fields": "convection"}, "SDU gates on the convection field"),
    ({"init": "xavier"}, "init 'xavier' scales the token embedding by sqrt(d_model)")])
def test_the_gpt2_check_reads_the_kinds_declarations(change, reason):
    """A field whose kind declares no GPT-2 map is refused before any weight is copied (no
    transformers needed to say why)."""
    why = sn.interop.gpt2_mismatch(_model(**change))
    assert reason in why and why.count(";") == 0          # the one reason, once per field


def test_export_copies_what_the_kinds_declare(tf):
    from splitnet.configs.kinds import KINDS
    from splitnet.interop.convert import _gpt2_pairs

    m = _model()
    hf = tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=256, n_positions=32, n_embd=16,
                                          n_layer=2, n_head=2))
    pairs = _gpt2_pairs(m, hf.transformer)
    per_layer = sum(len(KINDS[k].gpt2) for k in ("attention", "feedforward"))
    assert len(pairs) == 3 + 2 * per_layer
    assert pairs[3 + 1] == (m.layers[0].diffusion.qkv, hf.transformer.h[0].attn.c_attn)


def test_the_byte_tokenizer_is_splitnets_byte_encoding(tf, tmp_path):
    tok = sn.interop.byte_tokenizer()
    assert tok.encode(TEXT) == list(TEXT.encode("utf-8"))
    assert tok.decode(tok.encode(TEXT)) == TEXT
    sn.interop.to_hf(_model(), tmp_path)
    loaded = tf.AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    assert loaded.encode(TEXT) == list(TEXT.encode("utf-8"))


# --------------------------------------------------------------------------------- analyses

def _bpe_tokenizer(tf, vocab_size=300):
    """A small byte-level BPE tokenizer trained here (offline), GPT-2 style."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([TEXT * 20, "for i in range(n):\n"] * 5, trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    return tf.PreTrainedTokenizerFast(tokenizer_object=tok)


@pytest.fixture
def gpt2_dir(tf, tmp_path):
    d = tmp_path / "gpt2"
    _gpt2(tf).save_pretrained(d)
    _bpe_tokenizer(tf).save_pretrained(d)
    return d


def test_trajectories_of_an_imported_model_use_its_tokenizer(gpt2_dir):
    imp = sn.interop.load_hf_for_analysis(gpt2_dir)
    assert imp.tokenizer is not None
    text = "for i in range(n):"
    ids = imp.tokenizer.encode(text)
    assert len(ids) < len(text.encode())          # real BPE merges, not bytes
    traj = sn.trajectories.collect(imp.model, text, tokenizer=imp.tokenizer, continuous=True,
                                   points_per_layer=4)
    assert traj.tokens == tuple(ids)
    assert "".join(traj.labels).replace("\u2423", " ") == text
    assert traj.n_points == 1 + 3 * 2 and traj.path is not None
    with torch.no_grad():
        _, states = imp.model(torch.tensor([ids]), return_states=True)
    assert torch.equal(traj.states, states[:, 0])


def test_discretization_gap_of_an_imported_model(gpt2_dir):
    imp = sn.interop.load_hf_for_analysis(gpt2_dir)
    res = sn.analysis.discretization_gap(imp.model, imp.encode("for i in range(n):")[None],
                                         progress=False)
    assert res.scheme == "lie-trotter" and len(res.local) == 3
    assert all(math.isfinite(v) and v > 0 for v in res.local)
    # layer 0 starts from the embedding on both paths: local and cumulative coincide there
    assert res.cumulative[0] == pytest.approx(res.local[0], rel=1e-12)


def test_evaluate_counts_bits_per_byte(tf, tmp_path):
    m = _model()
    sn.interop.to_hf(m, tmp_path)
    imp = sn.interop.load_hf_for_analysis(tmp_path)
    r = imp.evaluate(TEXT)
    # bytes are the tokens: predicted bytes = all but the first of each window of 32
    n = len(TEXT.encode())
    assert r["tokens"] == r["bytes"] == n - math.ceil(n / 32)
    assert r["bpb"] == pytest.approx(r["loss"] / math.log(2), rel=1e-12)
    nats = 0.0
    with torch.no_grad():
        for w in torch.tensor(list(TEXT.encode())).split(32):
            nats += float(torch.nn.functional.cross_entropy(m(w[None])[0, :-1], w[1:],
                                                            reduction="sum"))
    assert r["loss"] * r["tokens"] == pytest.approx(nats, rel=1e-12)
    other = imp.evaluate(TEXT, model=sn.trajectories.with_scheme(imp.model, "strang"))
    assert other["tokens"] == r["tokens"] and other["loss"] != pytest.approx(r["loss"])


def test_trajectories_command_on_a_hugging_face_directory(gpt2_dir, tmp_path, capsys):
    out = tmp_path / "t.png"
    assert main(["trajectories", "--hf", str(gpt2_dir), "--prompt", "for i in range(n):",
                 "--out", str(out), "--points-per-layer", "2"]) == 0
    printed = capsys.readouterr().out
    assert "Hugging Face" in printed and out.is_file()
    assert main(["trajectories", "--hf", str(gpt2_dir), "--checkpoint", str(gpt2_dir),
                 "--out", str(out)]) == 2
    assert "not both" in capsys.readouterr().err


@pytest.mark.heavy
def test_refine_command_on_a_hugging_face_directory(gpt2_dir, tmp_path, capsys):
    """``splitnet refine --hf``: loss in nats per token on consecutive windows of the model's
    context from --text; GPT-2 is Lie–Trotter, so its lie-trotter/euler/1 point is the model."""
    text = tmp_path / "t.txt"
    text.write_text(TEXT * 4)
    png, js = tmp_path / "r.png", tmp_path / "r.json"
    rc = main(["refine", "--hf", str(gpt2_dir), "--text", str(text), "--windows", "2",
               "--schemes", "lie-trotter,strang", "--substeps", "1,2", "--methods", "euler",
               "--out", str(png), "--json", str(js), "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0 and png.is_file() and "Hugging Face" in out and "nats/token" in out
    import json

    from splitnet import refine as R

    res = R.RefinementResult.from_dict(json.loads(js.read_text()))
    imp = sn.interop.load_hf_for_analysis(gpt2_dir)
    ids = imp.encode(TEXT * 4)
    ctx = imp.model.max_len
    with torch.no_grad():
        x = torch.stack([ids[:ctx], ids[ctx:2 * ctx]])
        y = torch.stack([ids[1:ctx + 1], ids[ctx + 1:2 * ctx + 1]])
        want = float(torch.nn.functional.cross_entropy(imp.model(x).reshape(-1, 300),
                                                       y.reshape(-1)))
    assert res.unit == "nats/token" and res.own.loss == pytest.approx(want, rel=1e-6)
    lt = next(p for p in res.points if (p.scheme, p.substeps) == ("lie-trotter", 1))
    assert lt.loss == res.own.loss
    assert next(p for p in res.points if p.scheme == "strang").loss != res.own.loss
    capsys.readouterr()
    for extra, message in (([], "--text goes with --hf"),
                           (["--hf", str(gpt2_dir)], "not allowed with argument")):
        try:
            rc = main(["refine", "--checkpoint", str(tmp_path), "--text", str(text), *extra,
                       "--out", str(png)])
        except SystemExit as e:                 # argparse's own errors exit
            rc = e.code
        err = capsys.readouterr().err
        assert rc == 2 and message in err and len(err.strip().splitlines()) == 1, err


# ----------------------------------------------------------------------------------- export command

def _checkpoint(folder, **kw):
    m = _model(**kw).float()
    ck.save({"version": ck.VERSION, "step": 0, "model_config": m.config.to_dict(),
             "model": m.state_dict()}, folder / ck.CKPT)
    return m


def test_export_command(tf, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    m = _checkpoint(run)
    assert main(["export", "--checkpoint", str(run), "--out", str(tmp_path / "hf")]) == 0
    out = capsys.readouterr().out
    assert "standard GPT-2" in out and "logit difference" in out
    back = tf.AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    idx = torch.randint(0, 256, (1, 12))
    with torch.no_grad():
        assert (back(idx).logits - m(idx)).abs().max() < 1e-5
    capsys.readouterr()
    # a non-empty directory needs --overwrite; nothing is written on refusal
    assert main(["export", "--checkpoint", str(run), "--out", str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err
    assert "--overwrite" in err and err.count("\n") == 1
    assert main(["export", "--checkpoint", str(run), "--out", str(tmp_path / "hf"),
                 "--overwrite"]) == 0
    strang = tmp_path / "strang"
    strang.mkdir()
    _checkpoint(strang, scheme="strang", weights="per-stage")
    assert main(["export", "--checkpoint", str(strang), "--out", str(tmp_path / "s"),
                 "--format", "gpt2"]) == 2
    assert "not a GPT-2" in capsys.readouterr().err and not (tmp_path / "s").exists()
    assert main(["export", "--checkpoint", str(strang), "--out", str(tmp_path / "s")]) == 0
    assert "splitnet model" in capsys.readouterr().out


# ------------------------------------------------------------------------ without the extra

def test_without_transformers_one_line_says_what_to_install(monkeypatch, tmp_path, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "transformers" else real(name, *a))
    with pytest.raises(ImportError, match=r"pip install 'splitnet\[hf\]'"):
        sn.interop.from_hf(tmp_path)
    with pytest.raises(MissingDependency):
        sn.interop.to_hf(_model(), tmp_path / "x")
    run = tmp_path / "run"
    run.mkdir()
    _checkpoint(run)
    assert main(["export", "--checkpoint", str(run), "--out", str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'splitnet[hf]'" in err
    assert not (tmp_path / "hf").exists()
