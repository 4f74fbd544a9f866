"""The classic splitting problems of examples/ (docs/solvers.md): symplectic energy behaviour,
split-step Schrödinger and reaction–diffusion orders, and the doc's tables current."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
hh = importlib.import_module("henon_heiles")


def _halves(name: str, h: float = 0.1, t1: float = 200.0):
    xs = hh.trajectory(name, h, t1)
    dev = np.abs(hh.energy(xs) - hh.energy(hh.X0))
    mid = len(dev) // 2
    return dev[:mid + 1].max(), dev[mid:].max()


def test_a_symplectic_splitting_keeps_the_energy_error_bounded():
    first, second = _halves("strang")
    assert 1e-6 < second < 1.5 * first          # no growth over the second half


def test_rk4_on_the_whole_field_drifts():
    first, second = _halves("rk4")
    assert second > 1.7 * first                  # linear drift: about twice at twice the time


@pytest.mark.heavy
def test_split_step_fourier_orders():
    nls = importlib.import_module("nls_split_step")
    for r in nls.orders().values():
        assert abs(r.order - r.expected_order) < 0.1, r.table()


@pytest.mark.heavy
def test_reaction_diffusion_orders_with_exact_and_crank_nicolson_diffusion():
    rd = importlib.import_module("reaction_diffusion")
    for diffusion in ("exact", "crank-nicolson"):
        got = {n: r.order for n, r in rd.orders(diffusion).items()}
        assert abs(got["lie-trotter"] - 1) < 0.1 and abs(got["strang"] - 2) < 0.1, got
        assert abs(got["yoshida4"] - 4) < 0.25, got
    be = rd.orders("backward-euler", names=("strang",))["strang"]
    assert abs(be.order - 1) < 0.1          # a first-order flow caps the scheme


def test_docs_solvers_tables_are_current():
    sys.path.insert(0, str(ROOT / "experiments"))
    tables = importlib.import_module("solvers_tables")
    doc = ROOT / "docs" / "solvers.md"
    assert tables.render() == doc.read_text(), \
        "docs/solvers.md is out of date: run python3 -m splitnet.dev regen solvers"
