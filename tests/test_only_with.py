"""Options that only apply alongside another (issue: the hostile pass's D5-D8): refused when
typed without it, by one table per command (``ONLY_WITH`` of the configs, checked by
:func:`splitnet.configs.options.check_applicable`); never refused when not typed, so a value
that ``--resume`` restores from the checkpoint goes on working. The one-line refusals
themselves are rows of tests/test_errors.py's ``CLI_CASES``; here what a row cannot say."""

from __future__ import annotations

import pytest
from hostile import run_main

from splitnet.cli import main
from splitnet.runs import checkpoint as ck

TINY = ["--d-model", "16", "--n-heads", "2", "--n-layers", "1", "--context", "16",
        "--batch-size", "4", "--no-plot", "--threads", "1", "--no-progress", "--warmup", "0"]


def _main(argv) -> tuple[int, str]:
    rc, _, err = run_main(argv)
    return rc, err


@pytest.fixture(scope="module")
def chunked_run(tmp_path_factory):
    """Two steps of a language model trained with --loss chunked --loss-chunk 8."""
    tmp = tmp_path_factory.mktemp("chunked")
    text = tmp / "text.txt"
    text.write_text("def f(x):\n    return x + 1\n" * 150)
    out = tmp / "run"
    rc, err = _main(["train", *TINY, "--text", text, "--steps", "2", "--loss", "chunked",
                     "--loss-chunk", "8", "--out", out])
    assert rc == 0, err
    return out


def test_resume_takes_a_loss_chunk_the_checkpoint_applies(chunked_run):
    """--loss chunked is the checkpoint's: --resume --loss-chunk N is read, not refused."""
    rc, err = _main(["train", "--resume", "--steps", "3", "--loss-chunk", "16", "--out",
                     chunked_run, "--no-progress", "--threads", "1"])
    assert rc == 0, err
    assert ck.load(chunked_run)["train_config"]["loss_chunk"] == 16


def test_resume_with_another_loss_keeps_the_restored_chunk_unrefused(chunked_run):
    """--resume --loss plain: the checkpoint's loss_chunk was not typed, so nothing is refused;
    typed with it, it is (one line, nothing trained)."""
    step = ck.load(chunked_run)["step"]
    rc, err = _main(["train", "--resume", "--steps", str(step + 1), "--loss", "plain",
                     "--out", chunked_run, "--no-progress", "--threads", "1"])
    assert rc == 0, err
    rc, err = _main(["train", "--resume", "--steps", str(step + 2), "--loss", "plain",
                     "--loss-chunk", "8", "--out", chunked_run])
    assert rc == 2 and err.count("\n") == 1, err
    assert "--loss-chunk only applies with --loss chunked" in err
    assert ck.load(chunked_run)["step"] == step + 1


@pytest.mark.parametrize("argv", [
    ["--loss", "chunked", "--loss-chunk", "64"],
    ["--refine-prob", "0.5", "--refine-substeps", "2"],
    ["--gate", "tanh", "--gate-fields", "convection"],
    ["--diffusion-field", "conv", "--conv-kernel", "5"],
    ["--rotary-pct", "0.5", "--rotary-base", "500"],
    ["--compile", "--compile-mode", "default", "--compile-scope", "regional"],
])
def test_each_option_is_taken_with_what_it_applies_with(tmp_path, argv):
    text = tmp_path / "text.txt"
    text.write_text("abc " * 500)
    rc, err = _main(["train", *TINY, "--text", text, "--dry-run", *argv,
                     "--out", tmp_path / "run"])
    assert rc == 0, err


def test_the_tables_name_real_options():
    """Every row of every ONLY_WITH table is an option of its config (a renamed option would
    otherwise silently drop out of the check)."""
    import dataclasses

    from splitnet.configs.config import SplitConfig
    from splitnet.configs.run import SECTIONS
    from splitnet.configs.seq2seq import Seq2SeqConfig
    from splitnet.tasks.task import TASKS
    from splitnet.training.config import WHERE

    tables = [cls for cls in (SplitConfig, Seq2SeqConfig, *SECTIONS.values())
              if getattr(cls, "ONLY_WITH", None)]
    assert len(tables) >= 3                       # the two networks', acceleration's, ...
    for cls in tables:
        names = {f.name for f in dataclasses.fields(cls)}
        assert set(cls.ONLY_WITH) <= names, set(cls.ONLY_WITH) - names
    for t in TASKS.values():                      # a task's: run options it does not read
        assert set(t.ONLY_WITH) <= set(WHERE), set(t.ONLY_WITH) - set(WHERE)


def test_describe_refuses_activations_that_cannot_fit_before_printing(capsys):
    """D8: the table was printed, then the measurement refused; now nothing is printed."""
    rc = main(["describe", "--activations", "--seq-len", "100000"])
    got = capsys.readouterr()
    assert rc == 2 and got.out == "", got.out
    assert got.err.count("\n") == 1 and "lower --seq-len" in got.err


def test_describe_at_the_defaults_it_no_longer_spells_out(capsys):
    """--weights and --vocab-size default to None now (so typing them counts): not typed,
    both weight modes and 256 bytes, as before."""
    assert main(["describe", "--d-model", "16", "--n-heads", "2", "--n-layers", "1",
                 "--jsonl"]) == 0
    rows = [__import__("json").loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["weights"], r["vocab_size"]) for r in rows] == [("shared", 256),
                                                               ("per-stage", 256)]


def test_trajectories_fresh_model_defaults_unchanged(tmp_path, capsys):
    """The fresh model's options default to None now (so typing them counts): not typed, the
    model is the documented one (width 64, 6 layers, seed 0)."""
    assert main(["trajectories", "--no-ode", "--prompt", "ab", "--threads", "1",
                 "--out", str(tmp_path / "t.png")]) == 0
    out = capsys.readouterr().out
    assert "fresh initialisation (seed 0)" in out and "6 layers, d_model 64" in out


# the options that name a file or folder a command writes (a value-taking one of these names)
OUTPUT_FLAGS = ("--out", "--json", "--gif", "--diagnostics", "--tensorboard")


def test_every_output_option_of_every_command_refuses_an_empty_value():
    """D7: '' was skipped as not given (trajectories --gif, refine --json) or resolved to the
    current folder after all the work (trajectories --out). Every output option of every
    command, however new, is the parser's one-line refusal, as train's, export's and
    evaluate's were: the type of _args.add_output_option (or train's config options)."""
    import argparse

    from splitnet.cli import COMMANDS, build_parser

    found = set()
    for command in COMMANDS:
        for a in build_parser(command)._actions:
            named = set(a.option_strings) & set(OUTPUT_FLAGS)
            if not (named or getattr(a, "output", False)) or a.nargs == 0 or \
                    getattr(a, "replaced", False):     # an old spelling, only refused
                continue
            found.add(f"{command} {a.option_strings[-1]}")
            for empty in ("", "  "):
                with pytest.raises(argparse.ArgumentTypeError,
                                   match="expected a non-empty value"):
                    a.type(empty)
    assert {"order --out", "trajectories --out", "trajectories --gif",
            "trajectories --diagnostics", "refine --out", "refine --json", "train --out",
            "train --tensorboard", "export --out", "evaluate --json"} <= found, found
