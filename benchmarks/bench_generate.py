"""Generation speed with and without the key/value cache, side by side in one run.

For each scheme (``name`` or ``name:per-stage``; a sublayer pattern works too) a randomly
initialised ``SplitTransformer`` continues a random prompt greedily
(``model.generate(idx, N, temperature=0)``), once with the cache (``use_cache=True``) and once
recomputing the window per token (``use_cache=False``), alternately (the order swaps every
repetition); reported: median tokens/s of each over ``--reps`` repetitions, their ratio, and
whether both produced the same tokens. The prompt plus the new tokens fit the context (no
sliding), which is where the cache applies.

    python3 benchmarks/bench_generate.py                    # CPU, float32, the docs numbers
    python3 benchmarks/bench_generate.py --device cuda --d-model 768 --n-heads 12 \
        --n-layers 12 --max-len 1024 --prompt 256 --new-tokens 512
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

from splitnet.cli._args import nonnegative_int, positive_int
from splitnet.nets.generation import GenerationCache
from splitnet.nets.models import SplitTransformer

DEFAULT_SCHEMES = "lie-trotter,strang:per-stage,yoshida4,sssfsfff:per-stage"


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def parse_schemes(text: str) -> list[tuple[str, str]]:
    out = []
    for item in (s.strip() for s in text.split(",") if s.strip()):
        name, _, weights = item.partition(":")
        weights = weights or "shared"
        if weights not in ("shared", "per-stage"):
            raise SystemExit(f"bench_generate: {item!r}: weights must be shared or per-stage")
        out.append((name, weights))
    if not out:
        raise SystemExit("bench_generate: --schemes is empty")
    return out


def timed(model, idx, n, use_cache, device) -> tuple[float, torch.Tensor]:
    """Seconds for ``n`` greedy tokens, and the output."""
    _sync(device)
    t0 = time.perf_counter()
    out = model.generate(idx, n, temperature=0, use_cache=use_cache)
    _sync(device)
    return time.perf_counter() - t0, out


def bench_one(args, scheme, weights, device, dtype, idx) -> dict:
    torch.manual_seed(0)
    model = SplitTransformer(args.vocab_size, args.d_model, args.n_heads, args.n_layers,
                             scheme=scheme, weights=weights, max_len=args.max_len,
                             method=args.method).to(device=device, dtype=dtype).eval()
    n_tok = idx.shape[0] * args.new_tokens
    times = {True: [], False: []}
    outs = {}
    for _ in range(args.warmup):
        for c in (True, False):
            timed(model, idx, min(args.new_tokens, 4), c, device)
    for r in range(args.reps):
        for c in ((True, False) if r % 2 == 0 else (False, True)):
            dt, outs[c] = timed(model, idx, args.new_tokens, c, device)
            times[c].append(dt)
    cached, uncached = (n_tok / statistics.median(times[c]) for c in (True, False))
    return {"scheme": scheme, "weights": weights, "method": args.method,
            "params": model.n_params(),
            "attention_evals_per_token": GenerationCache(model, 1).n_caches(),
            "cached_tok_s": cached, "uncached_tok_s": uncached, "speedup": cached / uncached,
            "cached_all_s": times[True], "uncached_all_s": times[False],
            "same_tokens": bool(torch.equal(outs[True], outs[False]))}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", help="cpu | cuda (default cpu)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float64"])
    p.add_argument("--schemes", default=DEFAULT_SCHEMES,
                   help=f"comma-separated name[:shared|per-stage] (default {DEFAULT_SCHEMES})")
    p.add_argument("--method", default="euler", help="sub-flow method (default euler)")
    p.add_argument("--d-model", type=positive_int, default=256)
    p.add_argument("--n-heads", type=positive_int, default=4)
    p.add_argument("--n-layers", type=positive_int, default=4)
    p.add_argument("--vocab-size", type=positive_int, default=256)
    p.add_argument("--max-len", type=positive_int, default=256, help="context (default 256)")
    p.add_argument("--prompt", type=positive_int, default=64, help="prompt tokens (default 64)")
    p.add_argument("--new-tokens", type=positive_int, default=128,
                   help="tokens generated (default 128)")
    p.add_argument("--batch", type=positive_int, default=1, help="sequences at once (default 1)")
    p.add_argument("--reps", type=positive_int, default=5,
                   help="timed repetitions, median (default 5)")
    p.add_argument("--warmup", type=nonnegative_int, default=1,
                   help="untimed short runs first (default 1)")
    p.add_argument("--threads", type=positive_int, default=None, help="torch.set_num_threads")
    p.add_argument("--json", default=None, help="also write the results to this JSON file")
    return p


def main(argv=None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    if min(args.prompt, args.new_tokens, args.reps, args.batch) < 1:
        p.error("--prompt, --new-tokens, --reps and --batch must be >= 1")
    if args.prompt + args.new_tokens > args.max_len:
        p.error("--prompt + --new-tokens must fit --max-len (the cache's regime)")
    schemes = parse_schemes(args.schemes)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("bench_generate: --device cuda but no CUDA device is available", file=sys.stderr)
        return 2
    dtype = getattr(torch, args.dtype)
    idx = torch.randint(0, args.vocab_size, (args.batch, args.prompt),
                        generator=torch.Generator().manual_seed(0)).to(device)
    info = {"device": str(device), "dtype": args.dtype, "torch": torch.__version__,
            "threads": torch.get_num_threads(), "d_model": args.d_model,
            "n_heads": args.n_heads, "n_layers": args.n_layers, "max_len": args.max_len,
            "prompt": args.prompt, "new_tokens": args.new_tokens, "batch": args.batch,
            "reps": args.reps, "method": args.method}
    print("bench_generate: " + ", ".join(f"{k}={v}" for k, v in info.items()))
    from tqdm.auto import tqdm

    rows = [bench_one(args, s, w, device, dtype, idx)
            for s, w in tqdm(schemes, desc="schemes", file=sys.stderr)]
    print(f"{'scheme':<14}{'weights':<11}{'params':>9}{'attn/tok':>9}{'cached tok/s':>14}"
          f"{'uncached tok/s':>16}{'speed-up':>10}  same tokens")
    for r in rows:
        print(f"{r['scheme']:<14}{r['weights']:<11}{r['params']:>9}"
              f"{r['attention_evals_per_token']:>9}{r['cached_tok_s']:>14.1f}"
              f"{r['uncached_tok_s']:>16.1f}{r['speedup']:>9.2f}x  {r['same_tokens']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**info, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
