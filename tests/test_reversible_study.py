"""experiments/reversible_study.py at a toy size, so the study cannot rot: its four models have
equal parameters, the bytes saved for backward are flat in depth for the reversible stack and
grow with depth for the plain network, reconstruction is round-off in float64 and bit for bit in
exact mode, and the tables and the depth figure are written from those rows."""

from pathlib import Path

import pytest
from conftest import load_script

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "reversible_study.py"


@pytest.fixture(scope="module")
def study():
    return load_script(SCRIPT)


@pytest.fixture(scope="module")
def toy(study):
    sc = dict(study.cs.SCALES["cpu"])
    sc.update(d_model=8, n_heads=2, d_ff=16, context=8, batch_size=2)
    return sc


def test_the_four_models_have_the_transformers_parameters(study):
    sc = study.cs.SCALES["cpu"]
    counts = {m: study.cs.n_params(study.model_options(m, sc)) for m in study.ORDER}
    assert len(set(counts.values())) == 1, counts
    assert [study.model_options(m, sc).reversible for m in study.ORDER] == \
        [False, True, True, True]


def test_bytes_saved_for_backward_against_depth(study, toy):
    rows = study.bytes_vs_depth(toy, depths=(2, 4), models=["transformer", "rev-strang"])
    b = {(r["depth"], r["name"], r["mode"]): r["bytes"] for r in rows}
    assert b[(2, "rev-strang", "stored")] == b[(4, "rev-strang", "stored")] > 0
    for name in ("transformer", "rev-strang"):           # per layer: linear in depth
        grow = b[(4, name, "plain")] / b[(2, name, "plain")]
        assert 1.7 < grow < 2.1, (name, grow)
    # the final pair is less than one layer of the plain network
    assert b[(4, "rev-strang", "stored")] < b[(2, "transformer", "plain")] / 2
    table = study.bytes_table(rows)
    assert table[-1].startswith("| growth 2→4 | ") and "1.00x" in table[-1]


def test_reconstruction_against_depth(study, toy, tmp_path):
    weights = study.recon_models(toy, tmp_path)          # no run there: random init only
    assert list(weights) == ["random init"]
    rows = study.recon_vs_depth(toy, weights, depths=(2, 4), exact_depths=(4,), batch=2)
    at = {(r["precision"], r["depth"]): r for r in rows}
    assert {p for p, _ in at} == {p[0] for p in study.PRECISIONS}
    for n in (2, 4):
        assert at[("float64", n)]["moved"] > 1e-3       # the forward went somewhere
        assert 0 < at[("float64", n)]["rel"] < 1e-13
        assert at[("float64", n)]["rel"] < at[("float32", n)]["rel"] < 1e-4
    for p in ("exact k=10", "exact k=10, bf16 compute", "exact k=16"):
        assert at[(p, 4)]["bitwise"] and at[(p, 4)]["rel"] == 0.0
    table = study.recon_table(rows, "random init")
    assert table[-1].count("0 (bit for bit)") == 3
    from splitnet.plots import plot_against_depth

    series = {p: [(r["depth"], 0.0 if r["bitwise"] else r["rel"]) for r in rows
                  if r["precision"] == p] for p in dict.fromkeys(r["precision"] for r in rows)}
    out = plot_against_depth({"toy": series}, tmp_path / "recon.png", ylabel="error")
    assert out.stat().st_size > 1000


def test_a_subset_writes_into_the_run_directory(study, tmp_path):
    full = study.parse([])
    sub = study.parse(["--seeds", "0", "--runs", str(tmp_path)])
    assert full.full and not sub.full
    assert study.output_paths(full, Path("runs/x"))["report"] == Path("docs/reversible.md")
    assert study.output_paths(sub, tmp_path)["report"].parent == tmp_path
