"""No traceback from the command line, whatever number any option is given.

Every numeric option of every command is found from the parsers themselves (a new option is
fuzzed without an edit here) and given extreme values: 0, -0.0, 1e-320, 1e308, -1e308, 2**63,
2**64, nan, inf, and small ordinary ones. Each run starts from a baseline that does real work
in under a few seconds (tiny sizes, or --dry-run for train), in this process through
``splitnet.cli.main``; it must exit 0, 1 or 2 without "Traceback", and a refusal (2) is one
line. The default suite runs a hypothesis sample of (option, value) pairs and a few in
subprocesses; ``-m slow`` runs every pair.
"""

from __future__ import annotations

import contextlib
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

EXTREMES = ["0", "-0.0", "1e-320", "1e308", "-1e308", str(2**63), str(2**64), "nan", "inf",
            "-inf", "-1", "1", "2", "0.5", "", "1,2", "0x10", "1_000"]

# the option types that take numbers (parsers name them; config-derived ones are int/float or
# the config field's own parser)
NUMERIC_TYPES = {"positive_int", "nonnegative_int", "seed", "finite_float", "number",
                 "substeps_list", "csv_floats", "csv_positive_ints", "int", "float",
                 "gate_layers", "refine_substeps"}


def numeric_options() -> dict[str, list[str]]:
    """command -> its options that take numbers."""
    out = {}
    for name in COMMANDS:
        flags = []
        for a in build_parser(name)._actions:
            t = getattr(a.type, "__name__", None)
            if a.option_strings and t in NUMERIC_TYPES:
                flags.append(a.option_strings[-1])
        out[name] = flags
    return out


OPTIONS = numeric_options()


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
    return {"tmp": root, "ckpt": hostile.good_checkpoint(root / "good"), "mt": mt}


def baseline(command: str, s: dict) -> list[str]:
    """A cheap run of ``command`` that does real work (outputs in a fresh folder)."""
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
                         "--text", "ab", "--out", f"{out}/t.png"],
        "sample": ["--checkpoint", str(s["ckpt"]), "--max-new-tokens", "2"],
        "refine": ["--checkpoint", str(s["ckpt"]), "--schemes", "lie-trotter", "--substeps",
                   "1", "--methods", "euler", "--windows", "2", "--no-progress",
                   "--out", f"{out}/r.png"],
        "export": ["--checkpoint", str(s["ckpt"]), "--out", f"{out}/hf"],
        "translate": ["--checkpoint", str(s["mt"]), "--input", f"{tmp}/src.txt",
                      "--max-new-tokens", "4", "--no-progress"],
    }[command]


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


def check(command: str, flag: str, value: str, s: dict, tmp_path_factory) -> None:
    s = {**s, "out": tmp_path_factory.mktemp("out")}
    argv = [command.rstrip("!"), *baseline(command, s), flag, value]
    if command == "export" and flag == "--threads" and value in ("1", "2"):
        return                                 # a real export: tested in test_hostile
    rc, err = run(argv)
    assert rc in (0, 1, 2), (rc, argv, err)
    assert "Traceback" not in err, (argv, err)
    if rc == 2:
        assert err.count("\n") == 1, (argv, err)


def test_the_fuzz_sees_the_numeric_options_of_every_command():
    assert {"--tokens", "--d-model", "--step-sizes", "--seed", "--threads"} <= set(
        OPTIONS["order"])
    assert {"--temperature", "--top-k", "--max-new-tokens", "--seed"} <= set(OPTIONS["sample"])
    assert {"--lr", "--seed", "--d-model", "--context", "--gate-layers"} <= set(OPTIONS["train"])
    assert {"--step-size", "--n-layers", "--points-per-layer"} <= set(OPTIONS["trajectories"])
    assert {"--substeps", "--batch-size", "--windows"} <= set(OPTIONS["refine"])
    assert {"--beam", "--length-penalty", "--batch-size"} <= set(OPTIONS["translate"])
    assert {"--bpe", "--beam", "--label-smoothing", "--n-encoder-layers"} <= set(OPTIONS["train"])
    assert all(OPTIONS[c] for c in COMMANDS if c != "export"), OPTIONS


# "train!": a real two-step training run (the optimiser meets the numbers), beside --dry-run
PAIRS = [(c, f) for c in COMMANDS for f in OPTIONS[c]] + [("train!", f) for f in OPTIONS["train"]]


@settings(max_examples=45, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(pair=st.sampled_from(PAIRS), value=st.one_of(
    st.sampled_from(EXTREMES), st.integers(-2, 6).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr)))
def test_any_number_for_any_option(pair, value, scratch, tmp_path_factory):
    check(*pair, value, scratch, tmp_path_factory)


@pytest.mark.slow
@pytest.mark.parametrize("command,flag", PAIRS, ids=[f"{c} {f}" for c, f in PAIRS])
def test_every_extreme_for_every_option(command, flag, scratch, tmp_path_factory):
    for value in EXTREMES:
        check(command, flag, value, scratch, tmp_path_factory)


@pytest.mark.parametrize("argv", [
    ["order", "--tokens", str(2**64)],
    ["train", "--dry-run", "--lr", "1e308"],
    ["trajectories", "--step-size", "1e308", "--out", "/nonexistent/t.png"],
    ["sample", "--checkpoint", "/nonexistent", "--temperature", "1e-320"],
    ["schemes", "--check", "c:1e308,c:-1e308,c:1,d:1", "--order", "1"],
    ["describe", "--d-model", str(10**9), "--n-heads", "2"],
], ids=lambda a: " ".join(a[:3]))
def test_extremes_in_a_real_process(argv):
    r = subprocess.run([sys.executable, "-m", "splitnet", *argv], capture_output=True,
                       text=True, env=ENV, timeout=300, check=False)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
