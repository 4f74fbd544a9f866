"""A user's task from the command line (issue 59): ``splitnet train --task MODULE:NAME`` (a
module on PYTHONPATH or a .py path) and the entry-point group ``splitnet.tasks``, with its own
options as flags, the lock, atomic checkpoints and exact resume, killed and resumed; and what
the trainer says of a task that hands it the wrong thing (issue 62, D5-D8)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from splitnet.train import TrainConfig, train

from splitnet.cli import main
from splitnet.runs import checkpoint as ck
from splitnet.tasks import TASKS, get_task, register

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "sort_task.py"
SMALL = ["--context", "16", "--d-model", "32", "--n-heads", "2", "--n-layers", "2", "--scheme",
         "strang", "--batch-size", "8", "--warmup", "2", "--eval-every", "2", "--eval-windows",
         "16", "--no-progress", "--no-plot", "--seed", "3", "--device", "cpu", "--threads", "1"]

# a task of the user's own with options of its own: the digits it sorts come from --digits
OWN = '''
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from splitnet.configs.options import option
from splitnet.tasks import Task, register


@dataclass(frozen=True)
class CopyOptions:
    alphabet: int = option(10, "copy: symbols to copy (2..200)")

    def __post_init__(self):
        if not 2 <= self.alphabet <= 200:
            raise ValueError(f"alphabet must be in 2..200, got {self.alphabet}")


class Data:
    def __init__(self, n, alphabet):
        self.n, self.alphabet = n, alphabet

    def fingerprint(self):
        return {"source": "copy", "n": self.n, "alphabet": self.alphabet}

    def describe(self):
        return f"copy {self.n} of {self.alphabet} symbols"


class Copy(Task):
    name = "copy-task"
    help = "copy a line of symbols"
    options = CopyOptions

    def corpus(self, cfg, state, log):
        return Data(cfg.context // 2, cfg.alphabet)

    def _rows(self, corpus, rows, g):
        a = torch.randint(0, corpus.alphabet, (rows, corpus.n), generator=g) + 40
        seq = torch.cat([a, a], dim=1)
        x, y = seq[:, :-1].clone(), seq[:, 1:].clone()
        y[:, :corpus.n - 1] = -100
        return x, y

    def batch(self, cfg, corpus, step, replica, replicas):
        x, y = self._rows(corpus, cfg.batch_size, torch.Generator().manual_seed(cfg.seed + step))
        rows = cfg.batch_size // replicas
        part = slice(replica * rows, (replica + 1) * rows)
        return [x[part], y[part]], cfg.batch_size * corpus.n

    def held_out(self, model, corpus, cfg, env, val):
        x, y = self._rows(corpus, 16, torch.Generator().manual_seed(99))
        logits = model(x.to(env.device)).float()
        return float(F.cross_entropy(logits.reshape(-1, logits.size(-1)),
                                     y.to(env.device).reshape(-1))), {}
'''


@pytest.fixture
def own(tmp_path, monkeypatch):
    """``copy_task.py`` in a folder of the user's, on PYTHONPATH (and sys.path)."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "copy_task.py").write_text(OWN)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(folder), str(ROOT)]))
    yield folder
    TASKS.pop("copy-task", None)
    sys.modules.pop("copy_task", None)


def _rc(argv) -> int:
    """``main``'s exit status, a parser's usage error (SystemExit) included."""
    try:
        return main(argv)
    except SystemExit as e:
        return e.code


def _weights(out):
    return ck.load(out)["model"]


def test_a_task_by_path_trains_stops_and_resumes_exactly_from_the_command_line(tmp_path):
    spec = f"{EXAMPLE}:SortDigits"
    straight, parts = tmp_path / "straight", tmp_path / "parts"
    assert main(["train", "--task", spec, *SMALL, "--steps", "6", "--out", str(straight)]) == 0
    assert main(["train", "--task", spec, *SMALL, "--steps", "6", "--stop-at", "3", "--out",
                 str(parts)]) == 0
    assert ck.load(parts)["step"] == 3
    # --resume without --task: the checkpoint names the task by its spec, imported again
    assert main(["train", "--resume", "--out", str(parts), "--no-progress"]) == 0
    a, b = _weights(straight), _weights(parts)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert ck.load(parts)["train_config"]["task"] == spec
    la = [r["loss"] for r in ck.read_metrics(straight / ck.METRICS)]
    assert la == [r["loss"] for r in ck.read_metrics(parts / ck.METRICS)] and len(la) == 6


def test_a_task_by_module_name_brings_its_own_options_as_flags(own, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--task", "copy_task:Copy", *SMALL, "--steps", "2", "--alphabet",
                 "7", "--out", str(out)]) == 0
    state = ck.load(out)
    assert state["train_config"]["alphabet"] == 7 and state["corpus"]["alphabet"] == 7
    capsys.readouterr()
    assert main(["train", "--task", "copy_task:Copy", "--alphabet", "1", "--out",
                 str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "alphabet must be in 2..200" in err
    # its option is refused in another task's run, naming the task that reads it
    with pytest.raises(ValueError, match=r"--alphabet: language-model option \(read by --task "
                                         r"copy-task only\)"):
        TrainConfig(alphabet=7)
    assert TrainConfig(task="copy_task:Copy", alphabet=9).alphabet == 9


def test_the_help_lists_a_users_task_and_its_options(own, capsys):
    with pytest.raises(SystemExit):
        main(["train", "--task", "copy_task:Copy", "--help"])
    text = capsys.readouterr().out
    assert "copy-task: copy a line of symbols" in " ".join(text.split())
    assert "--alphabet" in text and "--task copy-task" in text


@pytest.mark.parametrize("spec,want", [
    ("no_such_module_xyz:Task", "importing no_such_module_xyz failed: ModuleNotFoundError"),
    ("{example}:NoSuchTask", "has no Task named 'NoSuchTask'"),
    ("{example}:BAR", "has no Task named 'BAR' (found int)"),
    ("/no/such/file.py:Task", "no file /no/such/file.py"),
    ("copy_task:", "a task of your own is MODULE:NAME"),
    (":Copy", "a task of your own is MODULE:NAME"),
    ("nope", "task must be one of lm, mlm, translate"),
])
def test_a_bad_task_spec_is_one_line(own, tmp_path, capsys, spec, want):
    capsys.readouterr()
    assert _rc(["train", "--task", spec.format(example=EXAMPLE), "--out",
                str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and want in err, err
    assert not (tmp_path / "o").exists()


def test_a_module_that_raises_on_import_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "broken_task.py").write_text("raise RuntimeError('the user\\'s bug')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["train", "--task", "broken_task:T", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "RuntimeError: the user's bug" in err


@pytest.mark.heavy
def test_an_installed_package_offers_tasks_through_the_entry_point_group(own, tmp_path):
    """A distribution's ``entry_points.txt`` names ``copy-task = copy_task:Copy`` in the group
    ``splitnet.tasks``: ``--task copy-task`` trains it, ``--help`` lists it."""
    dist = own / "copy_task-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: copy-task\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[splitnet.tasks]\ncopy-task = copy_task:Copy\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-m", "splitnet", "train", "--help"], env=env,
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0 and "copy-task" in r.stdout and "--alphabet" in r.stdout, r.stderr
    out = tmp_path / "ep"
    r = subprocess.run([sys.executable, "-m", "splitnet", "train", "--task", "copy-task", *SMALL,
                        "--steps", "2", "--out", str(out)], env=env, capture_output=True,
                       text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    assert ck.load(out)["train_config"]["task"] == "copy-task"


@pytest.mark.heavy
def test_a_users_task_killed_by_sigkill_resumes_bit_exactly(tmp_path):
    """kill -9 mid-run, then ``--resume`` from the command line: the final weights equal a run
    straight through (the batch of a step is a function of (seed, step) alone)."""
    spec, env = f"{EXAMPLE}:SortDigits", {**os.environ, "OMP_NUM_THREADS": "1"}
    args = [*SMALL, "--steps", "60", "--ckpt-every", "5", "--eval-every", "30"]
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    cmd = [sys.executable, "-m", "splitnet", "train", "--task", spec, *args]
    subprocess.run([*cmd, "--out", str(straight)], env=env, check=True, timeout=600,
                   capture_output=True)
    p = subprocess.Popen([*cmd, "--out", str(killed)], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and p.poll() is None:
        if (killed / ck.CKPT).exists() and ck.load(killed)["step"] >= 10:
            break
        time.sleep(0.2)
    assert p.poll() is None, "the run ended before it could be killed"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert ck.load(killed)["step"] < 60
    r = subprocess.run([sys.executable, "-m", "splitnet", "train", "--resume", "--out",
                        str(killed), "--no-progress"], env=env, capture_output=True, text=True,
                       timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    a, b = _weights(straight), _weights(killed)
    assert all(torch.equal(a[k], b[k]) for k in a)


# ------------------------------------------------------------------------------------------
# what a task hands the trainer (issue 62: D5 names, D6 batches, D7 token counts, D8 data)


@pytest.mark.parametrize("name", ["", "my task", None, 123, "--x", "1abc", "a.b"])
def test_register_refuses_a_name_that_is_not_an_identifier(name):
    t = type(get_task("lm"))()
    t.name = name                       # set after construction, where __init__ cannot see it
    with pytest.raises(ValueError, match="task's name must be a non-empty identifier"):
        register(t)
    assert name not in TASKS if isinstance(name, str) else True


@pytest.mark.parametrize("name", [None, 123, "", "  "])
def test_an_unknown_task_name_of_any_type_is_a_value_error(name):
    with pytest.raises(ValueError, match="task must be one of"):
        get_task(name)


def _faulty(tmp_path, name: str, **methods):
    """The sort task with some of its methods replaced, registered as ``name``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("sort_task", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cls = type("Faulty", (mod.SortDigits,), {"name": name, **methods})
    register(cls(), replace=True)
    return mod.small_run(str(tmp_path / name), 2, task=name, threads=1)


def _sort_batch(self, cfg, corpus, step, replica, replicas):
    return type(self).__mro__[1].batch(self, cfg, corpus, step, replica, replicas)


@pytest.mark.parametrize("batch,want", [
    (lambda self, *a: _sort_batch(self, *a)[0], r"batch\(\) returned Tensor as its tensors"),
    (lambda self, *a: (_sort_batch(self, *a)[0],), r"batch\(\) returned a tuple of 1 items"),
    (lambda self, *a: ("x", 5), r"batch\(\) returned str as its tensors"),
    (lambda self, *a: ([[1, 2]], 5), r"batch\(\) returned a list as tensor 0"),
    (lambda self, *a: ([t[:3] for t in _sort_batch(self, *a)[0]], 5),
     r"batch\(\) returned tensor 0 of shape \(3, 16\)"),
    (lambda self, *a: (_sort_batch(self, *a)[0], -2030), r"batch\(\) returned -2030 as its "
     r"token count"),
    (lambda self, *a: (_sort_batch(self, *a)[0], float("nan")), r"batch\(\) returned nan as "
     r"its token count"),
    (lambda self, *a: (_sort_batch(self, *a)[0], 12.5), r"batch\(\) returned 12.5 as its "
     r"token count"),
    (lambda self, *a: (_sort_batch(self, *a)[0][:1], 5),
     r"batch\(\) of step 0 does not fit its loss LMLoss.*TypeError"),
    (lambda self, *a: ([*_sort_batch(self, *a)[0], _sort_batch(self, *a)[0][0]], 5),
     r"batch\(\) of step 0 does not fit its loss LMLoss.*TypeError"),
    (lambda self, *a: ([_sort_batch(self, *a)[0][0], _sort_batch(self, *a)[0][1] + 999], 5),
     r"batch\(\) of step 0 does not fit its loss LMLoss.*(IndexError|out of bounds)"),
])
def test_a_malformed_batch_is_said_as_the_tasks(tmp_path, batch, want):
    cfg = _faulty(tmp_path, "faulty", batch=batch)
    try:
        with pytest.raises(ValueError, match=r"task 'faulty': " + want):
            train(cfg)
        assert not (tmp_path / "faulty" / ck.CKPT).exists()
    finally:
        TASKS.pop("faulty", None)


@pytest.mark.parametrize("fp,want", [
    ({"n": torch.tensor(3)}, r"\['n'\] is a torch.Tensor"),
    ({"n": [1, float("nan")]}, r"\['n'\]\[1\] is nan"),
    ({1: "a"}, "has the key 1"),
    ("sort", "a dict of plain data, got a str"),
    ({"p": Path("/x")}, r"is a pathlib"),
])
def test_a_fingerprint_that_is_not_plain_data_is_refused_before_step_1(tmp_path, fp, want):
    def corpus(self, cfg, state, log):
        data = type(self).__mro__[1].corpus(self, cfg, state, log)
        data.fingerprint = lambda: fp
        return data

    cfg = _faulty(tmp_path, "faulty-fp", corpus=corpus)
    try:
        with pytest.raises(ValueError, match=r"task 'faulty-fp': corpus\(\)\.fingerprint\(\) "
                                             r"must be .*" + want):
            train(cfg)
        assert not (tmp_path / "faulty-fp" / ck.CKPT).exists()
    finally:
        TASKS.pop("faulty-fp", None)


@pytest.mark.parametrize("held,want", [
    (lambda self, *a: "0.5", r"held_out\(\) returned '0.5'"),
    (lambda self, *a: (0.5,), r"held_out\(\) returned \(0.5,\)"),
    (lambda self, *a: (0.5, {"acc": "high"}),
     r"held_out\(\)'s metrics must be numbers, got acc='high'"),
    (lambda self, *a: (None, {}), r"held_out\(\) returned \(None, \{\}\)"),
])
def test_a_bad_held_out_score_is_said_as_the_tasks(tmp_path, held, want):
    cfg = _faulty(tmp_path, "faulty-val", held_out=held)
    try:
        with pytest.raises(ValueError, match=r"task 'faulty-val': " + want):
            train(cfg)
    finally:
        TASKS.pop("faulty-val", None)


def test_resume_with_stop_at_below_the_checkpoint_is_refused(tmp_path, capsys):
    out = tmp_path / "r"
    base = ["train", "--task", f"{EXAMPLE}:SortDigits", *SMALL, "--out", str(out)]
    assert main([*base, "--steps", "4"]) == 0
    capsys.readouterr()
    assert main(["train", "--resume", "--out", str(out), "--steps", "8", "--stop-at", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--stop-at 2 is below the checkpoint's step 4" in err
    assert ck.load(out)["step"] == 4


def test_a_task_whose_options_are_not_a_dataclass_is_refused():
    class NoData(type(get_task("lm"))):
        name = "no-data"
        options = dict

    with pytest.raises(TypeError, match="options must be a dataclass"):
        register(NoData())
