"""Issue 28, part B: one check of options per task, sacrebleu missing, sizes and shapes, and the
commands' lines. Each refusal: exit 2, one line on stderr naming the problem, no traceback,
nothing written; or the right result."""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import pytest
import torch

from splitnet.cli import build_parser, main
from splitnet.cli.commands.cmd_train import config_from_args
from splitnet.configs.config import MAX_BEAM
from splitnet.runs import checkpoint as ck
from splitnet.training.config import TrainConfig

S2S_TINY = ["--task", "translate", "--d-model", "16", "--n-heads", "2", "--n-encoder-layers",
            "1", "--n-decoder-layers", "1", "--context", "16", "--batch-size", "4", "--warmup",
            "1", "--threads", "1", "--no-progress", "--no-plot"]


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    import hostile

    return hostile.good_checkpoint(tmp_path_factory.mktemp("lm"))


@pytest.fixture(scope="module")
def mt_run(tmp_path_factory):
    """A translation run directory: two steps on the synthetic copy task, no test scores."""
    out = tmp_path_factory.mktemp("mt") / "run"
    with contextlib.redirect_stderr(io.StringIO()):
        assert main(["train", "--pairs", "copy", "--out", str(out), *S2S_TINY, "--steps", "2",
                     "--bleu-sentences", "0"]) == 0
    return out


def _refused(capsys, argv, *needles, written: Path | None = None) -> str:
    """``splitnet ARGV`` exits 2 with one line on stderr holding every needle, nothing on
    stdout, and ``written`` (a path the command would create) absent."""
    capsys.readouterr()
    try:
        rc = main(argv)
    except SystemExit as e:           # argparse's own refusals (a value of the wrong type)
        rc = e.code
    assert rc == 2, argv
    got = capsys.readouterr()
    err = got.err.strip()
    assert "Traceback" not in err and err.count("\n") == 0 and err, err
    assert err.startswith(f"splitnet {argv[0]}: error:"), err
    for n in needles:
        assert n in err, (n, err)
    assert got.out == "", got.out
    if written is not None:
        assert not written.exists(), written
    return err


# ------------------------------------------------------------------ 1. options of one task

@pytest.mark.parametrize("option,value", [("--beam", "4"), ("--length-penalty", "1.0"),
                                          ("--label-smoothing", "0.2"),
                                          ("--bleu-sentences", "3")])
def test_a_language_model_refuses_the_translation_options(tmp_path, capsys, option, value):
    out = tmp_path / "o"
    # the default's value too: given is given (the option would be recorded and ignored)
    _refused(capsys, ["train", "--out", str(out), option, value], f"{option}: encoder–decoder "
             f"option (read by --task translate only)", "this run is a language model "
             "(--task lm, the default): add --task translate", written=out)


@pytest.mark.parametrize("option,value", [("--bpe", "300"), ("--src-lang", "en"),
                                          ("--pairs", "copy"), ("--tgt-lang", "fr")])
def test_translation_data_options_do_not_switch_the_task(tmp_path, capsys, option, value):
    """Before, --bpe / --src-lang / --pairs made the run a translation run and the error then
    blamed --scheme; now the task is --task, and the line names the option that is wrong."""
    out = tmp_path / "o"
    err = _refused(capsys, ["train", "--out", str(out), option, value, "--scheme", "strang"],
                   f"{option}: encoder–decoder option", "add --task translate", written=out)
    assert "--scheme" not in err


def test_a_translation_run_refuses_val_fraction_and_says_why(tmp_path, capsys):
    out = tmp_path / "o"
    _refused(capsys, ["train", "--out", str(out), "--task", "translate", "--val-fraction", "0.2"],
             "--val-fraction: language-model option", "fixed rule", written=out)
    with pytest.raises(ValueError, match="--val-fraction: language-model option"):
        TrainConfig(task="translate", val_fraction=0.2)
    with pytest.raises(ValueError, match="--beam, --bleu-sentences: encoder–decoder options"):
        TrainConfig(beam=8, bleu_sentences=1)
    # the defaults of either task are not "given" (a translation run has no val_fraction: the
    # language model's default, passed to it, is dropped as 0.3's stored configs hold it)
    assert TrainConfig(task="translate", val_fraction=TrainConfig().val_fraction) == \
        TrainConfig(task="translate")


def test_the_task_options_follow_the_checkpoint_on_resume(lm_run, mt_run, capsys):
    _refused(capsys, ["train", "--resume", "--out", str(lm_run), "--beam", "8"],
             "--beam: encoder–decoder option", "resumed from its checkpoint")
    _refused(capsys, ["train", "--resume", "--out", str(mt_run), "--val-fraction", "0.3"],
             "--val-fraction: language-model option", "resumed from its checkpoint")
    _refused(capsys, ["train", "--resume", "--out", str(mt_run), "--scheme", "strang"],
             "--scheme: language-model option")
    _refused(capsys, ["train", "--resume", "--out", str(lm_run), "--n-encoder-layers", "2"],
             "--n-encoder-layers: encoder–decoder option")
    _refused(capsys, ["train", "--resume", "--out", str(lm_run), "--beam", "8", "--scheme",
                      "strang"], "--scheme (a language model's) and --beam")
    before = ck.load(mt_run)["step"]
    capsys.readouterr()
    # the task is the checkpoint's: a free translation option needs no --task on --resume
    assert main(["train", "--resume", "--out", str(mt_run), "--beam", "2", "--dry-run"]) == 0
    assert '"beam": 2' in capsys.readouterr().out
    assert ck.load(mt_run)["step"] == before


# ------------------------------------------------------------------ 2. sacrebleu missing

def test_without_sacrebleu_translation_training_stops_before_the_first_step(tmp_path, capsys,
                                                                           monkeypatch):
    monkeypatch.setitem(sys.modules, "sacrebleu", None)      # as if not installed
    out = tmp_path / "o"
    _refused(capsys, ["train", "--pairs", "copy", "--out", str(out), *S2S_TINY, "--steps", "2"],
             "sacrebleu", "pip install 'splitnet[translate]'", "--bleu-sentences 0",
             written=out)
    capsys.readouterr()
    assert main(["train", "--pairs", "copy", "--out", str(out), *S2S_TINY, "--steps", "1",
                 "--bleu-sentences", "0"]) == 0            # no scores: nothing to import


def test_without_sacrebleu_translate_reference_translates_nothing(mt_run, tmp_path, capsys,
                                                                  monkeypatch):
    monkeypatch.setitem(sys.modules, "sacrebleu", None)
    src = tmp_path / "src.txt"
    src.write_text("ab cd\nef gh\n")
    _refused(capsys, ["translate", "--checkpoint", str(mt_run), "--input", str(src),
                      "--reference", str(src), "--threads", "1"],
             "--reference (BLEU and chrF) needs sacrebleu", "pip install 'splitnet[translate]'")


# ------------------------------------------------------------------ 3. sizes and shapes

def test_a_huge_beam_is_refused_up_front(mt_run, tmp_path, capsys):
    out = tmp_path / "o"
    _refused(capsys, ["train", "--pairs", "copy", "--out", str(out), *S2S_TINY, "--beam",
                      "1000000000"], f"beam must be <= {MAX_BEAM:,}", written=out)
    src = tmp_path / "src.txt"
    src.write_text("ab cd\n")
    _refused(capsys, ["translate", "--checkpoint", str(mt_run), "--input", str(src), "--beam",
                      "1000000000"], "--beam", "expected a beam width")
    model = ck.load_model(mt_run)
    with pytest.raises(ValueError, match=r"beam must be an int in \[1, 1,024\]"):
        model.generate(torch.tensor([[5, 6, 7]]), 4, beam=10**9)


def test_a_beam_search_that_cannot_fit_is_refused_before_it_starts(mt_run, monkeypatch):
    from splitnet import runenv
    from splitnet.nets.decoding import decode_memory

    model = ck.load_model(mt_run)
    src = torch.tensor([[5, 6, 7]] * 4)
    need = decode_memory(model.config, 4, 3, 8, 64)
    assert need == pytest.approx(64 * decode_memory(model.config, 4, 3, 8, 1))  # rows x beam
    monkeypatch.setattr(runenv, "available_memory", lambda device=None: need)   # < need / 0.9
    with pytest.raises(ValueError, match=r"decoding 4 source.*beam 64 needs about"):
        model.generate(src, 8, beam=64)
    assert model.generate(src, 8, beam=2).shape[0] == 4      # a smaller search fits


def test_generate_wants_a_batch_and_says_so(mt_run):
    model = ck.load_model(mt_run)
    one = torch.tensor([5, 6, 7])
    with pytest.raises(ValueError, match=r"src must have shape \(batch, seq\), got \(3,\); one "
                                         r"sentence is src\[None\]"):
        model.generate(one, 4)
    with pytest.raises(ValueError, match=r"shape \(batch, seq\), got \(3,\)"):
        model(one, torch.tensor([[1]]))
    with pytest.raises(TypeError, match="src must be a tensor"):
        model.generate([[5, 6, 7]], 4)
    out = model.generate(one[None], 4)                      # one sentence as a batch of one
    assert out.shape[0] == 1 and 1 <= out.shape[1] <= 4


def test_negative_numbers_are_values_and_then_checked(tmp_path, capsys):
    out = tmp_path / "o"
    _refused(capsys, ["train", "--out", str(out), "--task", "translate", "--length-penalty",
                      "-1e308"], "length_penalty must be >= -10, got -1e+308", written=out)
    _refused(capsys, ["train", "--out", str(out), "--task", "translate", "--length-penalty",
                      "-inf"], "--length-penalty: expected a finite number")
    _refused(capsys, ["translate", "--checkpoint", str(out), "--length-penalty", "-1E3"],
             "--length-penalty: expected a number in [-10, 10], got '-1E3'")
    args = build_parser("train").parse_args(["--task", "translate", "--length-penalty",
                                             "-2.5e0"])
    assert config_from_args(args)[0].length_penalty == -2.5
    # an option name is still an option: a missing value is said so
    _refused(capsys, ["train", "--length-penalty", "--beam"], "expected one argument")


# ------------------------------------------------------------------ 4. commands

def test_order_refuses_a_three_field_scheme_without_fields_3_before_any_work(tmp_path, capsys):
    png = tmp_path / "o.png"
    for spec in ("sxf", "d:1,x:1,c:1", "strang,sxf"):
        _refused(capsys, ["order", "--schemes", spec, "--out", str(png)],
                 "advances diffusion, cross, convection", "add --fields 3", written=png)
    _refused(capsys, ["order", "--schemes", "d:1,q:1", "--out", str(png)], "it has no q",
             written=png)


def test_refine_calls_a_three_field_scheme_three_field(lm_run, mt_run, tmp_path, capsys):
    import splitnet as sn

    png = tmp_path / "r.png"
    for run in (lm_run, mt_run):
        err = _refused(capsys, ["refine", "--checkpoint", str(run), "--schemes", "sxf",
                                "--out", str(png)], "scheme 'sxf' advances diffusion, cross, "
                       "convection (3 fields)", "advance diffusion, convection (2 fields)",
                       written=png)
        assert "two-field splitting" not in err
    # a custom two-field scheme has no form over a decoder's three fields: said before the study
    _refused(capsys, ["refine", "--checkpoint", str(mt_run), "--schemes", "sfsf", "--out",
                      str(png), "--no-progress"], "the decoder's layers advance diffusion, "
             "cross, convection", "'sfsf' is a two-field splitting", written=png)
    with pytest.raises(ValueError, match=r"'sxf' is a 3-field splitting .* no 2-field form"):
        sn.schemes.resolve("sxf").over(("diffusion", "convection"))


def test_describe_a_translation_checkpoint_stack_by_stack(mt_run, capsys):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    from splitnet.nets.cost import seq2seq_costs

    capsys.readouterr()
    assert main(["describe", "--checkpoint", str(mt_run), "--seq-len", "12"]) == 0
    out = capsys.readouterr().out
    model = ck.load_model(mt_run).eval()
    assert f"{model.n_params():,} parameters" in out
    assert "encoder: lie-trotter [s f] x 1 layers" in out
    assert "decoder: lie-trotter [s x f] x 1 layers; evaluations per token: diffusion 1, " \
           "cross 1, convection 1" in out
    assert "decoder: d:1.0,x:1.0,c:1.0" in out and "check_order: ok" in out
    # the closed form against FlopCounterMode (the math kernel, so attention's matmuls count)
    n = 12
    src, tgt = torch.randint(3, 200, (2, n)), torch.randint(3, 200, (2, n))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc, torch.no_grad():
        model(src, tgt)
    closed = sum(r["flops"] for r in seq2seq_costs(model.config, n))
    assert fc.get_total_flops() == pytest.approx(2 * n * closed, rel=1e-9)


def test_export_refuses_a_translation_checkpoint_in_one_line(mt_run, tmp_path, capsys):
    out = tmp_path / "hf"
    _refused(capsys, ["export", "--checkpoint", str(mt_run), "--out", str(out)],
             "holds a translation model", "export writes language models only",
             "splitnet translate", written=out)
