"""Reliability round five (issue 49), each defect as a class with its test: outputs are never
written over a file of a run the command reads, by any spelling."""

import os
import subprocess
import sys

import pytest

from splitnet import checkpoint as ck

TINY = ["--d-model", "16", "--n-heads", "2", "--n-layers", "1", "--context", "16",
        "--batch-size", "4", "--no-progress", "--threads", "1"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("r") / "run"
    r = subprocess.run([sys.executable, "-m", "splitnet", "train", "--steps", "2", *TINY,
                        "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return out


def _spellings(run, name):
    """The same file written four ways: plain, with '..', relative to the cwd, via a link."""
    link = run.parent / f"link-{name}"
    if not link.exists():
        link.symlink_to(run / name)
    return [str(run / name), str(run / ".." / run.name / name),
            os.path.relpath(run / name), str(link)]


@pytest.mark.parametrize("name", [ck.CKPT, ck.METRICS, ck.PLOT])
@pytest.mark.parametrize("command,flag", [("refine", "--json"), ("refine", "--out"),
                                          ("evaluate", "--json"),
                                          ("trajectories", "--out"), ("export", "--out")])
def test_no_output_option_writes_over_a_file_of_the_run_it_reads(run, name, command, flag):
    """D2: every output option of every command that reads a run refuses, before any work,
    a path that is one of the run's files (plain, through '..', relative, through a link):
    one line, exit 2, the file unchanged."""
    before = (run / name).read_bytes()
    spellings = _spellings(run, name)
    turn = (len(command) + len(flag) + len(name)) % len(spellings)
    for path in spellings[turn:turn + 1]:      # one spelling each, every spelling used
        r = subprocess.run([sys.executable, "-m", "splitnet", command, "--checkpoint",
                            str(run), flag, path], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 2, (command, flag, path, r.stderr[-500:])
        assert r.stderr.count("\n") == 1 and "which this command reads" in r.stderr, r.stderr
        assert (run / name).read_bytes() == before
