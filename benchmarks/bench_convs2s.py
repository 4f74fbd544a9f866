"""Generation speed of ConvS2S against the Transformer at equal parameters (issue 47; the seed's
table 3: translation speed at beam 1 and 5).

The models are the translation study's (``experiments/translation_study.py``): width 128, a
BPE vocabulary of 4,000, the Transformer 2 + 2 layers, ConvS2S 4 + 4 (kernel 3, multi-step
attention, no feed-forward; 0.4 % fewer parameters) and ConvS2S's fields under Strang in the
decoder (``d/2 x d/2``). Each decodes ``--rows`` sources of ``--src-len`` tokens to exactly
``--new-tokens`` tokens (eos masked, so every model does the same work whatever its weights),
with its caches (self-attention's keys and values; the conv's window), at beam 1 and 5, from
its own initialisation. Timed in ``--runs`` interleaved rounds (the models' order rotates
each round), one thread; reported: the median tokens/s of each and the ratio to the
Transformer's.

    python3 benchmarks/bench_convs2s.py             # the docs numbers, ~2 min
    python3 benchmarks/bench_convs2s.py --quick     # a smoke run
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from splitnet.cli._args import csv_positive_ints, positive_int
from splitnet.nets.seq2seq import SplitSeq2Seq

CONVS2S = {"diffusion_field": "conv", "convection_field": "none", "cross_field": "multistep",
           "init": "convs2s", "norm": "none", "conv_kernel": 3}


def models(a) -> dict[str, SplitSeq2Seq]:
    base = {"pad_id": 0, "bos_id": 1, "eos_id": 2, "max_len": max(a.src_len, a.new_tokens) + 1,
            "tie_head": True}
    L = a.layers
    specs = {"Transformer": {"n_encoder_layers": L, "n_decoder_layers": L,
                             "weights": "per-stage"},
             "ConvS2S": {**CONVS2S, "n_encoder_layers": 2 * L, "n_decoder_layers": 2 * L},
             "ConvS2S-Strang": {**CONVS2S, "n_encoder_layers": 2 * L,
                                "n_decoder_layers": 2 * L, "decoder_scheme": "strang"}}
    out = {}
    for name, kw in specs.items():
        torch.manual_seed(0)
        m = SplitSeq2Seq(a.vocab, a.vocab, a.d_model, a.n_heads, **base, **kw).eval()
        eos = torch.tensor([m.config.eos_id])     # never chosen: every row runs to the end
        m.head.register_forward_hook(lambda mod, i, o, eos=eos: o.index_fill(-1, eos, -1e30))
        out[name] = m
    return out


def measure(a) -> dict:
    ms = models(a)
    g = torch.Generator().manual_seed(1)
    src = torch.randint(3, a.vocab, (a.rows, a.src_len), generator=g)
    times = {(n, b): [] for n in ms for b in a.beams}
    names = list(ms)
    for r in range(a.runs + 1):                     # round 0 warms up, then is dropped
        for n in names[r % len(names):] + names[:r % len(names)]:
            for b in a.beams:
                t0 = time.perf_counter()
                ms[n].generate(src, a.new_tokens, beam=b)
                if r:
                    times[n, b].append(time.perf_counter() - t0)
    out = {"params": {n: m.n_params() for n, m in ms.items()}}
    for (n, b), ts in times.items():
        out[n, b] = a.rows * a.new_tokens / statistics.median(ts)
    return out


def table(a, r: dict) -> str:
    lines = [f"generation tokens/s, {a.rows} sources of {a.src_len} tokens, {a.new_tokens} new "
             f"tokens each, one thread, median of {a.runs} interleaved rounds",
             "| model | parameters | " + " | ".join(f"beam {b} tokens/s | / Transformer"
                                                   for b in a.beams) + " |",
             "|---|---:|" + "---:|---:|" * len(a.beams)]
    for n, p in r["params"].items():
        cells = [f"{r[n, b]:.0f} | {r[n, b] / r['Transformer', b]:.2f}" for b in a.beams]
        lines.append(f"| {n} | {p:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--d-model", type=positive_int, default=128)
    p.add_argument("--n-heads", type=positive_int, default=4)
    p.add_argument("--layers", type=positive_int, default=2,
                   help="the Transformer's (ConvS2S: twice)")
    p.add_argument("--vocab", type=positive_int, default=4000)
    p.add_argument("--rows", type=positive_int, default=16)
    p.add_argument("--src-len", type=positive_int, default=24)
    p.add_argument("--new-tokens", type=positive_int, default=32)
    p.add_argument("--beams", default="1,5", type=csv_positive_ints,
                   help="beam widths, comma-separated (default 1,5)")
    p.add_argument("--runs", type=positive_int, default=5)
    p.add_argument("--threads", type=positive_int, default=1)
    p.add_argument("--quick", action="store_true", help="small sizes, one round")
    a = p.parse_args(argv)
    if a.quick:
        a.d_model, a.vocab, a.rows, a.new_tokens, a.runs = 32, 300, 4, 8, 1
    torch.set_num_threads(a.threads)
    print(table(a, measure(a)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
