"""No traceback from the command line, whatever any option is given.

The commands and their options come from the code itself: ``splitnet.cli.COMMANDS`` (every
``cmd_*.py``) and each command's parser (its ``configure(parser)``), so a new command or option
is fuzzed without an edit here. An option that takes a value is *numeric* when its type refuses
'abc' and takes a number (whatever the type is called); it gets extreme numbers (0, -1, nan,
inf, 1e30, 2**64, 'abc', ...). Every other option that takes a free value (paths, names, text)
gets what a path option must survive: a missing file, a directory, /dev/null, an empty file,
''. Options with choices are argparse's own business and are not fuzzed.

Each run starts from a baseline that does real work in well under a few seconds (BASELINES:
tiny sizes, or --dry-run for train; a command without a row there runs with its required
options only, --checkpoint being a real tiny run), in this process through
``splitnet.cli.main``. The outcome is exit 0, or exit 2 with ONE line on stderr, or exit 1 from a
command that documents a verdict (its module's ``VERDICT``); never a traceback. The default
suite runs every command's baseline, a hypothesis sample of (option, value) pairs and a few runs
in subprocesses; ``-m slow`` runs every pair with every value.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from splitnet.cli import COMMANDS, build_parser, main

ROOT = str(Path(__file__).resolve().parents[1])
ENV = {**os.environ, "OMP_NUM_THREADS": "1",
       "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)}

NUMBERS = ["0", "-0.0", "-1", "1e-320", "1e30", "1e308", "-1e308", str(2**63), str(2**64),
           "nan", "inf", "-inf", "abc", "1", "2", "0.5", "", "1,2", "0x10", "1_000"]
# {out}: a fresh folder per run; {out}/dir exists and is empty, {out}/empty is an empty file
PATHS = ["{out}/missing/nothing", "{out}/dir", "/dev/null", "{out}/empty", ""]

PARSERS = {name: build_parser(name) for name in COMMANDS}
MODULES = {name: importlib.import_module(f"splitnet.cli.commands.cmd_{name}") for name in COMMANDS}


def _parses(parse, text: str) -> bool:
    try:
        parse(text)
    except Exception:       # ValueError, TypeError, ArgumentTypeError: argparse's refusals
        return False
    return True


def _takes_value(a: argparse.Action) -> bool:
    return bool(a.option_strings) and a.nargs != 0 and not a.choices


def is_numeric(a: argparse.Action) -> bool:
    """A type that refuses a word but takes a number (or a list of them)."""
    return (a.type is not None and not _parses(a.type, "abc")
            and any(_parses(a.type, t) for t in ("1", "0.5", "1,2")))


def options(command: str, numeric: bool) -> list[str]:
    """``command``'s options that take a free value: the numeric ones or all the others."""
    return [a.option_strings[-1] for a in PARSERS[command]._actions
            if _takes_value(a) and is_numeric(a) == numeric]


NUMERIC = {c: options(c, True) for c in COMMANDS}
TEXTUAL = {c: options(c, False) for c in COMMANDS}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    import hostile

    root = tmp_path_factory.mktemp("fuzz")
    (root / "text.txt").write_text(hostile.TEXT)
    (root / "pairs.tsv").write_text("".join(f"w{i} x{i % 7}\tv{i} y{i % 5}\n"
                                            for i in range(200)))
    (root / "src.txt").write_text("w1 x1\nw2 x2\n")
    mt = root / "mt"
    rc, err = run(["train", "--task", "translate", "--pairs", str(root / "pairs.tsv"), "--out",
                   str(mt), "--d-model", "16", "--n-heads", "2", "--n-encoder-layers", "1",
                   "--n-decoder-layers", "1", "--context", "16", "--batch-size", "4",
                   "--steps", "2", "--bleu-sentences", "0", "--no-progress", "--no-plot",
                   "--threads", "1"])
    assert rc == 0, err
    mlm = root / "mlm"
    rc, err = run(["train", "--task", "mlm", "--text", str(root / "text.txt"), "--out", str(mlm),
                   "--d-model", "16", "--n-heads", "2", "--n-layers", "1", "--context", "16",
                   "--batch-size", "4", "--steps", "2", "--eval-windows", "4", "--no-progress",
                   "--no-plot", "--threads", "1"])
    assert rc == 0, err
    return {"tmp": root, "ckpt": hostile.good_checkpoint(root / "good"), "mt": mt, "mlm": mlm}


def known_baseline(command: str, s: dict) -> list[str] | None:
    """A cheap run of ``command`` that does real work (outputs in a fresh folder), for the
    commands whose defaults take long; None for the others."""
    tmp, out = s["tmp"], s["out"]
    return {
        "order": ["--schemes", "lie-trotter", "--method", "euler", "--tokens", "2",
                  "--d-model", "2", "--step-sizes", "0.2,0.1", "--out", f"{out}/o.png"],
        "schemes": ["--check", "c:0.5,d:1,c:0.5", "--order", "2"],
        "describe": ["--scheme", "lie-trotter", "--weights", "shared", "--d-model", "8",
                     "--n-heads", "2", "--n-layers", "1", "--seq-len", "8"],
        "train": ["--dry-run", "--d-model", "16", "--n-heads", "2", "--n-layers", "1",
                  "--context", "16", "--batch-size", "4", "--eval-windows", "4",
                  "--text", f"{tmp}/text.txt", "--out", f"{out}/run", "--no-progress"],
        "train!": ["--d-model", "16", "--n-heads", "2", "--n-layers", "1", "--context", "16",
                   "--batch-size", "4", "--eval-windows", "4", "--steps", "2", "--warmup", "1",
                   "--text", f"{tmp}/text.txt", "--out", f"{out}/run", "--no-progress",
                   "--no-plot", "--threads", "1"],
        "trajectories": ["--d-model", "8", "--n-heads", "2", "--n-layers", "1", "--no-ode",
                         "--prompt", "ab", "--out", f"{out}/t.png"],
        "sample": ["--checkpoint", str(s["ckpt"]), "--max-new-tokens", "2"],
        "refine": ["--checkpoint", str(s["ckpt"]), "--schemes", "lie-trotter", "--substeps",
                   "1", "--methods", "euler", "--windows", "2", "--no-progress",
                   "--out", f"{out}/r.png"],
        "export": ["--checkpoint", str(s["ckpt"]), "--out", f"{out}/hf"],
        "translate": ["--checkpoint", str(s["mt"]), "--input", f"{tmp}/src.txt",
                      "--max-new-tokens", "4", "--no-progress"],
        "evaluate": ["--checkpoint", str(s["mlm"]), "--wordnet",
                     str(Path(ROOT) / "tests" / "data" / "wordnet"), "--seed", "4",
                     "--max-train", "50", "--random-init", "--json", f"{out}/e.json"],
    }.get(command)


def required_only(command: str, s: dict) -> list[str]:
    """A command without a known baseline: its required options (one of each required group),
    --checkpoint a real tiny run, any other a fresh path in the output folder."""
    p = PARSERS[command]
    actions = [a for a in p._actions if a.required]
    actions += [g._group_actions[0] for g in p._mutually_exclusive_groups if g.required]
    argv = []
    for a in actions:
        value = str(s["ckpt"]) if a.dest == "checkpoint" else f"{s['out']}/{a.dest}"
        argv += [a.option_strings[-1], value] if a.option_strings else [value]
    return argv


def baseline(command: str, s: dict) -> list[str]:
    known = known_baseline(command, s)
    return required_only(command, s) if known is None else known


def without_rivals(argv: list[str], command: str, flag: str) -> list[str]:
    """``argv`` less the options that argparse refuses beside ``flag`` (its mutually exclusive
    partners), so that ``--hf`` is fuzzed on its own rather than refused beside --checkpoint."""
    p = PARSERS[command]
    action = p._option_string_actions[flag]
    rivals = {o for g in p._mutually_exclusive_groups if action in g._group_actions
              for a in g._group_actions if a is not action for o in a.option_strings}
    out, skip = [], False
    for item in argv:
        if skip:
            skip = False
        elif item in rivals:
            skip = p._option_string_actions[item].nargs != 0
        else:
            out.append(item)
    return out


def run(argv: list[str]) -> tuple[int, str]:
    """``splitnet ARGV`` in this process: (exit status, stderr); torch's global state (threads,
    default dtype) restored after."""
    threads, dtype = torch.get_num_threads(), torch.get_default_dtype()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code
        finally:
            torch.set_num_threads(threads)
            torch.set_default_dtype(dtype)
    return rc, err.getvalue()


def assert_clean(command: str, argv: list[str], rc, err: str) -> None:
    """Exit 0; or 2 with one line on stderr; or 1 from a command that documents a verdict."""
    assert "Traceback" not in err, (argv, err)
    if rc == 2:
        assert err.count("\n") == 1 and err.endswith("\n"), (argv, err)
    elif rc == 1:
        assert getattr(MODULES[command], "VERDICT", None), (argv, err)
    else:
        assert rc == 0, (rc, argv, err)


def check(command: str, flag: str, value: str, s: dict, tmp_path_factory) -> None:
    out = tmp_path_factory.mktemp("out")
    (out / "dir").mkdir()
    (out / "empty").write_bytes(b"")
    s = {**s, "out": out}
    name = command.rstrip("!")
    if name == "export" and flag == "--threads" and value in ("1", "2"):
        return                                 # a real export: tested in test_hostile
    argv = [name, *without_rivals(baseline(command, s), name, flag), flag,
            value.format(out=out)]
    rc, err = run(argv)
    assert_clean(name, argv, rc, err)


def test_the_fuzz_sees_every_command_and_its_options():
    assert set(NUMERIC) == set(TEXTUAL) == set(COMMANDS) == set(PARSERS)
    assert {"--tokens", "--d-model", "--step-sizes", "--seed", "--threads"} <= set(
        NUMERIC["order"])
    assert {"--temperature", "--top-k", "--max-new-tokens", "--seed"} <= set(NUMERIC["sample"])
    assert {"--lr", "--seed", "--d-model", "--context", "--gate-layers"} <= set(NUMERIC["train"])
    assert {"--step-size", "--n-layers", "--points-per-layer"} <= set(NUMERIC["trajectories"])
    assert {"--substeps", "--batch-size", "--windows"} <= set(NUMERIC["refine"])
    assert {"--beam", "--length-penalty", "--batch-size"} <= set(NUMERIC["translate"])
    assert {"--bpe", "--beam", "--label-smoothing", "--n-encoder-layers"} <= set(NUMERIC["train"])
    # the path options, and nothing numeric among them
    assert {"--checkpoint", "--hf", "--out", "--json", "--text"} <= set(TEXTUAL["refine"])
    assert {"--checkpoint", "--out"} <= set(TEXTUAL["export"])
    assert {"--checkpoint", "--input", "--reference"} <= set(TEXTUAL["translate"])
    assert {"--text", "--pairs", "--out", "--tensorboard"} <= set(TEXTUAL["train"])
    assert {"--checkpoint", "--hf", "--gif", "--diagnostics"} <= set(TEXTUAL["trajectories"])
    assert not set(NUMERIC["train"]) & set(TEXTUAL["train"])
    assert "--device" not in TEXTUAL["sample"] + NUMERIC["sample"]      # choices: argparse's
    assert all(NUMERIC[c] for c in COMMANDS if c in ("order", "sample", "train", "refine"))


# commands whose real run needs an optional extra: (the extra, the modules it brings)
EXTRAS = {"export": ("hf", ("transformers", "safetensors"))}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_runs_its_baseline_and_refuses_a_word_for_a_number(command, scratch,
                                                                         tmp_path_factory):
    """Each command, however new: the baseline works (a real run, exit 0), and every numeric
    option refuses 'abc' in one line, every other option a missing path without a traceback."""
    out = tmp_path_factory.mktemp("base")
    argv = [command, *baseline(command, {**scratch, "out": out})]
    rc, err = run(argv)
    extra = EXTRAS.get(command)
    if extra and not all(importlib.util.find_spec(m) for m in extra[1]):
        # without its extra (README's bare .[dev] install) the command says what to install
        assert rc == 2 and err.count("\n") == 1 and f"pip install 'splitnet[{extra[0]}]'" in err, \
            err
        pytest.skip(f"{command} needs the {extra[0]} extra")
    assert rc == 0, (argv, err)
    for flag in NUMERIC[command]:
        rc, err = run([*argv, flag, "abc"])
        assert rc == 2 and err.count("\n") == 1 and flag in err, (flag, err)
    for flag in TEXTUAL[command]:
        check(command, flag, PATHS[0], scratch, tmp_path_factory)


def test_without_rivals_drops_the_mutually_exclusive_partner_and_its_value():
    argv = ["--checkpoint", "X", "--windows", "2", "--no-progress"]
    assert without_rivals(argv, "refine", "--hf") == ["--windows", "2", "--no-progress"]
    assert without_rivals(argv, "refine", "--windows") == argv


# "train!": a real two-step training run (the optimiser meets the numbers), beside --dry-run
NUMERIC_PAIRS = ([(c, f) for c in COMMANDS for f in NUMERIC[c]]
                 + [("train!", f) for f in NUMERIC["train"]])
TEXT_PAIRS = ([(c, f) for c in COMMANDS for f in TEXTUAL[c]]
              + [("train!", f) for f in TEXTUAL["train"]])
SETTINGS = settings(deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


@settings(SETTINGS, max_examples=45)
@given(pair=st.sampled_from(NUMERIC_PAIRS), value=st.one_of(
    st.sampled_from(NUMBERS), st.integers(-2, 6).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr)))
def test_any_number_for_any_numeric_option(pair, value, scratch, tmp_path_factory):
    check(*pair, value, scratch, tmp_path_factory)


@settings(SETTINGS, max_examples=25)
@given(pair=st.sampled_from(TEXT_PAIRS), value=st.sampled_from(PATHS))
def test_any_bad_path_for_any_other_option(pair, value, scratch, tmp_path_factory):
    check(*pair, value, scratch, tmp_path_factory)


@pytest.mark.slow
@pytest.mark.parametrize("command,flag", NUMERIC_PAIRS, ids=[f"{c} {f}" for c, f in NUMERIC_PAIRS])
def test_every_extreme_for_every_numeric_option(command, flag, scratch, tmp_path_factory):
    for value in NUMBERS:
        check(command, flag, value, scratch, tmp_path_factory)


@pytest.mark.slow
@pytest.mark.parametrize("command,flag", TEXT_PAIRS, ids=[f"{c} {f}" for c, f in TEXT_PAIRS])
def test_every_bad_path_for_every_other_option(command, flag, scratch, tmp_path_factory):
    for value in PATHS:
        check(command, flag, value, scratch, tmp_path_factory)


@pytest.mark.parametrize("argv", [
    ["order", "--tokens", str(2**64)],
    pytest.param(["train", "--dry-run", "--lr", "1e308"], marks=pytest.mark.heavy),  # ~5 s
    ["trajectories", "--step-size", "1e308", "--out", "/nonexistent/t.png"],
    ["sample", "--checkpoint", "/nonexistent", "--temperature", "1e-320"],
    ["schemes", "--check", "c:1e308,c:-1e308,c:1,d:1", "--order", "1"],
    ["describe", "--d-model", str(10**9), "--n-heads", "2"],
    pytest.param(["translate", "--checkpoint", "/dev/null"], marks=pytest.mark.heavy),
], ids=lambda a: " ".join(a[:3]))
def test_extremes_in_a_real_process(argv):
    r = subprocess.run([sys.executable, "-m", "splitnet", *argv], capture_output=True,
                       text=True, env=ENV, timeout=300, check=False)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
