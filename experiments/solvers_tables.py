"""The classic splitting problems -> the tables of docs/solvers.md (``regen solvers``).

    python3 experiments/solvers_tables.py            # ~2-4 min on 2 busy cores; resumes
    python3 experiments/solvers_tables.py --refresh  # measure everything again

Three problems of ``examples/``, every field advanced by its own flow:

* Hénon–Heiles (``henon_heiles.py``), kinetic and potential shears: the largest energy error
  over [0, T] for T = 10, 100, 1000 at h = 0.1, splittings against classical RK4 on the whole
  field;
* the cubic Schrödinger equation by split-step Fourier (``nls_split_step.py``): global orders
  of Lie–Trotter, Strang and Yoshida4 against the exact soliton;
* Fisher–KPP reaction–diffusion (``reaction_diffusion.py``): global orders with an exact,
  a Crank–Nicolson and a backward-Euler diffusion flow.

And for the Schrödinger and reaction–diffusion problems the zoo's recommendation: every
registered two-field scheme (sn.schemes.available(), general problem class, no sum stages) at
h = 1, 1/2, ..., 1/128 over [0, 1], its cost (flow evaluations) and global error; per accuracy band
the cheapest measured run. Results are cached as json in experiments/cache/solvers/; only the
text between the ``<!-- solvers:NAME -->`` markers of docs/solvers.md is written.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

import henon_heiles as hh  # noqa: E402
import nls_split_step as nls  # noqa: E402
import numpy as np  # noqa: E402
import reaction_diffusion as rd  # noqa: E402

import splitnet as sn  # noqa: E402
from splitnet.dev.docblocks import fill_blocks  # noqa: E402

DOC = ROOT / "docs" / "solvers.md"
CACHE = ROOT / "experiments" / "cache" / "solvers"
ENERGY_SCHEMES = ("strang", "yoshida4", "blanes-moan4", "yoshida6", "rk4")
ENERGY_TIMES = (10, 100, 1000)
ENERGY_STEP = 0.1
BANDS = (1e-2, 1e-4, 1e-6, 1e-8)
SWEEP = [2.0 ** -k for k in range(8)]


def cached(name: str, refresh: bool, compute):
    path = CACHE / f"{name}.json"
    if path.exists() and not refresh:
        return json.loads(path.read_text())
    value = compute()
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1))
    return value


def energy_rows():
    rows = {}
    for name in ENERGY_SCHEMES:
        evals = 8 if name == "rk4" else sn.schemes.get(name).n_stages()   # rk4: 4 x 2 fields
        rows[name] = {"evals": evals, "errors": hh.energy_errors(name, ENERGY_STEP, ENERGY_TIMES)}
    return rows


def study_rows(results: dict) -> dict:
    return {name: {"slope": float(r.order), "theory": int(r.expected_order),
                   "step_sizes": r.step_sizes.tolist(), "errors": r.errors.tolist()}
            for name, r in results.items()}


def candidates() -> list[str]:
    out = []
    for name in sn.schemes.available():
        s = sn.schemes.get(name)
        if (len(s.fields) == 2 and s.problem_class == "general" and not s.is_exact
                and all(len(st.components) == 1 for st in s.stages)):
            out.append(name)
    return out


def sweep(problem: str) -> dict:
    """``{scheme: [[h, evaluations, error], ...]}`` over :data:`SWEEP`."""
    if problem == "nls":
        lin, nonlin, x0, exact = nls.nls_flows()
        fields, flows, end = ("linear", "nonlinear"), {"linear": lin, "nonlinear": nonlin}, \
            exact(1.0)
    else:
        fields, flows, x0, end = ("diffusion", "reaction"), rd.flows("exact"), rd.initial(), \
            rd.reference()
    out = {}
    for name in candidates():
        s = sn.schemes.get(name, fields=fields)
        runs = []
        for h in SWEEP:
            x = s.integrate(flows=flows, x0=x0, t1=1.0, step_size=h)[-1]
            err = float(np.linalg.norm(x - end))
            if math.isfinite(err):
                runs.append([h, round(1 / h) * len(s.stages), err])
        out[name] = runs
    return out


def recommendation(runs: dict) -> str:
    lines = ["| error at most | cheapest method | h | flow evaluations | Strang needs |",
             "|---|---|---:|---:|---:|"]
    for tol in BANDS:
        best = min(((ev, name, h) for name, rs in runs.items() for h, ev, e in rs if e <= tol),
                   default=None)
        strang = min((ev for h, ev, e in runs.get("strang", []) if e <= tol), default=None)
        if best is None:
            lines.append(f"| {tol:.0e} | none measured (h >= 1/128) | | | |")
            continue
        ev, name, h = best
        step = "1" if h == 1 else f"1/{round(1 / h)}"
        lines.append(f"| {tol:.0e} | {name} | {step} | {ev} | "
                     f"{strang if strang is not None else '> ' + str(128 * 3)} |")
    return "\n".join(lines)


def order_table(rows: dict, label: str = "") -> str:
    lead = f"{label} | " if label else ""
    lines = ["| " + lead + "scheme | theory | fitted slope | h | errors |",
             "|" + "---|" * (6 if label else 5)]
    for name, r in rows.items():
        hs = ", ".join(f"1/{round(1 / h)}" for h in r["step_sizes"])
        errs = ", ".join(f"{e:.2e}" for e in r["errors"])
        lines.append("| " + lead + f"{name} | {r['theory']} | {r['slope']:.2f} | {hs} | {errs} |")
    return "\n".join(lines)


def energy_table(rows: dict) -> str:
    lines = ["| method | flow or field evaluations per step | "
             + " | ".join(f"max energy error, T = {T}" for T in ENERGY_TIMES) + " |",
             "|---|---:|" + "---:|" * len(ENERGY_TIMES)]
    for name, r in rows.items():
        label = "rk4 (unsplit, not symplectic)" if name == "rk4" else name
        lines.append(f"| {label} | {r['evals']} | "
                     + " | ".join(f"{e:.2e}" for e in r["errors"]) + " |")
    return "\n".join(lines)


def render(refresh: bool = False) -> str:
    """docs/solvers.md with its tables from the cache (measured first where missing)."""
    energy = cached("henon_heiles_energy", refresh, energy_rows)
    nls_orders = cached("nls_orders", refresh, lambda: study_rows(nls.orders()))
    rd_orders = {d: cached(f"rd_orders_{d}", refresh, lambda d=d: study_rows(rd.orders(d)))
                 for d in rd.DIFFUSION_FLOWS}
    nls_runs = cached("nls_sweep", refresh, lambda: sweep("nls"))
    rd_runs = cached("rd_sweep", refresh, lambda: sweep("rd"))
    per_flow = [order_table(rows, d).splitlines() for d, rows in rd_orders.items()]
    head = order_table(rd_orders["exact"], "diffusion flow").splitlines()[:2]
    rd_table = "\n".join(head + [line for lines in per_flow for line in lines[2:]])
    tables = {"hh-energy": energy_table(energy), "nls-orders": order_table(nls_orders),
              "rd-orders": rd_table, "nls-cost": recommendation(nls_runs),
              "rd-cost": recommendation(rd_runs),
              "candidates": f"{len(nls_runs)} schemes: " + ", ".join(sorted(nls_runs))}
    return fill_blocks(DOC.read_text(), "solvers", tables)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--refresh", action="store_true", help="measure again, ignoring the cache")
    args = p.parse_args(argv)
    DOC.write_text(render(args.refresh))
    print(f"wrote the tables of {DOC.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
