"""The reliability issue's hostile pass, one test (or more) per defect: outputs that are devices
or FIFOs, --overwrite twice, the lock after rm -rf, a zip bomb under a memory bound, the run
directory inside its own corpus, full disks, SIGTERM during export, NaN runs, threads, stage
strings, and the verdicts of item 6 (check_order, landing on the fields branch). The one-line
refusals themselves are rows of docs/errors.md (tests/test_errors.py)."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import torch

import splitnet as sn
from splitnet import checkpoint as ck
from splitnet import data as D
from splitnet.cli import main
from splitnet.runs import lock as run_lock

ROOT = str(Path(__file__).resolve().parents[1])
ENV = {**os.environ, "OMP_NUM_THREADS": "1",
       "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)}
TINY = ["--d-model", "16", "--n-heads", "2", "--n-layers", "1", "--context", "16",
        "--batch-size", "4", "--warmup", "2", "--eval-windows", "8", "--threads", "1",
        "--no-progress", "--no-plot"]


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    import hostile

    p = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    p.write_text(hostile.TEXT)
    return p


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    import hostile

    return hostile.good_checkpoint(tmp_path_factory.mktemp("good"))


def _cli(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "splitnet", *argv], capture_output=True,
                          text=True, env=ENV, timeout=300, check=False)


def _one_line(err: str) -> None:
    assert "Traceback" not in err and err.strip().count("\n") == 0, err


# ------------------------------------------------------------------------- 1. output paths

def _special_files(tmp_path: Path) -> dict[str, Path]:
    """A FIFO, and a character device (the null device's numbers: never /dev itself) when
    running as root."""
    out = {"fifo": tmp_path / "fifo"}
    os.mkfifo(out["fifo"])
    if os.geteuid() == 0:
        out["device"] = tmp_path / "mynull"
        os.mknod(out["device"], 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return out


def _kind(p: Path) -> str:
    mode = os.lstat(p).st_mode
    return "fifo" if stat.S_ISFIFO(mode) else "device" if stat.S_ISCHR(mode) else "other"


def test_no_writer_replaces_a_device_or_a_fifo(tmp_path, capsys):
    from splitnet._io import atomic_write_text

    specials = _special_files(tmp_path)
    for name, target in specials.items():
        with pytest.raises(ValueError, match="not a regular file"):
            atomic_write_text(target, "x")
        for argv in (["order", "--schemes", "strang", "--out", str(target)],
                     ["trajectories", "--out", str(target)],
                     ["trajectories", "--out", str(tmp_path / "t.png"), "--diagnostics",
                      str(target)],
                     ["refine", "--checkpoint", str(tmp_path), "--out", str(target)],
                     ["refine", "--checkpoint", str(tmp_path), "--json", str(target)]):
            assert main(argv) == 2, argv
            err = capsys.readouterr().err
            assert "not a regular file" in err and err.count("\n") == 1, err
        assert _kind(target) == name                       # still what it was
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in
                                                                specials.values())


def test_the_atomic_write_keeps_a_regular_file_and_replaces_it(tmp_path):
    from splitnet._io import atomic_write_text

    p = tmp_path / "f.txt"
    p.write_text("old")
    atomic_write_text(p, "new")
    assert p.read_text() == "new" and stat.S_ISREG(os.lstat(p).st_mode)
    assert [x.name for x in tmp_path.iterdir()] == ["f.txt"]


# ------------------------------------------------------------------------- 2. --overwrite

def test_two_overwrites_keep_both_earlier_runs_and_a_users_previous_folder(text, tmp_path):
    out = tmp_path / "run"
    (out / "previous").mkdir(parents=True)
    (out / "previous" / "mine.txt").write_text("the user's own")
    for scheme in ("lie-trotter", "strang", "yoshida4"):
        extra = ["--overwrite"] if scheme != "lie-trotter" else []
        assert main(["train", "--text", str(text), "--out", str(out), *TINY, "--steps", "2",
                     "--scheme", scheme, *extra]) == 0
    assert ck.load(out)["model_config"]["scheme"] == "yoshida4"
    assert ck.load(out / "previous-1")["model_config"]["scheme"] == "lie-trotter"
    assert ck.load(out / "previous-2")["model_config"]["scheme"] == "strang"
    for gen in ("previous-1", "previous-2"):
        assert (out / gen / ck.METRICS).read_text().count("\n") == 2
    assert (out / "previous" / "mine.txt").read_text() == "the user's own"


def test_move_aside_never_reuses_a_generation(tmp_path):
    (tmp_path / "previous-7").mkdir()
    (tmp_path / ck.METRICS).write_text("{}\n")
    assert run_lock.move_aside(tmp_path) == tmp_path / "previous-8"
    assert run_lock.move_aside(tmp_path) is None                  # nothing left to move


# ------------------------------------------------------------------------- 3. the lock

@pytest.mark.heavy
def test_a_run_whose_directory_was_replaced_stops_and_writes_nothing_there(text, tmp_path):
    """rm -rf OUT while the run is alive, a second trainer in the new OUT: the first must not
    write its checkpoint (nor anything) over the second's."""
    import shutil

    out = tmp_path / "x"
    first = subprocess.Popen([sys.executable, "-m", "splitnet", "train", "--text", str(text),
                              "--out", str(out), *TINY, "--steps", "100000", "--ckpt-every",
                              "100000", "--eval-every", "100000"], env=ENV, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        t0 = time.time()
        while not (out / ck.METRICS).exists() or not (out / ck.METRICS).read_text().count("\n"):
            assert first.poll() is None and time.time() - t0 < 120, first.stderr.read()
            time.sleep(0.05)
        shutil.rmtree(out)
        second = _cli("train", "--text", str(text), "--out", str(out), *TINY, "--steps", "3",
                      "--scheme", "strang")
        assert second.returncode == 0, second.stderr
        if first.poll() is None:
            first.send_signal(signal.SIGTERM)             # its save must not land in OUT
        rc = first.wait(timeout=60)
        err = first.stderr.read()
    finally:
        if first.poll() is None:
            first.kill()
    assert rc == 1, err
    last = err.strip().splitlines()[-1]
    assert "was removed or replaced while this run was going" in last, err
    assert "Traceback" not in err
    state = ck.load(out)
    assert state["model_config"]["scheme"] == "strang" and state["step"] == 3
    assert [r["step"] for r in ck.read_metrics(out / ck.METRICS)] == [1, 2, 3]


def test_verify_sees_a_renamed_or_recreated_directory(tmp_path):
    d = tmp_path / "r"
    with run_lock.RunLock(d) as lock:
        lock.verify()
        d.rename(tmp_path / "moved")
        with pytest.raises(run_lock.RunDirectoryReplaced):
            lock.verify()
        d.mkdir()
        (d / ck.LOCK).write_text("")
        with pytest.raises(run_lock.RunDirectoryReplaced):
            lock.verify()


# ------------------------------------------------------------------------- 4. archives

BOMB = """
import json, sys
from splitnet import data as D

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024

before = hwm()
try:
    c = D.load_text(sys.argv[1], 0.5)   # eight text files, both splits
    out = {"ok": True, "files": c.n_files, "skipped": c.skipped}
except ValueError as e:
    out = {"ok": False, "error": str(e)}
out["peak_mb"] = (hwm() - before) / 2**20
print(json.dumps(out))
"""


def _bomb(path: Path, fill: bytes) -> Path:
    """A zip whose member expands to 1 GiB of ``fill`` (streamed: the test never holds it),
    beside a small text member."""
    import hostile

    chunk = fill * (1 << 20)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for k in range(8):
            z.writestr(f"src/m{k}.py", hostile.TEXT[k:])
        with z.open("big.bin", "w", force_zip64=True) as f:
            for _ in range(1024):
                f.write(chunk)
    return path


@pytest.mark.heavy
@pytest.mark.parametrize("fill,ok", [(b"\0", True), (b"a", False)], ids=["binary", "text"])
def test_a_zip_bomb_is_read_under_a_memory_bound(fill, ok, tmp_path):
    z = _bomb(tmp_path / "bomb.zip", fill)
    assert z.stat().st_size < 8 << 20
    assert zipfile.ZipFile(z).getinfo("big.bin").file_size == 1 << 30
    r = subprocess.run([sys.executable, "-c", BOMB, str(z)], capture_output=True, text=True,
                       env=ENV, timeout=300, check=True)
    res = json.loads(r.stdout)
    assert res["peak_mb"] < 300, res
    assert res["ok"] is ok, res
    if ok:          # the binary member skipped after its first chunk, the text kept
        assert (res["files"], res["skipped"]) == (8, 1)
    else:
        assert "big.bin" in res["error"] and "MiB" in res["error"], res


def test_a_declared_size_beyond_the_cap_is_refused_after_one_chunk(tmp_path, monkeypatch):
    import hostile

    z = tmp_path / "c.zip"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("a.py", hostile.TEXT)
    monkeypatch.setattr(D, "MAX_MEMBER", 1000)
    with pytest.raises(ValueError, match=r"'a.py' holds [\d,]+ bytes of text, more than"):
        D.load_text(z)


@pytest.mark.parametrize("name", sorted(__import__("hostile").ARCHIVES))
def test_every_corrupt_archive_is_one_line_naming_it(name, tmp_path):
    import hostile

    path = hostile.corrupt_archives(tmp_path)[name]
    with pytest.raises(ValueError) as e:
        D.load_text(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)


def test_the_run_directory_is_not_part_of_its_own_corpus(tmp_path, capsys):
    import hostile

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for k in range(8):
        (corpus / f"m{k}.py").write_text(hostile.TEXT[k:])
    out = corpus / "run"
    assert main(["train", "--text", str(corpus), "--out", str(out), *TINY, "--steps", "4",
                 "--stop-at", "2", "--val-fraction", "0.5"]) == 0
    assert main(["train", "--out", str(out), "--resume"]) == 0, capsys.readouterr().err
    assert ck.load(out)["step"] == 4
    assert ck.load(out)["corpus"]["files"] == 8


def test_a_latin1_file_name_does_not_reject_the_corpus(tmp_path):
    import hostile

    d = tmp_path / "c"
    d.mkdir()
    for k in range(6):
        (d / f"m{k}.py").write_text(hostile.TEXT[k:])
    (d / os.fsdecode(b"caf\xe9.py")).write_text(hostile.TEXT)
    c = D.load_text(d, 0.5)
    assert c.n_files == 7


# ------------------------------------------------------------------------- 7. disk full

def _limit_file_size(limit: int):
    def pre():
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)     # EFBIG instead of a signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return pre


@pytest.mark.heavy
def test_a_full_disk_while_training_is_one_line_and_leaves_no_torn_file(text, tmp_path):
    out = tmp_path / "full"
    r = subprocess.run([sys.executable, "-m", "splitnet", "train", "--text", str(text),
                        "--out", str(out), *TINY, "--steps", "3"], capture_output=True,
                       text=True, env=ENV, timeout=300, preexec_fn=_limit_file_size(40_000),
                       check=False)
    assert r.returncode == 1, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert "cannot write" in last and "checkpoint.pt" in last, r.stderr
    assert "Traceback" not in r.stderr
    assert not (out / ck.CKPT).exists()
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.heavy
@pytest.mark.skipif(__import__("importlib").util.find_spec("safetensors") is None,
                    reason="needs the hf extra")
def test_a_full_disk_while_exporting_leaves_nothing(run_dir, tmp_path):
    hf = tmp_path / "hf"
    r = subprocess.run([sys.executable, "-m", "splitnet", "export", "--checkpoint",
                        str(run_dir), "--out", str(hf)], capture_output=True, text=True,
                       env=ENV, timeout=300, preexec_fn=_limit_file_size(20_000), check=False)
    assert r.returncode == 2, r.stderr
    _one_line(r.stderr)
    assert "cannot write" in r.stderr and str(hf) in r.stderr
    assert not hf.exists() and sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.skipif(__import__("importlib").util.find_spec("safetensors") is None,
                    reason="needs the hf extra")
def test_exported_files_get_the_umask_modes(run_dir, tmp_path):
    hf = tmp_path / "hf"
    old = os.umask(0o022)
    try:
        assert main(["export", "--checkpoint", str(run_dir), "--out", str(hf)]) == 0
    finally:
        os.umask(old)
    for p in hf.iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o644, p
    assert stat.S_IMODE(hf.stat().st_mode) == 0o755


SLOW_EXPORT = """
import sys, time
import splitnet.interop as I
real = I.to_hf
def slow(model, directory, **kw):
    fmt = real(model, directory, **kw)
    print("WRITTEN", file=sys.stderr, flush=True)
    time.sleep(60)
    return fmt
I.to_hf = slow
from splitnet.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.heavy
@pytest.mark.skipif(__import__("importlib").util.find_spec("safetensors") is None,
                    reason="needs the hf extra")
def test_sigterm_during_export_leaves_nothing_half_written(run_dir, tmp_path):
    hf = tmp_path / "hf"
    proc = subprocess.Popen([sys.executable, "-c", SLOW_EXPORT, "export", "--checkpoint",
                             str(run_dir), "--out", str(hf)], stderr=subprocess.PIPE, env=ENV,
                            text=True)
    try:
        for line in proc.stderr:
            if "WRITTEN" in line:
                break
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 130 and err.strip() == "splitnet export: interrupted", err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


# ------------------------------------------------------------------------- 11. NaN runs

def test_a_nan_loss_before_any_checkpoint_says_none_was_written(text, tmp_path, monkeypatch,
                                                                 capsys):
    import splitnet.training.setup as S

    real = S._loss
    monkeypatch.setattr(S, "_loss", lambda m, x, y: real(m, x, y) * float("nan"))
    out = tmp_path / "nan"
    assert main(["train", "--text", str(text), "--out", str(out), *TINY, "--steps", "5"]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "No checkpoint was written" in err and "left untouched" not in err, err
    assert not (out / ck.CKPT).exists()


def test_a_diverged_refinement_keeps_both_outputs(run_dir, tmp_path):
    state = ck.load(run_dir)
    for k, v in state["model"].items():
        if k.endswith("weight") and v.dim() == 2:
            v.fill_(float("nan"))
    bad = tmp_path / "bad"
    bad.mkdir()
    torch.save(state, bad / ck.CKPT)
    png, js = tmp_path / "r.png", tmp_path / "r.json"
    assert main(["refine", "--checkpoint", str(bad), "--schemes", "lie-trotter", "--substeps",
                 "1,2", "--methods", "euler", "--windows", "2", "--no-progress", "--out",
                 str(png), "--json", str(js)]) == 0
    assert png.stat().st_size > 0
    res = json.loads(js.read_text())                       # valid JSON: null for NaN
    assert res["own"]["loss"] is None


# ------------------------------------------------------------------------- 8. stage strings

def test_stage_strings_in_scheme_lists():
    from splitnet.cli._args import scheme_list

    assert scheme_list("c:0.5,d:1,c:0.5") == ["c:0.5,d:1,c:0.5"]
    assert scheme_list("strang,c:0.5,d:1,c:0.5,sfsf") == ["strang", "c:0.5,d:1,c:0.5", "sfsf"]
    from splitnet.cli import build_parser

    p = build_parser("order")
    a = p.parse_args(["--schemes", "c:1,d:1", "--schemes", "c:0.5,d:1,c:0.5"])
    assert a.schemes == ["c:1,d:1", "c:0.5,d:1,c:0.5"]        # repeated: two stage strings


def test_describe_and_refine_take_a_stage_string(capsys, tmp_path):
    assert main(["describe", "--scheme", "c:0.5,d:1,c:0.5", "--weights", "shared",
                 "--d-model", "16", "--n-heads", "2", "--n-layers", "1"]) == 0
    assert "f/2 s f/2" in capsys.readouterr().out
    from splitnet.cli import build_parser
    from splitnet.cli.commands.cmd_refine import _grid

    grid = _grid(build_parser("refine").parse_args(
        ["--checkpoint", str(tmp_path), "--schemes", "c:0.5,d:1,c:0.5", "--substeps", "1",
         "--methods", "euler"]))
    assert len(grid) == 1 and len(grid[0][0].stages) == 3


def test_a_long_pattern_is_not_taken_for_a_file_name(capsys):
    rc = main(["schemes", "--check", "sf" * 200, "--order", "1"])
    out = capsys.readouterr()
    assert rc in (0, 1) and "File name too long" not in out.err and out.err == ""


# ------------------------------------------------------------------------- 9. order verdicts

def test_round_off_step_sizes_are_undetermined_not_a_mismatch(tmp_path, capsys):
    rc = main(["order", "--schemes", "strang", "--method", "euler", "--step-sizes",
               "1e-300,1e-301", "--out", str(tmp_path / "o.png"), "--strict"])
    out = capsys.readouterr().out
    assert "undetermined" in out and "MISMATCH" not in out
    assert rc == 1                       # --strict: nothing confirmed


# ------------------------------------------------------------------------- 10. threads

def test_every_command_that_computes_takes_threads():
    from splitnet.cli import build_parser

    for name in ("order", "train", "trajectories", "sample", "refine", "export"):
        flags = {o for a in build_parser(name)._actions for o in a.option_strings}
        assert "--threads" in flags, name


def test_default_threads_leave_busy_cores_alone(monkeypatch):
    from splitnet import runenv

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 8)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.2, 0.0, 0.0))
    assert runenv.default_threads() == 8                     # idle: torch's own choice
    monkeypatch.setattr(os, "getloadavg", lambda: (6.7, 0.0, 0.0))
    assert runenv.default_threads() == 1                     # busy: what is left, at least 1
    monkeypatch.setattr(os, "getloadavg", lambda: (20.0, 0.0, 0.0))
    assert runenv.default_threads() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "8")
    assert runenv.default_threads() == 8                     # the user's own choice


# ------------------------------------------------------------------------- 11. scripts

def test_a_subset_comparison_does_not_overwrite_the_tracked_report(tmp_path):
    import argparse
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "compare_schemes", Path(ROOT) / "experiments" / "compare_schemes.py")
    cs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cs)
    seeds = "0,1,2,3,4,5,6,7"
    a = argparse.Namespace(scale="cpu", seeds=seeds, steps=None, lr=None, text=None,
                           report=None, figure=None)
    assert cs.outputs(a, list(cs.ORDER), tmp_path, seeds)[0] == Path("docs/results.md")
    for change in ({"seeds": "0"}, {"steps": 3}, {"text": "x.txt"}):
        b = argparse.Namespace(**{**vars(a), **change})
        assert cs.outputs(b, list(cs.ORDER), tmp_path, seeds) == (
            tmp_path / "report.md", tmp_path / "compare.png")
    assert cs.outputs(a, ["transformer"], tmp_path, seeds)[0] == tmp_path / "report.md"


@pytest.mark.heavy
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without a GPU")
def test_the_gpu_suite_refuses_to_run_without_a_gpu(tmp_path):
    r = subprocess.run(["bash", str(Path(ROOT) / "benchmarks" / "gpu_suite.sh")],
                       capture_output=True, text=True, timeout=120, check=False,
                       env={**ENV, "PYTHON": sys.executable, "SUITE_DIR": str(tmp_path)})
    assert r.returncode == 2 and "no CUDA device" in r.stderr, r.stdout + r.stderr


# ------------------------------------------------------------------------- 6. verdicts
# check_order's round-off floor scales with the number of stages and the coefficients' size,
# non-finite and subnormal step sizes are undetermined, invalid orders refused.


def test_two_thousand_lie_trotter_substeps_are_first_order():
    n = 1000
    stages = [("diffusion", 1 / n), ("convection", 1 / n)] * n
    assert sn.check_order(stages, order=1).verdict == "ok"


def test_a_strang_step_repeated_500_times_is_second_order():
    stages = [("convection", 0.5 / 500), ("diffusion", 1 / 500), ("convection", 0.5 / 500)] * 500
    assert sn.check_order(stages, order=2).verdict == "ok"


@pytest.mark.parametrize("order", [0, -1, 2.5, True], ids=repr)
def test_an_invalid_order_is_refused(order):
    with pytest.raises(ValueError):
        sn.check_order("strang", order=order)


def test_subnormal_step_sizes_are_undetermined():
    """(already so through the API; the command line's `order` is
    test_round_off_step_sizes_are_undetermined_not_a_mismatch)"""
    res = sn.check_order("strang", order=2, step_sizes=[1e-300, 1e-301])
    assert res.verdict == "undetermined"
