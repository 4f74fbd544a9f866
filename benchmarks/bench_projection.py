"""The cost of projecting learned coefficients onto the order conditions (issue 45).

For each scheme, ``--layers`` rows of its coefficients perturbed by N(0, sd^2) (sd 1e-3: about one
AdamW step of the coefficients at lr 2e-3, what a training step's projection starts from; 1e-2: a
far start) are projected by :func:`splitnet.order.projection.project` (all rows at once, as the
trainer does), ``--reps`` times after one warm-up; reported: the median milliseconds per layer,
the damped steps taken and the largest condition after.

    python3 benchmarks/bench_projection.py            # the docs numbers (one thread)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

import splitnet as sn
from splitnet.cli._args import csv_floats, positive_int
from splitnet.order import conditions
from splitnet.order.projection import project


def row(name: str, sd: float, layers: int, reps: int) -> dict:
    s = sn.schemes.get(name)
    letters, k = conditions.structure(s.stages)
    c0 = torch.tensor([[float(st.coeff) for st in s.stages]], dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    starts = [c0 + sd * torch.randn(layers, c0.shape[1], dtype=torch.float64, generator=g)
              for _ in range(reps + 1)]
    project(starts[0], letters, k, s.order)                      # warm-up
    times, steps, defect = [], [], 0.0
    for c in starts[1:]:
        t0 = time.perf_counter()
        _, info = project(c, letters, k, s.order)
        times.append(time.perf_counter() - t0)
        steps.append(info["steps"])
        defect = max(defect, info["defect"])
    return {"scheme": name, "order": s.order, "stages": len(s.stages), "sd": sd,
            "ms_per_layer": 1e3 * statistics.median(times) / layers,
            "steps": statistics.median(steps), "defect": defect}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--schemes", default="lie-trotter,strang,yoshida4,suzuki4,yoshida6")
    p.add_argument("--sds", default="1e-3,1e-2", type=csv_floats,
                   help="perturbation standard deviations, comma-separated")
    p.add_argument("--layers", type=positive_int, default=4)
    p.add_argument("--reps", type=positive_int, default=5)
    p.add_argument("--threads", type=positive_int, default=1)
    a = p.parse_args(argv)
    for name in a.schemes.split(","):
        try:
            sn.schemes.resolve(name)
        except ValueError as e:
            p.error(f"--schemes: {e}")
    torch.set_num_threads(a.threads)
    print(f"projection onto the order conditions ({a.layers} layers at once, {a.threads} "
          f"thread(s), median of {a.reps}, torch {torch.__version__})")
    print("| scheme | order | stages | start: perturbation sd | ms per layer | damped steps | "
          "largest condition after |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in a.schemes.split(","):
        for sd in a.sds:
            r = row(name, sd, a.layers, a.reps)
            print(f"| {name} | {r['order']} | {r['stages']} | {sd:g} | {r['ms_per_layer']:.1f} "
                  f"| {r['steps']:g} | {r['defect']:.1e} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
