"""Field kinds: each kind's module (shapes, leading dims), its closed-form parameters and FLOPs
against the real module and FlopCounterMode, the flags generation reads; the GLU convolution
(formula, causality, locality, the centred window); the registry and the config option."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from splitnet import kinds as K
from splitnet.configs.config import SplitConfig
from splitnet.configs.options import read_options, readers
from splitnet.configs.plan import LayerField
from splitnet.fields import Gated, GLUConv
from splitnet.nets.models import SplitTransformer

D, N, M = 16, 7, 5
dt = torch.float64


def _cfg(**kw) -> SplitConfig:
    return SplitConfig(**{"vocab_size": 11, "d_model": D, "n_heads": 4, "n_layers": 2,
                          "max_len": 16, **kw})


def _cfg_for(kind, **kw) -> SplitConfig:
    """A config whose network has ``kind`` where a SplitConfig can (cross kinds: beside its
    defaults), with those of ``kw`` that only some kinds read only where a kind of it reads
    them (options.check_read refuses the others)."""
    own = {K.option_name(kind.serves): kind.name} if kind.serves in (
        "diffusion", "convection") else {}
    base = _cfg(**own, **{k: v for k, v in kw.items() if k not in readers()})
    read = read_options(base)
    return base.replace(**{k: v for k, v in kw.items() if k in readers() and k in read})


def _x(*shape, seed=0):
    return torch.randn(*shape, dtype=dt, generator=torch.Generator().manual_seed(seed))


def _call(module, x, memory=None):
    if memory is None:
        return module(0.0, x)
    if getattr(module, "reads_embedding", False):      # ConvS2S's attention: g = x will do
        return module(0.0, x, memory=memory, target_embedding=x)
    return module(0.0, x, memory=memory)


def _memory(kind, *lead, seed=None):
    """A memory of the width ``kind`` reads ([z | e] for ConvS2S's attention)."""
    shape = (*lead, M, D * kind.memory_parts)
    return torch.zeros(shape) if seed is None else _x(*shape, seed=seed)


def _all_kinds():
    """Every registered kind that builds a module ('none' builds none), and each gated."""
    plain = [K.get_kind(name) for name in K.KINDS if not K.KINDS[name].absent]
    return plain + [K.GatedKind(k, "tanh") for k in plain]


# the network options that change a kind's module: the norm, grouped-query attention, biases
VARIANTS = [{}, {"norm": "rms", "n_kv_heads": 2, "attention_bias": "qkv"},
            {"norm": "rms", "n_kv_heads": 1, "attention_bias": "none"},
            # Gemma 2's attention: the explicit soft-capped product instead of SDPA
            {"norm": "rms_offset", "n_kv_heads": 2, "attention_softcap": 2.0,
             "attention_scalar": 5.0}]


@pytest.mark.parametrize("kind", _all_kinds(), ids=repr)
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("variant", VARIANTS, ids=["gpt2", "rms-gqa-qkv", "rms-mqa-none",
                                                   "gemma2-softcap"])
def test_closed_forms_equal_the_module_and_flop_counter(kind, causal, variant):
    cfg = _cfg_for(kind, causal=causal, conv_kernel=5, **variant)
    width = 24 if kind.default_width(cfg) is not None else None
    with torch.device("meta"):
        module = kind.build(cfg, width)
        x = torch.zeros(2, N, D)
        memory = _memory(kind, 2) if kind.uses_memory else None
    assert kind.params(cfg, width) == sum(p.numel() for p in module.parameters())
    fc = FlopCounterMode(display=False)
    with fc:
        _call(module, x, memory)
    want = kind.flops(cfg, width, seq_len=N, memory_len=M if memory is not None else 0)
    assert fc.get_total_flops() == pytest.approx(want * 2 * N, rel=1e-12)
    # what generation reads from the module is what the kind says
    assert module.mixes_tokens == kind.mixes_tokens
    assert module.supports_cache == kind.cacheable(cfg)
    assert getattr(module, "uses_memory", False) == kind.uses_memory
    assert isinstance(module, Gated) == isinstance(kind, K.GatedKind)


@pytest.mark.parametrize("name", [n for n in K.KINDS if not K.KINDS[n].absent])
def test_every_kind_works_on_any_leading_dims(name):
    torch.manual_seed(0)
    kind = K.get_kind(name)
    module = kind.build(_cfg(causal=True)).double().eval()
    memory = _memory(kind, seed=3) if kind.uses_memory else None
    x = _x(3, 2, N, D)
    y = _call(module, x, memory)
    assert y.shape == x.shape
    want = torch.stack([_call(module, x[i], memory) for i in range(3)])
    torch.testing.assert_close(y, want, rtol=0, atol=1e-12)
    torch.testing.assert_close(_call(module, x[0, 0], memory), y[0, 0], rtol=0, atol=1e-12)


def test_glu_conv_is_the_windowed_formula():
    """y_i = W_o (a_i * sigmoid(b_i)), [a; b]_i = c + sum_m W_m h_{i-k+1+m}, h = LN(x), zero
    before the first token (causal)."""
    torch.manual_seed(0)
    k = 3
    g = GLUConv(D, kernel_size=k).double()
    x = _x(2, N, D)
    h = F.layer_norm(x, (D,), g.norm.weight, g.norm.bias, g.norm.eps)
    rows = []
    for i in range(N):
        z = g.conv.bias.clone().expand(2, 2 * D).clone()
        for m in range(k):
            j = i - k + 1 + m
            if j >= 0:
                z = z + h[:, j] @ g.conv.weight[:, :, m].T
        a, b = z[:, :D], z[:, D:]
        rows.append(g.proj(a * torch.sigmoid(b)))
    torch.testing.assert_close(g(0.0, x), torch.stack(rows, 1), rtol=0, atol=1e-12)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_causal_conv_sees_exactly_the_last_k_tokens(k):
    torch.manual_seed(0)
    g = GLUConv(D, kernel_size=k).double()
    x = _x(1, 10, D)
    j = 5
    y = x.clone()
    y[:, j] += _x(1, D, seed=1)                    # change token j only
    moved = (g(0.0, x) - g(0.0, y)).abs().amax(-1)[0]
    assert (moved[:j] == 0).all()                  # the past never sees the future
    assert (moved[j:j + k] > 1e-6).all()           # tokens j .. j+k-1 see token j
    assert (moved[j + k:] == 0).all()              # a local interaction: nobody further


@pytest.mark.parametrize("k", [1, 3, 5])
def test_centred_conv_sees_both_sides(k):
    torch.manual_seed(0)
    g = GLUConv(D, kernel_size=k, causal=False).double()
    x = _x(1, 11, D)
    j, r = 5, (k - 1) // 2
    y = x.clone()
    y[:, j] += _x(1, D, seed=1)
    moved = (g(0.0, x) - g(0.0, y)).abs().amax(-1)[0]
    inside = torch.zeros(11, dtype=torch.bool)
    inside[j - r:j + r + 1] = True
    assert (moved[inside] > 1e-6).all() and (moved[~inside] == 0).all()


def test_glu_conv_errors():
    with pytest.raises(ValueError, match="odd kernel_size"):
        GLUConv(D, kernel_size=4, causal=False)
    with pytest.raises(ValueError, match="kernel_size"):
        GLUConv(D, kernel_size=0)
    with pytest.raises(ValueError, match="d_model=16"):
        GLUConv(D)(0.0, torch.zeros(3, 8))
    with pytest.raises(ValueError, match="n_tokens"):
        GLUConv(D)(0.0, torch.zeros(D))


# ---------------------------------------------------------------------------------------------
# the registry and the config


def test_the_registry():
    for name, cls in K.KINDS.items():
        assert cls.name == name and cls.serves and (cls.absent or ":" in cls.module)
    none = K.get_kind("none")
    assert none.absent and none.params(_cfg()) == 0 and none.flops(_cfg()) == 0
    with pytest.raises(ValueError, match="builds nothing"):
        none.build(_cfg())
    assert K.serving("diffusion")[0] == "attention" and "conv" in K.serving("diffusion")
    assert K.serving("convection")[0] == "feedforward"      # the default: the first registered
    assert K.kind_of(_cfg(), "convection").name == "feedforward"
    assert K.kind_of(_cfg(diffusion_field="conv"), "diffusion").name == "conv"
    assert K.kind_of(_cfg(), "cross").name == "cross"
    with pytest.raises(ValueError, match="unknown field kind 'rnn'"):
        K.get_kind("rnn")
    with pytest.raises(ValueError, match="no field kind is registered for the field 'gravity'"):
        K.kind_of(_cfg(), "gravity")


def test_the_config_option_takes_its_choices_from_the_registry():
    from splitnet.configs.config import SplitConfig as C

    field = C.__dataclass_fields__["diffusion_field"]
    assert tuple(field.metadata["choices"]) == K.serving("diffusion")
    with pytest.raises(ValueError, match="'feedforward' serves convection, not diffusion"):
        _cfg(diffusion_field="feedforward")
    with pytest.raises(ValueError, match="conv_kernel"):
        _cfg(conv_kernel=0)
    with pytest.raises(ValueError, match="odd conv_kernel"):
        _cfg(diffusion_field="conv", causal=False, conv_kernel=2)
    with pytest.raises(ValueError, match=r"conv_kernel=2 \(--conv-kernel\) is read only with "
                                         r"--diffusion-field conv, and this network has "
                                         r"--diffusion-field attention"):
        _cfg(diffusion_field="attention", causal=False, conv_kernel=2)   # it would be ignored


def test_an_old_config_without_the_options_loads_with_the_defaults():
    d = _cfg().to_dict()
    del d["diffusion_field"], d["conv_kernel"]
    c = SplitConfig.from_dict(d)
    assert (c.diffusion_field, c.conv_kernel) == ("attention", 3)


@pytest.mark.parametrize("scheme, match", [
    ("a:1,c:1", r"has the fields diffusion and convection; .* advances a: no field kind serves"),
    ("c:0.5,d:1,x:1,c:0.5", r"advances cross: cross reads a memory .* SplitSeq2Seq"),
])
def test_a_model_refuses_a_field_it_has_no_kind_for(scheme, match):
    with pytest.raises(ValueError, match=match):
        SplitTransformer(11, D, 4, 1, scheme=scheme)


def test_a_conv_model_builds_conv_fields_with_the_macaron_matching():
    m = SplitTransformer(11, D, 4, 2, scheme="strang", weights="per-stage",
                         diffusion_field="conv", conv_kernel=4)
    lay = m.layers[0]
    assert all(isinstance(f, GLUConv) and f.kernel_size == 4 and f.causal
               for f in lay.diffusion)
    assert [f.fc1.out_features for f in lay.convection] == [2 * D, 2 * D]
    # the conv's output projection is a residual projection: GPT-2's scaled init
    std = lay.diffusion[0].proj.weight.std().item()
    assert std < 0.02 / 2 * 1.5 and lay.diffusion[0].conv.weight.std().item() > 0.015


# -- what each kind declares: residual outputs (GPT-2's scaled init), options, GPT-2 map -------


@pytest.mark.parametrize("kind", _all_kinds(), ids=repr)
def test_gpt2_init_scales_exactly_the_declared_residual_outputs(kind):
    """Every registered kind, plain and gated: each declared residual output exists and is drawn
    N(0, 0.02 / sqrt(n)); every other matrix N(0, 0.02). No name rule: the declaration."""
    from splitnet.integrators.layers import SplitLayer
    from splitnet.nets.init import init_gpt2, residual_outputs
    from splitnet.stagelists.stages import Stage

    assert kind.residual_outputs, f"{kind!r} declares no residual output"
    torch.manual_seed(0)
    cfg = _cfg(d_model=64, n_heads=4, conv_kernel=3)
    layer = SplitLayer([Stage(kind.serves, 1.0)], fields={kind.serves: kind.build(cfg)})
    plan = (LayerField(kind.serves, kind, None, 1, True),)
    declared = residual_outputs([layer], [plan])
    module = layer.field_modules(kind.serves)[0]
    assert [id(p) for p in declared] == [id(module.get_parameter(n))
                                        for n in kind.residual_outputs]
    n = 16
    init_gpt2(layer, n, declared)
    ids = {id(p) for p in declared}
    for name, p in layer.named_parameters():
        if p.dim() < 2:
            continue
        want = 0.02 / n ** 0.5 if id(p) in ids else 0.02
        assert float(p.detach().std()) == pytest.approx(want, rel=0.15), name


def test_a_declared_residual_output_the_module_lacks_is_an_error():
    from splitnet.integrators.layers import SplitLayer
    from splitnet.nets.init import residual_outputs
    from splitnet.stagelists.stages import Stage

    class Wrong(K.FeedForwardKind):
        residual_outputs = ("out.weight",)

    kind = Wrong()
    layer = SplitLayer([Stage("convection", 1.0)], fields={"convection": kind.build(_cfg())})
    with pytest.raises(ValueError, match=r"declares the residual output 'out\.weight', which "
                                         r"FeedForward does not have"):
        residual_outputs([layer], [(LayerField("convection", kind, None, 1, True),)])


def test_a_model_scales_the_declared_outputs_of_every_stack():
    from splitnet.nets.seq2seq import SplitSeq2Seq

    torch.manual_seed(0)
    m = SplitSeq2Seq(11, 11, 64, 4, n_encoder_layers=1, n_decoder_layers=1, init="gpt2",
                     pad_id=0, bos_id=1, eos_id=2, max_len=8)
    small = {n for n, p in m.named_parameters() if p.dim() >= 2 and float(p.detach().std()) < 0.012}
    assert small == {"encoder_layers.0.diffusion.proj.weight",
                     "encoder_layers.0.convection.fc2.weight",
                     "decoder_layers.0.diffusion.proj.weight",
                     "decoder_layers.0.cross.proj.weight",
                     "decoder_layers.0.convection.fc2.weight"}


def test_each_field_a_kind_serves_gets_a_generated_option():
    from splitnet.cli import build_parser
    from splitnet.cli.commands.cmd_train import config_from_args
    from splitnet.configs.options import kind_option_fields
    from splitnet.configs.seq2seq import Seq2SeqConfig

    assert kind_option_fields(SplitConfig) == ("diffusion", "convection")
    assert kind_option_fields(Seq2SeqConfig) == ("diffusion", "convection", "cross")
    assert (SplitConfig().convection_field, Seq2SeqConfig().cross_field) == ("feedforward",
                                                                              "cross")
    s2s = Seq2SeqConfig()
    assert s2s.stack_config("decoder").cross_field == "cross"
    with pytest.raises(ValueError, match="field kind 'attention' serves diffusion, not cross"):
        Seq2SeqConfig(cross_field="attention")
    with pytest.raises(ValueError, match="unknown convection field kind 'feedfwd'; did you mean "
                                         "feedforward"):
        SplitConfig(convection_field="feedfwd")
    p = build_parser("train")
    cfg, _ = config_from_args(p.parse_args(["--task", "translate", "--cross-field", "cross",
                                            "--convection-field", "feedforward"]))
    assert (cfg.model.cross_field, cfg.model.convection_field) == ("cross", "feedforward")
    with pytest.raises(ValueError, match="--cross-field: encoder–decoder option"):
        config_from_args(p.parse_args(["--task", "lm", "--cross-field", "cross"]))
    with pytest.raises(SystemExit):
        p.parse_args(["--convection-field", "attention"])


class SwiGLU(torch.nn.Module):
    """A SwiGLU feed-forward (Shazeer 2020): ``W3 (silu(W1 LN x) * W2 LN x)``, no biases."""

    uses_memory, mixes_tokens, supports_cache = False, False, False

    def __init__(self, d_model: int, d_ff: int, norm_eps: float = 1e-5):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d_model, eps=norm_eps)
        self.w1 = torch.nn.Linear(d_model, d_ff, bias=False)
        self.w2 = torch.nn.Linear(d_model, d_ff, bias=False)
        self.w3 = torch.nn.Linear(d_ff, d_model, bias=False)

    def forward(self, t, x):
        h = self.norm(x)
        return self.w3(F.silu(self.w1(h)) * self.w2(h))


class SwiGLUKind(K.FieldKind):
    name, serves, module = "swiglu", "convection", f"{__name__}:SwiGLU"
    summary, mixes_tokens, residual_outputs = "SwiGLU", False, ("w3.weight",)
    reads = ("d_ff",)

    def default_width(self, config):
        return config.d_ff

    def arguments(self, config, width):
        return {"d_model": config.d_model, "d_ff": self._width(config, width),
                "norm_eps": config.norm_eps}

    def params(self, config, width=None):
        return 3 * config.d_model * self._width(config, width) + 2 * config.d_model

    def flops(self, config, width=None, seq_len=1, memory_len=0):
        return 6.0 * config.d_model * self._width(config, width)


def test_a_new_kind_is_a_module_and_one_registry_entry(monkeypatch):
    """Nothing else: the configs and the command line offer it, networks build it, the GPT-2
    rule scales its declared output, the cost counts it, export refuses it as a GPT-2."""
    from splitnet.cli import build_parser
    from splitnet.configs.seq2seq import Seq2SeqConfig
    from splitnet.interop.convert import gpt2_mismatch
    from splitnet.nets.cost import count_params
    from splitnet.nets.seq2seq import SplitSeq2Seq

    monkeypatch.setitem(K.KINDS, "swiglu", SwiGLUKind)
    assert "swiglu" in SplitConfig.__dataclass_fields__["convection_field"].metadata["choices"]
    args = build_parser("train").parse_args(["--convection-field", "swiglu"])
    assert args.convection_field == "swiglu"
    torch.manual_seed(0)
    m = SplitTransformer(11, 64, 4, 2, convection_field="swiglu", max_len=8)
    ffn = m.layers[1].convection
    assert isinstance(ffn, SwiGLU) and ffn.w1.out_features == 256
    assert float(ffn.w3.weight.detach().std()) == pytest.approx(0.01, rel=0.1)   # 0.02/sqrt(4)
    assert float(ffn.w1.weight.detach().std()) == pytest.approx(0.02, rel=0.1)
    assert count_params(m.config) == (m.n_params(), m.n_params(embeddings=False))
    assert m(torch.tensor([[1, 2, 3]])).shape == (1, 3, 11)
    why = gpt2_mismatch(m)
    assert "convection field kind 'swiglu' has no GPT-2 counterpart (GPT-2 maps attention, " \
           "feedforward)" in why
    s2s = SplitSeq2Seq(11, 11, 16, 4, convection_field="swiglu", pad_id=0, bos_id=1, eos_id=2,
                       max_len=8)
    assert all(isinstance(lay.convection, SwiGLU)
               for lay in [*s2s.encoder_layers, *s2s.decoder_layers])
    assert Seq2SeqConfig.from_dict(s2s.config.to_dict()).convection_field == "swiglu"
