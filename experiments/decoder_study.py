"""Regenerate the three-field section of docs/theory.md: what order does a decoder layer have?

    python3 experiments/decoder_study.py          # ~1 min on 2 CPU cores

A decoder layer advances ``dx/dt = D(x) + X(x; m) + C(x)``: self-attention D, cross-attention X
to a fixed memory m (the encoder's output), feed-forward C. Every arrangement a user might
build is measured on the random decoder particle system (``splitnet.problems.decoder_system``:
6 particles in R^8, 5 memory particles, float64, seed 0) with exact and Euler sub-flows, on
random matrices (``check_order``), exactly in the free algebra (the conditions on Lyndon words),
and its leading error term (the pairs' Lie brackets) against the measured error. Tables go
between ``<!-- decoder_study:NAME -->`` markers of docs/theory.md; the figure to
docs/figures/decoder_orders.png.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

import splitnet as sn
from splitnet.analyses.convergence import leading_term
from splitnet.analyses.problems import decoder_system
from splitnet.dev.docblocks import write_blocks
from splitnet.order.algebra import lie_defects
from splitnet.plots import plot_convergence
from splitnet.stagelists.stages import pair_defects

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "theory.md"
FIG = ROOT / "docs" / "figures" / "decoder_orders.png"
HS = [0.2, 0.1, 0.05, 0.025]
METHODS = ("exact", "euler", "midpoint")
C, D, X = "convection", "diffusion", "cross"


def arrangements() -> list[tuple[str, str, object]]:
    """(label, what it is, scheme) for every decoder-layer arrangement studied."""
    get = sn.schemes.get
    return [
        ("Transformer decoder", "self, cross, FFN (Vaswani et al.)", get("lie-trotter", (D, X, C))),
        ("Macaron decoder (published)", "FFN/2, self, cross, FFN/2 (the seed)",
         sn.schemes.resolve("c:0.5,d:1,x:1,c:0.5")),
        ("symmetric, cross inside", "FFN/2, self/2, cross, self/2, FFN/2",
         get("strang", (C, D, X))),
        ("symmetric, self inside", "FFN/2, cross/2, self, cross/2, FFN/2",
         get("strang", (C, X, D))),
        ("merged self+cross", "FFN/2, (self + cross), FFN/2: one sum stage",
         sn.schemes.resolve("c:0.5,d+x:1,c:0.5")),
        ("triple jump", "Yoshida's composition of the symmetric step", get("yoshida4", (C, D, X))),
        ("parallel block", "self + cross + FFN in one sum stage (GPT-J style)",
         sn.schemes.resolve("d+x+c:1")),
    ]


def _pairs(scheme) -> str:
    w = {k: v for k, v in pair_defects(scheme.stages).items() if abs(v) > 1e-12}
    letter = {D: "D", X: "X", C: "C"}
    return ", ".join(f"[{letter[a]},{letter[b]}] {v:+g}" for (a, b), v in w.items()) or "none"


def _algebraic_order(scheme) -> str:
    if scheme.is_exact:
        return "exact"
    d = lie_defects(scheme.stages, 6)
    p = next((i for i, x in enumerate(d) if x > 1e-12), len(d))
    return str(p)


def _leading_gap(scheme, fields, x0) -> str:
    """Relative gap between the measured local error / h^2 and the predicted h^2 term."""
    e = leading_term(scheme, x0, fields=fields)
    if float(e.norm()) == 0.0:
        return "0 (second order)"
    h = 0.005
    ref = sn.reference_solution(x0=x0, times=torch.tensor([0.0, h], dtype=torch.float64),
                                fields=fields)[-1]
    err = (ref - scheme.step(x=x0, step_size=h, fields=fields)) / h ** 2
    return f"{float((err - e).norm() / e.norm()):.2%}"


def study() -> dict[str, str]:
    fields, x0 = decoder_system()
    rows = ["| arrangement | stages | local slope: exact | euler | midpoint | order on matrices "
            "(`check_order`) | exact order (Lyndon conditions) | pairs breaking order 2 "
            "(w_ab) | measured vs h² term at h = 0.005 | Euler constant / Transformer's |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    results, consts = [], {}
    items = arrangements()
    for label, what, s in tqdm(items, desc="decoder arrangements", unit="scheme"):
        res = {m: sn.convergence_study(s, x0=x0, step_sizes=HS, method=m, fields=fields)
               for m in METHODS}
        for m in ("exact", "euler"):
            res[m].scheme = label
            if not (s.is_exact and m == "exact"):     # no slope: the exact flow itself
                results.append(res[m])
        consts[label] = float(np.median(res["euler"].errors / np.asarray(HS) ** 2))
        chk = sn.check_order(s.stages)
        measured = "exact flow" if s.is_exact else f"{chk.measured:.2f} ({chk.verdict})"
        slopes = ["exact flow (error at the reference floor)" if s.is_exact and m == "exact"
                  else f"{res[m].order:.2f} ({res[m].expected_order})" for m in METHODS]
        diagram = s.diagram() if len(s.diagram()) < 40 else s.diagram()[:37] + "..."
        rows.append(f"| **{label}**: {what} | `{diagram}` | " + " | ".join(slopes)
                    + f" | {measured} | {_algebraic_order(s)} | {_pairs(s)} | "
                      f"{_leading_gap(s, fields, x0)} | "
                      f"{consts[label] / consts['Transformer decoder']:.2f} |")
    plot_convergence(results, FIG, title="decoder layer, three fields: local error")
    return {"table": "\n".join(rows)}


def main(argv=None) -> int:
    # no options: --help says what runs, anything else is refused (it rewrites docs/)
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    write_blocks(DOC, "decoder_study", study())
    print(f"decoder study written to {DOC.relative_to(ROOT)} and {FIG.relative_to(ROOT)} "
          f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
