"""ConvS2S (Gehring et al. 2017) as a splitting network (issue 47): the forward equal in float64
to a ConvS2S written here from the paper's equations; the source padding never read; cached
decoding (greedy and beam) equal to the full decoder; a layer of one field; the initialisation
and the encoder's gradient scale; the errors."""

from __future__ import annotations

import math

import pytest
import torch

from splitnet.configs.seq2seq import Seq2SeqConfig
from splitnet.integrators import schemes
from splitnet.integrators.splitting import OneField
from splitnet.nets.decoding import step_function
from splitnet.nets.seq2seq import SplitSeq2Seq

V, D, PAD = 40, 16, 0
CONVS2S = {"diffusion_field": "conv", "convection_field": "none", "cross_field": "multistep",
           "init": "convs2s", "norm": "none"}
R = math.sqrt(0.5)


def _model(layers=2, kernel=3, **kw) -> SplitSeq2Seq:
    torch.manual_seed(0)
    opts = {**CONVS2S, "n_encoder_layers": layers, "n_decoder_layers": layers,
            "conv_kernel": kernel, "pad_id": PAD, "bos_id": 1, "eos_id": 2, "max_len": 32, **kw}
    m = SplitSeq2Seq(V, V, D, 2, **opts).double()
    with torch.no_grad():               # biases away from their zero init: the test reads them
        for name, p in m.named_parameters():
            if name.endswith("bias"):
                p.normal_(0.0, 0.1)
    return m


def _src():
    g = torch.Generator().manual_seed(1)
    src = torch.randint(3, V, (3, 9), generator=g)
    src[0, 6:] = PAD                    # padded rows: the padding must never be read
    src[1, 8:] = PAD
    tgt = torch.randint(3, V, (3, 7), generator=g)
    return src, tgt


def _glu_conv(x, weight, bias, causal: bool):
    """``GLU(b + sum_j W_j x_{i - left + j})`` (zeros outside the sequence), row by row."""
    n, k, d = x.shape[1], weight.shape[-1], weight.shape[1]
    left = k - 1 if causal else (k - 1) // 2
    rows = []
    for i in range(n):
        acc = bias.expand(x.shape[0], 2 * d)
        for j in range(k):
            p = i - left + j
            if 0 <= p < n:
                acc = acc + x[:, p] @ weight[:, :, j].T
        rows.append(acc[:, :d] * torch.sigmoid(acc[:, d:]))
    return torch.stack(rows, 1)


def convs2s_reference(m: SplitSeq2Seq, src, tgt_in):
    """ConvS2S from the paper's equations (sections 3.1-3.4, with the scaling of the authors'
    fairseq fconv), reading ``m``'s weights by name: encoder blocks
    ``h <- sqrt(1/2)(h + GLU(conv(h)))`` with the padding zeroed; z = the last h; decoder blocks
    ``h <- sqrt(1/2)(h + GLU(conv_causal(h)))``, then ``d = sqrt(1/2)(W_d h + b_d + g)``,
    ``a = softmax(d z^T)`` over real source tokens, ``c = sqrt(m) a sqrt(1/2)(z + e)``,
    ``h <- sqrt(1/2)(h + W_o c + b_o)``; logits ``W h``."""
    pad = src.eq(m.config.pad_id)
    e = m.src_emb.weight[src] + m.src_pos.weight[:src.shape[1]]
    h = e
    for layer in m.encoder_layers:
        c = layer.diffusion.conv
        h = R * (h + _glu_conv(h.masked_fill(pad[..., None], 0.0), c.weight, c.bias, False))
    z, values = h, R * (h + e)
    n_real = (~pad).sum(1).double()
    g = m.tgt_emb.weight[tgt_in] + m.tgt_pos.weight[:tgt_in.shape[1]]
    h = g
    for layer in m.decoder_layers:
        c, att = layer.diffusion.conv, layer.cross
        h = R * (h + _glu_conv(h, c.weight, c.bias, True))
        q = R * (h @ att.q.weight.T + att.q.bias + g)
        a = torch.softmax((q @ z.transpose(1, 2)).masked_fill(pad[:, None], -math.inf), -1)
        cond = (a @ values) * n_real.sqrt()[:, None, None]
        h = R * (h + cond @ att.proj.weight.T + att.proj.bias)
    return h @ m.head.weight.T


def test_forward_equals_the_papers_equations_in_float64():
    m = _model(layers=3, kernel=5)
    src, tgt = _src()
    torch.testing.assert_close(m(src, tgt), convs2s_reference(m, src, tgt), rtol=0, atol=1e-12)
    assert m.encoder_scheme.diagram() == "s" and m.decoder_scheme.diagram() == "s x"


def test_a_mistake_in_the_reference_is_seen():
    """The comparison above can fail: a ConvS2S without the sqrt(m) of the conditional input
    (or with the padding read) differs by far more than round-off."""
    m = _model()
    src, tgt = _src()
    ref = convs2s_reference(m, src, tgt)
    no_pad_mask = convs2s_reference(m, src.masked_fill(src.eq(PAD), 5), tgt)
    assert (ref - no_pad_mask).abs().max() > 1e-3
    m.decoder_layers[0].cross.residual_scale = 1.0     # one attention step unscaled
    assert (m(src, tgt) - ref).abs().max() > 1e-3


def test_the_source_padding_is_never_read():
    m = _model()
    src, tgt = _src()
    out = m(src, tgt)
    longer = torch.cat([src, torch.full((3, 5), PAD)], dim=1)     # more padding
    torch.testing.assert_close(m(longer, tgt), out, rtol=0, atol=1e-12)
    mask = src.eq(PAD)
    other = src.masked_fill(mask, 7)                              # other ids under the mask
    torch.testing.assert_close(m(other, tgt, src_key_padding_mask=mask), out, rtol=0,
                               atol=1e-12)


@pytest.mark.parametrize("kw", [{}, {"decoder_scheme": "strang"}, {"method": "midpoint"},
                                {"decoder_scheme": "yoshida4", "conv_kernel": 5}])
def test_cached_decoding_equals_the_full_decoder(kw):
    m = _model(**kw).eval()
    src, tgt = _src()
    with torch.no_grad():
        memory, mask = m.encode(src)
        nxt = step_function(m, memory, mask, True, tgt.shape[1])
        for t in range(1, tgt.shape[1] + 1):
            # the step scores in float32, as decoding does
            want = torch.log_softmax(m.decode(tgt[:, :t], memory, mask)[:, -1].float(), -1)
            got = nxt(tgt[:, :t])
            real = torch.isfinite(got)                            # pad and bos set to -inf
            torch.testing.assert_close(got[real], want[real], rtol=0, atol=1e-6)
    for beam in (1, 4):
        assert torch.equal(m.generate(src, 10, beam=beam), m.generate(src, 10, beam=beam,
                                                                      use_cache=False))


def test_a_layer_of_one_field_is_the_plain_residual_step():
    for name in ("lie-trotter", "strang", "yoshida4", "macaron"):
        s = schemes.network_scheme(name, ("diffusion",))
        assert isinstance(s, OneField) and [(st.field, st.coeff) for st in s.stages] == \
            [("diffusion", 1.0)]
        assert s.is_exact and s.effective_order("euler") == 1 and s.effective_order("rk4") == 4
        assert schemes.resolve(s.to_dict()) == s
    with pytest.raises(ValueError, match=r"plain residual step .* give a registered name"):
        schemes.network_scheme("d:0.5,d:0.5", ("diffusion",))
    with pytest.raises(ValueError, match="at least two fields"):
        schemes.resolve("d:1")                                    # a splitting still splits
    cfg = Seq2SeqConfig(**CONVS2S, encoder_scheme="strang")
    assert cfg.stack_config("encoder").fields == ("diffusion",)
    again = Seq2SeqConfig.from_dict(cfg.to_dict())
    assert again == cfg and again.stack_config("encoder").scheme.diagram() == "s"


def test_the_convs2s_initialisation():
    torch.manual_seed(0)
    p = 0.2
    m = SplitSeq2Seq(300, 300, 256, 4, **CONVS2S, dropout=p, conv_kernel=3,
                     n_encoder_layers=1, n_decoder_layers=1)
    conv = m.decoder_layers[0].diffusion.conv.weight
    assert float(conv.std()) == pytest.approx(math.sqrt(4 * (1 - p) / (3 * 256)), rel=0.05)
    assert float(m.decoder_layers[0].cross.q.weight.std()) == pytest.approx(256 ** -0.5,
                                                                           rel=0.05)
    assert float(m.head.weight.std()) == pytest.approx(math.sqrt((1 - p) / 256), rel=0.05)
    for table in (m.src_emb, m.tgt_pos):
        assert float(table.weight.std()) == pytest.approx(0.1, rel=0.05)
    assert m.embed_scale == 1.0 and float(m.decoder_layers[0].cross.q.bias.abs().max()) == 0
    assert m.decoder_layers[0].diffusion.proj is None              # the paper's block


def test_the_encoder_gradient_is_scaled_by_the_attentions():
    m = _model(layers=3, decoder_scheme="strang")                 # x once per layer: n = 3
    assert m.memory_grad == pytest.approx(1 / 6)
    src, tgt = _src()

    def grads():
        m.zero_grad()
        m(src, tgt).pow(2).sum().backward()
        return m.encoder_layers[0].diffusion.conv.weight.grad.clone()

    scaled = grads()
    m.memory_grad = 1.0
    torch.testing.assert_close(scaled, grads() / 6, rtol=1e-12, atol=0)


@pytest.mark.parametrize("kw, match", [
    ({"reversible": True}, r"reversible network .* needs both; convection_field is none"),
    ({"reversible": True, "convection_field": "feedforward"},
     r"reversible network does not take cross_field=multistep"),
    ({"conv_kernel": 4}, "non-causal conv field needs an odd conv_kernel"),
    ({"decoder_scheme": "c:1,x:1"}, "advances convection"),
    ({"encoder_scheme": "sfsf"}, "plain residual step"),
])
def test_bad_configs_are_one_line_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        Seq2SeqConfig(**{**CONVS2S, **kw})


def test_the_multistep_field_says_what_it_needs():
    m = _model()
    att = m.decoder_layers[0].cross
    x = torch.zeros(2, 3, D, dtype=torch.float64)
    with pytest.raises(ValueError, match="needs target_embedding"):
        att(0.0, x, memory=torch.zeros(2, 4, 2 * D, dtype=torch.float64))
    with pytest.raises(ValueError, match="width 2 d_model = 32"):
        att(0.0, x, memory=torch.zeros(2, 4, D, dtype=torch.float64), target_embedding=x)


def test_conv_fields_with_a_feed_forward_under_strang_still_mask_padding():
    """The conv fields in a Macaron arrangement (feed-forward halves around the conv): the
    encoder is ``f/2 s f/2`` and the padding is still never read."""
    m = _model(convection_field="feedforward", d_ff=32, encoder_scheme="strang",
               decoder_scheme="strang")
    assert m.encoder_scheme.diagram() == "f/2 s f/2"
    assert m.decoder_scheme.diagram() == "f/2 s/2 x s/2 f/2"
    src, tgt = _src()
    longer = torch.cat([src, torch.full((3, 4), PAD)], dim=1)
    torch.testing.assert_close(m(longer, tgt), m(src, tgt), rtol=0, atol=1e-12)


# -- training: the CLI command of issue 47, and parity with the Transformer --------------------

def _parity():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "parity_convs2s.py"
    spec = importlib.util.spec_from_file_location("parity_convs2s", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.heavy
def test_the_command_line_learns_a_400_word_copy_task(tmp_path):
    """``splitnet train --task translate --pairs copy`` (400 pseudo-words, hundreds of distinct
    words: the decoder must read its source) as ConvS2S: BLEU > 30 after 400 steps."""
    pytest.importorskip("sacrebleu")
    import json

    from splitnet.cli import main

    out = tmp_path / "convs2s"
    assert main(["train", "--task", "translate", "--pairs", "copy", "--diffusion-field", "conv",
                 "--convection-field", "none", "--cross-field", "multistep", "--init",
                 "convs2s", "--norm", "none", "--steps", "400", "--bleu-sentences", "200",
                 "--out", str(out), "--threads", "1", "--no-progress", "--no-plot"]) == 0
    final = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    assert final["test_bleu"] > 30, final


@pytest.mark.heavy
@pytest.mark.parametrize("task", ["copy", "reverse"])
def test_convs2s_learns_the_alignment_tasks_within_1_5x_the_transformers_steps(task):
    """From their own initialisations, equal parameters, the same batches: ConvS2S reaches the
    threshold within 1.5x the Transformer's steps (plus one evaluation interval). Small: 60
    words, width 32, 1 + 1 Transformer layers (ConvS2S 2 + 2), about 10 s a task."""
    P = _parity()
    a = P.parser().parse_args(
        ["--d-model", "32", "--n-heads", "2", "--layers", "1", "--batch", "16", "--words", "60",
         "--pairs", "700", "--valid", "60", "--warmup", "20", "--line-words", "2,4",
         "--word-len", "2,4", "--max-len", "24", "--threshold", "1.0", "--max-steps", "800",
         "--eval-every", "20"])
    torch.set_num_threads(1)
    r = P.race_task(a, task, 0)
    assert abs(r["ConvS2S_params"] / r["Transformer_params"] - 1) < 0.02
    c, t = r["ConvS2S"]["steps"], r["Transformer"]["steps"]
    assert c is not None, r["ConvS2S"]["curve"]
    assert t is None or c <= 1.5 * t + a.eval_every, (c, t)


@pytest.mark.slow
@pytest.mark.parametrize("task", ["copy", "reverse"])
def test_the_400_word_races_of_the_benchmark(task):
    """benchmarks/parity_convs2s.py's own setting (400 words, width 64, Transformer 2 + 2,
    ConvS2S 4 + 4): within 1.5x, seeds 0 and 1 (docs/benchmarks.md; ~2-4 min a task)."""
    P = _parity()
    a = P.parser().parse_args([])
    torch.set_num_threads(1)
    for seed in (0, 1):
        r = P.race_task(a, task, seed)
        c, t = r["ConvS2S"]["steps"], r["Transformer"]["steps"]
        assert c is not None and t is not None, (r["ConvS2S"]["curve"], r["Transformer"]["curve"])
        assert c <= 1.5 * t + a.eval_every, (task, seed, c, t)


def test_describe_says_a_one_field_layer_has_nothing_to_split():
    from splitnet.cli.commands.cmd_describe import coefficient_lines, stack_lines
    from splitnet.nets.models import SplitTransformer

    lines = "\n".join(stack_lines(_model(), 16))
    assert "encoder: d:1.0\n  one field: nothing to split" in lines
    assert "inconsistent" not in lines and "d_ff=" not in lines     # no feed-forward to size
    lm = "\n".join(coefficient_lines(SplitTransformer(11, D, 2, 2, convection_field="none")))
    assert lm.count("one field: nothing to split") == 2 and "sub-flow method euler: 1" in lm


def test_refining_and_tracing_a_convs2s():
    """Re-discretisation refines the one-field encoder into plain sub-steps (any scheme), the
    decoder by the scheme; the trajectories' ODE path reads the target embedding."""
    from splitnet.analyses.refine import rediscretize
    from splitnet.analyses.trajectories import collect

    m = _model()
    src, tgt = _src()
    torch.testing.assert_close(rediscretize(m)(src, tgt), m(src, tgt), rtol=0, atol=0)
    r = rediscretize(m, "strang", substeps=2)
    assert r.encoder_scheme.diagram() == "s/2 s/2"
    assert r.decoder_scheme.diagram() == "s*0.25 x/2 s*0.25 s*0.25 x/2 s*0.25"
    assert torch.isfinite(r(src, tgt)).all()
    t = collect(m, tgt[0], source=src[1], continuous=True, points_per_layer=2, solver="rk4")
    assert t.path is not None and torch.isfinite(t.path).all()
    assert t.memory.shape == (src.shape[1], D)           # z, the encoder's output particles


def test_a_reversible_translation_model_with_conv_fields():
    """The conv field in a reversible encoder and decoder (attention's place in the pair): the
    padding is never read, gradients equal plain autograd, cached decoding the full one."""
    from splitnet.reversible.backprop import plain_autograd

    m = _model(diffusion_field="conv", convection_field="feedforward", cross_field="cross",
               init="xavier", norm="layer", reversible=True, d_ff=32)
    src, tgt = _src()
    longer = torch.cat([src, torch.full((3, 4), PAD)], dim=1)
    torch.testing.assert_close(m(longer, tgt), m(src, tgt), rtol=0, atol=1e-12)
    m(src, tgt).pow(2).sum().backward()
    grads = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    with plain_autograd(m):
        m(src, tgt).pow(2).sum().backward()
    for g, p in zip(grads, m.parameters()):
        torch.testing.assert_close(g, p.grad, rtol=0, atol=1e-9)
    m.eval()
    assert torch.equal(m.generate(src, 8, beam=3), m.generate(src, 8, beam=3, use_cache=False))
