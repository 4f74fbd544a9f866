"""Forward + backward time of SplitTransformer against a hand-written nanoGPT-style reference.

Part 1 (the overhead check): ``SplitTransformer(scheme="lie-trotter", weights="shared")`` and a
hand-written pre-LN GPT of the same size (same parameters, same SDPA call, same GELU) are timed
alternately, ``--pairs`` times (the order alternates within each pair so neither always runs on
a warm cache). Reported: median time of each, their ratio, and the median of per-pair ratios.

Part 2 (per scheme): median fwd+bwd time of every scheme (``--schemes``), shared and per-stage,
with parameters, field evaluations per token and training FLOPs per token (splitnet.cost), the
achieved FLOP rate, tokens/s and, when the peak is known (``--peak-tflops`` or a recognised
CUDA card), MFU = achieved / peak.

    python3 benchmarks/bench_layers.py                       # CPU, float32, the docs numbers
    python3 benchmarks/bench_layers.py --device cuda --dtype bfloat16 --compile \
        --d-model 768 --n-heads 12 --n-layers 12 --seq-len 1024 --batch 16

bf16 runs with parameters in bf16 (``model.to(dtype)``), as nanoGPT does under autocast for its
matmuls; the same ``--dtype`` applies to the reference.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import splitnet as sn
from splitnet.cost import describe
from splitnet.models import SplitTransformer
from splitnet.reference import RefGPT

# Dense bf16 peak (no sparsity) of cards we may see, FLOP/s.
PEAK_BF16 = {"H100": 989.4e12, "H200": 989.4e12, "A100": 312e12, "L4": 121e12, "A10": 125e12}


# ---------------------------------------------------------------------------------------------

def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def make_step(model, idx, targets):
    vocab = None

    def step():
        nonlocal vocab
        logits = model(idx)
        vocab = logits.shape[-1]
        loss = F.cross_entropy(logits.reshape(-1, vocab).float(), targets.reshape(-1))
        loss.backward()
        for p in model.parameters():
            p.grad = None
    return step


def time_call(fn, device, reps: int) -> float:
    """Seconds per call, mean over ``reps`` back-to-back calls."""
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    _sync(device)
    return (time.perf_counter() - t0) / reps


def build(kind, args, device, dtype, scheme="lie-trotter", weights="shared"):
    torch.manual_seed(0)
    if kind == "ref":
        m = RefGPT(args.vocab_size, args.d_model, args.n_heads, args.n_layers, args.seq_len)
    else:
        m = SplitTransformer(args.vocab_size, args.d_model, args.n_heads, args.n_layers,
                             scheme=scheme, weights=weights, max_len=args.seq_len)
    m = m.to(device=device, dtype=dtype).train()
    if args.compile:
        m = torch.compile(m, fullgraph=True)
    return m


def peak_flops(args, device) -> float | None:
    if args.peak_tflops:
        return args.peak_tflops * 1e12
    if device.type == "cuda" and args.dtype == "bfloat16":
        name = torch.cuda.get_device_name(device)
        for key, v in PEAK_BF16.items():
            if key in name:
                return v
    return None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", help="cpu | cuda (default cpu)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float64"])
    p.add_argument("--compile", action="store_true", help="torch.compile(fullgraph=True) both")
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--n-heads", type=int, default=4)
    p.add_argument("--n-layers", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--vocab-size", type=int, default=256)
    p.add_argument("--pairs", type=int, default=15, help="interleaved pairs (>= 9; default 15)")
    p.add_argument("--reps", type=int, default=3, help="fwd+bwd calls per timing (default 3)")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls first (default 3)")
    p.add_argument("--schemes", default="all",
                   help="per-scheme rows: comma-separated names, 'all' (registry) or 'none'")
    p.add_argument("--scheme-reps", type=int, default=5, help="timings per scheme row (median)")
    p.add_argument("--peak-tflops", type=float, default=None,
                   help="device peak for MFU (default: known CUDA cards in bf16)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch.set_num_threads (default: torch's choice)")
    p.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = p.parse_args(argv)
    if args.pairs < 1:
        p.error("--pairs must be >= 1")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("bench_layers: --device cuda but torch.cuda.is_available() is False",
              file=sys.stderr)
        return 2
    dtype = getattr(torch, args.dtype)
    ntok = args.batch * args.seq_len
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, args.vocab_size, (args.batch, args.seq_len), generator=g).to(device)
    targets = torch.randint(0, args.vocab_size, (args.batch, args.seq_len), generator=g).to(device)
    from tqdm.auto import tqdm

    info = {"device": str(device), "dtype": args.dtype, "compile": args.compile,
                "torch": torch.__version__, "threads": torch.get_num_threads(),
                "d_model": args.d_model, "n_heads": args.n_heads, "n_layers": args.n_layers,
                "seq_len": args.seq_len, "batch": args.batch, "vocab_size": args.vocab_size}
    print("bench_layers: " + ", ".join(f"{k}={v}" for k, v in info.items()))

    # -- part 1: overhead against the reference -----------------------------------------
    ours, ref = build("ours", args, device, dtype), build("ref", args, device, dtype)
    n_ours = sum(q.numel() for q in ours.parameters())
    n_ref = sum(q.numel() for q in ref.parameters())
    if n_ours != n_ref:
        raise SystemExit(f"size mismatch: ours {n_ours} parameters, reference {n_ref}")
    steps = {"ours": make_step(ours, idx, targets), "ref": make_step(ref, idx, targets)}
    for _ in range(args.warmup):
        steps["ours"](), steps["ref"]()
    t = {"ours": [], "ref": []}
    for i in tqdm(range(args.pairs), desc="interleaved pairs", unit="pair", file=sys.stderr):
        order = ("ours", "ref") if i % 2 == 0 else ("ref", "ours")
        for k in order:
            t[k].append(time_call(steps[k], device, args.reps))
    med = {k: statistics.median(v) for k, v in t.items()}
    pair_ratio = statistics.median(a / b for a, b in zip(t["ours"], t["ref"]))
    ratio = med["ours"] / med["ref"]
    print(f"\nparameters: {n_ours} (both)")
    print(f"fwd+bwd median over {args.pairs} interleaved pairs ({args.reps} calls each):")
    print(f"  SplitTransformer(lie-trotter)  {med['ours'] * 1e3:9.2f} ms")
    print(f"  nanoGPT-style reference        {med['ref'] * 1e3:9.2f} ms")
    print(f"  ratio of medians {ratio:.4f}   median of per-pair ratios {pair_ratio:.4f}   "
          f"(target <= 1.05)")
    results = dict(info, pairs=args.pairs, reps=args.reps, params=n_ours,
                   ours_ms=med["ours"] * 1e3, ref_ms=med["ref"] * 1e3, ratio=ratio,
                   pair_ratio=pair_ratio, ours_all_ms=[x * 1e3 for x in t["ours"]],
                   ref_all_ms=[x * 1e3 for x in t["ref"]], schemes=[])
    del ours, ref, steps

    # -- part 2: every scheme ---------------------------------------------------------------
    names = [] if args.schemes == "none" else (
        sn.schemes.available() if args.schemes == "all"
        else [s.strip() for s in args.schemes.split(",") if s.strip()])
    peak = peak_flops(args, device)
    rows = []
    combos = [(s, w) for s in names for w in ("shared", "per-stage")]
    for s, w in tqdm(combos, desc="schemes", unit="model", file=sys.stderr):
        m = build("ours", args, device, dtype, scheme=s, weights=w)
        step = make_step(m, idx, targets)
        step()
        ts = [time_call(step, device, 1) for _ in range(args.scheme_reps)]
        sec = statistics.median(ts)
        c = describe(s, weights=w, d_model=args.d_model, n_heads=args.n_heads,
                     n_layers=args.n_layers, vocab_size=args.vocab_size, seq_len=args.seq_len)
        rate = c.flops_train * ntok / sec
        rows.append({"scheme": c.scheme, "weights": w, "ms": sec * 1e3, "params": c.params,
                         "evals": c.evals, "train_gflop_tok": c.flops_train / 1e9,
                         "tokens_s": ntok / sec, "tflops": rate / 1e12,
                         "mfu": None if peak is None else rate / peak})
        del m, step
    if rows:
        print(f"\nper scheme, fwd+bwd median of {args.scheme_reps} ({ntok} tokens a call):")
        print(f"{'scheme':<14}{'weights':<11}{'ms':>10}{'params':>11}{'evals/tok':>10}"
              f"{'GFLOP/tok':>11}{'tokens/s':>11}{'TFLOP/s':>9}{'MFU':>7}")
        for r in rows:
            mfu = "-" if r["mfu"] is None else f"{100 * r['mfu']:.1f}%"
            print(f"{r['scheme']:<14}{r['weights']:<11}{r['ms']:10.1f}{r['params']:11d}"
                  f"{r['evals']:10d}{r['train_gflop_tok']:11.4f}{r['tokens_s']:11.0f}"
                  f"{r['tflops']:9.3f}{mfu:>7}")
    results["schemes"] = rows
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if math.isfinite(ratio) else 1


if __name__ == "__main__":
    sys.exit(main())
