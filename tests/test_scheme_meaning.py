"""One meaning per scheme name: a registry name builds the same arrangement of its fields in
every network class and on the command line (splitnet.schemes.network_scheme, the one rule):
the language model's, the encoder's and the decoder's ``strang`` all put the feed-forward
outermost, and the decoder nests cross-attention directly inside self-attention."""

from __future__ import annotations

import argparse
import warnings

import pytest

import splitnet as sn
from splitnet.cli.commands import cmd_order
from splitnet.stagelists.stages import CONVECTION, CROSS, DIFFUSION

LM = (DIFFUSION, CONVECTION)
DECODER = (DIFFUSION, CROSS, CONVECTION)
NAMES = sn.schemes.available("all")


def _quiet(f, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")       # restricted-class methods warn on get()
        return f(*a, **k)


def _decoder(name):
    try:
        return _quiet(sn.schemes.network_scheme, name, DECODER)
    except ValueError:                        # a two-field splitting: no decoder form
        return None


def test_the_rule_in_words():
    rule = sn.schemes.network_scheme
    def stages(text):
        return sn.schemes.resolve(text).stages

    assert rule("lie-trotter", LM).stages == stages("d:1,c:1")
    assert rule("strang", LM).stages == stages("c:0.5,d:1,c:0.5")
    assert rule("lie-trotter", DECODER).stages == stages("d:1,x:1,c:1")
    assert rule("strang", DECODER).stages == stages("c:0.5,d:0.5,x:1,d:0.5,c:0.5")
    assert rule("strang", DECODER).stages == \
        sn.schemes.get("strang", fields=(CONVECTION, DIFFUSION, CROSS)).stages
    assert rule("c:1,d:1", LM).stages == stages("c:1,d:1")     # not a name: as written


@pytest.mark.parametrize("name", NAMES)
def test_a_name_builds_one_arrangement_in_every_config(name):
    lm = _quiet(sn.models.SplitConfig, scheme=name).resolved_scheme()
    assert lm.stages == _quiet(sn.schemes.get, name).stages     # the registry's own arrangement
    dec = _decoder(name)
    cfg = _quiet(sn.models.Seq2SeqConfig, encoder_scheme=name,
                 decoder_scheme=name if dec is not None else "strang")
    assert cfg.stack_config("encoder").scheme.stages == lm.stages
    if dec is not None:
        assert cfg.stack_config("decoder").scheme.stages == dec.stages
        # the decoder's step is the language model's with cross nested inside self-attention:
        # without its cross stages (the self-attention halves around each joined) it is lm
        assert _without_cross(dec.stages) == [(s.field, s.coeff) for s in lm.stages]


def _without_cross(stages):
    out, joined = [], False
    for s in stages:
        if s.field == CROSS:
            joined = True
            continue
        if "+" in s.field:                    # a sum stage: drop the cross term
            s = sn.Stage("+".join(f for f in s.field.split("+") if f != CROSS), s.coeff)
        if joined and out and out[-1][0] == s.field:
            out[-1] = (s.field, pytest.approx(out[-1][1] + s.coeff, abs=1e-15))
        else:
            out.append((s.field, s.coeff))
        joined = False
    return out


@pytest.mark.parametrize("name", ["lie-trotter", "strang", "yoshida4", "parallel"])
def test_the_built_networks_and_the_order_command_agree(name):
    lm = sn.models.SplitTransformer(vocab_size=16, d_model=8, n_heads=2, n_layers=1, scheme=name)
    s2s = sn.models.SplitSeq2Seq(src_vocab=259, tgt_vocab=259, d_model=8, n_heads=2,
                                 n_encoder_layers=1, n_decoder_layers=1,
                                 encoder_scheme=name, decoder_scheme=name)
    assert s2s.config.stack_config("encoder").scheme.stages == lm.scheme.stages
    assert tuple(s.field for s in s2s.decoder_layers[0].stages) == \
        tuple(s.field for s in sn.schemes.network_scheme(name, DECODER).stages)
    args = argparse.Namespace(**{**vars(_order_defaults()), "fields": 3, "schemes": [name]})
    schemes, _ = cmd_order._validate(args)
    assert schemes[0].stages == sn.schemes.network_scheme(name, DECODER).stages


def _order_defaults():
    p = argparse.ArgumentParser()
    cmd_order.configure(p)
    return p.parse_args([])



def test_a_checkpoint_config_from_before_the_rule_rebuilds_its_own_network():
    """A Seq2SeqConfig dict without ``init`` (written by 0.2) nested a registry name over the
    fields as listed (encoder strang = d/2 c d/2): it loads as those stages, weights and
    function equal to the network it was trained as, and says so in the scheme's name."""
    import torch

    Cfg = sn.models.Seq2SeqConfig
    kw = {"d_model": 8, "n_heads": 2, "n_encoder_layers": 1, "n_decoder_layers": 1,
              "weights": "per-stage", "init": "gpt2"}
    old = Cfg(encoder_scheme="d:0.5,c:1,d:0.5", decoder_scheme="d:0.5,x:0.5,c:1,x:0.5,d:0.5", **kw)
    d = Cfg(encoder_scheme="strang", decoder_scheme="strang", **kw).to_dict()
    del d["init"]
    loaded = Cfg.from_dict(d)
    assert loaded.init == "gpt2" and "0.2 nesting" in loaded.stack_config("encoder").scheme.name
    torch.manual_seed(0)
    a = sn.models.SplitSeq2Seq.from_config(old).double().eval()
    b = sn.models.SplitSeq2Seq.from_config(loaded).double().eval()
    b.load_state_dict(a.state_dict())                 # same names and shapes
    src, tgt = torch.randint(0, 256, (2, 5)), torch.randint(0, 256, (2, 4))
    torch.testing.assert_close(a(src, tgt), b(src, tgt), rtol=0, atol=0)
    assert Cfg.from_dict(loaded.to_dict()) == loaded   # and it round-trips
    new = Cfg.from_dict({**d, "init": "gpt2"})         # today's dict: today's rule
    assert new.stack_config("encoder").scheme.stages == sn.schemes.get("strang").stages
