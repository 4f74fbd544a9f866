"""``splitnet train --grow-at``: the depth doubles during training (issue 43), the optimiser
state goes with the layers, and ``--resume`` across a growth continues bit for bit."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hostile import code_corpus, run_main, train_cli

from splitnet.cli import build_parser
from splitnet.cli.commands.cmd_train import config_from_args
from splitnet.nets.depth import source_layer
from splitnet.nets.models import SplitTransformer
from splitnet.runs import checkpoint as ck
from splitnet.training import depths, growth
from splitnet.training.setup import build_optimizer, lr_at

TINY = ["--d-model", "32", "--n-heads", "2", "--n-layers", "1", "--context", "32",
        "--batch-size", "8", "--warmup", "3", "--eval-windows", "16", "--threads", "1",
        "--no-progress", "--no-plot", "--dropout", "0.1", "--steps", "10", "--grow-at", "3,6",
        "--eval-every", "2", "--ckpt-every", "2"]


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    return code_corpus(tmp_path_factory.mktemp("corpus") / "corpus.txt")


_train = train_cli


def _losses(out):
    return {r["step"]: r["loss"] for r in ck.read_metrics(Path(out) / ck.METRICS)}


@pytest.fixture(scope="module")
def full(text, tmp_path_factory):
    out = tmp_path_factory.mktemp("grow") / "full"
    _train("--text", str(text), "--out", str(out), *TINY)
    return out


def test_the_depth_doubles_at_each_listed_step(full):
    state = ck.load(full)
    assert state["model_config"]["n_layers"] == 4 and state["model_config"]["step_size"] == 0.25
    assert state["train_config"]["model"]["n_layers"] == 1         # the run's start
    assert sorted(_losses(full)) == list(range(1, 11))


@pytest.mark.parametrize("stop", [2, 3, 4, 6])
def test_resume_across_a_growth_is_bit_exact(text, full, tmp_path, stop):
    """Stopped before (2), at (3, 6: saved before the growth) and after (4) a growth step."""
    cut = tmp_path / "cut"
    _train("--text", str(text), "--out", str(cut), *TINY, "--stop-at", str(stop),
           "--ckpt-every", "1")
    _train("--out", str(cut), "--resume", "--no-progress", "--no-plot", "--threads", "1")
    a, b = _losses(full), _losses(cut)
    assert sorted(b) == list(range(1, 11))
    assert all(a[s] == b[s] for s in range(1, 11)), (a, b)
    wa, wb = ck.load(full)["model"], ck.load(cut)["model"]
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_the_moments_go_with_the_copies():
    torch.manual_seed(0)
    cfg = config_from_args(build_parser("train").parse_args(["--steps", "20"]))[0]
    m = SplitTransformer(vocab_size=64, d_model=16, n_heads=2, n_layers=2, max_len=16)
    opt = build_optimizer(m, cfg)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: lr_at(s, cfg.warmup, cfg.steps, cfg.min_lr_ratio, cfg.schedule))
    for _ in range(3):
        m(torch.randint(0, 64, (2, 8))).square().mean().backward()
        opt.step()
        sched.step()
        opt.zero_grad()
    big, new_opt, new_sched = growth.grow(m, opt, sched, cfg)
    old = dict(m.named_parameters())
    for name, p in big.named_parameters():
        src = old[source_layer(name, ("layers",), 2)]
        for k in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(new_opt.state[p][k], opt.state[src][k]), (name, k)
        assert new_opt.state[p]["exp_avg"].data_ptr() != opt.state[src]["exp_avg"].data_ptr()
    assert [g["lr"] for g in new_opt.param_groups] == [g["lr"] for g in opt.param_groups]
    assert new_sched.last_epoch == sched.last_epoch == 3
    new_sched.step()
    sched.step()
    assert [g["lr"] for g in new_opt.param_groups] == [g["lr"] for g in opt.param_groups]


@pytest.mark.parametrize("argv", [
    ["describe", "--checkpoint", "{run}"],
    ["sample", "--checkpoint", "{run}", "--max-new-tokens", "4", "--prompt", "def"],
    ["export", "--checkpoint", "{run}", "--out", "{tmp}/hf"],
    ["trajectories", "--checkpoint", "{run}", "--prompt", "def f(x)", "--out", "{tmp}/t.png"],
    ["refine", "--checkpoint", "{run}", "--schemes", "strang", "--substeps", "1,2",
     "--methods", "euler", "--windows", "4", "--out", "{tmp}/r.png", "--no-progress"],
])
@pytest.mark.heavy
def test_every_command_reads_a_grown_checkpoint(full, tmp_path, argv):
    if argv[0] == "export":
        pytest.importorskip("transformers")
    argv = [a.format(run=full, tmp=tmp_path) for a in argv]
    threads = [] if argv[0] == "describe" else ["--threads", "1"]
    r = subprocess.run([sys.executable, "-m", "splitnet", *argv, *threads],
                       capture_output=True, timeout=300)       # sample: an untrained model's bytes
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-1500:]
    if argv[0] == "describe":
        assert "layer 3:" in r.stdout.decode() and "layer 4:" not in r.stdout.decode()


@pytest.mark.parametrize("grow,extra,want", [
    ("6,3", [], "must be strictly increasing"),
    ("3,3", [], "must be strictly increasing"),
    ("0", [], "must lie in 1..9"),
    ("10", [], "must lie in 1..9"),
    ("3", ["--parallel", "fsdp"], "--grow-at does not take --parallel fsdp"),
    ("x", [], "--grow-at"),
])
def test_bad_growth_lists_are_one_line_errors(tmp_path, grow, extra, want):
    rc, _, err = run_main(["train", "--steps", "10", "--grow-at", grow, *extra,
                           "--out", tmp_path / "o", "--threads", "1"])
    assert rc == 2 and err.count("\n") == 1, err
    assert want in err, err
    assert not (tmp_path / "o" / "checkpoint.pt").exists()


def test_a_checkpoint_whose_depth_the_schedule_cannot_explain_is_refused():
    from splitnet.training.config import TrainConfig

    cfg = TrainConfig(steps=10, grow_at=(3, 6))
    one = cfg.model
    two = depths.grown_config(one, 1)
    depths.check_resumed(cfg, one, 3)          # saved before the growth at step 3
    depths.check_resumed(cfg, two, 3)          # ... or after it, before step 4
    depths.check_resumed(cfg, two, 5)
    for model, step in ((one, 4), (two, 2), (depths.grown_config(one, 2), 5),
                        (one.replace(d_model=64), 1)):
        with pytest.raises(ValueError, match="incompatible checkpoint"):
            depths.check_resumed(cfg, model, step)


def test_an_encoder_decoder_grows_both_stacks(tmp_path):
    out = tmp_path / "mt"
    _train("--task", "translate", "--pairs", "copy", "--n-encoder-layers", "1",
           "--n-decoder-layers", "1", "--d-model", "32", "--n-heads", "2", "--context", "24",
           "--batch-size", "8", "--steps", "6", "--grow-at", "3", "--eval-every", "3",
           "--bleu-sentences", "0", "--threads", "1", "--no-progress", "--no-plot", "--out",
           str(out))
    c = ck.load(out)["model_config"]
    assert (c["n_encoder_layers"], c["n_decoder_layers"], c["step_size"]) == (2, 2, 0.5)
    assert sorted(_losses(out)) == list(range(1, 7))
