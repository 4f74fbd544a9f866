"""Initialisation as a stated choice (splitnet.nets.init): the ``init`` option of both configs,
what each rule draws, the sqrt(d) embedding scale of ``xavier``, and old config dicts."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from splitnet.cli import build_parser
from splitnet.cli.commands.cmd_train import config_from_args
from splitnet.configs.config import SplitConfig
from splitnet.configs.options import init_rule
from splitnet.configs.seq2seq import Seq2SeqConfig
from splitnet.nets.models import SplitTransformer
from splitnet.nets.seq2seq import SplitSeq2Seq
from splitnet.training.config import TrainConfig

SPECIALS = {"pad_id": 0, "bos_id": 1, "eos_id": 2}
D = 32


def _s2s(seed=0, **kw):
    torch.manual_seed(seed)
    opts = dict(n_encoder_layers=2, n_decoder_layers=2, max_len=16, **SPECIALS)
    return SplitSeq2Seq(40, 40, D, 4, **{**opts, **kw})


def test_defaults_choices_and_errors():
    # a bare language model's rule is gpt2 (None: its task's), an encoder–decoder's xavier
    assert SplitConfig().init is None and init_rule(SplitConfig()) == "gpt2"
    assert Seq2SeqConfig().init == "xavier"
    for cls in (SplitConfig, Seq2SeqConfig):
        for rule in ("gpt2", "xavier"):
            assert cls(init=rule).init == rule
        with pytest.raises(ValueError, match="init must be one of gpt2, xavier, convs2s; got "
                                             "'he'"):
            cls(init="he")


def test_the_command_line_has_the_option_for_both_tasks():
    p = build_parser("train")
    lm, _ = config_from_args(p.parse_args(["--init", "xavier"]))
    assert isinstance(lm.model, SplitConfig) and lm.model.init == "xavier"
    s2s, explicit = config_from_args(p.parse_args(["--task", "translate", "--init", "gpt2"]))
    assert isinstance(s2s.model, Seq2SeqConfig) and s2s.model.init == "gpt2"
    assert "model.init" in explicit
    default, _ = config_from_args(p.parse_args(["--task", "translate"]))
    assert default.model.init == "xavier"
    with pytest.raises(SystemExit):
        p.parse_args(["--init", "normal"])


def _linears(model):
    return [m for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv1d))
            and m.weight is not getattr(model, "head", nn.Linear(1, 1)).weight]


def test_xavier_draws_the_transformer_rule():
    m = _s2s()
    assert m.embed_scale == math.sqrt(D)
    for lin in _linears(m):                       # every field matrix, fused q/k/v included
        w = lin.weight.detach()
        fan_in = w.shape[1] * w[0, 0].numel()
        fan_out = w.shape[0] * w[0, 0].numel()
        bound = math.sqrt(6.0 / (fan_in + fan_out))
        assert float(w.abs().max()) <= bound
        assert float(w.abs().max()) > 0.9 * bound  # uniform over the whole interval
        assert lin.bias is None or float(lin.bias.detach().abs().max()) == 0.0
    assert abs(float(m.src_emb.weight.detach().std()) * math.sqrt(D) - 1) < 0.1
    for pos in (m.src_pos, m.tgt_pos):           # positions at the scaled tokens' size
        assert abs(float(pos.weight.detach().std()) - 1) < 0.1
    for ln in (mod for mod in m.modules() if isinstance(mod, nn.LayerNorm)):
        assert torch.equal(ln.weight, torch.ones(D)) and torch.equal(ln.bias, torch.zeros(D))
    untied = _s2s(tie_head=False, shared_embeddings=False)
    assert abs(float(untied.head.weight.detach().std()) * math.sqrt(D) - 1) < 0.1
    assert abs(float(untied.tgt_emb.weight.detach().std()) * math.sqrt(D) - 1) < 0.1


def test_xavier_scales_the_tokens_not_the_positions():
    m = _s2s()
    src = torch.tensor([[5, 6, 7]])
    pos = torch.arange(3)
    want = m.src_emb.weight[src] * math.sqrt(D) + m.src_pos.weight[pos]
    torch.testing.assert_close(m.embed_source(src), want)
    g = _s2s(init="gpt2")
    assert g.embed_scale == 1.0
    torch.testing.assert_close(g.embed_source(src), g.src_emb.weight[src] + g.src_pos.weight[pos])
    lm = SplitTransformer(50, D, 4, 1, init="xavier")
    idx = torch.tensor([[3, 4]])
    torch.testing.assert_close(lm.embed(idx), lm.tok_emb.weight[idx] * math.sqrt(D)
                               + lm.pos_emb.weight[:2])


def test_gpt2_draws_nanogpt_rule():
    m = _s2s(init="gpt2")
    stages = 2 * 2 + 2 * 3                         # encoder d c, decoder d x c: 10 sub-layers
    assert abs(float(m.src_emb.weight.detach().std()) / 0.02 - 1) < 0.05
    proj = torch.cat([lay.cross.proj.weight.flatten() for lay in m.decoder_layers])
    assert abs(float(proj.detach().std()) / (0.02 / math.sqrt(stages)) - 1) < 0.1


def test_an_old_seq2seq_dict_loads_as_gpt2_with_the_same_function():
    """A checkpoint written before ``init`` existed holds no such key: it must rebuild the
    function it was trained as (no sqrt(d) scale), although today's default is xavier."""
    old = _s2s(init="gpt2").eval()
    d = old.config.to_dict()
    del d["init"]
    cfg = Seq2SeqConfig.from_dict(d)
    assert cfg.init == "gpt2"
    again = SplitSeq2Seq.from_config(d).eval()
    again.load_state_dict(old.state_dict())
    src, tgt = torch.tensor([[5, 6, 7, 8]]), torch.tensor([[1, 9, 10]])
    with torch.no_grad():
        torch.testing.assert_close(again(src, tgt), old(src, tgt), rtol=0, atol=0)
        new = SplitSeq2Seq.from_config({**d, "init": "xavier"}).eval()
        new.load_state_dict(old.state_dict())      # the same weights under today's default
        assert not torch.allclose(new(src, tgt), old(src, tgt))   # would be another function
    lm = SplitConfig().to_dict()
    del lm["init"]
    assert SplitConfig.from_dict(lm).init == "gpt2"
    assert Seq2SeqConfig.from_dict(Seq2SeqConfig().to_dict()).init == "xavier"   # kept if given


def test_one_initialisation_rule_per_task_from_the_command_line_and_from_python():
    """Issue 42: ``TrainConfig(task="mlm", model=SplitConfig(d_model=64))`` got gpt2 where
    ``splitnet train --task mlm --d-model 64`` got xavier; the task's rule now applies to a
    model that names none, from either door, and an explicit one is kept."""
    p = build_parser("train")
    for task, rule in (("lm", "gpt2"), ("mlm", "xavier")):
        py = TrainConfig(task=task, model=SplitConfig(d_model=64)).model.init
        cli = config_from_args(p.parse_args(["--task", task, "--d-model", "64"]))[0].model.init
        assert py == cli == rule, (task, py, cli)
        for explicit in ("gpt2", "xavier"):
            assert TrainConfig(task=task, model=SplitConfig(init=explicit)).model.init == \
                explicit == config_from_args(p.parse_args(
                    ["--task", task, "--init", explicit]))[0].model.init
    torch.manual_seed(0)
    bare = SplitTransformer(vocab_size=50, d_model=32, n_heads=4, n_layers=2)
    assert bare.embed_scale == 1.0 and abs(float(bare.tok_emb.weight.std()) - 0.02) < 0.003
