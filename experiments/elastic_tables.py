"""The convergence tables of docs/elastic.md: one network run at n = 1, 2, 4, ... steps.

A network with ``depth_basis`` (:mod:`splitnet.fields.depthfield`) is one ODE over ``[0, T]``
whatever its number of steps (:func:`splitnet.nets.depth.at_depth`), so doubling the steps must
shrink the change of its output at its order: the scheme's for a reversible network (shears,
whose exact flow is the integral of the field over the stage's clock interval, taken by Gauss
quadrature of the scheme's order), 1 for a plain network of Euler sub-layers. Each case is a
2-layer network (h = 1, T = 2), d_model 16, float64, the final state of 12 tokens
(:func:`splitnet.analyses.depth.depth_errors`); time-dependent weights are ``legendre:3`` with
the coefficients beyond the constant drawn at half each weight's spread
(:func:`splitnet.analyses.depth.vary_in_depth`, seed 0). The controls show what breaks the
order: one evaluation per stage at its clock's start, the midpoint rule on a composition whose
adjacent stages are merged, per-stage weights (the stages of one field are then different
fields), the kinks of hat functions.

``python3 experiments/elastic_tables.py`` writes the table between the ``elastic:convergence``
markers of docs/elastic.md (``python3 -m splitnet.dev regen elastic-convergence``);
tests/test_elastic.py asserts every fitted slope and that the document is this rendering.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

DEPTHS = (1, 2, 4, 8, 16, 32, 64, 128)
FIT = 3                    # the slope is fitted over the finest FIT differences above FLOOR
FLOOR = 1e-12              # float64 round-off of these states is ~1e-15: far below
DOC = Path(__file__).resolve().parents[1] / "docs" / "elastic.md"
SMALL = {"vocab_size": 64, "d_model": 16, "n_heads": 2, "max_len": 16}


@dataclasses.dataclass(frozen=True)
class Case:
    """One row: a network and the order theory gives it."""

    group: str             # "constant", "time-dependent" or "control"
    scheme: str
    reversible: bool
    basis: str
    order: int
    weights: str = "shared"
    method: str = "euler"
    quadrature: int | None = None      # Gauss points per stage instead of the rule's (0: start)
    note: str = ""

    @property
    def label(self) -> str:
        kind = "reversible" if self.reversible else f"plain ({self.method})"
        extra = f", {self.weights}" if self.weights != "shared" else ""
        return f"{kind} {self.scheme}, {self.basis}{extra}" + \
            (f", quadrature {self.quadrature}" if self.quadrature is not None else "")


CASES = [
    Case("constant", "lie-trotter", True, "legendre:1", 1),
    Case("constant", "strang", True, "legendre:1", 2),
    Case("constant", "yoshida4", True, "legendre:1", 4),
    Case("constant", "lie-trotter", False, "legendre:1", 1),
    Case("constant", "strang", False, "legendre:1", 1),
    Case("time-dependent", "lie-trotter", True, "legendre:3", 1),
    Case("time-dependent", "strang", True, "legendre:3", 2),
    Case("time-dependent", "yoshida4", True, "legendre:3", 4),
    Case("time-dependent", "yoshida4", True, "bernstein:3", 4),
    Case("time-dependent", "blanes-moan4", True, "legendre:3", 4),
    Case("time-dependent", "yoshida6", True, "legendre:3", 6),
    Case("time-dependent", "blanes-moan6", True, "legendre:3", 6),
    Case("time-dependent", "lie-trotter", False, "legendre:3", 1),
    Case("time-dependent", "strang", False, "legendre:3", 1),
    Case("time-dependent", "strang", False, "legendre:3", 2, method="rk4",
         note="RK4 sub-steps see t: the splitting's order"),
    Case("control", "strang", True, "legendre:3", 1, quadrature=0,
         note="one evaluation at the clock's start"),
    Case("control", "yoshida4", True, "legendre:3", 1, quadrature=0,
         note="one evaluation at the clock's start"),
    Case("control", "forest-ruth4", True, "legendre:3", 2, quadrature=1,
         note="the triple jump merged: the midpoint is not enough"),
    Case("control", "forest-ruth4", True, "legendre:3", 4,
         note="the same with the rule's 2 Gauss points"),
    Case("control", "strang", True, "legendre:3", 1, weights="per-stage",
         note="per-stage weights: each stage its own field"),
    Case("control", "strang", True, "linear:3", 2, note="hat functions: kinks at the nodes"),
    Case("control", "yoshida4", True, "linear:3", 2, note="hat functions: kinks at the nodes"),
]


def network(case: Case):
    """The case's network: float64, eval mode, its depth fields varied in depth."""
    import torch

    from splitnet.analyses.depth import vary_in_depth
    from splitnet.nets.models import SplitTransformer

    torch.manual_seed(0)
    m = SplitTransformer(**SMALL, n_layers=2, scheme=case.scheme, reversible=case.reversible,
                         depth_basis=case.basis, weights=case.weights,
                         method=case.method).double().eval()
    vary_in_depth(m)
    return m


def measure(case: Case) -> tuple[list[float], list[float]]:
    """``(|y_n - y_2n| for n in DEPTHS, observed rates)`` of the case."""
    import torch

    from splitnet.analyses.depth import depth_errors

    m = network(case)
    x = m.embed(torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(0)))
    return depth_errors(m, x, DEPTHS, quadrature=case.quadrature)


def evaluations(case: Case) -> str:
    """Field evaluations per stage: the quadrature's points for a reversible network with
    time-dependent weights, the method's otherwise."""
    from splitnet.configs.depth import quadrature_points, time_dependent
    from splitnet.integrators.schemes import get
    from splitnet.integrators.subflows import get_method

    if not case.reversible:
        return str(get_method(case.method).evals)
    if not time_dependent(case.basis):
        return "1"
    if case.quadrature == 0:
        return "1 (start)"
    s = get(case.scheme)
    m = quadrature_points(s.order, s.stages) if case.quadrature is None else case.quadrature
    return f"{m} (Gauss)" if m > 1 else "1 (midpoint)"


def fitted(diffs) -> tuple[float, tuple[int, ...]]:
    """``(slope, the n of the differences fitted)``: ``-d log2 |y_n - y_2n| / d log2 n`` by
    least squares over the finest ``FIT`` differences above ``FLOOR``."""
    kept = [(n, d) for n, d in zip(DEPTHS, diffs) if d > FLOOR][-FIT:]
    ns, ds = zip(*kept)
    return float(-np.polyfit(np.log2(ns), np.log2(ds), 1)[0]), ns


GROUPS = {"constant": "constant weights (legendre:1)",
          "time-dependent": "time-dependent weights",
          "control": "controls"}


def render() -> str:
    """The table (markdown) of every case, measured now."""
    head = ("| weights | network | evaluations per stage | order (theory) | ‖y_n − y_2n‖, n = "
            f"{', '.join(map(str, DEPTHS[:-1]))} | observed rates | fitted slope | note |")
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for case in CASES:
        diffs, rates = measure(case)
        lines.append(f"| {GROUPS[case.group]} | {case.label} | {evaluations(case)} | "
                     f"{case.order} | {', '.join(f'{d:.2e}' for d in diffs)} | "
                     f"{', '.join(f'{r:.2f}' for r in rates)} | {fitted(diffs)[0]:.2f} | "
                     f"{case.note} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--doc", type=Path, default=DOC, help="the document to write (default "
                   "docs/elastic.md)")
    p.add_argument("--print", action="store_true", help="print the table, write nothing")
    args = p.parse_args(argv)
    table = render()
    if args.print:
        print(table)
        return 0
    from splitnet.dev.docblocks import write_blocks

    changed = write_blocks(args.doc, "elastic", {"convergence": table})
    print(f"{args.doc}: {'written' if changed else 'unchanged'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
