"""splitnet's SplittingSolver against diffrax's own Euler and Heun at equal accuracy.

The problem of tests/test_user_flows.py: ``x' = (A + B) x``, A and B symmetric 6x6 and not
commuting, float64, global error at t = 1 against the exact solution. For each solver the
largest step ``1/2^k`` whose error is at most ``--tol``; then the jitted ``diffeqsolve`` at that
step is timed (median of ``--runs``, after compilation). Euler and Heun solve the whole field
``(A + B) x``; the splitting solvers use the exact flows of A and B (matrix exponentials by
eigendecomposition, one matrix-vector pair per stage) or RK4 on the vector fields.

    python3 benchmarks/bench_diffrax.py               # tol 1e-6, median of 20
    python3 benchmarks/bench_diffrax.py --tol 1e-4 --runs 50
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import jax

jax.config.update("jax_enable_x64", True)
import diffrax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import splitnet as sn  # noqa: E402
from splitnet.interop.diffrax import SplittingSolver  # noqa: E402


def problem(seed: int = 1, n: int = 6):
    rng = np.random.default_rng(seed)

    def sym():
        m = rng.standard_normal((n, n))
        return (m + m.T) / (2 * np.sqrt(n))

    return sym(), sym(), rng.standard_normal(n)


def eig_flow(m):
    lam, v = np.linalg.eigh(m)
    lam, v = jnp.asarray(lam), jnp.asarray(v)
    return lambda t, y, dt: v @ (jnp.exp(dt * lam) * (v.T @ y))


def solvers(a, b):
    """name -> (solver, terms)."""
    ja, jb = jnp.asarray(a), jnp.asarray(b)
    whole = diffrax.ODETerm(lambda t, y, args: (ja + jb) @ y)
    split = diffrax.MultiTerm(diffrax.ODETerm(lambda t, y, args: ja @ y),
                              diffrax.ODETerm(lambda t, y, args: jb @ y))
    out = {"diffrax Euler": (diffrax.Euler(), whole), "diffrax Heun": (diffrax.Heun(), whole)}
    for name in ("strang", "yoshida4", "blanes-moan4"):
        s = sn.schemes.get(name)
        flows = {s.fields[0]: eig_flow(a), s.fields[1]: eig_flow(b)}
        out[f"SplittingSolver({name}, exact flows)"] = (SplittingSolver(s, flows=flows), split)
    out["SplittingSolver(yoshida4, rk4)"] = (SplittingSolver("yoshida4", method="rk4"), split)
    return out


def positive(kind):
    def parse(text):
        try:
            v = kind(text)
        except ValueError:
            v = 0
        if not v > 0:
            raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
        return v
    return parse


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tol", type=positive(float), default=1e-6)
    p.add_argument("--runs", type=positive(int), default=20)
    args = p.parse_args(argv)
    a, b, x0 = problem()
    y0 = jnp.asarray(x0)
    exact = eig_flow(a + b)(0.0, y0, 1.0)
    print(f"x' = (A + B) x over [0, 1], global error <= {args.tol:g}, median of {args.runs}")
    print("| solver | steps | error | time per solve |")
    print("|---|---:|---:|---:|")
    for name, (solver, terms) in solvers(a, b).items():
        for k in range(0, 21):
            n = 2 ** k

            @jax.jit
            def solve(y, solver=solver, terms=terms, n=n):
                return diffrax.diffeqsolve(terms, solver, 0.0, 1.0, 1.0 / n, y, max_steps=n,
                                           stepsize_controller=diffrax.ConstantStepSize()
                                           ).ys[-1]
            err = float(jnp.linalg.norm(solve(y0) - exact))
            if err <= args.tol:
                break
        else:
            print(f"| {name} | > {n} | {err:.2e} | |")
            continue
        times = []
        for _ in range(args.runs):
            t = time.perf_counter()
            solve(y0).block_until_ready()
            times.append(time.perf_counter() - t)
        print(f"| {name} | {n} | {err:.2e} | {statistics.median(times) * 1e3:.3f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
