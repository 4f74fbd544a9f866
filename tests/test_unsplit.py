"""The unsplit scheme: one stage advancing the sum of the fields (the parallel block), and mixed
schemes of sum and single stages. Float64, non-commuting fields."""

from __future__ import annotations

import pytest
import torch

import splitnet as sn
from splitnet.analyses.problems import decoder_system, particle_system


def _rk4(f, x, h):
    k1 = f(x)
    k2 = f(x + h / 2 * k1)
    k3 = f(x + h / 2 * k2)
    k4 = f(x + h * k3)
    return x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


def test_parallel_is_registered_apart_as_the_exact_flow():
    p = sn.schemes.get("parallel")
    assert p.stages == (sn.Stage("diffusion+convection", 1.0),) and p.is_exact
    assert "parallel" in sn.schemes.available("unsplit")
    assert "parallel" in sn.schemes.available("all")
    assert "parallel" not in sn.schemes.available() + sn.schemes.available("splitting")
    assert p.effective_order("euler") == 1 and p.effective_order("rk4") == 4
    r = sn.check_order(p)
    assert r.ok and "exact flow" in r.summary()           # not reported as a failure
    assert sn.schemes.get("gpt-j") == p


def test_parallel_with_euler_is_the_parallel_block_and_with_rk4_classical_rk4():
    F, G, x0 = particle_system()
    p = sn.schemes.get("parallel")
    h = 0.3
    torch.testing.assert_close(p.step(F, G, x0, step_size=h, method="euler"),
                               x0 + h * (F(0.0, x0) + G(0.0, x0)), rtol=0, atol=1e-15)
    torch.testing.assert_close(p.step(F, G, x0, step_size=h, method="rk4"),
                               _rk4(lambda x: F(0.0, x) + G(0.0, x), x0, h), rtol=0, atol=1e-14)


def test_parallel_over_three_fields_is_one_sum_stage():
    fields, x0 = decoder_system()
    p = sn.schemes.get("parallel", fields=("diffusion", "cross", "convection"))
    assert len(p.stages) == 1 and set(p.fields) == set(fields)
    h = 0.2
    torch.testing.assert_close(p.step(x=x0, step_size=h, method="euler", fields=fields),
                               x0 + h * sum(f(0.0, x0) for f in fields.values()),
                               rtol=0, atol=1e-15)


@pytest.mark.parametrize("spec,order", [("c:0.5,d+x:1,c:0.5", 2), ("d+x:1,c:1", 1),
                                        ("c:0.25,d+c:0.5,d:0.5,c:0.25", 1)])
def test_mixed_sum_field_schemes_have_their_measured_orders(spec, order):
    r = sn.check_order(spec, order=order)
    assert r.ok, r.summary()
    assert sn.schemes.resolve(spec).order == order


def test_the_order_command_reports_the_exact_flow_not_a_mismatch(tmp_path, capsys):
    from splitnet.cli import main

    rc = main(["order", "--schemes", "parallel", "--methods", "exact,euler", "--strict",
               "--out", str(tmp_path / "p.png")])
    out = capsys.readouterr().out
    assert rc == 0 and "MISMATCH" not in out and "exact" in out


# ---------------------------------------------------------------------------------------------
# a parallel network end to end: layers, describe, refine, trajectories


def _parallel_model(method="euler", weights="shared"):
    torch.manual_seed(0)
    m = sn.models.SplitTransformer(256, 16, 2, 2, scheme="parallel", method=method,
                                   weights=weights, max_len=16).double().eval()
    return m


@pytest.mark.parametrize("method", ["euler", "rk4"])
def test_a_parallel_network_steps_the_sum_of_its_layer_fields(method):
    """Every layer is x + D(x) + C(x) (euler, GPT-J's block) or classical RK4 of D + C."""
    m = _parallel_model(method)
    idx = torch.randint(0, 256, (2, 9))
    x = m.embed(idx)
    for layer in m.layers:
        d, c = layer.field_modules("diffusion")[0], layer.field_modules("convection")[0]

        def f(y, d=d, c=c):
            return d(0.0, y) + c(0.0, y)

        x = x + f(x) if method == "euler" else _rk4(f, x, 1.0)
    torch.testing.assert_close(m(idx), m.head(m.norm(x)), rtol=0, atol=1e-12)


def test_a_parallel_network_is_described_refined_and_traced():
    from splitnet import cost
    from splitnet.analyses.refine import ode_model, rediscretize
    from splitnet.analyses.trajectories import collect

    m = _parallel_model("midpoint")
    row = cost.describe(m.config, seq_len=16)
    assert row.params == m.n_params() and row.evals == {"diffusion": 4, "convection": 4}
    assert row.pattern == "s+f"
    idx = torch.randint(0, 256, (1, 12))
    torch.testing.assert_close(rediscretize(m, method="midpoint")(idx), m(idx), rtol=0, atol=0)
    # two parallel midpoint steps of h/2 per layer: the same ODE, closer to its exact flow
    exact = ode_model(m)(idx)
    err1 = (m(idx) - exact).abs().max()
    err2 = (rediscretize(m, "parallel", substeps=2, method="midpoint")(idx) - exact).abs().max()
    assert err2 < err1 / 2
    tr = collect(m, "abcdefgh", continuous=True)
    assert tr.fields == ("embedding",) + ("diffusion+convection",) * 2
    assert tr.path is not None and float(tr.gap()[-1]) < 1e-2


def test_the_counts_in_docs_unsplit_are_the_studys_models():
    """docs/unsplit.md's first table: each fixed model's parameters and field evaluations per
    layer are those of the model experiments/unsplit_study.py builds (closed forms, which
    tests/test_cost.py holds equal to the built models)."""
    import importlib.util
    from pathlib import Path

    from splitnet import cost

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("unsplit_study",
                                                  root / "experiments" / "unsplit_study.py")
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    lines = (root / "docs" / "unsplit.md").read_text().splitlines()
    for name in study.FIXED:
        c = study.model_config(name)
        n = cost.describe(c, seq_len=c.max_len).params   # closed form = n_params (test_cost)
        per_layer = sum(cost.field_evals(c).values()) / c.n_layers
        row = next(ln for ln in lines if ln.startswith(f"| {study.LABELS[name]} (n="))
        cells = [x.strip() for x in row.strip("|").split("|")]
        assert cells[1:3] == [f"{n:,}", f"{per_layer:g}"], (name, cells[:3])
