"""Layers dropped and merged on imported models (issue 61, item 4): each measured cost against
a transformers model built independently (the layer removed; the pair's mean weights with its
residual branch doubled, a step of 2 h), Block Influence against a hand computation from
transformers' own hidden states, and the refusals."""

import copy
import math

import pytest
import torch

import splitnet as sn
from splitnet.analyses.redundancy import (
    LayerStudy,
    block_influence,
    coarsen_pair,
    drop_layer,
    layer_study,
    mergeable,
    ranks,
)

tf = pytest.importorskip("transformers")
L, V = 4, 97


def _family(name):
    torch.manual_seed(3)
    if name == "gpt2":
        c = tf.GPT2Config(vocab_size=V, n_positions=32, n_embd=32, n_layer=L, n_head=4,
                          resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        m = tf.GPT2LMHeadModel(c)
    else:
        cls, cfg = {"llama": (tf.LlamaForCausalLM, tf.LlamaConfig),
                    "qwen3": (tf.Qwen3ForCausalLM, tf.Qwen3Config),
                    "olmo2": (tf.Olmo2ForCausalLM, tf.Olmo2Config)}[name]
        extra = {"head_dim": 16} if name == "qwen3" else {}
        m = cls(cfg(vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=L,
                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                    **extra))
    m = m.double().eval()
    with torch.no_grad():      # norms off one, every layer different: a wrong map would show
        for n, p in m.named_parameters():
            if "norm" in n or ".ln_" in n:
                p.add_(0.3 * torch.randn_like(p))
    return m


def _blocks(m):
    return m.transformer.h if hasattr(m, "transformer") else m.model.layers


def _doubled(name: str, family: str) -> bool:
    """The parameters whose doubling doubles a block's residual branches (a step of 2 h)."""
    if family == "olmo2":              # x + N(f(x)): the post-norm's weight scales the branch
        return name.startswith(("post_attention_layernorm", "post_feedforward_layernorm"))
    return name.startswith(("attn.c_proj", "mlp.c_proj", "self_attn.o_proj", "mlp.down_proj"))


def _without(m, k):
    r = copy.deepcopy(m)
    blocks = _blocks(r)
    del blocks[k]
    return r


def _merged(m, k, family):
    """transformers' model with blocks k, k+1 replaced by one block of their mean weights,
    each residual branch doubled: the pair as one step of 2 h, built without splitnet."""
    r = copy.deepcopy(m)
    blocks = _blocks(r)
    other = dict(blocks[k + 1].named_parameters())
    with torch.no_grad():
        for n, p in blocks[k].named_parameters():
            p.copy_((p + other[n]) / 2 * (2 if _doubled(n, family) else 1))
    del blocks[k + 1]
    return r


def _loss(hf_model, batches):
    """Mean cross-entropy in float64 (validation_loss's is float32's)."""
    tot, n = 0.0, 0
    with torch.no_grad():
        for x, y in batches:
            lg = hf_model(x, use_cache=False).logits
            tot += float(torch.nn.functional.cross_entropy(lg.reshape(-1, V), y.reshape(-1),
                                                           reduction="sum"))
            n += y.numel()
    return tot / n


def _evaluate(batches):
    def evaluate(m):
        with torch.no_grad():
            return sum(float(torch.nn.functional.cross_entropy(
                m(x).reshape(-1, V), y.reshape(-1), reduction="sum")) for x, y in batches) / \
                sum(y.numel() for _, y in batches)
    return evaluate


def _batches():
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(0, V, (6, 13), generator=g)
    return [(ids[:3, :-1], ids[:3, 1:]), (ids[3:, :-1], ids[3:, 1:])]


FAMILIES = ["llama", "qwen3", "olmo2", "gpt2"]


@pytest.mark.parametrize("family", FAMILIES)
def test_each_cost_is_the_loss_of_a_model_built_without_splitnet(family, exact_norms):
    src = _family(family)
    model = sn.interop.from_hf(src)
    batches = _batches()
    study = layer_study(model, _evaluate(batches))
    base = _loss(src, batches)
    assert abs(study.loss - base) < 1e-12
    for k in range(L):
        assert abs(study.drop[k] - _loss(_without(src, k), batches)) < 1e-12, k
    for k in range(L - 1):
        assert abs(study.pairs["mean"][k] - _loss(_merged(src, k, family), batches)) < 1e-12
    # "first": layer k's own weights at 2 h, layer k + 1 gone
    first = copy.deepcopy(src)
    with torch.no_grad():
        for n, p in _blocks(first)[1].named_parameters():
            p.mul_(2 if _doubled(n, family) else 1)
    del _blocks(first)[2]
    assert abs(study.pairs["first"][1] - _loss(first, batches)) < 1e-12
    # every cost is a change: none is zero on a random network
    assert min(abs(c) for c in study.drop_costs() + study.pair_costs("mean")) > 1e-6


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_block_influence_is_one_minus_the_mean_cosine_of_transformers_states(family,
                                                                              exact_norms):
    src = _family(family)
    batches = _batches()
    outs = {}
    hook = _blocks(src)[L - 1].register_forward_hook(
        lambda mod, a, o: outs.setdefault("last", []).append(o[0] if isinstance(o, tuple) else o))
    with torch.no_grad():
        hs = [src(x, output_hidden_states=True, use_cache=False).hidden_states
              for x, _ in batches]
    hook.remove()
    want = []
    for k in range(L):                  # transformers' last hidden state is after the final norm
        a = torch.cat([h[k].reshape(-1, 32) for h in hs])
        b = torch.cat([(h[k + 1] if k < L - 1 else o).reshape(-1, 32)
                       for h, o in zip(hs, outs["last"])])
        cos = (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))
        want.append(1 - float(cos.mean()))
    loss, bi = block_influence(sn.interop.from_hf(src), _evaluate(batches))
    assert max(abs(x - y) for x, y in zip(bi, want)) < 1e-12, (bi, want)
    assert abs(loss - _loss(src, batches)) < 1e-12
    assert len({round(b, 6) for b in bi}) == L     # the layers differ: a shuffle would show


def test_the_views_share_the_models_modules_and_leave_it_as_it_was():
    m = sn.SplitTransformer(vocab_size=V, d_model=16, n_heads=2, n_layers=4, max_len=16)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    d, p, f = drop_layer(m, 1), coarsen_pair(m, 1), coarsen_pair(m, 1, "first")
    assert d.layers[1] is m.layers[2] and d.config.n_layers == 3 and m.config.n_layers == 4
    assert p.layers[0] is m.layers[0] and p.layers[2] is m.layers[3]
    assert p.layers[1].step_size == 2 * m.config.step_size
    assert f.layers[1].diffusion is m.layers[1].diffusion
    w = (m.layers[1].diffusion.qkv.weight + m.layers[2].diffusion.qkv.weight) / 2
    assert torch.allclose(p.layers[1].diffusion.qkv.weight, w, atol=1e-7, rtol=0)
    assert all(torch.equal(v, m.state_dict()[k]) for k, v in before.items())


def test_spearman_and_ranks():
    s = LayerStudy(loss=1.0, bi=[0.1, 0.4, 0.2, 0.3], drop=[1.2, 1.5, 1.1, 1.9],
                   pairs={"mean": [1.1, 1.2, 1.3]})
    assert ranks(s.bi) == [1, 4, 2, 3] and ranks(s.drop_costs()) == [2, 3, 1, 4]
    # rho = 1 - 6 sum d^2 / (n (n^2 - 1)), d the rank differences (-1, 1, 1, -1)
    assert math.isclose(s.spearman()[0], 1 - 6 * 4 / (4 * 15))
    assert ranks([0.2, float("nan"), 0.1]) == [2, 3, 1]
    t = s.table("nats/token")
    assert "cheapest first: by the measured drop cost 2, 0, 1, 3; by BI 0, 2, 3, 1" in t
    assert "Spearman rank correlation of BI and the drop cost: +0.600" in t
    assert math.isnan(LayerStudy(1.0, [0.1, 0.2], [1.0, 1.1], {}).spearman()[0])


@pytest.mark.parametrize("call,says", [
    (lambda m: drop_layer(m, 4), "layer k in 0..3"),
    (lambda m: drop_layer(m, True), "layer k in 0..3"),
    (lambda m: coarsen_pair(m, 3), "k in 0..2"),
    (lambda m: coarsen_pair(m, 0, "last"), "restriction must be one of mean, first"),
    (lambda m: layer_study(m, lambda x: 1.0, restrictions=("median",)), "restriction"),
    (lambda m: drop_layer(sn.SplitTransformer(vocab_size=V, d_model=16, n_heads=2, n_layers=2,
                                              max_len=8, reversible=True), 0), "reversible"),
    (lambda m: drop_layer(sn.SplitTransformer(vocab_size=V, d_model=16, n_heads=2, n_layers=1,
                                              max_len=8), 0), "at least 2 layers"),
])
def test_what_cannot_be_dropped_or_merged_is_refused(call, says):
    m = sn.SplitTransformer(vocab_size=V, d_model=16, n_heads=2, n_layers=4, max_len=16)
    with pytest.raises(ValueError, match=says):
        call(m)


def test_gated_layers_keep_their_gates_and_a_mixed_pair_is_refused():
    m = sn.SplitTransformer(vocab_size=V, d_model=16, n_heads=2, n_layers=4, max_len=16,
                            gate="sigmoid", gate_layers=(0, 1, 3))
    assert drop_layer(m, 1).config.gate_layers == (0, 2)
    assert coarsen_pair(m, 0).config.gate_layers == (0, 2)
    with pytest.raises(ValueError, match=r"layers \(1, 2\) are in gate_layers and not"):
        coarsen_pair(m, 1)


def test_a_pair_of_a_local_and_a_global_layer_is_nan_in_the_study_and_said_in_the_table():
    """Gemma's pattern: layers 0 and 2 windowed, 1 and 3 global; no pair can be one step, yet
    the study runs (its pairs NaN), and a windowed network's dropped layer keeps its kind."""
    m = sn.SplitTransformer(vocab_size=V, d_model=16, n_heads=2, n_layers=4, max_len=16,
                            sliding_window=4, window_layers=(0, 2), positions="none",
                            rotary_pct=1.0).eval()
    assert [mergeable(m, k) for k in range(3)] == [False, False, False]
    assert drop_layer(m, 0).config.window_layers == (1,)
    ids = torch.randint(0, V, (2, 12), generator=torch.Generator().manual_seed(0))

    def evaluate(net):
        logits = net(ids)
        return float(torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1),
                                                       ids[:, 1:].flatten()))
    s = layer_study(m, evaluate)
    assert all(math.isnan(v) for r in s.pairs for v in s.pairs[r])
    assert len(s.drop) == 4 and not any(math.isnan(v) for v in s.drop)
    assert s.table().count("cannot merge") == 3 * len(s.pairs)
    assert mergeable(sn.SplitTransformer(vocab_size=V, d_model=16, n_heads=2, n_layers=4,
                                         max_len=16, sliding_window=4, window_layers=(0, 1),
                                         positions="none", rotary_pct=1.0), 0)


def _folder(tmp_path):
    from splitnet.interop.convert import byte_tokenizer

    torch.manual_seed(0)
    c = tf.LlamaConfig(vocab_size=256, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
    tf.LlamaForCausalLM(c).save_pretrained(tmp_path / "ll")
    byte_tokenizer().save_pretrained(tmp_path / "ll")
    (tmp_path / "t.txt").write_text("def f(x):\n    return x * 2\n" * 20)
    return ["refine", "--hf", str(tmp_path / "ll"), "--text", str(tmp_path / "t.txt"),
            "--windows", "2", "--schemes", "strang", "--substeps", "1", "--methods", "euler",
            "--coarsen", "none", "--prolong", "none", "--no-progress"]


@pytest.mark.heavy
def test_refine_hf_prints_the_table_and_writes_it_to_json_and_a_figure(tmp_path, capsys):
    import json

    from splitnet.cli import main

    args = _folder(tmp_path)
    png, js = tmp_path / "r.png", tmp_path / "r.json"
    assert main(args + ["--out", str(png), "--json", str(js)]) == 0
    out = capsys.readouterr().out
    d = json.loads(js.read_text())["layers"]
    assert len(d["drop"]) == 3 and len(d["pairs"]["mean"]) == 2 and len(d["pairs"]["first"]) == 2
    assert "layers dropped and merged (nats/token" in out and "cheapest first" in out
    for k in range(3):
        assert f"{k:>5} {d['bi'][k]:>9.4g} {d['bi_rank'][k]:>7} " in out
    assert (tmp_path / "r_layers.png").read_bytes()[:4] == b"\x89PNG"
    assert main(args + ["--out", str(tmp_path / "s.png"), "--no-layer-costs"]) == 0
    assert "layers dropped" not in capsys.readouterr().out
    assert not (tmp_path / "s_layers.png").exists()


def test_refine_refuses_a_figure_over_its_input_in_one_line(tmp_path, capsys):
    from splitnet.cli import main

    (tmp_path / "t_layers.png").write_text("def f(x): return x\n" * 20)
    rc = main(["refine", "--hf", str(tmp_path), "--text", str(tmp_path / "t_layers.png"),
               "--out", str(tmp_path / "t.png")])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith("splitnet refine: error:") and "t_layers.png" in err
    assert not (tmp_path / "t.png").exists()


# -- docs/llama.md's table (experiments/hf_depth.py, regen hf-depth) ---------------------------

def _experiment():
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "experiments"))
    try:
        import hf_depth
    finally:
        sys.path.pop(0)
    return hf_depth, (root / "docs" / "llama.md").read_text()


def _same_to_the_printed_digit(a: str, b: str) -> bool:
    """The same text and numbers within one unit of their last printed digit: float64
    round-off moves with the CPU's BLAS, a printed digit of these losses does not."""
    import re

    num = r"[-+]?\d+\.\d+"
    if re.sub(num, "#", a) != re.sub(num, "#", b):
        return False
    return all(abs(float(x) - float(y)) <= 1.01 * 10.0 ** -len(x.split(".")[1])
               for x, y in zip(re.findall(num, a), re.findall(num, b)))


def test_the_same_to_the_printed_digit_check_can_fail():
    assert _same_to_the_printed_digit("| a | +0.1234 |", "| a | +0.1235 |")
    assert not _same_to_the_printed_digit("| a | +0.1234 |", "| a | +0.1236 |")
    assert not _same_to_the_printed_digit("| a | +0.1234 |", "| b | +0.1234 |")


def test_docs_llama_md_layer_table_is_the_cache_rendered():
    H, doc = _experiment()
    missing = [f for f, t in H.ROWS if not H.cache_file(f, t).exists()]
    assert not missing, (f"experiments/cache/hf_depth lacks {missing}: python3 -m "
                         f"splitnet.dev regen hf-depth")
    assert H.render() in doc, ("docs/llama.md's layer table is out of date: python3 -m "
                               "splitnet.dev regen hf-depth")


@pytest.mark.heavy
@pytest.mark.parametrize("family,trained", [("llama", False), ("gpt2", True)])
def test_docs_llama_md_layer_table_rows_are_measured_again(family, trained):
    H, doc = _experiment()
    now = H.row(family, trained, H.measure(family, trained))
    head = now.split(" | ")[:2]
    kept = next(line for line in doc.splitlines() if line.split(" | ")[:2] == head)
    assert _same_to_the_printed_digit(now, kept), (
        f"docs/llama.md has\n{kept}\nmeasured now\n{now}\n(python3 experiments/hf_depth.py "
        f"--refresh)")
