"""Nothing lost, nothing silent, nothing executed: the run lock, --overwrite, resume after a
move and after a corpus change, options restored on resume, checkpoints that cannot run code,
signals inside a long step, a closed pipe, and arbitrary input to the command line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from splitnet import checkpoint as ck
from splitnet.cli import main
from splitnet.runs import lock as run_lock

TINY = ["--d-model", "16", "--n-heads", "2", "--n-layers", "1", "--context", "16",
        "--batch-size", "4", "--warmup", "2", "--eval-windows", "8", "--threads", "1",
        "--no-progress", "--no-plot"]
# subprocesses run this checkout's code, whatever is pip-installed
ROOT = str(Path(__file__).resolve().parents[1])
ENV = {**os.environ, "OMP_NUM_THREADS": "1",
       "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)}


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    p = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    p.write_text("".join(f"def f{i}(x):\n    return x * {i % 7}\n" for i in range(300)))
    return p


def _spawn(*argv, cwd=None):
    return subprocess.Popen([sys.executable, "-m", "splitnet", "train", *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, cwd=cwd)


def _wait_for_lines(path: Path, n: int, proc, timeout: float = 120) -> None:
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            raise AssertionError(f"trainer exited: {proc.stderr.read().decode()[-1500:]}")
        if path.exists() and len(path.read_text().splitlines()) >= n:
            return
        time.sleep(0.05)
    raise AssertionError("trainer too slow")


def _train(*argv) -> int:
    return main(["train", *argv])


# ------------------------------------------------------------------------------ the run lock

@pytest.mark.heavy
def test_a_second_trainer_on_the_same_out_is_refused_naming_the_first(text, tmp_path):
    out = tmp_path / "x"
    first = _spawn("--text", str(text), "--out", str(out), *TINY, "--steps", "100000",
                   "--ckpt-every", "1000", "--eval-every", "1000")
    try:
        _wait_for_lines(out / ck.METRICS, 2, first)
        second = subprocess.run([sys.executable, "-m", "splitnet", "train", "--text", str(text),
                                 "--out", str(out), *TINY, "--steps", "5", "--overwrite"],
                                capture_output=True, text=True, env=ENV, timeout=120,
                                check=False)
        assert second.returncode == 2, second.stderr
        err = second.stderr.strip()
        assert err.count("\n") == 0 and "Traceback" not in err
        assert f"in use by another splitnet train (pid {first.pid} on host" in err, err
        assert first.poll() is None                       # the first one goes on, untouched
        steps = [json.loads(x)["step"] for x in (out / ck.METRICS).read_text().splitlines()]
        assert steps == list(range(1, len(steps) + 1))   # one writer: no step twice
    finally:
        first.kill()
        first.wait()
    # The killed trainer's lock file stays behind; the kernel dropped its lock: taken over.
    assert json.loads((out / ck.LOCK).read_text())["pid"] == first.pid
    assert _train("--text", str(text), "--out", str(out), *TINY, "--steps", "2",
                  "--overwrite") == 0


def test_a_trainer_on_a_live_run_without_resume_is_told_it_is_live(text, tmp_path, capsys):
    """Round five's pass: a second train on a folder whose run is alive was told 'pass
    --resume or --overwrite', both of which the lock then refuses: name the live run first."""
    out = tmp_path / "x"
    out.mkdir()
    (out / ck.CKPT).write_bytes(b"a checkpoint")
    capsys.readouterr()
    with run_lock.RunLock(out):
        assert _train("--text", str(text), "--out", str(out), *TINY, "--steps", "2") == 2
        err = capsys.readouterr().err
        assert f"in use by another splitnet train (pid {os.getpid()}" in err, err
        assert "--resume" not in err and err.count("\n") == 1
    assert _train("--text", str(text), "--out", str(out), *TINY, "--steps", "2") == 2
    assert "already exists: pass --resume" in capsys.readouterr().err    # free: the advice


def test_the_lock_is_released_and_holds_the_holder():
    import tempfile

    d = Path(tempfile.mkdtemp())
    with run_lock.RunLock(d):
        info = json.loads((d / ck.LOCK).read_text())
        assert info["pid"] == os.getpid() and info["host"]
        with pytest.raises(run_lock.RunLocked, match=f"pid {os.getpid()}"):
            # a second lock on the same folder (another open file description) is refused
            run_lock.RunLock(d).acquire()
    with run_lock.RunLock(d):                                  # released: taken again
        pass


# ------------------------------------------------------------------------------ --overwrite

@pytest.mark.heavy
def test_overwrite_leaves_nothing_resume_could_pick_up(text, tmp_path):
    """The issue's scenario: a finished Lie–Trotter run, then --overwrite with Strang killed
    (-9) before its first checkpoint; --resume must not continue the old run."""
    out = tmp_path / "w"
    assert _train("--text", str(text), "--out", str(out), *TINY, "--steps", "4") == 0
    new = _spawn("--text", str(text), "--out", str(out), *TINY, "--overwrite", "--scheme",
                 "strang", "--steps", "100000", "--ckpt-every", "1000", "--eval-every", "1000")
    try:
        t0 = time.time()
        while not (out / "previous-1" / ck.CKPT).exists() and time.time() - t0 < 120:
            time.sleep(0.05)
        _wait_for_lines(out / ck.METRICS, 2, new)        # the new run's own lines
    finally:
        new.kill()
        new.wait()
    assert not (out / ck.CKPT).exists()
    assert ck.load(out / "previous-1")["model_config"]["scheme"] == "lie-trotter"   # kept aside
    assert _train("--out", str(out), "--resume", "--no-progress") == 2


# ------------------------------------------------------------------------------ resume

def test_resume_from_another_directory_with_a_relative_corpus(text, tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    (work / "c.txt").write_text(text.read_text())
    monkeypatch.chdir(work)
    assert _train("--text", "c.txt", "--out", "run", *TINY, "--steps", "6",
                  "--stop-at", "3") == 0
    monkeypatch.chdir(tmp_path)                          # elsewhere: the path was resolved
    assert _train("--out", str(work / "run"), "--resume", "--no-progress") == 0
    assert ck.load(work / "run")["step"] == 6
    # the same file named relative to the new directory is the same corpus
    assert _train("--out", str(work / "run"), "--resume", "--steps", "7", "--text",
                  "work/c.txt", "--no-progress") == 0


def test_a_changed_corpus_stops_resume_unless_allowed(text, tmp_path, capsys):
    c = tmp_path / "c.txt"
    c.write_text(text.read_text())
    out = tmp_path / "r"
    assert _train("--text", str(c), "--out", str(out), *TINY, "--steps", "4",
                  "--stop-at", "2") == 0
    c.write_text(text.read_text().replace("return", "yield"))
    capsys.readouterr()
    assert _train("--out", str(out), "--resume", "--no-progress") == 2
    err = capsys.readouterr().err
    assert "the corpus changed since the checkpoint was written" in err
    assert "--allow-data-change" in err
    assert _train("--out", str(out), "--resume", "--allow-data-change", "--no-progress") == 0
    assert "going on (--allow-data-change)" in capsys.readouterr().err


def test_resume_restores_every_run_option(text, tmp_path, capsys):
    out = tmp_path / "o"
    assert _train("--text", str(text), "--out", str(out), *TINY, "--steps", "9",
                  "--eval-every", "3", "--ckpt-every", "3", "--stop-at", "3") == 0
    assert _train("--out", str(out), "--resume") == 0          # no flags at all
    recs = ck.read_metrics(out / ck.METRICS)
    assert [r["step"] for r in recs if "val_bpb" in r] == [3, 6, 9]
    assert "it/s" not in capsys.readouterr().err               # --no-progress restored
    assert not (out / ck.PLOT).exists()                        # --no-plot restored
    cfg = ck.load(out)["train_config"]
    assert (cfg["eval_every"], cfg["ckpt_every"], cfg["progress"]) == (3, 3, False)
    # a free option may change on resume; a fixed one may not
    assert _train("--out", str(out), "--resume", "--steps", "10", "--eval-every", "5") == 0
    assert ck.load(out)["train_config"]["eval_every"] == 5
    assert _train("--out", str(out), "--resume", "--lr", "0.5") == 2
    assert "lr: checkpoint 0.002, given 0.5" in capsys.readouterr().err


# ------------------------------------------------------------------------------ checkpoints

def _evil_checkpoint(folder: Path, marker: Path) -> None:
    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    folder.mkdir(parents=True, exist_ok=True)
    torch.save({"version": 2, "model": {}, "model_config": Evil(), "step": 1,
                "train_config": {}}, folder / ck.CKPT)


# every command that reads a checkpoint, and how it is pointed at one
READERS = {
    "train": ["--resume", "--out", "{dir}"],
    "trajectories": ["--checkpoint", "{dir}", "--out", "{tmp}/t.png"],
    "export": ["--checkpoint", "{dir}", "--out", "{tmp}/hf"],
    "sample": ["--checkpoint", "{dir}", "--max-new-tokens", "4"],
    "refine": ["--checkpoint", "{dir}", "--out", "{tmp}/r.png", "--no-progress"],
}


def _commands_reading_checkpoints() -> list[str]:
    import importlib

    from splitnet.cli import COMMANDS

    out = []
    for name in COMMANDS:
        mod = importlib.import_module(f"splitnet.cli.commands.cmd_{name}")
        src = Path(mod.__file__).read_text()
        if "load_model" in src or "train" == name:
            out.append(name)
    return out


def test_every_command_that_reads_checkpoints_is_covered():
    assert set(_commands_reading_checkpoints()) <= set(READERS), (
        "add the new command to READERS: it reads checkpoints")


@pytest.mark.parametrize("command", sorted(READERS))
def test_a_malicious_checkpoint_runs_nothing(command, tmp_path, capsys):
    marker = tmp_path / "PWNED"
    _evil_checkpoint(tmp_path / "run", marker)
    argv = [a.replace("{dir}", str(tmp_path / "run")).replace("{tmp}", str(tmp_path))
            for a in READERS[command]]
    assert main([command, *argv]) == 2
    err = capsys.readouterr().err
    assert "loading it could run code" in err and err.count("\n") == 1
    assert not marker.exists()
    with pytest.raises(ValueError, match="could run code"):
        ck.load(tmp_path / "run")
    assert not marker.exists()


def test_a_trusted_old_checkpoint_loads(text, tmp_path):
    """A 0.1-format checkpoint (pickled RNG tuples, the config as a dict with a tuple) is
    refused by default and loads with --trust-checkpoint; the next save is safe."""
    out = tmp_path / "old"
    assert _train("--text", str(text), "--out", str(out), *TINY, "--steps", "4",
                  "--stop-at", "2") == 0
    state = ck.load(out)
    import random

    import numpy as np

    state["version"] = 1
    state["rng"] = {"python": random.getstate(), "numpy": np.random.get_state(),
                    "torch": state["rng"]["torch"]}
    torch.save(state, out / ck.CKPT)
    assert _train("--out", str(out), "--resume", "--no-progress") == 2
    assert _train("--out", str(out), "--resume", "--trust-checkpoint", "--no-progress") == 0
    assert ck.load(out)["step"] == 4                       # rewritten in the safe format


# ------------------------------------------------------------------------------ signals

SLOW_STEP = """
import sys, time
import splitnet.training.setup as S
real = S._loss
calls = {"n": 0}
def slow(model, x, y):
    calls["n"] += 1
    if calls["n"] == 3:
        print("SLOW", file=sys.stderr, flush=True)
        for _ in range(600):          # a long step: 60 s of Python work
            time.sleep(0.1)
    return real(model, x, y)
S._loss = slow
from splitnet.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _signal_at(script: str, argv: list, marker: str, sig) -> tuple[int, float, str]:
    """Run ``python -c script *argv``, send ``sig`` once a stderr line holds ``marker``:
    (exit status, seconds from the signal to the exit, the rest of stderr)."""
    proc = subprocess.Popen([sys.executable, "-c", script, *argv], stderr=subprocess.PIPE,
                            env=ENV, text=True)
    try:
        for line in proc.stderr:
            if marker in line:
                break
        t0 = time.time()
        proc.send_signal(sig)
        rc = proc.wait(timeout=30)
        return rc, time.time() - t0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.heavy
def test_a_signal_inside_a_long_step_is_honoured_within_seconds(text, tmp_path):
    out = tmp_path / "s"
    rc, took, _ = _signal_at(SLOW_STEP, ["train", "--text", str(text), "--out", str(out), *TINY,
                                         "--steps", "50", "--ckpt-every", "100",
                                         "--eval-every", "100"], "SLOW", signal.SIGTERM)
    assert rc == 128 + signal.SIGTERM
    assert took < 5, took
    assert ck.load(out)["step"] == 2                       # the abandoned step made no update
    assert [r["step"] for r in ck.read_metrics(out / ck.METRICS)] == [1, 2]


# ------------------------------------------------------------------------------ pipes

def test_a_verdict_survives_a_closed_pipe():
    """`splitnet schemes --check ... | head -1`: the reader is gone before anything is written;
    the exit status is still the verdict's (1: the stages are not second order)."""
    r, w = os.pipe()
    os.close(r)
    proc = subprocess.run([sys.executable, "-m", "splitnet", "schemes", "--check", "d:1,c:1",
                           "--order", "2"], stdout=w, stderr=subprocess.PIPE, text=True,
                          timeout=120, check=False)
    os.close(w)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


# ------------------------------------------------------------------------------ any input

NUMERIC = ["--lr", "--min-lr-ratio", "--warmup", "--clip", "--threads", "--stop-at",
           "--peak-tflops", "--dropout", "--step-size", "--d-ff", "--val-fraction",
           "--weight-decay", "--beta1", "--beta2", "--eval-every", "--batch-size"]
text_inputs = st.one_of(st.text(max_size=12), st.sampled_from(
    ["", ",", "nan", "inf", "-1", "0", "1e308", "s", "sf", "c:1,d:1", "c:", "d:0.5,c:1",
     "0,1", "x", " ", "--", "\x00", "lie-trotter"]))
numbers = st.one_of(st.integers(-10**6, 10**6).map(str),
                    st.floats(allow_nan=True, allow_infinity=True).map(repr), text_inputs)


SMALL_TEXT = Path(__import__("tempfile").mkdtemp()) / "small.txt"
SMALL_TEXT.write_text("x = 1\n" * 500)


def _no_traceback_and_nothing_written(argv, out: Path):
    from test_errors import run_cli

    rc, _, err = run_cli(argv)
    assert rc in (0, 1, 2), (rc, argv, err)
    assert "Traceback" not in err, (argv, err)
    if rc == 2:
        assert err.count("\n") == 1, (argv, err)
        assert not out.exists() or not any(out.iterdir()), argv


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(value=text_inputs)
def test_any_stage_string(value, tmp_path_factory):
    """schemes --check writes no file: run from an empty folder, the folder stays empty (a
    stage string such as 'x.png' must not become a path)."""
    here = tmp_path_factory.mktemp("check")
    old = os.getcwd()
    os.chdir(here)
    try:
        _no_traceback_and_nothing_written(["schemes", "--check", value, "--order", "2"], here)
    finally:
        os.chdir(old)
    assert not any(here.iterdir()), list(here.iterdir())


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(flag=st.sampled_from(["--scheme", "--gate-layers"] + NUMERIC), value=numbers)
def test_any_training_option(flag, value, tmp_path_factory):
    out = tmp_path_factory.mktemp("prop") / "out"
    argv = ["train", "--dry-run", *TINY, "--text", str(SMALL_TEXT), "--out", str(out), flag,
            value]
    if flag == "--gate-layers":
        argv += ["--gate", "sigmoid"]
    _no_traceback_and_nothing_written(argv, out)


def test_dry_run_prints_the_plan_and_writes_nothing(text, tmp_path, capsys):
    out = tmp_path / "d"
    assert _train("--dry-run", "--text", str(text), "--out", str(out), *TINY) == 0
    printed = capsys.readouterr().out
    assert '"context": 16' in printed and "memory estimate" in printed
    assert not out.exists()


SLOW_SETUP = """
import sys, time
import splitnet.runs.data as D
real = D.load_corpus
def slow(*a, **k):
    print("LOADING", file=sys.stderr, flush=True)
    for _ in range(600):
        time.sleep(0.1)
    return real(*a, **k)
D.load_corpus = slow
from splitnet.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.heavy
def test_ctrl_c_while_starting_stops_at_once_with_one_line(text, tmp_path):
    out = tmp_path / "c"
    rc, took, err = _signal_at(SLOW_SETUP, ["train", "--text", str(text), "--out", str(out),
                                            *TINY, "--steps", "5"], "LOADING", signal.SIGINT)
    assert rc == 130 and took < 5
    assert "Traceback" not in err and err.strip() == "splitnet train: interrupted"
    assert not out.exists()
