"""The audit of published RK / predictor–corrector blocks (splitnet.analyses.blocks, docs/peers.md):
the blocks compute what their formulas say, and their measured orders."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import splitnet as sn
from splitnet import blocks as B


@pytest.fixture(scope="module")
def system():
    F, G, x0 = sn.particle_system()
    return {"diffusion": F, "convection": G}, x0


def test_the_blocks_are_their_formulas(system):
    fields, y = system
    D, C = (lambda x: fields["diffusion"](0.0, x)), (lambda x: fields["convection"](0.0, x))
    h = 0.3
    with torch.no_grad():
        def seq(x):                         # the pre-norm layer's increment, Euler sub-steps
            return h * D(x) + h * C(x + h * D(x))

        k1 = seq(y)
        k2 = seq(y + k1)
        torch.testing.assert_close(B.BLOCKS["ode-t-rk2"].step(fields, y, 0.0, h),
                                   y + (k1 + k2) / 2, rtol=0, atol=1e-14)
        lit1 = y + seq(y)                   # the released code: stages hold y + F
        lit2 = (y + lit1) + seq(y + lit1)
        torch.testing.assert_close(B.BLOCKS["ode-t-rk2-literal"].step(fields, y, 0.0, h),
                                   y + (lit1 + lit2) / 2, rtol=0, atol=1e-14)
        torch.testing.assert_close(B.BLOCKS["pcformer-ema-rk2"].step(fields, y, 0.0, h),
                                   y + 0.25 * k1 + 0.5 * k2, rtol=0, atol=1e-14)
        # RK4 of the parallel layer is splitnet's own scheme parallel with rk4 sub-flows
        own = sn.schemes.get("parallel").step(fields=fields, x=y, step_size=h, method="rk4")
        torch.testing.assert_close(B.BLOCKS["rk4-parallel"].step(fields, y, 0.0, h), own,
                                   rtol=0, atol=1e-14)


@pytest.mark.parametrize("name,euler", [
    ("ode-t-rk2", 1), ("ode-t-rk4", 1), ("ode-t-rk3-code", 1), ("ode-t-rk2-gated", 1),
    ("rk2-parallel", 2), ("rk2-gated-parallel", 2), ("rk2-gated-b-parallel", 1),
    ("rk3-code-parallel", 2), ("rk3-kutta-parallel", 3), ("rk4-parallel", 4),
    ("pece-parallel", 2)])
def test_orders_on_matrices(name, euler):
    """Euler sub-steps (the network as built): a sequential layer keeps every outer method at
    order 1, the parallel layer gives it its classical order (the coded RK3: 2; a gate trained
    off 1/2: 1). Exact sub-flows: an outer RK of a flow's increment is order 1."""
    b = B.BLOCKS[name]
    assert abs(B.matrix_order(b, "euler").tail - euler) < 0.1
    assert abs(B.matrix_order(b, "exact").tail - 1) < 0.1


@pytest.mark.parametrize("name", ["pcformer-ema-rk2", "pcformer-ema-rk4", "ode-t-rk2-init",
                                  "ode-t-rk2-literal"])
def test_inconsistent_blocks_have_no_order(name, system):
    fields, x0 = system
    m = B.matrix_order(B.BLOCKS[name], "euler")
    assert not m.tail > 0.5                       # NaN (never under 1e-6) or about 0
    assert B.local_order(B.BLOCKS[name], fields, x0).tail < 0.5


def test_orders_on_the_particle_system(system):
    fields, x0 = system
    got = {n: B.local_order(B.BLOCKS[n], fields, x0).tail
           for n in ("ode-t-rk2", "ode-t-rk4", "rk2-parallel", "rk4-parallel")}
    assert got == pytest.approx({"ode-t-rk2": 1, "ode-t-rk4": 1, "rk2-parallel": 2,
                                 "rk4-parallel": 4}, abs=0.1)


def test_the_coded_corrector_is_not_an_integrator(system):
    fields, x0 = system
    g = B.global_order(B.BLOCKS["pcformer-corrector"], fields, x0, steps=(4, 8, 16))
    assert (g.errors > 1.0).all() and g.errors[-1] > g.errors[0]     # grows with the layers
    assert B.global_order(B.BLOCKS["rk2-parallel"], fields, x0, steps=(4, 8, 16)).tail > 1.8


@pytest.mark.slow
def test_the_audit_table_in_docs_is_current():
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "experiments"))
    import peers_audit

    text = peers_audit.DOC.read_text()
    a, b = text.index(peers_audit.START), text.index(peers_audit.END)
    assert text[a + len(peers_audit.START):b].strip() == peers_audit.table().strip(), \
        "docs/peers.md's audit table is out of date: run python3 -m splitnet.dev regen peers"
