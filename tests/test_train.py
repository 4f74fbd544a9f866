"""splitnet train: learning, exact resume, kill -9 recovery, signals, NaN stop, bad input."""

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from splitnet import checkpoint as ck
from splitnet import train as T
from splitnet.cli import build_parser
from splitnet.cli.commands.cmd_train import config_from_args

TINY = ["--d-model", "32", "--n-heads", "2", "--n-layers", "2", "--context", "32",
        "--batch-size", "8", "--warmup", "3", "--eval-windows", "16", "--threads", "1",
        "--no-progress", "--no-plot"]


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    """A small, learnable corpus: repeated Python-like lines with some variety."""
    p = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    lines = [f"def f{i}(x):\n    return x * {i % 7} + {i % 3}\n" for i in range(600)]
    p.write_text("".join(lines))
    return p


def _args(*extra):
    return build_parser("train").parse_args(list(extra))


def _train(*argv):
    """What `splitnet train ARGV` runs: the config from the command line, then train()."""
    return T.train(*config_from_args(_args(*argv)))


def _run(text, out, *extra):
    return _train("--text", str(text), "--out", str(out), *TINY, *extra)


def _run_cli(*argv):
    from splitnet.cli import main

    return main(["train", *argv])


def _losses(out):
    return {r["step"]: r["loss"] for r in ck.read_metrics(Path(out) / ck.METRICS)}


def test_loss_decreases(text, tmp_path):
    s = _run(text, tmp_path / "a", "--steps", "40", "--lr", "3e-3", "--eval-every", "10")
    recs = ck.read_metrics(tmp_path / "a" / ck.METRICS)
    first = sum(r["loss"] for r in recs[:5]) / 5
    last = sum(r["loss"] for r in recs[-5:]) / 5
    assert last < first - 1.0, (first, last)
    vals = [r["val_bpb"] for r in recs if "val_bpb" in r]
    assert [r["step"] for r in recs if "val_bpb" in r] == [10, 20, 30, 40]
    assert vals[-1] < vals[0]
    assert all(math.isclose(r["bpb"], r["loss"] / math.log(2)) for r in recs)
    assert s["step"] == 40 and s["val_bpb"] == vals[-1]
    state = ck.load(tmp_path / "a")
    assert state["step"] == 40
    for key in ("model", "optimizer", "scheduler", "rng", "model_config", "train_config",
                "corpus"):
        assert key in state
    assert set(state["rng"]) >= {"python", "numpy", "torch"}


def test_conv_field_learns_and_resumes(text, tmp_path):
    """A ConvS2S-like decoder-only network is one flag: GLU convolutions as the diffusion field."""
    out = tmp_path / "conv"
    _run(text, out, "--diffusion-field", "conv", "--conv-kernel", "4", "--steps", "30",
         "--lr", "3e-3", "--eval-every", "30")
    recs = ck.read_metrics(out / ck.METRICS)
    first = sum(r["loss"] for r in recs[:5]) / 5
    last = sum(r["loss"] for r in recs[-5:]) / 5
    assert last < first - 0.5, (first, last)
    state = ck.load(out)
    assert (state["model_config"]["diffusion_field"], state["model_config"]["conv_kernel"]) == \
        ("conv", 4)
    assert any(k.endswith("diffusion.conv.weight") for k in state["model"])
    s = _run(text, out, "--steps", "32", "--resume")     # the kind is restored from the checkpoint
    assert s["step"] == 32 and ck.load(out)["model_config"]["diffusion_field"] == "conv"


def test_lr_schedule():
    def lr(s):
        return T.lr_at(s, warmup=10, steps=110, min_lr_ratio=0.1)

    assert lr(0) == pytest.approx(0.1)
    assert lr(9) == pytest.approx(1.0)
    assert lr(60) == pytest.approx(0.55)           # half-way down the cosine
    assert lr(110) == pytest.approx(0.1)
    assert all(lr(s) >= lr(s + 1) for s in range(10, 110))


def test_exact_resume(text, tmp_path):
    """Stop at step 5 of 10 and resume: steps 6..10 equal an uninterrupted run, bit for bit
    (dropout on, so the restored RNG state matters)."""
    common = ["--steps", "10", "--dropout", "0.1", "--eval-every", "5", "--ckpt-every", "5"]
    _run(text, tmp_path / "full", *common)
    _run(text, tmp_path / "cut", *common, "--stop-at", "5")
    assert max(_losses(tmp_path / "cut")) == 5
    _train("--out", str(tmp_path / "cut"), "--resume", "--no-progress", "--no-plot",
           "--threads", "1")
    a, b = _losses(tmp_path / "full"), _losses(tmp_path / "cut")
    assert sorted(a) == sorted(b) == list(range(1, 11))
    for s in range(6, 11):
        assert a[s] == b[s], (s, a[s], b[s])
    wa = ck.load(tmp_path / "full")["model"]
    wb = ck.load(tmp_path / "cut")["model"]
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_resume_extends_steps(text, tmp_path):
    _run(text, tmp_path / "r", "--steps", "6", "--eval-every", "3")
    s = _train("--out", str(tmp_path / "r"), "--resume", "--steps", "9", "--no-progress",
               "--no-plot", "--threads", "1", "--eval-every", "3")
    assert s["step"] == 9
    assert sorted(_losses(tmp_path / "r")) == list(range(1, 10))


def _spawn(text, out, *extra):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "splitnet", "train", "--text", str(text), "--out", str(out),
         *TINY, *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def _wait_for_step(out, step, proc, timeout=90, need_ckpt=True):
    t0 = time.time()
    path = Path(out) / ck.METRICS
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            raise AssertionError(f"trainer exited early: {proc.stderr.read().decode()[-2000:]}")
        if path.exists():
            lines = path.read_text().splitlines()
            if len(lines) >= step and (not need_ckpt or (Path(out) / ck.CKPT).exists()):
                return
        time.sleep(0.05)
    raise AssertionError("trainer too slow")


@pytest.mark.heavy
def test_kill9_then_resume(text, tmp_path):
    out = tmp_path / "k"
    proc = _spawn(text, out, "--steps", "100000", "--ckpt-every", "4", "--eval-every", "1000")
    try:
        _wait_for_step(out, 10, proc)
    finally:
        proc.kill()                                  # SIGKILL: no handler runs
        proc.wait()
    # The kill may land mid-write: a temporary file can be left, checkpoint.pt is whole.
    ck_step = ck.load(out)["step"]
    assert ck_step >= 8 and ck_step % 4 == 0
    (out / f".{ck.CKPT}.x7k2.tmp").write_bytes(b"torn")  # as a kill during a save leaves it
    s = _train("--out", str(out), "--resume", "--steps", str(ck_step + 3),
               "--no-progress", "--no-plot", "--threads", "1")
    assert s["step"] == ck_step + 3
    lines = (out / ck.METRICS).read_text().splitlines()
    recs = [json.loads(x) for x in lines]           # every line is valid JSON
    assert [r["step"] for r in recs] == list(range(1, ck_step + 4))
    assert not list(out.glob("*.tmp"))               # leftovers of a torn save are removed


@pytest.mark.heavy
def test_sigterm_saves_checkpoint(text, tmp_path):
    out = tmp_path / "t"
    proc = _spawn(text, out, "--steps", "100000", "--ckpt-every", "1000", "--eval-every", "1000")
    try:
        _wait_for_step(out, 3, proc, need_ckpt=False)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 128 + signal.SIGTERM, proc.stderr.read().decode()[-2000:]
    state = ck.load(out)
    last = ck.read_metrics(out / ck.METRICS)[-1]["step"]
    assert state["step"] == last >= 3


def _poison_loss_from_step_6(monkeypatch) -> None:
    """The training loss becomes NaN from the 6th call of cross_entropy (the 6th step) on."""
    real = F.cross_entropy
    calls = {"n": 0}

    def poisoned(*a, **k):
        calls["n"] += 1
        out = real(*a, **k)
        return out * float("nan") if calls["n"] > 5 else out

    monkeypatch.setattr(F, "cross_entropy", poisoned)


def test_nan_loss_stops_and_keeps_checkpoint(text, tmp_path, monkeypatch, capsys):
    _poison_loss_from_step_6(monkeypatch)
    out = tmp_path / "n"
    rc = _run_cli("--text", str(text), "--out", str(out), *TINY, "--steps", "20",
                  "--ckpt-every", "2", "--eval-every", "1000")
    assert rc == 1
    err = capsys.readouterr().err
    assert "non-finite training loss" in err and "step 6" in err
    state = ck.load(out)
    assert state["step"] == 4                       # last good checkpoint untouched
    assert all(torch.isfinite(v).all() for v in state["model"].values())
    # the advice can be followed (issue 49, D7): a new run with a lower --lr over it, the
    # stopped one kept in previous-1 (--resume refuses a changed --lr)
    assert "start a new run with a lower --lr" in err and "then --resume" not in err
    monkeypatch.undo()
    assert _run_cli("--text", str(text), "--out", str(out), *TINY, "--steps", "2",
                    "--overwrite", "--lr", "1e-4") == 0
    assert ck.load(out / "previous-1")["step"] == 4


def test_bad_inputs(text, tmp_path, capsys):
    def err(*a):
        rc = _run_cli(*TINY, *a)
        assert rc == 2
        return capsys.readouterr().err

    assert "not found" in err("--text", str(tmp_path / "missing.txt"), "--out", str(tmp_path))
    (tmp_path / "empty.txt").write_text("")
    assert "empty" in err("--text", str(tmp_path / "empty.txt"), "--out", str(tmp_path / "e"))
    (tmp_path / "short.txt").write_text("x" * 300)
    assert "context" in err("--text", str(tmp_path / "short.txt"), "--out", str(tmp_path / "s"),
                            "--context", "64")
    assert "no checkpoint" in err("--out", str(tmp_path / "none"), "--resume")

    out = tmp_path / "ok"
    _run(text, out, "--steps", "2")
    assert "already exists" in err("--text", str(text), "--out", str(out), "--steps", "2")
    msg = err("--out", str(out), "--resume", "--d-model", "48")
    assert "incompatible checkpoint" in msg and "d_model" in msg
    msg = err("--out", str(out), "--resume", "--context", "64")   # beyond the model's max_len
    assert "incompatible checkpoint" in msg and "context" in msg
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / ck.CKPT).write_bytes(b"not a checkpoint")
    assert "not a readable checkpoint" in err("--out", str(bad), "--resume")
    torch.save({"foo": 1}, bad / ck.CKPT)
    assert "not a splitnet checkpoint" in err("--out", str(bad), "--resume")
    assert "divisible" in err("--text", str(text), "--out", str(tmp_path / "d"),
                              "--grad-accum", "3")
    with pytest.raises(ValueError, match="max_len"):
        ck.load_model(out)(torch.zeros(1, 64, dtype=torch.long))


def test_truncate_metrics_drops_later_and_torn_lines(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_text("".join(json.dumps({"step": s, "loss": 1.0}) + "\n" for s in range(1, 8))
                 + '{"step": 8, "lo')
    assert ck.truncate_metrics(p, 5) == 5
    assert [r["step"] for r in ck.read_metrics(p)] == [1, 2, 3, 4, 5]


@pytest.mark.heavy
def test_cli_default_corpus(tmp_path):
    """The acceptance command on the default (stdlib) corpus, then --resume to 30."""
    from splitnet.cli import main
    out = tmp_path / "cli"
    assert main(["train", "--steps", "20", "--out", str(out), "--device", "cpu",
                 "--threads", "1", "--eval-windows", "64", "--no-progress"]) == 0
    for f in (ck.CKPT, ck.METRICS, ck.PLOT):
        assert (out / f).is_file()
    assert main(["train", "--resume", "--steps", "30", "--out", str(out), "--threads", "1",
                 "--no-progress"]) == 0
    recs = ck.read_metrics(out / ck.METRICS)
    assert [r["step"] for r in recs] == list(range(1, 31))
    assert ck.load(out)["step"] == 30


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_bf16_run(text, tmp_path):
    s = _run(text, tmp_path / "g", "--steps", "5", "--device", "cuda")
    assert s["step"] == 5 and math.isfinite(s["val_bpb"])


@pytest.mark.heavy
def test_summary_is_the_steady_state_median_not_the_average(text, tmp_path, monkeypatch, capsys):
    """A fake slow first step (as compilation makes it) must not pull the reported speed down:
    tokens/s and MFU are the median over the steps after warm-up, the first step's excess is
    reported apart as compile time, and metrics.jsonl keeps every step's own figures."""
    import statistics

    real_step, calls = T._train_step, {"n": 0}

    def slow_first(run):
        calls["n"] += 1
        if calls["n"] == 1:
            time.sleep(3.0)
        return real_step(run)

    monkeypatch.setattr(T, "_train_step", slow_first)
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: fn)   # --compile without inductor
    out = tmp_path / "s"
    s = _run(text, out, "--steps", "20", "--eval-every", "1000", "--compile",
             "--peak-tflops", "1")
    recs = ck.read_metrics(out / ck.METRICS)
    step_s = [r["step_s"] for r in recs]
    assert len(step_s) == 20 and step_s[0] >= 3.0 and max(step_s[1:]) < 1.0
    assert s["warmup_steps"] == 2
    assert s["step_s"] == pytest.approx(statistics.median(step_s[2:]))
    tokens = 8 * 32
    assert s["tok_per_s"] == pytest.approx(tokens / s["step_s"])
    assert s["tok_per_s"] > 2 * 20 * tokens / sum(step_s)          # far above the average
    assert s["mfu"] == pytest.approx(s["flops_per_token"] * s["tok_per_s"] / 1e12)
    assert s["compile_s"] == pytest.approx(step_s[0] - s["step_s"]) and s["compile_s"] > 2
    assert s["compile_scope"] == "model+loss"
    err = capsys.readouterr().err
    assert f"{s['tok_per_s']:.0f} tokens/s steady" in err
    assert f"compile {s['compile_s']:.1f} s" in err


def test_deferred_host_syncs_change_nothing_but_when_numbers_are_read(text, tmp_path):
    """--sync-every 4 reads losses back every fourth step (what CUDA does by default): the
    same losses, the same weights, the same metrics lines, evaluation where it was."""
    common = ["--steps", "10", "--eval-every", "5", "--ckpt-every", "5"]
    _run(text, tmp_path / "a", *common)
    _run(text, tmp_path / "b", *common, "--sync-every", "4")
    a = ck.read_metrics(tmp_path / "a" / ck.METRICS)
    b = ck.read_metrics(tmp_path / "b" / ck.METRICS)
    keys = ("step", "loss", "lr", "grad_norm", "tokens")
    assert [[r[k] for k in keys] for r in a] == [[r[k] for k in keys] for r in b]
    assert [r.get("val_bpb") for r in a] == [r.get("val_bpb") for r in b]
    wa, wb = ck.load(tmp_path / "a")["model"], ck.load(tmp_path / "b")["model"]
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_deferred_nan_still_keeps_the_last_good_checkpoint(text, tmp_path, monkeypatch, capsys):
    _poison_loss_from_step_6(monkeypatch)
    out = tmp_path / "n"
    assert _run_cli("--text", str(text), "--out", str(out), *TINY, "--steps", "20",
                    "--ckpt-every", "4", "--eval-every", "1000", "--sync-every", "3") == 1
    assert "non-finite training loss (nan) at step 6" in capsys.readouterr().err
    state = ck.load(out)
    assert state["step"] == 4 and all(torch.isfinite(v).all() for v in state["model"].values())
