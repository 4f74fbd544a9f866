"""Cost accounting: the closed forms (splitnet.kinds, splitnet.cost) are exact -- equal to the
parameters of the model built and to FlopCounterMode on it (meta device) -- for every scheme,
weights mode, gate, field kind and sub-flow method; evaluations per field; the table; the CLI."""

import json

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import splitnet as sn
from splitnet import cli, cost
from splitnet.configs.config import SplitConfig
from splitnet.nets.models import SplitTransformer

D, H, L, V, T = 64, 4, 2, 40, 16


def _closed_form_forward(n_attn, ffn_widths, d=D, t=T, v=V):
    """Matmul FLOPs per token: qkv + out projection 2*4 d^2, QK^T and AV 2*2*t*d (dense), each
    FFN 2*2*d*width, tied head 2*d*v."""
    return n_attn * (8 * d * d + 4 * t * d) + sum(4 * d * w for w in ffn_widths) + 2 * d * v


def _c(scheme, weights="shared", **kw):
    return cost.describe(scheme, weights=weights, d_model=D, n_heads=H, n_layers=L,
                         vocab_size=V, seq_len=T, **kw)


def _measured(config: SplitConfig, seq_len: int, backward: bool = False):
    """(parameters, non-embedding parameters, FLOPs per token) of the model itself: built on the
    meta device (no memory, no arithmetic) and run under FlopCounterMode."""
    with torch.device("meta"):
        model = SplitTransformer.from_config(config)
    idx = torch.zeros(2, seq_len, dtype=torch.long, device="meta")
    fc = FlopCounterMode(display=False)
    with fc:
        out = model(idx)
        if backward:
            out.float().sum().backward()
    return model.n_params(), model.n_params(embeddings=False), fc.get_total_flops() / (2 * seq_len)


def _assert_exact(seq_len=T, backward=False, **options):
    config = SplitConfig(**{"d_model": 16, "n_heads": 2, "n_layers": 2, "vocab_size": 11,
                            "max_len": seq_len, **options})
    c = cost.describe(config, seq_len=seq_len)
    n, n_ne, flops = _measured(config, seq_len, backward)
    assert (c.params, c.params_non_embedding) == (n, n_ne), options
    assert (c.flops_train if backward else c.flops_forward) == flops, options


# variants of a scheme: weights, gates, the conv kind, sub-flow methods
VARIANTS = [
    {"weights": "shared"},
    {"weights": "per-stage"},
    {"weights": "per-stage", "diffusion_field": "conv", "gate": "tanh", "gate_layers": [1]},
    {"weights": "shared", "diffusion_field": "conv", "conv_kernel": 4, "method": "midpoint"},
    {"weights": "per-stage", "gate": "sigmoid", "gate_fields": "convection", "method": "rk4"},
]


@pytest.mark.heavy
@pytest.mark.parametrize("scheme", sn.schemes.available("core") + ["sfsf", "ruth3"])
def test_closed_forms_are_exact_for_the_core_schemes(scheme):
    for v in VARIANTS:
        _assert_exact(scheme=scheme, **v)


@pytest.mark.slow
@pytest.mark.parametrize("scheme", sn.schemes.available())
def test_closed_forms_are_exact_for_every_registry_scheme(scheme):
    for v in VARIANTS:
        _assert_exact(scheme=scheme, **v)


@pytest.mark.parametrize("options", [
    {"scheme": "c:0.25,d:0.5,d+c:0.5,c:0.25", "weights": "per-stage"},   # a sum stage
    {"scheme": "c:0.25,d:0.5,d+c:0.5,c:0.25", "gate": "sigmoid", "diffusion_field": "conv"},
    {"scheme": "strang", "diffusion_field": "conv", "causal": False, "conv_kernel": 5},
    {"scheme": "strang", "activation": "relu", "d_ff": 24, "weights": "per-stage"},
    # issue 61: heads of their own width, q/k norms per head and over the projection
    {"head_dim": 12, "n_kv_heads": 1, "qk_norm": "head", "norm": "rms", "attention_bias": "qkv"},
    {"head_dim": 6, "qk_norm": "projection", "scheme": "strang", "weights": "per-stage"},
    {"qk_norm": "head", "attention_bias": "none", "positions": "none", "rotary_pct": 1.0},
    {"norm_position": "sandwich", "norm": "rms", "convection_field": "swiglu"},
    {"norm_position": "post", "scheme": "strang", "qk_norm": "projection"},
    {"convection_field": "geglu", "norm": "rms_offset", "scale_embedding": True,
     "weights": "per-stage", "scheme": "strang"},
    # Gemma 2 / 3: soft-caps (element-wise: no FLOPs), the attention scalar, windows on some
    # layers (a mask: counted dense, as FlopCounterMode counts attention), two rotary bases
    {"attention_softcap": 50.0, "logit_softcap": 30.0, "attention_scalar": 12.0,
     "sliding_window": 4, "window_layers": [0], "n_kv_heads": 1, "head_dim": 12},
    {"sliding_window": 3, "local_rotary_base": 100.0, "positions": "none", "rotary_pct": 1.0,
     "qk_norm": "head", "norm": "rms_offset", "norm_position": "sandwich", "scheme": "strang"},
])
def test_closed_forms_are_exact_for_sum_stages_and_options(options):
    _assert_exact(**options)


@pytest.mark.parametrize("options", [
    {"scheme": "lie-trotter"},
    {"scheme": "strang", "weights": "per-stage", "gate": "tanh", "method": "midpoint"},
    {"scheme": "strang", "diffusion_field": "conv"},
])
def test_training_flops_are_three_times_forward(options):
    """Each matmul's backward is two matmuls of its size; the embedding lookup is none."""
    _assert_exact(backward=True, **options)


def test_lie_trotter_flops_match_closed_form():
    c = _c("lie-trotter")
    assert c.flops_forward == _closed_form_forward(L, [4 * D] * L)
    assert c.flops_train == 3 * c.flops_forward
    assert c.evals == {"diffusion": L, "convection": L} and c.n_evals == 2 * L
    assert c.kinds == {"diffusion": "attention", "convection": "feedforward"}


def test_strang_shared_vs_per_stage():
    sh, ps = _c("strang"), _c("strang", "per-stage")
    assert sh.flops_forward == _closed_form_forward(L, [4 * D] * 2 * L)
    assert ps.flops_forward == _closed_form_forward(L, [2 * D] * 2 * L)   # half-width FFNs
    assert ps.flops_forward == _c("lie-trotter").flops_forward            # Macaron matching
    assert sh.params == _c("lie-trotter").params
    assert sh.evals["convection"] == ps.evals["convection"] == 2 * L


def test_every_registry_scheme_counts_its_stages():
    for name in sn.schemes.available():
        s = sn.schemes.get(name)
        c = _c(name)
        nd, nc = s.n_stages("diffusion"), s.n_stages("convection")
        assert c.evals == {"diffusion": L * nd, "convection": L * nc}
        assert c.flops_forward == _closed_form_forward(L * nd, [4 * D] * L * nc)


def test_conv_field_counts():
    c = _c("lie-trotter", diffusion_field="conv", conv_kernel=5)
    assert c.kinds["diffusion"] == "conv"
    assert c.flops_forward == L * (22 * D * D + 4 * D * 4 * D) + 2 * D * V
    assert c.params_non_embedding == L * (11 * D * D + 5 * D + 8 * D * D + 4 * D + 3 * D) + 2 * D


def test_method_multiplies_evaluations():
    c = _c("strang", method="rk4")
    assert c.evals == {"diffusion": 4 * L, "convection": 8 * L}
    with pytest.raises(ValueError, match="fixed number"):
        _c("strang", method="exact")
    with pytest.raises(ValueError, match="seq_len"):
        cost.describe("strang", seq_len=0)


def test_format_table_has_every_row_and_a_column_per_field():
    rows = cost.table(["lie-trotter", "strang"], d_model=D, n_heads=H, n_layers=L,
                      vocab_size=V, seq_len=T)
    md = cost.format_table(rows, markdown=True)
    assert md.count("\n") == 2 + 4 - 1 and "| strang | per-stage |" in md
    assert "diffusion evals/tok" in md and "convection evals/tok" in md
    assert "strang" in cost.format_table(rows)


def test_training_mfu_uses_the_closed_form():
    from splitnet.training.setup import flops_per_token

    for kw in ({"scheme": "strang", "weights": "per-stage"}, {"diffusion_field": "conv"},
               {"scheme": "strang", "method": "midpoint", "gate": "tanh"}):
        config = SplitConfig(d_model=16, n_heads=2, n_layers=2, vocab_size=11, max_len=8, **kw)
        model = SplitTransformer.from_config(config)
        assert flops_per_token(model, 8) == cost.describe(config, seq_len=8).flops_train
    exact = SplitTransformer.from_config(config.replace(method="exact"))
    assert flops_per_token(exact, 8) == cost.forward_flops(config, 8, evals=1) * 3


def test_cli_describe(capsys):
    rc = cli.main(["describe", "--schemes", "strang,sfsf", "--d-model", "32", "--n-heads", "2",
                   "--n-layers", "1", "--seq-len", "8", "--vocab-size", "11", "--jsonl"])
    assert rc == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.strip().splitlines()]
    assert [(r["scheme"], r["weights"]) for r in rows] == [
        ("strang", "shared"), ("strang", "per-stage"), ("sfsf", "shared"), ("sfsf", "per-stage")]
    assert rows[2]["evals"] == {"diffusion": 2, "convection": 2} and rows[2]["n_evals"] == 4
    assert cli.main(["describe", "--scheme", "nope", "--d-model", "32", "--n-heads", "2"]) == 2
    assert cli.main(["describe", "--diffusion-field", "conv", "--d-model", "32", "--n-heads",
                     "2", "--weights", "shared"]) == 0
    assert "diffusion = conv" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        cli.main(["describe", "--help"])
    assert e.value.code == 0
    assert "--scheme" in capsys.readouterr().out


def test_the_cost_numbers_in_docs_networks_are_the_closed_forms():
    """docs/networks.md's cost table (experiments/cost_table.py, `regen costs`) and its conv
    sentence state parameters and FLOPs: every row is what the closed forms give now, and the
    Lie-Trotter conv network (k = 3, 256 tokens) has the parameters and GFLOP/token it says."""
    import importlib.util
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("cost_table", root / "experiments" /
                                                  "cost_table.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    doc = (root / "docs" / "networks.md").read_text()
    block = doc[doc.index(script.START):doc.index(script.END)]

    def rows(text):                     # the data rows of a markdown table (header wording aside)
        return [ln for ln in text.splitlines() if ln.startswith("| ") and "---" not in ln][1:]

    assert rows(block) == rows(script.table()) and len(rows(block)) == 2 * 7
    size = {"d_model": 512, "n_heads": 8, "n_layers": 6, "vocab_size": 256}
    conv = cost.describe(scheme="lie-trotter", diffusion_field="conv", conv_kernel=3, **size)
    attn = cost.describe(scheme="lie-trotter", **size)
    num = r"(\d+\.\d+)"
    said = re.search(rf"has {num}M parameters and {num} forward\s+GFLOP/token against {num}M "
                     rf"and {num}", doc).groups()
    assert said == (f"{conv.params / 1e6:.3f}", f"{conv.flops_forward / 1e9:.4f}",
                    f"{attn.params / 1e6:.3f}", f"{attn.flops_forward / 1e9:.4f}")
