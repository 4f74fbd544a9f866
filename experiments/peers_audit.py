"""The audit of published Runge–Kutta / predictor–corrector blocks -> the tables of docs/peers.md

    python experiments/peers_audit.py          # ~30 s on 2 busy cores; rewrites the tables

Every block of :data:`splitnet.analyses.blocks.BLOCKS` measured four ways: its local error on the
built-in particle system (random attention + feed-forward fields, 6 particles in R^8, float64)
against the exact flow of D + C over h in {0.2, 0.1, 0.05, 0.025}, with the layer's sub-layers
as Euler sub-steps (the network as built) and as exact sub-flows; and on random non-commuting
6x6 matrices with Euler and exact linear sub-flows at adaptive step sizes. The multistep
corrector has no one-step error: its global error at t = 1 after n = 4..32 layers instead.
The prose of docs/peers.md is hand-written; only the text between the markers is generated.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import splitnet as sn
from splitnet import blocks as B

DOC = Path(__file__).resolve().parents[1] / "docs" / "peers.md"
START, END = "<!-- BEGIN AUDIT TABLE -->", "<!-- END AUDIT TABLE -->"


def _fmt(m: B.Measured) -> str:
    if not math.isfinite(m.tail):
        return "inconsistent (error does not shrink)" if m.errors.size and \
            float(m.errors.min()) > 1e-6 else "–"
    if m.tail < 0.5:
        return f"inconsistent ({m.tail:.2f})"
    return f"{m.tail:.2f}"


def weights(block) -> str:
    """The stage weights as the block uses them and their sum (consistency needs 1)."""
    if isinstance(block, B.RKBlock):
        if block.gate is not None:
            return f"g, 1 − g (gate bias {block.gate.bias:g}); sum 1"
        if block.literal:
            return "½, ½ on L = y + F; identity coefficient 5/2"
        return f"{', '.join(f'{b:.4g}' for b in block.b)}; sum {sum(block.b):.4g}"
    if isinstance(block, B.PECE):
        return "predictor Heun, corrector ½, ½; sum 1"
    return "states averaged over all layers"


def measure(name: str, block, fields, x0) -> list[str]:
    t0 = time.perf_counter()
    if isinstance(block, B.HistoryCorrector):
        g = B.global_order(block, fields, x0, method="euler")
        errs = ", ".join(f"{e:.2g}" for e in g.errors)
        cells = [f"global error at t = 1, n = 4..32: {errs} (slope {g.order:.2f})", "–", "–", "–"]
    else:
        cells = [_fmt(B.local_order(block, fields, x0, method=m)) for m in ("euler", "exact")]
        cells += [_fmt(B.matrix_order(block, method=m)) for m in ("euler", "exact")]
    print(f"  {name}: {cells} ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    return cells


def table() -> str:
    F, G, x0 = sn.particle_system()
    fields = {"diffusion": F, "convection": G}
    head = ("| block | layer F | stage weights | claimed | order: particles, Euler sub-steps | "
            "particles, exact sub-flows | matrices, Euler sub-steps | matrices, exact "
            "sub-flows |")
    lines = [head, "|---|---|---|---|---:|---:|---:|---:|"]
    for name, block in B.BLOCKS.items():
        cells = measure(name, block, fields, x0)
        lines.append(f"| `{name}`: {block.label} | {block.inner} | {weights(block)} | "
                     f"{block.claimed} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    # no options: --help says what runs, anything else is refused (it rewrites docs/)
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    text = DOC.read_text()
    a, b = text.index(START) + len(START), text.index(END)
    DOC.write_text(text[:a] + "\n" + table() + "\n" + text[b:])
    print(f"wrote the audit table of {DOC}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
