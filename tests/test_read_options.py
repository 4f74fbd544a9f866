"""One rule for every option against the field kinds that read it (issue 62 D4): each field kind
declares the options only some kinds read that it reads (``FieldKind.reads``), each norm those
it reads (``options.NORMS``), and a network config refuses one set away from its default that
no kind of its network reads (``options.check_read``): ``activation`` with a SwiGLU or no
feed-forward, ``n_kv_heads`` / ``attention_bias`` / rotary options with a conv diffusion field,
``norm_eps`` with ``norm="none"``, ``d_ff`` without a feed-forward, ``conv_kernel`` without a
conv field.

The cases are generated from the declarations: every option some kind or norm reads, every
kind of every field of both network configs that does not read it, so a kind registered later
is covered without touching this file. A stored config (a checkpoint written before the rule)
still loads, its unread options reset to their defaults (they changed nothing)."""

from __future__ import annotations

import dataclasses

import pytest
from hostile import run_main

from splitnet.configs import kinds as K
from splitnet.configs.config import SplitConfig
from splitnet.configs.options import NORMS, flag, kind_option_fields, readers
from splitnet.configs.seq2seq import Seq2SeqConfig

CONFIGS = {"lm": (SplitConfig, {"vocab_size": 64, "d_model": 16, "n_heads": 4, "n_layers": 1,
                                "max_len": 16}),
           "seq2seq": (Seq2SeqConfig, {"d_model": 16, "n_heads": 4, "n_encoder_layers": 1,
                                       "n_decoder_layers": 1})}


def _other(cls, name):
    """A valid value of option ``name`` other than its default (read from the field)."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    choices = f.metadata.get("choices")
    if choices:
        return next(c for c in choices if c != f.default)
    if f.default is None:
        return 1                                    # d_ff, n_kv_heads: any width / count
    if isinstance(f.default, bool):
        return not f.default
    if isinstance(f.default, int):
        return f.default + 2                        # conv_kernel 5: odd, as a centred window
    return f.default * 2 if f.default else 0.5


def _avoiding(cls, name):
    """For each kind option of ``cls`` the kinds not reading ``name``, and the norms not
    reading it (empty where every kind reads it)."""
    fields = {K.option_name(f): [k for k in K.serving(f) if name not in K.KINDS[k].reads]
              for f in kind_option_fields(cls)}
    return fields, [n for n, reads in NORMS.items() if name not in reads]


def _cases():
    """(config, option, field option, kind) for every kind not reading an option, the other
    fields and the norm on kinds that do not read it either."""
    out = []
    for net, (cls, _) in CONFIGS.items():
        names = {f.name for f in dataclasses.fields(cls)}
        for name in readers():
            if name not in names:
                continue
            fields, norms = _avoiding(cls, name)
            if not norms or not all(fields.values()):
                continue
            for option, kinds in fields.items():
                out += [(net, name, option, kind) for kind in kinds]
    return out


def _network(cls, name, choose):
    fields, norms = _avoiding(cls, name)
    kw = {option: kinds[0] for option, kinds in fields.items()}
    return {**kw, "norm": norms[0], **choose}


CASES = _cases()


def test_the_cases_cover_what_the_issue_names():
    have = {(name, option, kind) for net, name, option, kind in CASES}
    for case in [("activation", "convection_field", "swiglu"),
                 ("activation", "convection_field", "none"),
                 ("n_kv_heads", "diffusion_field", "conv"),
                 ("attention_bias", "diffusion_field", "conv"),
                 ("rotary_pct", "diffusion_field", "conv"),
                 ("d_ff", "convection_field", "none"),
                 ("conv_kernel", "diffusion_field", "attention")]:
        assert case in have, case
    assert ("norm_eps", "diffusion_field", "attention") in have       # with --norm none
    assert len(CASES) >= 20


@pytest.mark.parametrize("net, name, option, kind", CASES,
                         ids=[f"{n}-{o}-{f}={k}" for n, o, f, k in CASES])
def test_an_option_no_kind_of_the_network_reads_is_refused(net, name, option, kind):
    cls, base = CONFIGS[net]
    kw = {**base, **_network(cls, name, {option: kind})}
    cls(**kw)                                           # at its default: taken
    value = _other(cls, name)
    with pytest.raises(ValueError) as info:
        cls(**kw, **{name: value})
    msg = str(info.value)
    assert msg.startswith(f"{name}={value!r} ({flag(name)}) is read only with ") and \
        "\n" not in msg, msg
    for o, k in readers()[name]:                      # says what would read it
        if o in {f.name for f in dataclasses.fields(cls)}:
            assert f"{flag(o)} {k}" in msg, msg
    assert f"{flag(option)} {kind}" in msg            # and what this network has


@pytest.mark.parametrize("net", list(CONFIGS))
def test_each_reader_takes_the_option(net):
    """The positive side: with a kind (or norm) that reads it, each option is taken."""
    cls, base = CONFIGS[net]
    names = {f.name for f in dataclasses.fields(cls)}
    tried = 0
    for name, who in readers().items():
        if name not in names:
            continue
        for option, kind in who:
            if option not in names:
                continue
            kw = {**base, **_network(cls, name, {option: kind})}
            if option != "norm" and not _avoiding(cls, name)[1]:
                continue
            value = _other(cls, name)
            if name == "rotary_base":
                kw["rotary_pct"] = 0.5
            if name in ("window_layers", "local_rotary_base"):   # refine the window's layers
                kw.update(sliding_window=4, rotary_pct=0.5)
                value = (0,) if name == "window_layers" else value
            cfg = cls(**kw, **{name: value})
            assert getattr(cfg, name) == value
            tried += 1
    assert tried >= 5


def test_a_stored_config_with_an_unread_option_still_loads():
    """A checkpoint's config written before the rule: the unread option reset, the same
    network (the option changed nothing)."""
    from splitnet.nets.models import SplitTransformer

    d = SplitConfig(vocab_size=64, d_model=16, n_heads=4, n_layers=1, max_len=16,
                    convection_field="swiglu").to_dict()
    old = {**d, "activation": "relu"}
    cfg = SplitConfig.from_dict(old)
    assert cfg.activation == "gelu" and cfg == SplitConfig.from_dict(d)
    assert SplitTransformer.from_config(cfg).n_params() == \
        SplitTransformer.from_config(SplitConfig.from_dict(d)).n_params()
    with pytest.raises(ValueError, match="activation='relu'"):
        SplitConfig(**old)                              # given, not stored: refused
    s2s = {**Seq2SeqConfig(diffusion_field="conv", convection_field="none").to_dict(),
           "d_ff": 99, "norm": "none", "norm_eps": 0.1}
    back = Seq2SeqConfig.from_dict(s2s)
    assert (back.norm_eps, back.norm) == (1e-5, "none")


def test_replace_carries_no_option_the_new_network_does_not_read():
    """replace(convection_field="none") of a config whose d_ff was filled in (4 d_model) is
    taken; a d_ff given with it is not."""
    cfg = SplitConfig(vocab_size=64, d_model=16, n_heads=4, n_layers=1, max_len=16)
    assert cfg.replace(convection_field="none").convection_field == "none"
    with pytest.raises(ValueError, match=r"d_ff=32 \(--d-ff\) is read only with"):
        cfg.replace(convection_field="none", d_ff=32)
    relu = cfg.replace(activation="relu")
    assert relu.replace(convection_field="swiglu").activation == "gelu"


def _main(argv) -> tuple[int, str]:
    rc, _, err = run_main(argv)
    return rc, err


@pytest.mark.parametrize("argv", [
    ["--convection-field", "swiglu", "--activation", "gelu"],       # typed, at its default
    ["--diffusion-field", "conv", "--n-kv-heads", "2"],
    ["--norm", "none", "--norm-eps", "1e-5"],
    ["--task", "translate", "--diffusion-field", "conv", "--convection-field", "none",
     "--cross-field", "multistep", "--init", "convs2s", "--norm", "none", "--d-ff", "64"],
])
def test_the_command_line_refuses_in_one_line_before_any_work(argv, tmp_path):
    rc, err = _main(["train", *argv, "--steps", "1", "--out", tmp_path / "run"])
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "only applies with" in err or "is read only with" in err, err
    assert not (tmp_path / "run").exists()
