"""The partitioned particle system (the ODE of a reversible network, issue 27): every field a
shear, so Euler sub-steps keep every scheme's order, where on the ordinary particle system they
make every scheme first order. ``splitnet order --partitioned`` measures it."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import torch

from splitnet import cli
from splitnet.analyses.convergence import convergence_study, lie_bracket, reference_solution
from splitnet.analyses.problems import (
    Shear,
    decoder_system,
    particle_system,
    partitioned_system,
)

ROOT = Path(__file__).resolve().parents[1]
# T = 1 in 2 ... 16 steps (partitioned) and 8 ... 64 (ordinary system: Euler's order 1 needs
# the smaller steps to be asymptotic for the fourth-order composition's large coefficients);
# every error here lies between 1e-7 and 0.5, far above the reference's 1e-11 floor
GLOBAL_HS = [0.5, 0.25, 0.125, 0.0625]
CONTRAST_HS = [1 / 8, 1 / 16, 1 / 32, 1 / 64]
SCHEMES = [("lie-trotter", 1), ("strang", 2), ("yoshida4", 4)]


@pytest.fixture(autouse=True)
def _keep_default_dtype():
    """`splitnet order` sets float64 as the process default; undo it for other modules."""
    d = torch.get_default_dtype()
    yield
    torch.set_default_dtype(d)


@pytest.fixture(scope="module")
def system():
    D, C, x0 = partitioned_system()
    return {"diffusion": D, "convection": C}, x0


def test_the_fields_are_shears_that_do_not_commute(system):
    """D~ = (D(x2), 0), C~ = (0, C(x1)) with particle_system's D and C; each field's Euler step
    is its exact flow; the bracket [D~, C~] is as large as the fields themselves."""
    fields, x0 = system
    D, C = fields["diffusion"], fields["convection"]
    F, G, x1 = particle_system()
    assert x0.shape == (2, 6, 8) and x0.dtype == torch.float64
    assert torch.equal(x0[0], x1) and not torch.allclose(x0[0], x0[1])
    assert torch.equal(D(0.0, x0)[0], F(0.0, x0[1])) and not D(0.0, x0)[1].any()
    assert torch.equal(C(0.0, x0)[1], G(0.0, x0[0])) and not C(0.0, x0)[0].any()
    h = 0.3
    for f in (D, C):
        flow = reference_solution(x0=x0, times=torch.tensor([0.0, h], dtype=torch.float64),
                                  fields={"diffusion": f})[-1]
        assert (flow - (x0 + h * f(0.0, x0))).norm() < 1e-12 * x0.norm()
    bracket = lie_bracket(D, C, x0).norm()
    assert bracket > 0.5 * min(D(0.0, x0).norm(), C(0.0, x0).norm())


def test_a_shear_writes_one_block_from_the_other():
    with pytest.raises(ValueError, match="writes one of the blocks 0, 1 and reads the other"):
        Shear(torch.nn.Identity(), write=1, read=1)


@pytest.mark.parametrize(("name", "p"), SCHEMES)
def test_euler_keeps_the_scheme_order_on_the_partitioned_system(system, name, p):
    """Global error at T = 1 with Euler sub-steps: fitted slope p (Lie–Trotter 1, Strang 2,
    Yoshida4 4), and the study expects p (the sub-steps are exact sub-flows on shears)."""
    fields, x0 = system
    r = convergence_study(name, x0=x0, step_sizes=GLOBAL_HS, kind="global", method="euler",
                          fields=fields)
    assert r.used.all() and r.errors.min() > 100 * r.floor
    assert r.method_order == r.expected_order == p
    assert abs(r.order - p) < 0.1 and r.ok


@pytest.mark.parametrize(("name", "p"), SCHEMES)
def test_euler_makes_every_scheme_first_order_on_the_ordinary_system(name, p):
    """The contrast: the same fields on one particle set, Euler sub-steps: global slope 1."""
    F, G, x0 = particle_system()
    r = convergence_study(name, x0=x0, step_sizes=CONTRAST_HS, kind="global", method="euler",
                          fields={"diffusion": F, "convection": G})
    assert r.used.all() and r.method_order == 1
    assert abs(r.order - 1) < 0.1


def test_local_slopes_on_the_partitioned_system(system):
    """One step: local slope p + 1 with Euler sub-steps (h = 0.2 ... 0.025)."""
    fields, x0 = system
    for name, p in SCHEMES:
        r = convergence_study(name, x0=x0, step_sizes=[0.2, 0.1, 0.05, 0.025], method="euler",
                              fields=fields)
        assert r.used.all() and abs(r.order - (p + 1)) < 0.1, (name, r.order)


def test_a_sum_stage_is_no_shear(system):
    """``parallel`` advances D~ + C~ in one stage: its Euler step is an Euler step of the whole
    ODE, first order, and the study expects 1."""
    fields, x0 = system
    r = convergence_study("parallel", x0=x0, step_sizes=CONTRAST_HS, kind="global",
                          method="euler", fields=fields)
    assert r.method_order == 1 and abs(r.order - 1) < 0.1


def test_a_sum_of_shears_writing_one_block_is_a_shear(system):
    """Cross-attention writes x1 reading x2, as attention does: the stage d~ + x~ is a shear, so
    ``c/2, d+x, c/2`` with Euler sub-steps keeps Strang's order 2 on x1' = D(x2) + X(x2; m),
    x2' = C(x1)."""
    fields, x0 = system
    X = decoder_system()[0]["cross"]
    three = {**fields, "cross": Shear(X, write=0, read=1)}
    r = convergence_study("c:0.5,d+x:1,c:0.5", x0=x0, step_sizes=GLOBAL_HS, kind="global",
                          method="euler", fields=three)
    assert r.method_order == 2 and abs(r.order - 2) < 0.1


def _run(argv, capsys):
    rc = cli.main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_partitioned_measures_the_scheme_order_with_euler(tmp_path, capsys):
    png = tmp_path / "order.png"
    rc, out, _ = _run(["order", "--partitioned", "--kind", "global", "--schemes",
                       "lie-trotter,strang,yoshida4", "--out", str(png), "--strict"], capsys)
    assert rc == 0, out
    assert "Partitioned" in out and "2 x 6 particles" in out
    rows = re.findall(r"^(\S+)\s+(euler)\s+(\d+)\s+(\d+\.\d+)\s+(\d+)\s+ok$", out, re.MULTILINE)
    got = {r[0]: (int(r[2]), float(r[3]), int(r[4])) for r in rows}
    assert set(got) == {"lie-trotter", "strang", "yoshida4"}
    for name, p in SCHEMES:
        order, slope, expected = got[name]
        assert order == expected == p and abs(slope - p) < 0.1
    assert png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(("argv", "message"), [
    (["--schemes", "parallel"], r"scheme 'parallel' cannot run on the partitioned system "
                                r"\(--partitioned\): stage 1 \(diffusion\+convection\) "),
    (["--fields", "3"], r"--partitioned takes --fields 2"),
])
def test_cli_partitioned_refuses_what_is_no_shear(tmp_path, capsys, argv, message):
    out = tmp_path / "o.png"
    rc, stdout, err = _run(["order", "--partitioned", *argv, "--out", str(out)], capsys)
    assert rc == 2 and stdout == "" and not out.exists()
    assert len(err.strip().splitlines()) == 1 and re.search(message, err), err


def _orders_script():
    spec = importlib.util.spec_from_file_location("partitioned_orders",
                                                  ROOT / "experiments" / "partitioned_orders.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_every_zoo_method_keeps_its_order_with_euler_on_the_partitioned_system():
    """The table of docs/theory.md (experiments/partitioned_orders.py), ~2 min: for every zoo
    method the Euler step is the exact-sub-flow step (to the sub-flow solver's 1e-13) and the
    study expects the declared order; the global slope is within 0.3 of it for every method
    up to order 8. The tenth-order sets reach the 1e-11 floor at h = 1/2 .. 1/3 (T = 1), before
    a slope can be fitted: no verdict, never a mismatch. On the ordinary system the same
    sub-steps give slope 1 for every method."""
    mod = _orders_script()
    part, plain = partitioned_system(), particle_system()
    for name in mod.zoo_methods():
        row = mod.measure(name, part, plain)
        r, why = row["global"]
        assert row["gap"] < 1e-13, (name, row["gap"])
        if row["order"] <= 8:
            assert r is not None and r.ok and r.expected_order == row["order"], (name, why)
        else:
            assert r is None and "above the floor" in why, (name, r and r.order)
        assert row["contrast"].ok and row["contrast"].expected_order == 1, name
