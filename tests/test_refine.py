"""Re-discretising a trained network (issue 11): the identity, convergence to the ODE of the
layers' own fields, the weighted-sum field of per-stage layers, ODE-consistent training, and
``splitnet refine``."""

import json
import math
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
import torch

import splitnet as sn
from splitnet import checkpoint as ck
from splitnet import refine as R
from splitnet.analyses.convergence import rediscretize
from splitnet.cli import main as _main
from splitnet.configs.config import SplitConfig
from splitnet.integrators.layers import WeightedSum
from splitnet.stagelists.stages import CONVECTION, DIFFUSION
from splitnet.training.config import TrainConfig
from splitnet.training.train import train


def main(argv) -> int:
    """``splitnet ARGV``'s exit status (argparse's errors exit through SystemExit)."""
    try:
        return _main(argv)
    except SystemExit as e:
        return e.code


def _model(scheme="lie-trotter", weights="shared", h=0.5, seed=0, layers=2, d=16):
    torch.manual_seed(seed)
    return sn.models.SplitTransformer(vocab_size=40, d_model=d, n_heads=2, n_layers=layers,
                                      scheme=scheme, weights=weights, step_size=h,
                                      max_len=16).double().eval()


def _idx(seed=1, T=9):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 40, (2, T), generator=g)


def _slopes(diffs):
    """log2 of successive ratios: the observed order when the substeps double."""
    d = np.asarray(diffs)
    return np.log2(d[:-1] / d[1:])


# ---------------------------------------------------------------------------------------------
# rediscretize


@pytest.mark.parametrize("scheme,weights", [("lie-trotter", "shared"), ("strang", "per-stage"),
                                            ("yoshida4", "shared"), ("yoshida4", "per-stage"),
                                            ("ssfsff", "per-stage")])
def test_identity_equals_the_model(scheme, weights):
    """rediscretize(model) with its defaults computes exactly what the model computes
    (float64, bit for bit), states included, and shares every parameter (no copy)."""
    m = _model(scheme, weights)
    r = rediscretize(m)
    idx = _idx()
    assert torch.equal(r(idx), m(idx))
    (_, sa), (_, sb) = r(idx, return_states=True), m(idx, return_states=True)
    assert torch.equal(sa, sb) and torch.equal(r.state_times(), m.state_times())
    assert [id(p) for p in r.parameters()] == [id(p) for p in m.parameters()]
    assert r.refinement == R.Refinement("own", 1, "euler", "own stages")
    assert r.config == m.config and isinstance(r, sn.models.SplitTransformer)
    assert r.layers is not m.layers and all(a is not b for a, b in zip(r.layers, m.layers))


def test_weights_are_shared_not_copied():
    """A change to the model's weights shows in the re-discretised model at once."""
    m = _model("strang")
    r = rediscretize(m, "yoshida4", 2, "rk4")
    idx = _idx()
    before = r(idx)
    with torch.no_grad():
        m.layers[0].convection.fc1.weight.mul_(3.0)
    assert not torch.allclose(r(idx), before)


def test_named_own_scheme_equals_default_for_shared_weights():
    """With shared weights the layer's fields are its modules: naming the own scheme is the
    default, and substeps=n equals one step of the scheme repeated n times with h/n."""
    m = _model("strang")
    idx = _idx()
    assert torch.equal(rediscretize(m, "strang")(idx), m(idx))
    for k in (2, 3):
        a = rediscretize(m, None, k, "midpoint")(idx)
        b = rediscretize(m, "strang", k, "midpoint")(idx)
        assert torch.equal(a, b)
        # by hand: n steps of h/n per layer, sub-step j from t_k + j h/n
        x, h = m.embed(idx), m.step_size
        for layer_k, layer in enumerate(m.layers):
            step = sn.schemes.get("strang").layer(layer.diffusion, layer.convection,
                                                  step_size=h / k, method="midpoint")
            for j in range(k):
                x = step(x, layer_k * h + j * h / k)
        torch.testing.assert_close(a, m.head(m.norm(x)), rtol=1e-12, atol=1e-12)


@pytest.mark.heavy
def test_substeps_with_exact_flows_converge():
    """Exact sub-flows, n = 1, 2, 4, 8 substeps of Lie–Trotter and Strang on a random model: the
    differences between successive refinements shrink with the splitting's order (global slope
    1 for Lie–Trotter, 2 for Strang), and both approach the unsplit ODE of the fields."""
    m = _model("lie-trotter", h=0.5)
    idx = _idx()
    with torch.no_grad():
        ode = R.ode_model(m)(idx)
        for scheme, order in (("lie-trotter", 1), ("strang", 2)):
            outs = [rediscretize(m, scheme, k, "exact")(idx) for k in (1, 2, 4, 8)]
            diffs = [(a - b).norm().item() for a, b in pairwise(outs)]
            to_ode = [(o - ode).norm().item() for o in outs]
            assert all(b < a for a, b in pairwise(diffs)), (scheme, diffs)
            assert np.all(np.abs(_slopes(diffs) - order) < 0.3), (scheme, _slopes(diffs))
            assert all(b < a for a, b in pairwise(to_ode)), (scheme, to_ode)
            assert to_ode[-1] < to_ode[0] / 2 ** (3 * order - 1)


def test_euler_substeps_converge_to_the_ode():
    """Residual sub-layers with more substeps (the network refined as built) approach the same
    ODE at first order."""
    m = _model("strang", h=0.5)
    idx = _idx()
    with torch.no_grad():
        ode = R.ode_model(m)(idx)
        err = [(rediscretize(m, None, k)(idx) - ode).norm().item() for k in (4, 8, 16, 32)]
    assert np.all(np.abs(_slopes(err) - 1) < 0.25), _slopes(err)


def test_per_stage_layers_use_the_weighted_sum_field():
    """Per-stage weights: a named scheme integrates D_k = sum_i c_i D_ki and C_k = sum_j c_j C_kj
    (SplitLayer.field, the discretization gap's definition), computed here by hand."""
    m = _model("strang", "per-stage")
    idx = _idx()
    r = rediscretize(m, "lie-trotter")
    for lr, lm in zip(r.layers, m.layers):
        (con,) = lr.field_modules(CONVECTION)
        assert isinstance(con, WeightedSum) and con.coeffs == [0.5, 0.5]
        assert list(con.terms) == lm.field_modules(CONVECTION)
        assert lr.field_modules(DIFFUSION) == lm.field_modules(DIFFUSION)
    x, h = m.embed(idx), m.step_size
    for k, layer in enumerate(m.layers):
        (d,), (c1, c2) = layer.field_modules(DIFFUSION), layer.field_modules(CONVECTION)
        t = k * h
        x = x + h * d(t, x)
        x = x + h * (0.5 * c1(t, x) + 0.5 * c2(t, x))
    torch.testing.assert_close(r(idx), m.head(m.norm(x)), rtol=1e-12, atol=1e-12)
    # not the first stage's module alone: the second one matters
    x1 = m.embed(idx)
    for k, layer in enumerate(m.layers):
        x1 = x1 + h * layer.field_modules(DIFFUSION)[0](k * h, x1)
        x1 = x1 + h * layer.field_modules(CONVECTION)[0](k * h, x1)
    assert (r(idx) - m.head(m.norm(x1))).abs().max() > 1e-6


def test_per_stage_own_stages_and_weighted_sum_reach_one_ode():
    """A per-stage Yoshida4 layer (negative coefficients): its own stage modules refined, and
    the weighted-sum fields under Strang, converge to the same ODE solution (the layer's
    ode_field, as the discretization gap uses)."""
    m = _model("yoshida4", "per-stage", h=0.25, layers=1)
    idx = _idx()
    with torch.no_grad():
        ode = R.ode_model(m)(idx)
        own = [(rediscretize(m, None, k, "exact")(idx) - ode).norm().item() for k in (1, 2, 4)]
        ws = [(rediscretize(m, "strang", k, "exact")(idx) - ode).norm().item() for k in (1, 2, 4)]
    assert all(b < a for a, b in pairwise(own)) and own[-1] < own[0] / 3, own
    assert all(b < a for a, b in pairwise(ws)) and ws[-1] < ws[0] / 12, ws


def test_ode_model_states_match_state_times():
    m = _model("strang")
    o = R.ode_model(m)
    _, states = o(_idx(), return_states=True)
    assert states.shape[0] == len(o.state_times()) == 1 + 2 * m.n_layers
    torch.testing.assert_close(states[-1], o.layers[-1](states[-3], m.step_size))


def test_bad_input():
    m = _model()
    with pytest.raises(ValueError, match="substeps must be an int >= 1, got 0"):
        rediscretize(m, substeps=0)
    with pytest.raises(ValueError, match="substeps"):
        rediscretize(m, substeps=1.5)
    with pytest.raises(ValueError, match="unknown scheme 'nope'"):
        rediscretize(m, "nope")
    with pytest.raises(ValueError, match="unknown method 'bogus'"):
        rediscretize(m, method="bogus")
    with pytest.raises(TypeError, match="SplitTransformer"):
        rediscretize(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="unknown method"):
        R.study_grid(methods=["euler", "rk5"])
    with pytest.raises(ValueError, match="substeps"):
        R.study_grid(substeps=[1, 0])
    with pytest.raises(ValueError, match=r"no substeps given for method\(s\) \['rk4'\]"):
        R.study_grid(["strang"], {"euler": [1]}, ["euler", "rk4"])


def test_study_grid():
    grid = R.study_grid(["strang", "own"], {"euler": [1, 2], "rk4": [1]}, ["euler", "rk4"])
    assert [(s if s is None else s.name, k, m) for s, k, m in grid] == [
        ("strang", 1, "euler"), ("strang", 2, "euler"), ("strang", 1, "rk4"),
        (None, 1, "euler"), (None, 2, "euler"), (None, 1, "rk4")]
    assert len(R.study_grid(["lie-trotter"], [1, 2, 4], ["euler", "exact"], [1])) == 4


# ---------------------------------------------------------------------------------------------
# the study


def test_refinement_study_counts_evaluations():
    """Field evaluations per layer are counted: n * stages * (evaluations per sub-step)."""
    m = _model("lie-trotter", d=16)
    idx = _idx()
    res = R.refinement_study(m, lambda mod: mod(idx).square().mean().item(),
                             schemes=["lie-trotter", "strang"], substeps=[1, 2],
                             methods=["euler", "midpoint", "rk4"], progress=False)
    ev = {(p.scheme, p.method, p.substeps): p.evals for p in res.points}
    assert res.own.evals == 2
    assert ev[("lie-trotter", "euler", 2)] == 4
    assert ev[("strang", "midpoint", 2)] == 2 * 3 * 2
    assert ev[("strang", "rk4", 1)] == 12
    assert res.ode is not None and res.ode.evals > 12          # adaptive dopri5: many
    own = {(p.scheme, p.method, p.substeps): p.loss for p in res.points}
    assert own[("lie-trotter", "euler", 1)] == res.own.loss    # the own scheme named = the model
    back = R.RefinementResult.from_dict(json.loads(json.dumps(res.to_dict())))
    assert back == res
    assert "ODE of the fields" in res.table()


# ---------------------------------------------------------------------------------------------
# ODE-consistent training


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    p = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    p.write_text("".join(f"def f{i}(x):\n    return x * {i % 7} + {i % 3}\n"
                         for i in range(400)))
    return p


def _cfg(corpus, out, **kw):
    model = SplitConfig(d_model=32, n_heads=2, n_layers=2, dropout=kw.pop("dropout", 0.0))
    return TrainConfig(model=model, text=str(corpus), context=32, batch_size=8, warmup=3,
                       eval_windows=8, eval_every=5, ckpt_every=5, threads=1, progress=False,
                       plot=False, out=str(out), **kw)


def _losses(out):
    return {r["step"]: r["loss"] for r in ck.read_metrics(Path(out) / ck.METRICS)}


def _weights(out):
    return ck.load(out)["model"]


def test_refinement_choice_is_a_function_of_seed_and_step():
    draws = [R.refinement_at(3, s, 0.5, (1, 2, 4)) for s in range(4000)]
    assert draws == [R.refinement_at(3, s, 0.5, (1, 2, 4)) for s in range(4000)]
    refined = [d for d in draws if d is not None]
    assert abs(len(refined) / 4000 - 0.5) < 0.04
    assert {1, 2, 4} == set(refined)
    assert draws != [R.refinement_at(4, s, 0.5, (1, 2, 4)) for s in range(4000)]
    assert all(R.refinement_at(0, s, 0.0, (2,)) is None for s in range(100))
    state = torch.random.get_rng_state()
    R.refinement_at(0, 1, 1.0, (2,))
    assert torch.equal(state, torch.random.get_rng_state())   # torch's RNG untouched


def test_refine_prob_zero_is_bit_identical(corpus, tmp_path):
    train(_cfg(corpus, tmp_path / "plain", steps=6))
    train(_cfg(corpus, tmp_path / "zero", steps=6, refine_prob=0.0, refine_substeps=(2, 4)))
    train(_cfg(corpus, tmp_path / "ode", steps=6, refine_prob=1.0, refine_substeps=(2,)))
    a, b, c = (_losses(tmp_path / n) for n in ("plain", "zero", "ode"))
    assert a == b
    wa, wb = _weights(tmp_path / "plain"), _weights(tmp_path / "zero")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert a[1] != c[1]                       # the option does change the forward pass


def test_refined_forward_is_the_rediscretized_model(corpus):
    """During a refined step the model runs rediscretize(model, substeps=k); its layers come
    back afterwards, also after an exception."""
    m = _model("strang")
    idx, old = _idx(), m.layers
    want = rediscretize(m, None, 3)(idx)
    with R.refined(m, 3):
        assert torch.equal(m(idx), want)
    assert m.layers is old
    with pytest.raises(RuntimeError), R.refined(m, 2):
        raise RuntimeError("boom")
    assert m.layers is old and torch.equal(rediscretize(m)(idx), m(idx))


def test_exact_resume_with_refine_prob(corpus, tmp_path):
    """Stop at step 5 of 10 and resume: bit-identical to an uninterrupted run with refinement
    (and dropout) on."""
    kw = {"steps": 10, "refine_prob": 0.5, "refine_substeps": (1, 2, 4), "dropout": 0.1}
    train(_cfg(corpus, tmp_path / "full", **kw))
    train(_cfg(corpus, tmp_path / "cut", stop_at=5, **kw))
    assert max(_losses(tmp_path / "cut")) == 5
    train(_cfg(corpus, tmp_path / "cut", resume=True, **kw))
    a, b = _losses(tmp_path / "full"), _losses(tmp_path / "cut")
    assert sorted(a) == sorted(b) == list(range(1, 11))
    assert all(a[s] == b[s] for s in a)
    wa, wb = _weights(tmp_path / "full"), _weights(tmp_path / "cut")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert sum(R.refinement_at(0, s, 0.5, (2, 4)) is not None for s in range(5, 10)) > 0


def test_train_config_validates_the_options():
    with pytest.raises(ValueError, match="refine_prob"):
        TrainConfig(refine_prob=1.5)
    with pytest.raises(ValueError, match="refine_substeps"):
        TrainConfig(refine_substeps=(1, 0))
    with pytest.raises(ValueError, match="refine_substeps"):
        TrainConfig(refine_substeps=())
    assert TrainConfig(refine_substeps="1,2").refine_substeps == (1, 2)
    assert TrainConfig(refine_substeps=[2, 4]).refine_substeps == (2, 4)


def test_train_flags(corpus, tmp_path):
    from splitnet.cli import build_parser
    from splitnet.cli.commands.cmd_train import config_from_args

    args = build_parser("train").parse_args(["--refine-prob", "0.25", "--refine-substeps",
                                             "2,8"])
    cfg, explicit = config_from_args(args)
    assert (cfg.refine_prob, cfg.refine_substeps) == (0.25, (2, 8))
    assert {"refine_prob", "refine_substeps"} <= explicit


# ---------------------------------------------------------------------------------------------
# splitnet refine


@pytest.fixture(scope="module")
def run_dir(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "run"
    train(_cfg(corpus, out, steps=4))
    return out


def test_cli_writes_table_and_png(run_dir, tmp_path, capsys):
    png, js = tmp_path / "r.png", tmp_path / "r.json"
    rc = main(["refine", "--checkpoint", str(run_dir), "--schemes", "lie-trotter,strang",
               "--substeps", "1,2", "--methods", "euler,exact", "--exact-substeps", "1",
               "--windows", "4", "--out", str(png), "--json", str(js), "--no-progress",
               "--threads", "1"])
    out = capsys.readouterr().out
    assert rc == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for s, m in (("lie-trotter", "euler"), ("lie-trotter", "exact"), ("strang", "euler"),
                 ("strang", "exact")):
        assert any(line.split()[:2] == [s, m] for line in out.splitlines()), (s, m, out)
    res = R.RefinementResult.from_dict(json.loads(js.read_text()))
    assert len(res.points) == 2 * (2 + 1) and res.ode is not None
    # the trained Lie-Trotter model is its own lie-trotter/euler/1 point, in bits per byte
    p = next(p for p in res.points if (p.scheme, p.method, p.substeps) == ("lie-trotter",
                                                                          "euler", 1))
    assert p.loss == res.own.loss and res.unit == "bpb"
    assert math.isclose(res.value(p), p.loss / math.log(2))
    assert f"{res.value(res.own):.4f} bpb" in out
    # beside it, each layer dropped and each pair merged, in bits per byte (issue 61)
    layers = json.loads(js.read_text())["layers"]
    assert layers["loss"] == res.own.loss and len(layers["drop"]) == 2
    assert f"layers dropped and merged (bpb, change against the network as it is, " \
           f"{res.value(res.own):.4f}" in out


@pytest.mark.parametrize("extra,message", [
    (["--schemes", "lie-trotter,nope"], "unknown scheme 'nope'"),
    (["--substeps", "1,0"], "--substeps: expected a positive integer, got '0'"),
    (["--methods", "euler,rk5"], "unknown method 'rk5'"),
    (["--exact-substeps", "0"], "--exact-substeps: expected a positive integer"),
    (["--windows", "0"], "--windows: expected a positive integer"),
])
def test_cli_bad_input_is_one_line(run_dir, tmp_path, capsys, extra, message):
    png = tmp_path / "r.png"
    rc = main(["refine", "--checkpoint", str(run_dir), "--out", str(png), *extra])
    err = capsys.readouterr().err
    assert rc == 2 and not png.exists()
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert err.startswith("splitnet refine: error:")


def test_cli_missing_checkpoint_is_one_line(tmp_path, capsys):
    png = tmp_path / "r.png"
    rc = main(["refine", "--checkpoint", str(tmp_path / "none"), "--out", str(png)])
    err = capsys.readouterr().err
    assert rc == 2 and not png.exists()
    assert err.startswith("splitnet refine: error: no checkpoint at")
    assert len(err.strip().splitlines()) == 1
    rc = main(["refine", "--out", str(png)])
    err = capsys.readouterr().err
    assert rc == 2 and "--checkpoint" in err and len(err.strip().splitlines()) == 1


def test_cli_per_stage_model_gets_its_own_stages(corpus, tmp_path, capsys):
    """A Macaron (per-stage Strang) checkpoint: by default its own stages are a line too, and
    their n=1 value is the network as trained; the named schemes use the weighted-sum fields."""
    out = tmp_path / "macaron"
    cfg = _cfg(corpus, out, steps=2)
    train(cfg.replace(model=cfg.model.replace(scheme="strang", weights="per-stage")))
    js = tmp_path / "m.json"
    rc = main(["refine", "--checkpoint", str(out), "--substeps", "1", "--methods", "euler",
               "--windows", "2", "--out", str(tmp_path / "m.png"), "--json", str(js),
               "--no-progress"])
    capsys.readouterr()
    assert rc == 0
    res = R.RefinementResult.from_dict(json.loads(js.read_text()))
    by = {p.scheme: p for p in res.points}
    assert set(by) == {"lie-trotter", "strang", "yoshida4", "own"}
    assert by["own"].loss == res.own.loss and by["own"].evals == 3
    assert by["strang"].loss != res.own.loss      # the weighted-sum field is another network


def test_summary_figure_takes_panels_with_different_seed_counts(tmp_path):
    """One seed (no error bar) beside three, in two panels: the figure is written."""
    from splitnet.plots import plot_refinement_summary

    rng = np.random.default_rng(0)
    panels = {"trained 300 steps": {"A": rng.random((3, 5)), "B": rng.random((3, 5))},
              "trained 1200 steps": {"A": rng.random((1, 5)), "B": rng.random((3, 5))}}
    out = plot_refinement_summary(panels, [1, 2, 4, 8, "ODE"], tmp_path / "s.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_subflow_method_has_its_own_line_style_in_the_refinement_figure():
    """The style follows splitnet.subflows.METHODS (no second list of names to drift): each
    registered method a distinct (dash, marker), never dotted or "^" (those mark the ODE level
    and values off the scale); an unknown name still gets a style."""
    from splitnet.integrators.subflows import METHODS
    from splitnet.plots.refinement import _method_style

    styles = [_method_style(m) for m in METHODS]
    assert len(set(map(repr, styles))) == len(styles)
    assert all(ls != ":" and mk != "^" for ls, mk in styles)
    assert _method_style("not-a-method") == ("-", "p")


def test_refine_command_defaults_are_the_studys():
    """The command line keeps the defaults of splitnet.analyses.refine without importing it
    (torch) at --help time: the two must not drift."""
    from splitnet.analyses import refine
    from splitnet.cli.commands import cmd_refine

    assert tuple(cmd_refine.DEFAULT_SCHEMES.split(",")) == refine.DEFAULT_SCHEMES


def test_the_sizes_docs_refine_states_are_the_studys():
    """docs/refine.md's limits: "Small networks (0.84M parameters) and short training (0.6M and
    2.5M bytes)": the models experiments/refine_study.py trains (splitnet train's default size)
    and its two lengths (steps x batch x context of its training config)."""
    import importlib.util

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("refine_study",
                                                  root / "experiments" / "refine_study.py")
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    import re

    source = (root / "experiments" / "refine_study.py").read_text()
    lengths = [int(x) for x in re.search(r'"--lengths", default="([\d,]+)"', source)[1]
               .split(",")]                       # the study's default training lengths
    sizes, volumes = set(), []
    for name in study.MODELS:
        for steps in lengths:
            tc = study.train_config(name, steps, 0, root / "unused", 1, "cpu")
            n = sn.cost.describe(tc.model, seq_len=tc.model.max_len).params   # = n_params
            sizes.add(f"{n / 1e6:.2f}")
            volumes.append(tc.steps * tc.batch_size * tc.context)
    doc = " ".join((root / "docs" / "refine.md").read_text().split())
    short, long_ = sorted(set(volumes))
    assert len(sizes) == 1 and len(set(volumes)) == 2, (sizes, volumes)
    assert (f"Small networks ({sizes.pop()}M parameters) and short training "
            f"({short / 1e6:.1f}M and {long_ / 1e6:.1f}M bytes)") in doc


@pytest.mark.parametrize("name", ["lie-trotter", "strang", "yoshida4"])
@pytest.mark.parametrize("n", [2, 3])
def test_repeated_scheme_takes_n_steps_of_h_over_n(name, n):
    """``repeated(scheme, n)``: the scheme's stages n times with coefficients c / n, so each
    field still advances over one step h in all (a planted ``c`` instead of ``c / n`` ran every
    refined layer n times too far, and only this says so)."""
    from splitnet.integrators.schemes import resolve
    from splitnet.nets.rediscretize import repeated

    s = resolve(name)
    r = repeated(s, n)
    want = [(st.field, st.coeff / n) for _ in range(n) for st in s.stages]
    assert [st.field for st in r.stages] == [f for f, _ in want]
    assert [st.coeff for st in r.stages] == pytest.approx([c for _, c in want], abs=1e-15)
    assert r.order == s.order
