"""The cost table of docs/networks.md: the seven core schemes, shared and per-stage weights, at
d_model = 512 (8 heads, 6 layers, d_ff = 2048, vocabulary 256, 256 tokens).

    python3 experiments/cost_table.py            # closed forms: instant; prints the table
    python3 experiments/cost_table.py --write    # into docs/networks.md (regen costs)
    splitnet describe --schemes all --markdown    # the rows for these seven (`all`: the zoo too)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from splitnet import cost
from splitnet.integrators.schemes import available

DOC = Path(__file__).resolve().parents[1] / "docs" / "networks.md"
START, END = "<!-- BEGIN GENERATED cost_table -->", "<!-- END GENERATED cost_table -->"


def table() -> str:
    rows = cost.table(schemes=available("core"), d_model=512, n_heads=8,
                      n_layers=6, vocab_size=256, seq_len=256)
    return ("d_model 512, 8 heads, 6 layers, d_ff 2048, vocabulary 256 (tied head), 256 tokens, "
            "Euler sub-layers, self-attention and feed-forward fields. FLOPs: matmul FLOPs per "
            "token in closed form (splitnet.kinds; FlopCounterMode's convention, checked against "
            "it by tests/test_cost.py), causal attention counted dense; train = forward + "
            "backward = 3 x forward. `fwd x`: forward FLOPs relative to lie-trotter with the same "
            "weights mode.\n\n"
            + cost.format_table(rows, markdown=True))


def write(body: str, doc: Path = DOC) -> None:
    """Replace what lies between the markers of ``doc`` with ``body`` (unchanged: not
    rewritten)."""
    text = doc.read_text()
    if START not in text or END not in text:
        raise SystemExit(f"{doc} has no {START} ... {END} block")
    a, b = text.index(START) + len(START), text.index(END)
    new = text[:a] + "\n" + body.strip() + "\n" + text[b:]
    if new != text:
        doc.write_text(new)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true",
                    help=f"write the table into {DOC.relative_to(DOC.parents[1])} instead of "
                         f"printing it")
    args = ap.parse_args(argv)
    body = table()
    if args.write:
        write(body)
        print(f"wrote the cost table of {DOC.relative_to(DOC.parents[1])}", file=sys.stderr)
    else:
        print(body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
