"""``splitnet describe``: parameters, field evaluations and FLOPs per token (splitnet.cost)."""

from __future__ import annotations

import sys

from ..config import WEIGHTS, SplitConfig
from ._args import SCHEME_LIST_HELP, add_config_options, given_options, positive_int, scheme_list

RANK = 30   # place in `splitnet --help`
HELP = "parameters, field evaluations and FLOPs per token of a model"
# describe's own defaults: a mid-size model (see splitnet.cost.REFERENCE_SIZE)
SIZE = {"d_model": 512, "n_heads": 8, "n_layers": 6}


def configure(p) -> None:
    p.add_argument("--scheme", type=scheme_list, action="extend", default=None,
                   help=f"schemes: {SCHEME_LIST_HELP}; or 'all' for the registry (default "
                        f"lie-trotter)")
    p.add_argument("--weights", choices=[*WEIGHTS, "both"], default="both",
                   help="weights mode (default both)")
    g = p.add_argument_group("model (splitnet.models.SplitConfig)")
    add_config_options(g, SplitConfig, defaults=SIZE, skip=("scheme", "weights"))
    p.add_argument("--vocab-size", type=positive_int, default=256,
                   help="vocabulary (default 256, bytes)")
    p.add_argument("--seq-len", type=positive_int, default=256,
                   help="tokens per sequence (default 256)")
    p.add_argument("--markdown", action="store_true", help="print a markdown table")
    p.add_argument("--json", action="store_true", help="print one JSON object per row")


def run(args) -> int:
    import json

    from .. import cost
    from ..schemes import available

    given = args.scheme or ["lie-trotter"]
    names = available() if given == ["all"] else given
    weights = WEIGHTS if args.weights == "both" else (args.weights,)
    size = {**SIZE, **given_options(args, SplitConfig, skip=("scheme", "weights"))}
    size.update(vocab_size=args.vocab_size, max_len=args.seq_len)
    for n in names:                     # every problem before any work
        SplitConfig(**size, scheme=n)
    rows = cost.table(names, weights=weights, seq_len=args.seq_len, **size)
    if args.json:
        for r in rows:
            print(json.dumps(r.as_dict()))
        return 0
    r0 = rows[0]
    kinds = ", ".join(f"{f} = {k}" for f, k in r0.kinds.items())
    print(f"d_model={r0.d_model} n_heads={r0.n_heads} n_layers={r0.n_layers} d_ff={r0.d_ff} "
          f"vocab={r0.vocab_size} seq_len={r0.seq_len} method={r0.method}; fields: {kinds}; "
          f"FLOPs = matmul FLOPs per token in closed form (FlopCounterMode's convention, dense "
          f"attention)")
    print(cost.format_table(rows, markdown=args.markdown))
    print()
    for s in dict.fromkeys(r.scheme for r in rows):
        r = next(x for x in rows if x.scheme == s)
        diag = r.pattern if len(r.pattern) <= 90 else r.pattern[:87] + "..."
        print(f"{s:<14} {diag}")
    sys.stdout.flush()
    return 0


__all__ = ["HELP", "RANK", "SIZE", "configure", "run"]
