"""Cost accounting: FLOPs against the closed-form count, evaluations, parameters, CLI."""

import json

import pytest

import splitnet as sn
from splitnet import cli, cost

D, H, L, V, T = 64, 4, 2, 40, 16


def _closed_form_forward(n_attn, ffn_widths, d=D, t=T, v=V):
    """Matmul FLOPs per token: qkv + out projection 2*4 d^2, QK^T and AV 2*2*t*d (dense), each
    FFN 2*2*d*width, tied head 2*d*v."""
    return n_attn * (8 * d * d + 4 * t * d) + sum(4 * d * w for w in ffn_widths) + 2 * d * v


def _c(scheme, weights="shared", **kw):
    return cost.describe(scheme, weights=weights, d_model=D, n_heads=H, n_layers=L,
                         vocab_size=V, seq_len=T, **kw)


def test_lie_trotter_flops_match_closed_form():
    c = _c("lie-trotter")
    assert c.flops_forward == _closed_form_forward(L, [4 * D] * L)
    # backward of a matmul costs two matmuls, except that the embedding's gradient needs none
    assert 2.5 * c.flops_forward < c.flops_train <= 3 * c.flops_forward
    assert (c.attn_evals, c.ffn_evals, c.evals) == (L, L, 2 * L)


def test_strang_shared_vs_per_stage():
    sh, ps = _c("strang"), _c("strang", "per-stage")
    assert sh.flops_forward == _closed_form_forward(L, [4 * D] * 2 * L)
    assert ps.flops_forward == _closed_form_forward(L, [2 * D] * 2 * L)   # half-width FFNs
    assert ps.flops_forward == _c("lie-trotter").flops_forward            # Macaron matching
    assert sh.params == _c("lie-trotter").params
    assert sh.ffn_evals == ps.ffn_evals == 2 * L


@pytest.mark.parametrize("names", [
    sn.schemes.available("core") + ["ruth3", "forest-ruth4", "kahan-li6"],
    pytest.param(sn.schemes.available(), marks=pytest.mark.slow)])   # the zoo: ~2 s a scheme
def test_every_registry_scheme_counts_its_stages(names):
    for name in names:
        s = sn.schemes.get(name)
        c = _c(name, backward=False)
        nd, nc = s.n_stages("diffusion"), s.n_stages("convection")
        assert (c.attn_evals, c.ffn_evals) == (L * nd, L * nc)
        assert c.flops_forward == _closed_form_forward(L * nd, [4 * D] * L * nc)


def test_method_multiplies_evaluations():
    c = _c("strang", method="rk4", backward=False)
    assert (c.attn_evals, c.ffn_evals) == (4 * L, 8 * L)
    with pytest.raises(ValueError, match="fixed number"):
        _c("strang", method="exact")
    with pytest.raises(ValueError, match="seq_len"):
        cost.describe("strang", seq_len=0)


def test_format_table_has_every_row():
    rows = cost.table(["lie-trotter", "strang"], d_model=D, n_heads=H, n_layers=L,
                      vocab_size=V, seq_len=T, backward=False)
    md = cost.format_table(rows, markdown=True)
    assert md.count("\n") == 2 + 4 - 1 and "| strang | per-stage |" in md
    assert "strang" in cost.format_table(rows)


def test_cli_describe(capsys):
    rc = cli.main(["describe", "--scheme", "strang,sfsf", "--d-model", "32", "--n-heads", "2",
                   "--n-layers", "1", "--seq-len", "8", "--vocab-size", "11", "--json"])
    assert rc == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.strip().splitlines()]
    assert [(r["scheme"], r["weights"]) for r in rows] == [
        ("strang", "shared"), ("strang", "per-stage"), ("sfsf", "shared"), ("sfsf", "per-stage")]
    assert rows[2]["attn_evals"] == 2
    assert cli.main(["describe", "--scheme", "nope", "--d-model", "32", "--n-heads", "2"]) == 2
    with pytest.raises(SystemExit) as e:
        cli.main(["describe", "--help"])
    assert e.value.code == 0
    assert "--scheme" in capsys.readouterr().out
