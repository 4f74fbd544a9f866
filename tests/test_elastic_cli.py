"""Inference at any depth (issue 60, item 3): ``--at-depth N`` for sample, translate, evaluate
and refine, refine's loss at n = 1, 2, 4, ... with the rate of its gap, describe's depth line;
one-line errors (exit 2) where N cannot apply."""

import math

import pytest

from splitnet.analyses.depth import gap_rates, steps_table
from splitnet.cli import build_parser, main
from splitnet.cli.commands.cmd_describe import depth_line
from splitnet.cli.commands.cmd_train import config_from_args
from splitnet.configs.config import SplitConfig
from splitnet.training import train as T

TINY = ["--d-model", "32", "--n-heads", "2", "--n-layers", "4", "--context", "32",
        "--batch-size", "8", "--warmup", "2", "--eval-windows", "8", "--threads", "1",
        "--no-progress", "--no-plot", "--steps", "4", "--eval-every", "4"]


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    p = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    p.write_text("".join(f"def f{i}(x):\n    return x * {i % 7} + {i % 3}\n"
                         for i in range(400)))
    return p


def _train(*argv):
    return T.train(*config_from_args(build_parser("train").parse_args(list(argv))))


@pytest.fixture(scope="module")
def elastic(text, tmp_path_factory):
    out = tmp_path_factory.mktemp("elastic") / "run"
    _train("--text", str(text), "--out", str(out), *TINY, "--depth-basis", "bernstein:2",
           "--scheme", "strang", "--reversible", "--train-depths", "2,4")
    return out


@pytest.fixture(scope="module")
def layered(text, tmp_path_factory):
    out = tmp_path_factory.mktemp("layered") / "run"
    _train("--text", str(text), "--out", str(out), *TINY)
    return out


def _one_line(capsys, rc, *words):
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert all(w in err for w in words), err


def test_sample_runs_at_any_depth_of_a_basis(elastic, capsys):
    outs = []
    for n in ("3", "4"):
        assert main(["sample", "--checkpoint", str(elastic), "--max-new-tokens", "16",
                     "--temperature", "0", "--at-depth", n, "--threads", "1"]) == 0
        outs.append(capsys.readouterr().out)
    assert all(len(o.encode("utf-8", "surrogateescape")) >= 1 for o in outs)


@pytest.mark.parametrize("n, words", [("0", ["--at-depth"]), ("two", ["--at-depth"]),
                                      ("1.5", ["--at-depth"])])
def test_a_bad_number_of_steps_is_one_line(elastic, capsys, n, words):
    with pytest.raises(SystemExit) as e:          # argparse's exit: one line, status 2
        main(["sample", "--checkpoint", str(elastic), "--at-depth", n])
    _one_line(capsys, e.value.code, *words)


def test_a_layered_network_refuses_a_depth_it_cannot_run_at(layered, capsys):
    rc = main(["sample", "--checkpoint", str(layered), "--at-depth", "3",
               "--max-new-tokens", "4"])
    _one_line(capsys, rc, "--at-depth 3", "multiple or a divisor")
    assert main(["sample", "--checkpoint", str(layered), "--at-depth", "2",
                 "--max-new-tokens", "4", "--temperature", "0"]) == 0


@pytest.mark.heavy
def test_refine_prints_the_loss_at_each_depth_and_the_gap_rate(elastic, tmp_path, capsys):
    rc = main(["refine", "--checkpoint", str(elastic), "--substeps", "1", "--methods", "euler",
               "--schemes", "strang", "--coarsen", "none", "--prolong", "none", "--out",
               str(tmp_path / "r.png"), "--no-progress", "--threads", "1", "--at-depth", "2"])
    out = capsys.readouterr().out
    assert rc == 0, out
    rows = [line.split() for line in out.splitlines() if line.split()[:1] in
            (["1"], ["2"], ["4"], ["8"])]
    assert [r[0] for r in rows[:4]] == ["1", "2", "4", "8"]       # up to twice the depth (4)
    assert "fitted rate of the gap:" in out


def test_gap_rates_measure_the_order_of_a_known_sequence():
    pts = [(n, 1.0 + 3.0 / n ** 2) for n in (1, 2, 4, 8, 16)]   # gaps fall as n^-2
    gaps, rates, fit = gap_rates(pts)
    assert [n for n, _ in gaps] == [1, 2, 4, 8]
    assert all(r == pytest.approx(2.0) for r in rates) and fit == pytest.approx(2.0)
    pts = [(n, 1.0 + 1.0 / n) for n in (1, 2, 4, 8)]
    assert gap_rates(pts)[2] == pytest.approx(1.0)
    assert gap_rates([(1, 1.0), (2, 1.0)])[2] is None
    table = steps_table([(n, 1.0 + 3.0 / n ** 2) for n in (1, 2, 4)], "bpb", 1 / math.log(2))
    assert "fitted rate of the gap: 2.00" in table


def test_describe_says_the_basis_and_the_depths(elastic, capsys):
    assert main(["describe", "--checkpoint", str(elastic)]) == 0
    out = capsys.readouterr().out
    assert "depth basis bernstein:2" in out and "trained at 2, 4 steps" in out
    assert depth_line(SplitConfig()) is None
    assert "LayerDrop 0.2 (linear)" in depth_line(SplitConfig(), {"layer_drop": 0.2,
                                                                   "layer_drop_rule": "linear"})
    assert "early exits after 2, 4 layers" in depth_line(SplitConfig(), {"early_exit": [2, 4]})
    assert depth_line(SplitConfig(), {"layer_drop": 0.0, "early_exit": []}) is None


def test_evaluate_refuses_a_depth_of_a_layered_encoder_where_it_cannot_apply(layered, capsys):
    rc = main(["evaluate", "--checkpoint", str(layered), "--at-depth", "3"])
    _one_line(capsys, rc)            # not a masked language model, or the depth: one line
