"""Text generation: the key/value cache is exact for every kind of layer, sampling is seeded,
bad input is refused, and `splitnet sample` streams N bytes from a trained checkpoint.

The reference everywhere is the plain definition, independent of splitnet.nets.generation: the next
greedy token is ``model(seq[:, -max_len:])[:, -1].argmax()``, one full forward per token.
Models are float64 with weights drawn at std 0.5 (at GPT-2's 0.02 a tiny tied model mostly
repeats its last token, and equal outputs would prove little).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import splitnet as sn
from splitnet import generation as G
from splitnet.cli import main
from splitnet.nets.models import SplitTransformer

V, MAX_LEN = 23, 12
MODELS = {
    "lie-trotter": {"scheme": "lie-trotter"},
    "strang per-stage": {"scheme": "strang", "weights": "per-stage"},
    "yoshida4 shared": {"scheme": "yoshida4"},
    "sssfsfff per-stage": {"scheme": "sssfsfff", "weights": "per-stage"},
    "strang gated": {"scheme": "strang", "gate": "sigmoid", "gate_layers": [1]},
    "strang midpoint": {"scheme": "strang", "method": "midpoint"},
    "yoshida4 rk4 per-stage": {"scheme": "yoshida4", "method": "rk4", "weights": "per-stage"},
}


def _model(seed=0, **kw) -> SplitTransformer:
    torch.manual_seed(seed)
    m = SplitTransformer(V, 16, 2, 2, max_len=MAX_LEN, **kw).double()
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.5)
    return m.eval()


def _prompt(T, B=2, seed=1) -> torch.Tensor:
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


def _greedy_reference(model, idx, n) -> torch.Tensor:
    seq = idx
    with torch.no_grad():
        for _ in range(n):
            nxt = model(seq[:, -model.max_len:])[:, -1].argmax(-1, keepdim=True)
            seq = torch.cat([seq, nxt], dim=1)
    return seq


def _no_full_forward(monkeypatch):
    """Make the cache-less path fail, to prove a generation used the cache."""
    def fail(model, idx):
        raise AssertionError("full forward used where the cache should be")
    monkeypatch.setattr(G, "forward_last", fail)


# ---------------------------------------------------------------------------------------------
# the cache is exact


@pytest.mark.parametrize("name", MODELS)
def test_cached_greedy_equals_uncached_within_context(name, monkeypatch):
    m = _model(**MODELS[name])
    idx = _prompt(4)
    ref = _greedy_reference(m, idx, MAX_LEN - 4)          # fills the context exactly
    assert len(set(ref[:, 4:].flatten().tolist())) >= 4   # a sequence that says something
    assert torch.equal(m.generate(idx, MAX_LEN - 4, temperature=0, use_cache=False), ref)
    _no_full_forward(monkeypatch)
    assert torch.equal(m.generate(idx, MAX_LEN - 4, temperature=0, use_cache=True), ref)


@pytest.mark.parametrize("name", MODELS)
def test_cached_greedy_equals_uncached_with_sliding_context(name):
    """Prompt + new tokens > max_len: the window slides (the last max_len tokens)."""
    m = _model(**MODELS[name])
    idx = _prompt(5)
    ref = _greedy_reference(m, idx, 2 * MAX_LEN)
    for use_cache in (None, True, False):
        assert torch.equal(m.generate(idx, 2 * MAX_LEN, temperature=0, use_cache=use_cache), ref)


def test_prompt_longer_than_the_context():
    m = _model(**MODELS["strang per-stage"])
    idx = _prompt(MAX_LEN + 7)
    out = m.generate(idx, 5, temperature=0)
    assert out.shape == (2, MAX_LEN + 12)
    assert torch.equal(out, _greedy_reference(m, idx, 5))
    assert torch.equal(out[:, :MAX_LEN + 7], idx)


def test_a_context_that_may_not_slide_is_refused_past_max_len():
    """``context_slides=False`` (an imported sliding attention window): every token predicted
    from the whole sequence; a request that would slide is one ValueError before any token,
    at exactly one token past the bound, and the same tokens as a sliding model within it."""
    m, slides = _model(context_slides=False), _model()
    for T in (1, 5, MAX_LEN):
        n = MAX_LEN - T + 1                        # the last token sees exactly MAX_LEN
        for use_cache in (None, False):
            assert torch.equal(m.generate(_prompt(T), n, temperature=0, use_cache=use_cache),
                               slides.generate(_prompt(T), n, temperature=0))
            with pytest.raises(ValueError, match=rf"context of {MAX_LEN} tokens may not slide.*"
                                                 rf"room for {n} new tokens \(asked for {n + 1}"):
                G.stream(m, _prompt(T), n + 1, temperature=0, use_cache=use_cache)
    assert torch.equal(m.generate(_prompt(MAX_LEN + 3), 0), _prompt(MAX_LEN + 3))
    with pytest.raises(ValueError, match=r"15-token prompt leaves no room for any \(asked for 1"):
        m.generate(_prompt(MAX_LEN + 3), 1)
    assert SplitTransformer.from_config(m.config.to_dict()).config.context_slides is False


@pytest.mark.parametrize("name", MODELS)
def test_cached_forward_in_chunks_equals_the_full_forward(name):
    """Logits of a sequence fed in chunks of 3, 1, 4, 4 tokens (a chunk after a non-empty cache
    uses the offset causal mask) equal the full forward's, row by row."""
    m = _model(**MODELS[name])
    seq = _prompt(MAX_LEN)
    cache = G.GenerationCache(m, MAX_LEN)
    with torch.no_grad():
        parts = [G.forward_cached(m, seq[:, a:b], cache) for a, b in
                 ((0, 3), (3, 4), (4, 8), (8, 12))]
        full = m(seq)
    assert cache.length == MAX_LEN
    torch.testing.assert_close(torch.cat(parts, dim=1), full, rtol=0, atol=1e-12)


def test_cache_count_is_one_per_attention_evaluation():
    def count(**kw):
        return G.GenerationCache(_model(**kw), MAX_LEN).n_caches()

    assert count(scheme="lie-trotter") == 2                        # 2 layers x 1 stage
    assert count(scheme="yoshida4") == 2 * 3                       # shared module, 3 stages
    assert count(scheme="yoshida4", weights="per-stage") == 2 * 3
    assert count(scheme="strang", method="midpoint") == 2 * 1 * 2  # 2 evaluations
    assert count(scheme="yoshida4", method="rk4") == 2 * 3 * 4


@pytest.mark.parametrize("share", ["per-module", "per-stage-not-per-evaluation"])
def test_control_sharing_a_cache_breaks_exactness(share):
    """Why each stage and each evaluation has its own cache: sharing one (a shared attention
    module's three stages; midpoint's two evaluations) mixes keys of different states and the
    logits come out wrong."""
    kw = {"scheme": "yoshida4"} if share == "per-module" else \
        {"scheme": "strang", "method": "midpoint"}
    m = _model(**kw)
    seq = _prompt(6)
    cache = G.GenerationCache(m, 4 * MAX_LEN)
    for layer in cache.layers:
        stages = [i for i, c in enumerate(layer) if c is not None]
        one = G.KVCache(4 * MAX_LEN)
        for i in stages:
            layer[i] = [one] * len(layer[i]) if share != "per-module" else \
                [one] + layer[i][1:]
    with torch.no_grad():
        logits = torch.cat([G.forward_cached(m, seq[:, :3], cache),
                            G.forward_cached(m, seq[:, 3:], cache)], dim=1)
        full = m(seq)
    assert (logits - full).abs().max() > 1e-3


def test_exact_method_generates_without_cache_and_non_causal_not_at_all():
    m = _model(method="exact").float()   # float32: dopri5 at float64 tolerances takes seconds
    assert "adaptive" in G.cache_unsupported(m)
    idx = _prompt(3, B=1)
    assert torch.equal(m.generate(idx, 2, temperature=0), _greedy_reference(m, idx, 2))
    with pytest.raises(ValueError, match="adaptive"):
        m.generate(idx, 3, use_cache=True)
    # a bidirectional model (a masked LM) is refused by every door (issue 49 D12): it reads the
    # tokens after each one, so "continuing" it is no model of the text
    enc = _model(causal=False).float()
    assert "not causal" in G.cache_unsupported(enc)
    for use_cache in (None, False):
        with pytest.raises(ValueError, match=r"bidirectional \(causal=False"):
            enc.generate(idx, 2, use_cache=use_cache)


# ---------------------------------------------------------------------------------------------
# sum stages and field kinds: generation asks each stage's field

SUM = "c:0.25,d:0.5,d+c:0.5,c:0.25"       # a sum stage d+c beside plain stages
SUM_MODELS = {
    "sum shared": {"scheme": SUM},
    "sum per-stage gated": {"scheme": SUM, "weights": "per-stage", "gate": "tanh"},
    "sum rk4": {"scheme": SUM, "method": "rk4"},
    "parallel": {"scheme": "parallel"},
}


def _sum_model(name):
    kw = dict(SUM_MODELS[name])
    if kw["scheme"] == "parallel":           # one stage d+c:1: x + D(x) + C(x), GPT-J's block
        kw["scheme"] = sn.SplittingScheme.from_stages([("d+c", 1.0)], order=1, name="parallel")
    return _model(**kw)


@pytest.mark.parametrize("name", SUM_MODELS)
def test_sum_stages_generate_exactly_with_the_cache(name, monkeypatch):
    """The cache of a sum stage goes to its attention component: cached greedy equals the
    plain definition, within the context and sliding past it."""
    m = _sum_model(name)
    assert G.cache_unsupported(m) is None
    idx = _prompt(4)
    ref = _greedy_reference(m, idx, MAX_LEN - 4)
    assert len(set(ref[:, 4:].flatten().tolist())) >= 4
    assert torch.equal(m.generate(idx, MAX_LEN - 4, temperature=0, use_cache=False), ref)
    seq = _prompt(MAX_LEN)
    cache = G.GenerationCache(m, MAX_LEN)
    with torch.no_grad():
        parts = [G.forward_cached(m, seq[:, a:b], cache) for a, b in ((0, 5), (5, 6), (6, 12))]
        torch.testing.assert_close(torch.cat(parts, dim=1), m(seq), rtol=0, atol=1e-12)
    _no_full_forward(monkeypatch)
    assert torch.equal(m.generate(idx, MAX_LEN - 4, temperature=0, use_cache=True), ref)


def test_sum_stage_caches_are_counted_and_needed():
    m = _sum_model("sum rk4")
    cache = G.GenerationCache(m, MAX_LEN)
    assert [[c is not None for c in layer] for layer in cache.layers] == \
        [[False, True, True, False]] * 2                   # d and d+c take caches, c none
    assert cache.n_caches() == 2 * 2 * 4
    # control: without its cache the sum stage's attention sees only the new tokens
    for layer in cache.layers:
        layer[2] = None
    seq = _prompt(6)
    with torch.no_grad():
        logits = torch.cat([G.forward_cached(m, seq[:, :3], cache),
                            G.forward_cached(m, seq[:, 3:], cache)], dim=1)
        assert (logits - m(seq)).abs().max() > 1e-3


def test_conv_field_generates_with_a_cache_of_its_window():
    """A causal conv keeps its window's inputs in a cache: cached generation equals one forward
    of the window per token, past max_len (the window slides) too; gated and in a sum stage
    alike."""
    models = [_model(scheme="strang", diffusion_field="conv", conv_kernel=2),
              _model(diffusion_field="conv", gate="sigmoid", gate_layers=[0], scheme=SUM),
              _model(diffusion_field="conv", scheme="c:0.25,d+c:0.5,d:0.5,c:0.25"),
              _model(diffusion_field="conv", conv_kernel=4, method="midpoint")]
    idx = _prompt(5)
    for m in models:
        assert G.cache_unsupported(m) is None
        ref = _greedy_reference(m, idx, 2 * MAX_LEN)       # one forward of the window per token
        assert len(set(ref[:, 5:].flatten().tolist())) >= 4
        for use_cache in (None, True, False):
            assert torch.equal(m.generate(idx, 2 * MAX_LEN, temperature=0, use_cache=use_cache),
                               ref)
    m = models[0]
    cache = G.GenerationCache(m, MAX_LEN)
    with torch.no_grad():
        whole = m(idx)
        parts = torch.cat([G.forward_cached(m, idx[:, :3], cache),
                           G.forward_cached(m, idx[:, 3:4], cache),
                           G.forward_cached(m, idx[:, 4:], cache)], dim=1)
    torch.testing.assert_close(parts, whole, rtol=0, atol=1e-5)


def test_a_sum_takes_a_cache_only_when_its_other_parts_are_position_wise():
    from splitnet.fields import Attention, FeedForward, GLUConv
    from splitnet.integrators.flows import SumField

    att = Attention(16, 2, causal=True)
    assert SumField([att, FeedForward(16, 32)], [0.0, 0.0]).supports_cache
    assert not SumField([att, GLUConv(16)], [0.0, 0.0]).supports_cache
    assert not SumField([att, lambda t, x: x], [0.0, 0.0]).supports_cache   # unknown: mixes
    assert not SumField([Attention(16, 2), FeedForward(16, 32)], [0.0, 0.0]).supports_cache


def test_batch_rows_are_independent():
    m = _model(**MODELS["yoshida4 shared"])
    idx = _prompt(4, B=3)
    out = m.generate(idx, 6, temperature=0)
    for b in range(3):
        assert torch.equal(out[b:b + 1], m.generate(idx[b:b + 1], 6, temperature=0))


# ---------------------------------------------------------------------------------------------
# sampling


def test_same_seed_same_sample_and_top_k_one_is_greedy():
    m = _model(**MODELS["strang per-stage"])
    idx = _prompt(4)

    def draw(seed, **kw):
        return m.generate(idx, 16, generator=torch.Generator().manual_seed(seed), **kw)

    a, b, c = draw(0, top_k=5), draw(0, top_k=5), draw(1, top_k=5)
    assert torch.equal(a, b) and not torch.equal(a, c)
    torch.manual_seed(3)
    g1 = m.generate(idx, 16, temperature=0.7)
    torch.manual_seed(3)
    assert torch.equal(g1, m.generate(idx, 16, temperature=0.7))    # global RNG, seeded
    greedy = m.generate(idx, 16, temperature=0)
    assert torch.equal(draw(5, top_k=1), greedy)
    assert torch.equal(draw(5, temperature=1e-9), greedy)
    assert torch.equal(draw(0, top_k=5, use_cache=False), a)       # cache changes nothing


def test_top_k_draws_only_among_the_k_largest():
    m = _model(**MODELS["lie-trotter"])
    out = m.generate(_prompt(3, B=4), 8, top_k=3, temperature=2.0,
                     generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = m(out[:, :-1])[:, 2:]                                # predicts tokens 3..
    top3 = logits.topk(3, dim=-1).indices
    assert (top3 == out[:, 3:, None]).any(-1).all()
    assert not (logits.argmax(-1) == out[:, 3:]).all()               # not simply greedy


def test_sample_function():
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0]], dtype=torch.float64)
    assert G.sample(logits, 0).tolist() == [[1]]
    g = torch.Generator().manual_seed(0)
    draws = torch.cat([G.sample(logits, 1.0, top_k=2, generator=g) for _ in range(400)])
    assert set(draws.flatten().tolist()) == {1, 3}
    frac = (draws == 1).double().mean().item()      # p(1) = e^3 / (e^3 + e^2) = 0.731
    assert abs(frac - 0.731) < 0.07
    assert G.sample(logits, 1e-300).tolist() == [[1]]                # no overflow to NaN
    assert G.sample(logits.bfloat16(), 1.0, top_k=10, generator=g).shape == (1, 1)


# ---------------------------------------------------------------------------------------------
# contract: shapes, modes, errors


def test_mode_grad_and_zero_tokens():
    m = _model(**MODELS["strang gated"]).train()
    idx = _prompt(4)
    out = m.generate(idx, 3)
    assert out.dtype == torch.int64 and out.shape == (2, 7) and not out.requires_grad
    assert m.training and all(p.grad is None for p in m.parameters())
    assert torch.equal(m.generate(idx, 0), idx)
    m.eval()
    m.generate(idx, 2)
    assert not m.training
    it = G.stream(m.train(), idx, 5)
    next(it)
    assert not m.training                                 # eval while streaming
    it.close()
    assert m.training                                     # restored when closed


@pytest.mark.parametrize("call, err, match", [
    (lambda m, i: m.generate(i.float(), 2), TypeError, "int64"),
    (lambda m, i: m.generate([[1, 2]], 2), TypeError, "torch.Tensor"),
    (lambda m, i: m.generate(i[0], 2), ValueError, "batch, seq"),
    (lambda m, i: m.generate(i[:, :0], 2), ValueError, "seq >= 1"),
    (lambda m, i: m.generate(i + V, 2), ValueError, r"\[0, 23\)"),
    (lambda m, i: m.generate(i - 30, 2), ValueError, r"\[0, 23\)"),
    (lambda m, i: m.generate(i, -1), ValueError, "max_new_tokens"),
    (lambda m, i: m.generate(i, 2.0), ValueError, "max_new_tokens"),
    (lambda m, i: m.generate(i, True), ValueError, "max_new_tokens"),
    (lambda m, i: m.generate(i, 2, temperature=-0.5), ValueError, "temperature"),
    (lambda m, i: m.generate(i, 2, temperature=float("nan")), ValueError, "temperature"),
    (lambda m, i: m.generate(i, 2, temperature=float("inf")), ValueError, "temperature"),
    (lambda m, i: m.generate(i, 2, temperature="1"), ValueError, "temperature"),
    (lambda m, i: m.generate(i, 2, top_k=0), ValueError, "top_k"),
    (lambda m, i: m.generate(i, 2, top_k=2.5), ValueError, "top_k"),
    (lambda m, i: m.generate(i, 2, top_k=True), ValueError, "top_k"),
    (lambda m, i: m.generate(i, 2, generator=0), TypeError, "generator"),
    (lambda m, i: m.generate(i, 2, use_cache="yes"), TypeError, "use_cache"),
    (lambda m, i: G.stream(m, i, -1), ValueError, "max_new_tokens"),   # at the call
])
def test_bad_arguments(call, err, match):
    with pytest.raises(err, match=match):
        call(_model(), _prompt(3))


def test_cache_errors():
    c = G.KVCache(4)
    k = torch.zeros(1, 2, 3, 8)
    c.append(k, k)
    with pytest.raises(ValueError, match="capacity 4"):
        c.append(k, k)
    with pytest.raises(ValueError, match="capacity"):
        G.KVCache(0)
    enc = SplitTransformer(V, 16, 2, 1, causal=False, max_len=8)
    with pytest.raises(ValueError, match="causal"):
        enc.layers[0].diffusion(0.0, torch.zeros(1, 2, 16), cache=G.KVCache(8))
    with pytest.raises(ValueError, match="cannot use a key/value cache"):
        G.GenerationCache(enc, 8)


# ---------------------------------------------------------------------------------------------
# splitnet sample


TRAIN = ["--d-model", "32", "--n-heads", "2", "--n-layers", "2", "--context", "32",
         "--batch-size", "8", "--steps", "3", "--threads", "1", "--no-progress", "--no-plot",
         "--scheme", "strang", "--weights", "per-stage"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A checkpoint made by a tiny `splitnet train` run."""
    d = tmp_path_factory.mktemp("sample")
    text = d / "corpus.txt"
    text.write_text("".join(f"def f{i}(x):\n    return x * {i % 7}\n" for i in range(300)))
    assert main(["train", *TRAIN, "--text", str(text), "--out", str(d / "run")]) == 0
    return d / "run"


def _sample(capsysbinary, *argv):
    rc = main(["sample", *argv])
    out, err = capsysbinary.readouterr()
    return rc, out, err.decode()


def test_sample_writes_n_bytes_reproducibly(run_dir, capsysbinary):
    args = ["--checkpoint", str(run_dir), "--prompt", "def f", "--max-new-tokens", "50",
            "--top-k", "40", "--seed", "7"]
    rc, out, err = _sample(capsysbinary, *args)
    assert rc == 0 and len(out) == 50
    assert "50 tokens" in err and "tokens/s" in err and "key/value cache" in err
    assert _sample(capsysbinary, *args)[1] == out
    assert _sample(capsysbinary, *args[:-1], "8")[1] != out


def test_sample_greedy_matches_generate_and_empty_prompt_starts_at_newline(run_dir,
                                                                            capsysbinary):
    from splitnet.runs.checkpoint import load_model

    model = load_model(run_dir)
    for prompt, start in (("é = ", "é = ".encode()), ("", b"\n")):
        rc, out, _ = _sample(capsysbinary, "--checkpoint", str(run_dir), "--prompt", prompt,
                             "--max-new-tokens", "40", "--temperature", "0", "--device", "cpu")
        ref = model.generate(torch.tensor([list(start)]), 40, temperature=0)
        assert rc == 0 and out == bytes(ref[0, len(start):].tolist())
    long = "x = 1\n" * 10                                   # 60 bytes > context 32: slides
    rc, out, err = _sample(capsysbinary, "--checkpoint", str(run_dir), "--prompt", long,
                           "--max-new-tokens", "5")
    assert rc == 0 and len(out) == 5 and "no cache" in err
    rc, out, err = _sample(capsysbinary, "--checkpoint", str(run_dir), "--prompt", long[:30],
                           "--max-new-tokens", "10")
    assert rc == 0 and len(out) == 10 and "cache for 3 tokens" in err


@pytest.mark.parametrize("argv, match", [
    (["--max-new-tokens", "-5"], "integer >= 0"),
    (["--temperature", "-1"], "number >= 0"),
    (["--temperature", "nan"], "finite number"),
    (["--top-k", "0"], "positive integer"),
    (["--seed", "x"], "integer >= 0"),
    (["--device", "tpu"], "invalid choice"),
])
def test_sample_bad_options_exit_2_with_one_line(run_dir, argv, match, capsys):
    with pytest.raises(SystemExit) as e:
        main(["sample", "--checkpoint", str(run_dir), *argv])
    out, err = capsys.readouterr()
    assert e.value.code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and match in err


def test_sample_bad_checkpoint_exits_2_with_one_line(tmp_path, capsys):
    bad = tmp_path / "checkpoint.pt"
    bad.write_bytes(b"not a checkpoint")
    for ck in (tmp_path / "missing", tmp_path):
        assert main(["sample", "--checkpoint", str(ck)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and len(err.strip().splitlines()) == 1
        assert err.startswith("splitnet sample: error:")
    if not torch.cuda.is_available():
        assert main(["sample", "--checkpoint", str(tmp_path), "--device", "cuda"]) == 2
        assert "no CUDA device" in capsys.readouterr().err


@pytest.mark.heavy
def test_sample_streams_and_stops_when_the_reader_goes(run_dir):
    """The real command: bytes arrive before the run ends, and a closed pipe (``| head -c``)
    stops it quietly with status 0."""
    p = subprocess.Popen([sys.executable, "-m", "splitnet", "sample", "--checkpoint",
                          str(run_dir), "--max-new-tokens", "1000000", "--device", "cpu"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    first = p.stdout.read(20)        # a million tokens would take minutes: these stream
    p.stdout.close()
    _, err = p.communicate(timeout=120)
    assert len(first) == 20 and p.returncode == 0, err.decode()[-2000:]
    assert b"Traceback" not in err and b"tokens/s" in err


# ---------------------------------------------------------------------------------------------
# the benchmark runs


@pytest.mark.heavy
def test_bench_generate_runs(tmp_path):
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_generate.py"
    out = tmp_path / "g.json"
    r = subprocess.run([sys.executable, str(path), "--d-model", "16", "--n-heads", "2",
                        "--n-layers", "1", "--prompt", "4", "--new-tokens", "6", "--reps", "1",
                        "--schemes", "lie-trotter,strang:per-stage", "--json", str(out)],
                       capture_output=True, text=True, timeout=300, check=False,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(x["scheme"], x["weights"]) for x in rows] == [("lie-trotter", "shared"),
                                                           ("strang", "per-stage")]
    assert all(x["cached_tok_s"] > 0 and x["uncached_tok_s"] > 0 and x["same_tokens"]
               for x in rows)
