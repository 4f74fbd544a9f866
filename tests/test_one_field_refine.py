"""Re-discretising a network of one field per layer (issue 62, D11): a language model without a
feed-forward (``convection_field="none"``) and ConvS2S (its encoder has one field, its decoder
two: the conv and the multi-step attention). Their ODE is the field's own flow; substeps,
methods, the exact ODE and depth changes apply, a scheme name does not (with one field there is
nothing to split). ``splitnet refine`` refused every such network, after loading it, naming an
internal scheme 'ode'."""

from __future__ import annotations

import contextlib
import io
import json
import math

import pytest
import torch

import splitnet as sn
from splitnet.analyses import refine as R
from splitnet.cli import main as _main

CONVS2S = {"diffusion_field": "conv", "convection_field": "none", "cross_field": "multistep",
           "init": "convs2s", "norm": "none"}


def main(argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = _main(argv)
        except SystemExit as e:
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


def _lm(kind="attention", layers=2):
    torch.manual_seed(0)
    return sn.models.SplitTransformer(40, 16, 2, layers, max_len=16, diffusion_field=kind,
                                      convection_field="none", step_size=0.5).double().eval()


def _convs2s():
    torch.manual_seed(0)
    return sn.models.SplitSeq2Seq(40, 40, 16, 2, n_encoder_layers=2, n_decoder_layers=2,
                                  pad_id=0, bos_id=1, eos_id=2, max_len=16,
                                  **CONVS2S).double().eval()


def _lm_loss(idx):
    return lambda m: float(m(idx).square().mean())


@pytest.mark.parametrize("kind", ["attention", "conv"])
def test_a_one_field_language_model_is_refined_by_substeps_methods_and_its_ode(kind):
    """The study of a one-field network: its own step only (the one scheme there is), every
    method and substep count, and the exact ODE, whose loss the exact substeps converge to."""
    m = _lm(kind)
    idx = torch.randint(0, 40, (2, 9), generator=torch.Generator().manual_seed(1))
    assert R.one_field(m) == f"diffusion ({kind})"
    res = R.refinement_study(m, _lm_loss(idx), substeps=(1, 2, 4), methods=("euler", "exact"),
                             progress=False)
    assert {p.scheme for p in res.points} == {R.OWN}
    assert res.ode is not None and math.isfinite(res.ode.loss)
    exact = sorted((p for p in res.points if p.method == "exact"), key=lambda p: p.substeps)
    assert all(abs(p.loss - res.ode.loss) < 1e-9 for p in exact)   # exact flows: the ODE itself
    euler = sorted((p for p in res.points if p.method == "euler"), key=lambda p: p.substeps)
    gaps = [abs(p.loss - res.ode.loss) for p in euler]
    assert gaps[0] > gaps[1] > gaps[2] > 0 and 1.5 < gaps[1] / gaps[2] < 2.7   # Euler: order 1
    assert euler[0].loss == pytest.approx(res.own.loss, abs=1e-12)  # n = 1 is the network


def test_the_ode_model_of_one_field_is_that_fields_flow():
    m = _lm()
    ode = R.ode_model(m)
    assert ode.scheme.name == "ode" and ode.scheme.fields == ("diffusion",)
    idx = torch.randint(0, 40, (1, 7), generator=torch.Generator().manual_seed(2))
    fine = R.rediscretize(m, None, 64, "rk4")
    assert torch.allclose(ode(idx), fine(idx), atol=1e-9)


@pytest.mark.parametrize("schemes", [("strang",), ("lie-trotter", "own"), ("yoshida4",),
                                     ("c:0.5,d:1,c:0.5",)])
def test_named_schemes_are_refused_for_a_one_field_network(schemes):
    with pytest.raises(ValueError, match=r"one field, diffusion \(attention\).*nothing to split"):
        R.refinement_study(_lm(), lambda m: 0.0, schemes=schemes, progress=False)


def test_convs2s_is_refined_its_decoder_by_a_scheme_its_encoder_by_substeps():
    """ConvS2S: the decoder's two fields take a scheme, the encoder's one field plain substeps;
    both stacks' Euler substeps approach the ODE of their fields at order 1."""
    m = _convs2s()
    assert R.one_field(m) is None
    g = torch.Generator().manual_seed(3)
    src, tgt = torch.randint(3, 40, (1, 5), generator=g), torch.randint(3, 40, (1, 4), generator=g)

    def loss(mod):
        return float(mod(src, tgt).square().mean())

    res = R.refinement_study(m, loss, schemes=("strang", R.OWN), substeps=(1, 4, 16),
                             methods=("euler",), progress=False)
    assert {p.scheme for p in res.points} == {"strang", R.OWN}
    assert all(math.isfinite(p.loss) for p in [*res.points, res.ode, res.own])
    own = sorted((p for p in res.points if p.scheme == R.OWN), key=lambda p: p.substeps)
    assert own[0].loss == pytest.approx(res.own.loss, abs=1e-12)
    gaps = [abs(p.loss - res.ode.loss) for p in own]
    assert gaps[0] > gaps[1] > gaps[2] and 2.5 < gaps[1] / gaps[2] < 6.5     # 4x: order 1


def test_the_command_line_limits_equal_the_librarys():
    from splitnet.cli.commands import cmd_refine

    assert cmd_refine.MAX_SUBSTEPS == R.MAX_SUBSTEPS


# ---------------------------------------------------------------------------------------------
# splitnet refine on one-field checkpoints: every option

@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    import hostile

    root = tmp_path_factory.mktemp("onefield")
    lm = hostile.good_checkpoint(root / "lm", convection_field="none")
    gone = hostile.good_checkpoint(root / "gone", convection_field="none")
    two = hostile.good_checkpoint(root / "two")            # diffusion and convection
    (root / "gone" / "corpus.txt").unlink()     # its training text is no longer there
    mt = root / "mt" / "run"
    rc, _, err = main(["train", "--pairs", "copy", "--out", str(mt), "--steps", "1",
                       *hostile.S2S_TINY, *(f"--{k.replace('_', '-')}={v}"
                                            for k, v in CONVS2S.items())])
    assert rc == 0, err
    return {"lm": lm, "mt": mt, "gone": gone, "two": two}


OPTIONS = [
    [], ["--methods", "euler,rk4", "--substeps", "1,2"],
    ["--method", "exact", "--substeps", "1", "--exact-substeps", "1"],
    ["--schemes", "own", "--methods", "euler", "--substeps", "1,4", "--coarsen", "none",
     "--prolong", "2,4"],
    ["--scheme", "own", "--methods", "euler,midpoint", "--substeps", "2", "--coarsen", "2",
     "--prolong", "none", "--batch-size", "1"],
]


@pytest.mark.heavy
@pytest.mark.parametrize("kind", ["lm", "mt"])
@pytest.mark.parametrize("extra", OPTIONS, ids=[" ".join(o) or "defaults" for o in OPTIONS])
def test_refine_takes_every_option_on_one_field_checkpoints(runs, kind, extra, tmp_path):
    """Every refine option on a one-field language model and on ConvS2S: exit 0, the JSON's
    losses finite, the ODE point there (was: 'scheme 'ode' has only the field ...'). The
    language model is studied by its own step only; ConvS2S's decoder takes the default
    schemes unless told."""
    js = tmp_path / "r.json"
    rc, _, err = main(["refine", "--checkpoint", str(runs[kind]), "--windows", "4",
                         "--no-progress", "--out", str(tmp_path / "r.png"), "--json", str(js),
                         *extra])
    assert rc == 0, err
    d = json.loads(js.read_text())
    told = any(o in extra for o in ("--scheme", "--schemes"))
    want = {R.OWN} if told or kind == "lm" else set(R.DEFAULT_SCHEMES)
    assert {p["scheme"] for p in d["points"]} == want
    assert d["ode"] is not None and all(
        isinstance(p["loss"], float) for p in [d["own"], d["ode"], *d["points"]])


@pytest.mark.heavy
def test_a_scheme_for_convs2s_splits_its_decoder(runs, tmp_path):
    rc, out, err = main(["refine", "--checkpoint", str(runs["mt"]), "--scheme", "strang",
                         "--methods", "euler", "--substeps", "1", "--windows", "4",
                         "--no-progress", "--coarsen", "none", "--prolong", "none",
                         "--out", str(tmp_path / "r.png")])
    assert rc == 0, err
    assert "strang" in out


@pytest.mark.parametrize("extra", [["--schemes", "strang"], ["--scheme", "lie-trotter"],
                                   ["--schemes", "own,yoshida4"]])
def test_refine_refuses_a_named_scheme_for_a_one_field_network_before_reading_data(runs,
                                                                                   extra,
                                                                                   tmp_path):
    """The refusal names the field and comes before the corpus is read: with the training
    text gone, the message is still about the scheme."""
    rc, _, err = main(["refine", "--checkpoint", str(runs["gone"]), "--out",
                       str(tmp_path / "r.png"), *extra])
    assert rc == 2 and err.count("\n") == 1, err
    assert "this model's layers advance one field, diffusion (attention)" in err, err
    assert not (tmp_path / "r.png").exists()


@pytest.mark.parametrize("extra", [["--scheme", "strang"], ["--compare", "lie-trotter,strang"],
                                   ["--scheme", "lie-trotter", "--compare", "yoshida4"]])
def test_trajectories_refuses_a_scheme_for_a_one_field_network(runs, extra, tmp_path):
    """trajectories' --scheme and --compare re-run the fields under other schemes: for one
    field every one is the same step (the small multiples were identical); refused, one line."""
    rc, _, err = main(["trajectories", "--checkpoint", str(runs["lm"]), "--out",
                       str(tmp_path / "t.png"), *extra])
    assert rc == 2 and err.count("\n") == 1 and "one field, diffusion (attention)" in err, err
    assert not (tmp_path / "t.png").exists()
    from splitnet.analyses.trajectories import with_scheme

    with pytest.raises(ValueError, match="nothing to split"):
        with_scheme(_lm(), "strang")
    rc, _, err = main(["trajectories", "--checkpoint", str(runs["lm"]), "--no-ode", "--prompt",
                       "ab cd", "--out",
                       str(tmp_path / "t.png")])
    assert rc == 0, err


def test_a_stage_string_must_name_the_fields_of_the_stack_it_integrates(runs, tmp_path):
    """A stage string or pattern names its fields: over ConvS2S's decoder (diffusion and cross)
    ``d:0.5,x:1,d:0.5`` is taken as written (it was refused: 'refine integrates diffusion and
    convection'), while ``c:0.5,d:1,c:0.5`` is refused instead of being relabelled onto the
    decoder's fields; a language model refuses the d/x string for the same reason."""
    base = ["--methods", "euler", "--substeps", "1", "--windows", "2", "--coarsen", "none",
            "--prolong", "none", "--no-progress", "--out", str(tmp_path / "r.png")]
    rc, _, err = main(["refine", "--checkpoint", str(runs["mt"]), "--schemes",
                         "d:0.5,x:1,d:0.5", *base])
    assert rc == 0, err
    for run, spec, whose in ((runs["mt"], "c:0.5,d:1,c:0.5", "decoder"),
                             (runs["two"], "d:0.5,x:1,d:0.5", "model"), (runs["mt"], "sfs",
                                                                        "decoder")):
        rc, _, err = main(["refine", "--checkpoint", str(run), "--schemes", spec, *base[:-2],
                           "--out", str(tmp_path / "refused.png")])
        assert rc == 2 and err.count("\n") == 1, err
        assert f"but the {whose}'s layers advance" in err and "names its fields" in err, err
        assert not (tmp_path / "refused.png").exists()
