"""Reversible against plain: the time of a training step and the bytes it saves for backward.

For each scheme, ``SplitTransformer(scheme, reversible=True)`` and the same network with
ordinary residual layers (the same parameters, copied) run forward + cross-entropy + backward
on the same batch, alternating which goes first, ``--pairs`` times; reported: the median time
of each, the median of per-pair ratios reversible / plain (theory: about 4/3 -- backward
recomputes each field once more, a forward being about a third of a step), and the bytes
autograd saves for backward (:func:`splitnet.reversible.saved_bytes`, parameters excluded).

    python3 benchmarks/bench_reversible.py                   # the docs numbers (CPU)
    python3 benchmarks/bench_reversible.py --quick           # a smoke run
    python3 benchmarks/bench_reversible.py --device cuda --d-model 768 --n-heads 12 \\
        --n-layers 12 --seq-len 1024 --batch 8               # on a GPU (not run here)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from splitnet.nets.models import SplitTransformer
from splitnet.reversible import saved_bytes


def _pair(a, scheme, device, n_layers=None, **extra):
    """The plain network and the reversible one (``extra``: its options) with the same
    parameters, seed 0, in training mode (``benchmarks/gpu_reversible.py`` uses it too)."""
    torch.manual_seed(0)
    kw = {"vocab_size": a.vocab, "d_model": a.d_model, "n_heads": a.n_heads,
          "n_layers": a.n_layers if n_layers is None else n_layers, "scheme": scheme,
          "max_len": a.seq_len}
    plain = SplitTransformer(**kw).to(device)
    rev = SplitTransformer(**kw, reversible=True, **extra).to(device)
    rev.load_state_dict(plain.state_dict())
    return plain.train(), rev.train()


def _step(model, idx, device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    logits = model(idx)
    F.cross_entropy(logits.flatten(0, 1), idx.flatten()).backward()
    for p in model.parameters():
        p.grad = None
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - t0


def row(a, scheme, device) -> dict:
    plain, rev = _pair(a, scheme, device)
    idx = torch.randint(0, a.vocab, (a.batch, a.seq_len), device=device,
                        generator=torch.Generator(device).manual_seed(1))
    for _ in range(a.warmup):
        _step(plain, idx, device)
        _step(rev, idx, device)
    tp, tr = [], []
    for i in range(a.pairs):
        order = ((plain, tp), (rev, tr)) if i % 2 == 0 else ((rev, tr), (plain, tp))
        for m, acc in order:
            acc.append(_step(m, idx, device))
    return {"scheme": scheme, "plain_ms": 1e3 * statistics.median(tp),
            "rev_ms": 1e3 * statistics.median(tr),
            "ratio": statistics.median(r / p for p, r in zip(tp, tr)),
            "plain_saved": saved_bytes(plain, idx), "rev_saved": saved_bytes(rev, idx)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--schemes", default="lie-trotter,strang,yoshida4")
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--n-heads", type=int, default=4)
    p.add_argument("--n-layers", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--pairs", type=int, default=11)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    a = p.parse_args(argv)
    if a.quick:
        a.d_model, a.n_layers, a.seq_len, a.batch, a.pairs, a.warmup = 16, 2, 16, 2, 1, 0
    torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    print(f"reversible vs plain, forward + backward (d_model {a.d_model}, {a.n_heads} heads, "
          f"{a.n_layers} layers, batch {a.batch} x {a.seq_len}, {device}, {a.threads} "
          f"thread(s), {a.pairs} interleaved pairs, torch {torch.__version__})")
    print("| scheme | plain ms | reversible ms | reversible / plain (median of pairs) | "
          "saved for backward, plain | reversible |")
    print("|---|---:|---:|---:|---:|---:|")
    for s in a.schemes.split(","):
        r = row(a, s, device)
        print(f"| {s} | {r['plain_ms']:.1f} | {r['rev_ms']:.1f} | **{r['ratio']:.2f}** | "
              f"{r['plain_saved'] / 2**20:.1f} MiB | {r['rev_saved'] / 2**20:.2f} MiB |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
