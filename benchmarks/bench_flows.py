"""The cost of splitnet's numerical API on user flows: ``scheme.integrate(flows=...)`` against a
hand-written loop of the same Strang step, on numpy arrays and on torch tensors.

The problem is the split-step Fourier step of the cubic Schrödinger equation
(``examples/nls_split_step.py``): a linear flow by two FFTs, a pointwise nonlinear phase. Both
sides store every state (as ``integrate`` does) and run the same flows; splitnet also checks
each flow's output (kind, shape, dtype, finite), which is what the ratio pays for.

    python3 benchmarks/bench_flows.py                  # median of 7 runs, n = 256 and 4096
    python3 benchmarks/bench_flows.py --runs 3 --sizes 1024 --steps 200

Prints the medians and the ratios side by side, one markdown row per backend and size.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import torch
from nls_split_step import nls_flows

import splitnet as sn


def positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return v


def hand_loop(lin, nonlin, x, h: float, steps: int, stack):
    """Strang by hand: ``L(h/2) N(h) L(h/2)`` per step, every state kept."""
    out = [x]
    for k in range(steps):
        t = k * h
        x = lin(t, x, h / 2)
        x = nonlin(t, x, h)
        x = lin(t + h / 2, x, h / 2)
        out.append(x)
    return stack(out)


def median_times(fns, runs: int) -> list[float]:
    """The median wall time of each of ``fns``, run interleaved (one of each per round), so
    that a busy machine slows both sides alike."""
    for fn in fns:
        fn()                               # warm up (FFT plans, allocator)
    times = [[] for _ in fns]
    for _ in range(runs):
        for fn, ts in zip(fns, times):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
    return [statistics.median(ts) for ts in times]


def compare(n: int, steps: int, runs: int, backend: str) -> tuple[float, float, float]:
    lin, nonlin, x0, _ = nls_flows(n, backend=backend)
    scheme = sn.schemes.get("strang", fields=("linear", "nonlinear"))
    if scheme.fields[0] != "linear":
        raise SystemExit(f"expected strang's outer field to be 'linear', got {scheme.fields}")
    h = 1.0 / steps
    stack = np.stack if backend == "numpy" else torch.stack
    ours = lambda: scheme.integrate(flows={"linear": lin, "nonlinear": nonlin}, x0=x0,  # noqa
                                    t1=1.0, step_size=h)
    theirs = lambda: hand_loop(lin, nonlin, x0, h, steps, stack)  # noqa: E731
    diff = ours()[-1] - theirs()[-1]
    err = float(abs(diff).max())
    if err > 1e-12:
        raise SystemExit(f"splitnet and the hand loop differ by {err:.3g}")
    return (*median_times([ours, theirs], runs), err)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=positive, default=7)
    p.add_argument("--steps", type=positive, default=500)
    p.add_argument("--sizes", type=lambda s: [positive(v) for v in s.split(",")],
                   default=[256, 4096])
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    print(f"Strang split-step Fourier (cubic NLS), {args.steps} steps, median of {args.runs}")
    print("| backend | n | splitnet integrate | hand-written loop | ratio | max difference |")
    print("|---|---:|---:|---:|---:|---:|")
    for backend in ("numpy", "torch"):
        for n in args.sizes:
            ours, theirs, err = compare(n, args.steps, args.runs, backend)
            print(f"| {backend} | {n} | {ours * 1e3:.1f} ms | {theirs * 1e3:.1f} ms | "
                  f"{ours / theirs:.2f} | {err:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
