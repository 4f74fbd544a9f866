"""The unsplit scheme: one stage advancing the sum of the fields (the parallel block), and mixed
schemes of sum and single stages. Float64, non-commuting fields."""

from __future__ import annotations

import pytest
import torch

import splitnet as sn
from splitnet.problems import decoder_system, particle_system


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

    rc = main(["order", "--schemes", "parallel", "--method", "exact,euler", "--strict",
               "--out", str(tmp_path / "p.png")])
    out = capsys.readouterr().out
    assert rc == 0 and "MISMATCH" not in out and "exact" in out
