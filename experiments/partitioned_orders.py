"""Regenerate the partitioned-system table of docs/theory.md: with Euler sub-steps (residual
sub-layers) every zoo method keeps its order on the ODE of a reversible network.

    python3 experiments/partitioned_orders.py       # 3-6 min on 2 busy CPU cores
    python3 -m splitnet.dev regen partitioned       # the same

The system is ``splitnet.problems.partitioned_system()`` (6 + 6 particles in R^8, float64,
seed 0): ``x1' = D(x2)``, ``x2' = C(x1)`` with the attention D and feed-forward C of the
ordinary particle system. Each field is a shear, so an Euler sub-step is its exact sub-flow.
For every zoo method (``sn.schemes.available()`` and the restricted Runge–Kutta–Nyström sets,
which on this system have their general order) and each kind (local, global) it runs
``convergence_study(..., method="euler")`` -- what ``splitnet order --partitioned`` runs -- down
a grid of step sizes until an error falls under the study's floor (10 x rtol x |x0| = 1e-11),
then again on the ``TAIL`` = 4 smallest step sizes the study's own fit used: the asymptotic end
of the curve, above round-off. That study's fitted slope and verdict are the table's (``splitnet
order --partitioned --schemes NAME --kind KIND --step-sizes ...`` with those step sizes prints
the same). Also per method: ``|Euler step - exact-sub-flow step| / |x0|`` at h = 0.2, and, the
contrast, the global slope on the ordinary particle system with Euler sub-steps at h = 1/8 ...
1/64 (theory: 1 for every scheme).
The table goes between the ``<!-- partitioned_orders:NAME -->`` markers of docs/theory.md.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

import splitnet as sn
from splitnet.analyses.convergence import convergence_study
from splitnet.analyses.problems import particle_system, partitioned_system
from splitnet.dev.docblocks import write_blocks
from splitnet.order.fit import fit_slope

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "theory.md"
TAIL = 4                        # points fitted: the smallest step sizes above the floor
LOCAL_GRID = tuple(0.8 * 2.0 ** (-k / 4) for k in range(29))           # 0.8 ... 0.0071
GLOBAL_GRID = tuple(1.0 / n for n in (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64,
                                      80, 96, 128))
CONTRAST_GRID = (1 / 8, 1 / 16, 1 / 32, 1 / 64)
GAP_STEP = 0.2


def zoo_methods() -> list[str]:
    """Every registered splitting method, the restricted (Runge–Kutta–Nyström) ones last."""
    return sn.schemes.available() + sn.schemes.available("restricted")


def get(name: str):
    with warnings.catch_warnings():     # restricted sets warn that they have class order only
        warnings.simplefilter("ignore")
        return sn.schemes.get(name)


def pilot(scheme, fields: dict, x0: torch.Tensor, kind: str, grid) -> tuple:
    """``(step sizes, errors, floor)`` of the Euler convergence study down ``grid`` (largest h
    first), four step sizes at a time, stopping after the first error under the study's floor
    (the smaller steps would only measure round-off)."""
    hs, errs, floor = [], [], 0.0
    for chunk in np.array_split(np.asarray(grid), -(-len(grid) // 4)):    # >= 2 points each
        r = convergence_study(scheme, x0=x0, step_sizes=chunk.tolist(), kind=kind,
                              method="euler", fields=fields)
        hs += r.step_sizes.tolist()
        errs += r.errors.tolist()
        floor = r.floor
        if min(errs) <= floor:
            break
    return np.asarray(hs), np.asarray(errs), floor


def tail_study(scheme, fields: dict, x0: torch.Tensor, kind: str, grid) -> tuple:
    """``(result, how)``: the Euler convergence study on the ``TAIL`` smallest step sizes of
    ``grid`` among those the study's fit (:func:`~splitnet.order.check.fit_slope`) would use on
    the whole grid (errors above its floor, decreasing with h): the asymptotic end of the curve,
    above round-off. ``how`` says why there is no such run (fewer than 3 usable errors)."""
    hs, errs, floor = pilot(scheme, fields, x0, kind, grid)
    used = fit_slope(hs, errs, floor)[1]
    tail = np.sort(hs[used])[:TAIL]
    if len(tail) < 3:
        return None, f"{len(tail)} error{'' if len(tail) == 1 else 's'} above the floor"
    return convergence_study(scheme, x0=x0, step_sizes=tail[::-1].tolist(), kind=kind,
                             method="euler", fields=fields), ""


def exact_gap(scheme, fields: dict, x0: torch.Tensor, h: float = GAP_STEP) -> float:
    """``|step(euler) - step(exact)| / |x0|`` after one step of ``h``: the Euler sub-steps are
    the exact sub-flows (torchdiffeq at rtol 1e-13) to the sub-flow solver's tolerance."""
    with torch.no_grad():
        a, b = (scheme.step(x=x0, step_size=h, method=m, fields=fields)
                for m in ("euler", "exact"))
    return float((a - b).norm() / x0.norm())


def measure(name: str, part=None, plain=None) -> dict:
    """One row: local and global Euler slopes on the partitioned system (each ``(result,
    why)``, result None when undetermined), the Euler-vs-exact step gap there, and the global
    Euler slope on the ordinary particle system."""
    scheme = get(name)
    D, C, x0 = part or partitioned_system()
    F, G, y0 = plain or particle_system()
    fields = {"diffusion": D, "convection": C}
    return {"name": name, "order": scheme.order,
            "restricted": name in sn.schemes.available("restricted"),
            "local": tail_study(scheme, fields, x0, "local", LOCAL_GRID),
            "global": tail_study(scheme, fields, x0, "global", GLOBAL_GRID),
            "gap": exact_gap(scheme, fields, x0),
            "contrast": convergence_study(scheme, x0=y0, step_sizes=CONTRAST_GRID,
                                          kind="global", method="euler",
                                          fields={"diffusion": F, "convection": G})}


def _slope(study) -> str:
    r, why = study
    if r is None:
        return f"– ({why})"
    text = f"{r.order:.2f}"
    return text if r.ok else f"**{text}**"          # bold: off theory by more than 0.3


def _range(study) -> str:
    r, _ = study
    if r is None:
        return "–"
    return f"{r.step_sizes.max():.3g} … {r.step_sizes.min():.3g}"


def table(rows: list[dict]) -> str:
    """The markdown table of :func:`measure`'s rows."""
    lines = ["| method | p | local slope (p + 1) | h | global slope (p) | h | Euler − exact "
             "sub-flows, h = 0.2 | ordinary system: global slope (1) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        name = f"`{r['name']}`" + (" †" if r["restricted"] else "")
        lines.append(f"| {name} | {r['order']} | {_slope(r['local'])} | {_range(r['local'])} | "
                     f"{_slope(r['global'])} | {_range(r['global'])} | {r['gap']:.0e} | "
                     f"{_slope((r['contrast'], ''))} |")
    return "\n".join(lines)


def _ok(study) -> bool:
    return study[0] is not None and study[0].ok


def summary(rows: list[dict]) -> str:
    """How many rows match theory in each column, and the largest Euler-vs-exact gap."""
    n = len(rows)
    return (f"Within 0.3 of theory on the partitioned system with Euler sub-steps: local slope "
            f"{sum(_ok(r['local']) for r in rows)} of {n} methods, global slope "
            f"{sum(_ok(r['global']) for r in rows)} of {n}; Euler step − exact-sub-flow step at "
            f"most {max(r['gap'] for r in rows):.0e} × |x0|. Ordinary system with Euler "
            f"sub-steps: global slope 1 for {sum(r['contrast'].ok for r in rows)} of {n}.")


def main(argv=None) -> int:
    # no options: --help says what runs, anything else is refused (it rewrites docs/)
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    part, plain = partitioned_system(), particle_system()
    rows = []
    for name in zoo_methods():
        rows.append(measure(name, part, plain))
        print(f"{name}: local {_slope(rows[-1]['local'])}, global {_slope(rows[-1]['global'])}",
              file=sys.stderr)
    write_blocks(DOC, "partitioned_orders", {"table": table(rows), "summary": summary(rows)},
                 stamp=True)
    print(f"{summary(rows)}\nwritten to {DOC.relative_to(ROOT)} "
          f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
