"""The cost table of docs/networks.md: the seven core schemes, shared and per-stage weights, at
d_model = 512 (8 heads, 6 layers, d_ff = 2048, vocabulary 256, 256 tokens).

    python3 experiments/cost_table.py > /tmp/cost.md      # closed forms: instant; the rows of
    splitnet describe --scheme all --markdown             # for these seven (`all`: the zoo too)
"""

from __future__ import annotations

import sys

from splitnet import cost
from splitnet.schemes import available


def main() -> int:
    rows = cost.table(schemes=available("core"), d_model=512, n_heads=8,
                      n_layers=6, vocab_size=256, seq_len=256)
    print("d_model 512, 8 heads, 6 layers, d_ff 2048, vocabulary 256 (tied head), 256 tokens, "
          "Euler sub-layers, self-attention and feed-forward fields. FLOPs: matmul FLOPs per token "
          "in closed form (splitnet.kinds; FlopCounterMode's convention, checked against it by "
          "tests/test_cost.py), causal attention counted dense; train = forward + backward = 3 x "
          "forward. `fwd x`: forward FLOPs relative to lie-trotter with the same weights "
          "mode.\n")
    print(cost.format_table(rows, markdown=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
