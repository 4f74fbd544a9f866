"""CPU threads against speed of the everyday commands, on this machine as it is (busy or not).

``splitnet train`` (the default model: d_model 128, 4 layers, batch 16 x 128; steady-state
steps/s from its own summary line) and ``splitnet sample`` (tokens/s from its stderr line, 200
greedy tokens from a checkpoint of the same model) are run as separate processes with
``--threads 1``, ``--threads 2``, ..., torch's own default (one thread per core: what both
commands used before splitnet 0.2.1) and no flag (the command's default now,
:func:`splitnet.runenv.default_threads`), interleaved, ``--reps`` times each; reported: the
median and the range, with the 1-minute load average before each run.

    python3 benchmarks/bench_threads.py                       # docs/benchmarks.md's table
    python3 benchmarks/bench_threads.py --reps 5 --steps 40 --json runs/threads.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from splitnet.cli._args import csv_positive_ints, positive_int

ROOT = Path(__file__).resolve().parents[1]
ENV = {**{k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"},
       "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def _run(argv: list[str]) -> str:
    r = subprocess.run([sys.executable, "-m", "splitnet", *argv], capture_output=True,
                       text=True, env=ENV, check=False)
    if r.returncode != 0:
        raise SystemExit(f"failed: splitnet {' '.join(argv)}\n{r.stderr[-2000:]}")
    return r.stderr


def _torch_default() -> int:
    code = "import torch; print(torch.get_num_threads())"
    return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=ENV, check=True).stdout)


def _train(out: str, steps: int, threads: str | None) -> float:
    argv = ["train", "--out", out, "--steps", str(steps), "--overwrite", "--no-plot",
            "--no-progress", "--eval-every", "100000", "--ckpt-every", "100000"]
    err = _run(argv + (["--threads", threads] if threads else []))
    tok = float(re.search(r"([\d.]+) tokens/s steady", err).group(1))
    return tok / (16 * 128)          # steps/s of the default batch (16 x 128 bytes)


def _sample(ckpt: str, n: int, threads: str | None) -> float:
    argv = ["sample", "--checkpoint", ckpt, "--max-new-tokens", str(n), "--temperature", "0"]
    err = _run(argv + (["--threads", threads] if threads else []))
    return float(re.search(r"([\d.]+) tokens/s", err).group(1))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", default="1,2", type=csv_positive_ints,
                   help="explicit thread counts (default 1,2)")
    p.add_argument("--reps", type=positive_int, default=3)
    p.add_argument("--steps", type=positive_int, default=30,
                   help="training steps per run (default 30)")
    p.add_argument("--new-tokens", type=positive_int, default=200)
    p.add_argument("--json", help="also write the measurements here")
    args = p.parse_args(argv)
    tdef = _torch_default()
    variants = {str(t): str(t) for t in args.threads}
    variants[f"torch default ({tdef})"] = str(tdef)
    variants["splitnet default"] = None
    rows = {k: {"train": [], "sample": [], "load": []} for k in variants}
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = str(Path(tmp) / "run")
        _train(ckpt, 2, "1")                 # a checkpoint of the default model to sample
        for rep in range(args.reps):
            for name, t in variants.items():
                rows[name]["load"].append(os.getloadavg()[0])
                rows[name]["train"].append(_train(str(Path(tmp) / "t"), args.steps, t))
                rows[name]["sample"].append(_sample(ckpt, args.new_tokens, t))
                print(f"rep {rep + 1} {name:<22} train {rows[name]['train'][-1]:6.2f} steps/s  "
                      f"sample {rows[name]['sample'][-1]:7.1f} tokens/s  (load "
                      f"{rows[name]['load'][-1]:.2f})", file=sys.stderr, flush=True)
    print(f"{os.cpu_count()} cores; median of {args.reps} runs (min-max); train: default model, "
          f"{args.steps} steps; sample: {args.new_tokens} greedy tokens")
    print("| threads | train steps/s | sample tokens/s | load avg |")
    print("|---|---|---|---|")
    for name, r in rows.items():
        def cell(xs, f):
            return f"{statistics.median(xs):{f}} ({min(xs):{f}}-{max(xs):{f}})"
        print(f"| {name} | {cell(r['train'], '.2f')} | {cell(r['sample'], '.0f')} | "
              f"{statistics.median(r['load']):.2f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
