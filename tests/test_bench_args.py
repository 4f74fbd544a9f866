"""The benchmark and experiment scripts refuse bad input in one line with exit 2, before
anything runs (no traceback, no half-finished measurement, no run folders made, no docs
rewritten: a script without options still answers --help and refuses the rest)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CASES = [
    ("bench_convs2s.py", ["--threads", "0"], "expected a positive integer"),
    ("bench_convs2s.py", ["--beams", "1,x"], "expected a positive integer"),
    ("bench_digest.py", ["--repeats", "0"], "expected a positive integer"),
    ("bench_flows.py", ["--runs", "0"], "expected a positive integer"),
    ("bench_flows.py", ["--sizes", "256,x"], "expected a positive integer"),
    ("bench_layers.py", ["--schemes", "bogus", "--pairs", "0"], "unknown scheme 'bogus'"),
    ("bench_layers.py", ["--weights", "bogus", "--pairs", "0"], "unknown layout 'bogus'"),
    ("bench_llama.py", ["--rounds", "0"], "expected a positive integer"),
    ("bench_reversible.py", ["--presets", "foo"], "unknown preset 'foo'"),
    ("bench_reversible.py", ["--schemes", "nope", "--quick"], "unknown scheme 'nope'"),
    ("bench_reversible.py", ["--pairs", "0"], "expected a positive integer"),
    ("bench_reversible.py", ["--d-model", "10", "--n-heads", "3"], "not divisible"),
    ("bench_reversible.py", ["--json", "/no/such/folder/x.json", "--quick"], "no such folder"),
    ("bench_llama.py", ["--presets", "zz"], "unknown preset 'zz'"),
    ("bench_projection.py", ["--schemes", "bogus"], "unknown scheme 'bogus'"),
    ("bench_projection.py", ["--sds", "a"], "expected a number"),
    ("bench_seq2seq.py", ["--pairs", "0"], "expected a positive integer"),
    ("bench_threads.py", ["--threads", "1,x"], "expected a positive integer"),
    ("bench_vs_hf.py", ["--threads", "0"], "expected a positive integer"),
    ("gpu_reversible.py", ["--depths", "2,x", "--device", "cpu"], "expected a positive integer"),
    ("gpu_seed_scale.py", ["--seeds", "x"], "expected a seed"),
    ("gpu_seed_scale.py", ["--arms", "Bogus"], "unknown arrangement 'Bogus'"),
    ("parity.py", ["--threads", "0"], "expected a positive integer"),
    ("parity_mlm.py", ["--seed", "-1"], "expected a seed"),
]
CASES = [("benchmarks", *c) for c in CASES] + [("experiments", *c) for c in [
    ("compare_schemes.py", ["--steps", "0"], "expected a positive integer"),
    ("solvers_tables.py", ["--bogus"], "unrecognized arguments: --bogus"),
    ("compare_schemes.py", ["--seeds", "0,x"], "expected a seed"),
    ("depth_study.py", ["--jobs", "0"], "expected a positive integer"),
    ("llama_study.py", ["--seeds", "x"], "expected a seed"),
    ("refine_study.py", ["--full-seed", "-1"], "expected a seed"),
    ("reversible_study.py", ["--steps", "0"], "expected a positive integer"),
    ("unsplit_study.py", ["--seeds", "x"], "expected a seed"),
    ("networks_gap.py", ["--n-layers", "0"], "expected a positive integer"),
    ("decoder_study.py", ["--bogus"], "unrecognized arguments: --bogus"),
    ("partitioned_orders.py", ["--bogus"], "unrecognized arguments: --bogus"),
    ("peers_audit.py", ["--bogus"], "unrecognized arguments: --bogus"),
    ("translation_study.py", ["--study", "--jobs", "0"], "expected a positive integer"),
    ("trajectories_figs.py", ["--checkpoint", "/no/such/run"], "no checkpoint there"),
    ("translation_study.py", ["--study", "--seeds", "1,x"], "expected a seed"),
]]


# each case is a Python process that imports torch (~3.5 s on two cores): the quick suite keeps
# one benchmark's and one experiment's, the rest are heavy (CI runs them: -m 'not slow')
QUICK = {"bench_convs2s.py", "translation_study.py"}
_seen: set = set()


def _param(c):
    first = c[1] in QUICK and c[1] not in _seen
    _seen.add(c[1])
    return pytest.param(*c, id=f"{c[1]}:{' '.join(c[2])}",
                        marks=() if first else pytest.mark.heavy)


@pytest.mark.parametrize("folder, script, args, says", [_param(c) for c in CASES])
def test_bad_input_is_one_line_and_exit_2(folder, script, args, says, tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / folder / script), *args], capture_output=True,
                       text=True, timeout=120, cwd=tmp_path, check=False)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, r.stderr[-1500:]
    assert says in lines[-1] and "Traceback" not in r.stderr
    assert not any(tmp_path.iterdir())          # nothing made where it was run


def test_a_bare_translation_study_runs_the_seeds_the_docs_report(monkeypatch):
    """``translation_study.py --study`` without ``--seeds`` runs each arrangement's reported
    seeds (six; ConvS2S's two at three), never new ConvS2S seeds; given seeds run as given."""
    monkeypatch.syspath_prepend(str(ROOT / "experiments"))
    import translation_study as t

    jobs = []
    monkeypatch.setattr(t, "best_search", lambda: ("key", None))
    monkeypatch.setattr(t, "_study_job", lambda job: jobs.append(job[:2]) or "")
    t.study(None, 1)
    seeds = {lab: sorted(s for la, s in jobs if la == lab) for lab in t.ARRANGEMENTS}
    assert seeds["ConvS2S"] == seeds["ConvS2S-Strang"] == [0, 1, 2]
    assert seeds["Transformer"] == seeds["Macaron"] == list(t.SEEDS) == [0, 1, 2, 3, 4, 5]
    jobs.clear()
    t.study([7], 1, labels=["ConvS2S"])
    assert jobs == [("ConvS2S", 7)]


@pytest.mark.heavy                 # a Python process each (~3.5 s of importing torch)
@pytest.mark.parametrize("script", ["bench_reversible.py", "bench_llama.py", "gpu_reversible.py"])
def test_cuda_without_a_device_is_one_line(script, tmp_path):
    """``--device cuda:1`` where torch sees no GPU: splitnet.cli._args.torch_device's one line,
    the same as the CLI's."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--device", "cuda:1"],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.endswith("--device cuda:1: no CUDA device is available")


@pytest.mark.heavy
def test_bench_reversible_survives_a_closed_pipe(tmp_path):
    """``bench_reversible.py ... | head -1``: the reader goes after the first line; the run still
    ends with status 0 and writes its --json (no BrokenPipeError)."""
    out = tmp_path / "rows.json"
    proc = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "bench_reversible.py"),
                             "--quick", "--schemes", "strang", "--json", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 0, err[-1500:]
    assert "BrokenPipeError" not in err and out.is_file()
