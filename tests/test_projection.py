"""Learned coefficients that are exactly a method (issue 45): the damped Gauss–Newton projection
onto the order conditions, float64 coefficients in any model dtype, the trainer's projection
after every optimiser step, and the refusals."""

import json

import pytest
import torch

import splitnet as sn
from splitnet.configs.config import SplitConfig
from splitnet.order import conditions
from splitnet.order.algebra import algebraic_order
from splitnet.order.projection import ProjectionError, project, residual
from splitnet.training.config import TrainConfig


def _setup(name, layers=4, sd=0.02, seed=0):
    s = sn.schemes.get(name)
    letters, k = conditions.structure(s.stages)
    c0 = torch.tensor([[float(st.coeff) for st in s.stages]], dtype=torch.float64)
    g = torch.Generator().manual_seed(seed)
    c = c0 + sd * torch.randn(layers, c0.shape[1], dtype=torch.float64, generator=g)
    return s, letters, k, c0, c


@pytest.mark.parametrize("name,sd", [("strang", 0.02), ("yoshida4", 0.02), ("suzuki4", 0.02),
                                     ("blanes-moan4", 0.02), ("yoshida6", 0.01)])
def test_projection_brings_perturbed_coefficients_to_a_method_of_the_order(name, sd):
    """From N(0, sd^2) perturbations: every condition of degree <= p below 1e-12, the
    algebraic order of each projected layer >= p, and the move a near method's, not a reset
    to the scheme: of the perturbation's size (under 1.5x its distance from the scheme, less
    on average), not zero, and landing elsewhere than the scheme.
    Strang's structure (c d c) has one second-order method, its own: there the projection
    lands on it."""
    s, letters, k, c0, c = _setup(name, sd=sd)
    x, info = project(c, letters, k, s.order)
    assert residual(x, letters, k, s.order).abs().max() <= 1e-12
    assert info["defect"] <= 1e-12 < info["defect_before"]
    for row in x.tolist():
        stages = [sn.schemes.Stage(st.field, v) for st, v in zip(s.stages, row)]
        assert algebraic_order(stages, tol=1e-10) >= s.order
    if name == "strang":
        assert torch.allclose(x, c0.expand_as(x), rtol=0, atol=1e-14)
        return
    move = (x - c).abs().amax(dim=1)
    away = (c - c0).abs().amax(dim=1)
    assert bool((move < 1.5 * away).all()) and bool((move > 0).all())
    assert float(move.mean()) < float(away.mean())
    assert (x - c0).abs().max() > 1e-6                       # not the scheme again


def test_a_projection_without_a_solution_is_an_error_naming_the_layer():
    """Lie–Trotter's structure (d c) has no second-order method: the projection stops with a
    ProjectionError that names the layer and says how far it got."""
    _, letters, k, _, c = _setup("lie-trotter", layers=2, sd=0.01)
    with pytest.raises(ProjectionError, match=r"^layer 0: .*order-2 conditions.*largest "
                                              r"condition"):
        project(c, letters, k, 2, max_steps=8)
    with pytest.raises(ProjectionError, match=r"^first:"):
        project(c, letters, k, 2, max_steps=4, names=["first", "second"])


def _model(scheme="yoshida4", **kw):
    torch.manual_seed(0)
    return sn.models.SplitTransformer(vocab_size=64, d_model=16, n_heads=2, n_layers=3,
                                      scheme=scheme, max_len=16, learn_coefficients=True,
                                      project_coefficients=True, **kw)


def _max_condition(model):
    letters, k = conditions.structure(model.layers[0].stages)
    return max(float(residual(la.stage_coeffs.detach(), letters, k, model.scheme.order)
                     .abs().max()) for la in model.layers)


def test_coefficients_stay_float64_whatever_the_models_dtype():
    m = _model()
    for convert in (lambda m: m.float(), lambda m: m.half(), lambda m: m.to(torch.bfloat16),
                    lambda m: m.double(), lambda m: m.to("cpu", torch.float32)):
        m = convert(m)
        assert all(la.stage_coeffs.dtype == torch.float64 for la in m.layers)
    assert m.layers[0].diffusion.qkv.weight.dtype == torch.float32
    assert _max_condition(m) <= 1e-12                        # exact at construction
    plain = sn.models.SplitTransformer(vocab_size=64, d_model=16, n_heads=2, n_layers=2,
                                       scheme="strang", learn_coefficients=True).half()
    assert plain.layers[0].stage_coeffs.dtype == torch.float16    # without: as before


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_model_projection_after_a_move_and_gradients_reach_the_coefficients(dtype):
    m = _model().to(dtype)
    idx = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(1))
    torch.nn.functional.cross_entropy(m(idx).flatten(0, 1), idx.flatten()).backward()
    g = m.layers[1].stage_coeffs.grad
    assert g is not None and g.dtype == torch.float64 and float(g.abs().max()) > 0
    with torch.no_grad():
        for la in m.layers:
            la.stage_coeffs.add_(0.003 * torch.randn_like(la.stage_coeffs))
    assert _max_condition(m) > 1e-4
    info = m.project_coefficients()
    assert _max_condition(m) <= 1e-12 and info["steps"] >= 1
    checks = sn.check_order(m)
    assert all(c.ok and c.condition_defect <= 1e-12 for c in checks)
    assert "largest order condition" in checks[0].summary()


def test_project_coefficients_refusals():
    with pytest.raises(ValueError, match="needs learned coefficients"):
        SplitConfig(vocab_size=64, d_model=16, n_heads=2, n_layers=2,
                    project_coefficients=True)
    with pytest.raises(ValueError, match="yoshida8 declares order 8"):
        SplitConfig(vocab_size=64, d_model=16, n_heads=2, n_layers=2, scheme="yoshida8",
                    learn_coefficients=True, project_coefficients=True)
    with pytest.raises(ValueError, match="--parallel fsdp does not take --project-coeff"):
        TrainConfig(model=SplitConfig(vocab_size=256, d_model=16, n_heads=2, n_layers=2,
                                      learn_coefficients=True, project_coefficients=True),
                    parallel="fsdp")
    free = sn.models.SplitTransformer(vocab_size=64, d_model=16, n_heads=2, n_layers=2,
                                      scheme="strang", learn_coefficients=True)
    with pytest.raises(ValueError, match="needs float64 coefficients"):
        free.project_coefficients()
    fixed = sn.models.SplitTransformer(vocab_size=64, d_model=16, n_heads=2, n_layers=2)
    with pytest.raises(ValueError, match="does not learn its coefficients"):
        fixed.project_coefficients()


def _train(out, steps, resume=False, scheme="yoshida4", **kw):
    from splitnet.training.train import train

    cfg = TrainConfig(model=SplitConfig(vocab_size=256, d_model=16, n_heads=2, n_layers=2,
                                        scheme=scheme, learn_coefficients=True,
                                        project_coefficients=True, max_len=16),
                      context=16, batch_size=4, steps=steps, lr=3e-2, warmup=0,
                      eval_every=3, ckpt_every=3, eval_windows=4, device="cpu", threads=1,
                      progress=False, plot=False, out=str(out), resume=resume,
                      overwrite=not resume, **kw)
    return train(cfg)


@pytest.mark.heavy
def test_training_projects_after_every_step_and_resumes_bit_for_bit(tmp_path):
    """Every step's coefficients satisfy the conditions (the metrics' defect), they moved
    from the scheme's, and 6 steps in one go equal 3 + 3 across a resume, bit for bit."""
    from splitnet import checkpoint as ck

    _train(tmp_path / "a", 6)
    _train(tmp_path / "b", 6, stop_at=3)
    _train(tmp_path / "b", 6, resume=True)
    a, b = ck.load(tmp_path / "a"), ck.load(tmp_path / "b")
    for key, v in a["model"].items():
        assert torch.equal(v, b["model"][key]), key
    recs = [json.loads(x) for x in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    defects = [r["order_defect"] for r in recs if "order_defect" in r]
    assert defects and max(defects) <= 1e-24                  # squared conditions
    model = ck.model_from_state(a, tmp_path / "a")
    coeffs = model.layers[0].stage_coeffs
    assert coeffs.dtype == torch.float64 and _max_condition(model) <= 1e-12
    scheme = torch.tensor([float(st.coeff) for st in sn.schemes.get("yoshida4").stages],
                          dtype=torch.float64)
    assert float((coeffs.detach() - scheme).abs().max()) > 1e-6     # a method of its own


@pytest.mark.heavy
def test_a_projection_that_fails_in_training_stops_the_run_naming_the_layer(tmp_path,
                                                                            monkeypatch):
    from splitnet.order import projection
    from splitnet.training.train import TrainingError

    real, calls = projection.project, []

    def fail(c, letters, k, degree, **kw):     # the model's construction passes, a step fails
        calls.append(1)
        if len(calls) == 1:
            return real(c, letters, k, degree, **kw)
        raise ProjectionError("layer 1: its coefficients could not be brought onto the "
                              "order-4 conditions (test)")
    _train(tmp_path / "r", 3)
    monkeypatch.setattr(projection, "project", fail)
    with pytest.raises(TrainingError, match=r"^layer 1: .*the run stops here"):
        _train(tmp_path / "r", 6, resume=True)


@pytest.mark.heavy
def test_the_cli_refuses_projection_without_learned_coefficients(tmp_path):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "splitnet", "train", "--project-coefficients",
                        "--steps", "1", "--out", str(tmp_path / "x")], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "--learn-coefficients" in r.stderr


@pytest.mark.heavy
def test_two_ddp_ranks_keep_the_coefficients_float64_and_exact(tmp_path):
    """--parallel ddp (2 gloo ranks): the coefficients stay float64 parameters, every rank
    projects after its step, and the checkpoint's layers are fourth-order methods."""
    import os
    import subprocess
    import sys

    from splitnet import checkpoint as ck

    text = tmp_path / "corpus.txt"
    text.write_text("".join(f"def g{i}(y):\n    return y - {i % 5}\n" for i in range(300)))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "splitnet", "train", "--text", str(text), "--steps", "3", "--eval-every", "3",
           "--d-model", "16", "--n-heads", "2", "--n-layers", "2", "--context", "16",
           "--batch-size", "4", "--scheme", "yoshida4", "--learn-coefficients",
           "--project-coefficients", "--lr", "0.03", "--parallel", "ddp", "--no-progress",
           "--out", str(tmp_path / "r")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-2000:]
    model = ck.model_from_state(ck.load(tmp_path / "r"), tmp_path / "r")
    assert all(la.stage_coeffs.dtype == torch.float64 for la in model.layers)
    assert _max_condition(model) <= 1e-12


def test_autocast_leaves_the_coefficients_float64():
    m = _model()
    idx = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(2))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = m(idx)
    out.float().sum().backward()
    assert m.layers[0].stage_coeffs.dtype == torch.float64
    assert m.layers[0].stage_coeffs.grad.dtype == torch.float64
