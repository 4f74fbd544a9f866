"""Forward + backward time of SplitTransformer against a hand-written nanoGPT-style reference.

Part 1 (the overhead check): ``SplitTransformer(scheme="lie-trotter", weights="shared")`` and the
nanoGPT-style GPT of the same size (``splitnet.nets.reference.RefGPT``: same parameters, same SDPA
call, same GELU) are timed alternately, ``--pairs`` times (the order alternates within each pair
so neither always runs on a warm cache), with the same speed levers applied to both. Reported:
median time of each, their ratio, the median of per-pair ratios, tokens/s, MFU and compile
seconds.

Part 2 (per scheme): median step time of every scheme (``--schemes``), shared and per-stage,
with parameters, field evaluations per token and training FLOPs per token (splitnet.nets.cost), the
achieved FLOP rate, tokens/s, compile seconds and, when the peak is known (``--peak-tflops`` or a
recognised CUDA card), MFU = achieved / peak. On a CUDA out-of-memory error the batch is halved
(the row says which batch it ran).

The levers (each a named option; the defaults are the plain step)::

    --compile                    torch.compile (default scope: model+loss)
    --compile-scope model        the model compiled, the loss eager (the float32 logits outside)
                    model+loss   model and cross-entropy as one graph (fullgraph)
                    regional     each distinct field module once (reference: each block), then
                                 head + loss: compile time independent of the stage count
    --compile-mode MODE          default | reduce-overhead | max-autotune (CUDA graphs) |
                                 max-autotune-no-cudagraphs
    --loss plain|chunked         chunked: linear + cross-entropy per chunk of --loss-chunk rows,
                                 never the full float32 logits (splitnet.tasks.losses)
    --sdpa BACKEND               auto | flash | efficient | cudnn | math
    --optimizer none|fused|foreach|for-loop   an AdamW step inside the timed step
    --precision params           parameters stored in --dtype (bf16 weights, no master copy)
                autocast         float32 parameters, autocast to --dtype
                master           --dtype copy for forward/backward, AdamW on float32 masters
    --batch N                    the micro-batch size

    python3 benchmarks/bench_layers.py                       # CPU, float32, the docs numbers
    python3 benchmarks/bench_layers.py --device cuda --dtype bfloat16 --compile \\
        --d-model 768 --n-heads 12 --n-layers 12 --seq-len 1024 --batch 16 --vocab-size 50304

Compile seconds: the first call's time minus the median of the timed calls (tracing and code
generation of forward and backward). Inductor's on-disk caches are off unless
``--compile-cache``, and dynamo is reset before each model, so each figure is a cold compile.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import sys
import time
from contextlib import nullcontext

import torch

import splitnet as sn
from splitnet import accel
from splitnet.cli._args import nonnegative_int, positive_int
from splitnet.configs.config import ADAMW_IMPLS, COMPILE_MODES, LOSSES, SDPA_BACKENDS
from splitnet.configs.options import WEIGHTS
from splitnet.nets.cost import describe
from splitnet.nets.models import SplitTransformer
from splitnet.nets.reference import RefGPT
from splitnet.tasks.losses import LMLoss, plain_cross_entropy

# Dense bf16 peak (no sparsity) of cards we may see, FLOP/s.
PEAK_BF16 = {"H100": 989.4e12, "H200": 989.4e12, "A100": 312e12, "L4": 121e12, "A10": 125e12}
SCOPES = ("model", "model+loss", "regional")
PRECISIONS = ("params", "autocast", "master")
LEVERS = ("compile", "compile_scope", "compile_mode", "loss", "loss_chunk", "sdpa", "optimizer",
          "precision")


# ---------------------------------------------------------------------------------------------

def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_call(fn, device, reps: int) -> float:
    """Seconds per call, mean over ``reps`` back-to-back calls."""
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    _sync(device)
    return (time.perf_counter() - t0) / reps


def build(kind, args, device, scheme="lie-trotter", weights="shared"):
    """The model with its stored parameter dtype: ``--dtype`` under ``--precision params``,
    float32 (the master copy) otherwise."""
    torch.manual_seed(0)
    if kind == "ref":
        m = RefGPT(args.vocab_size, args.d_model, args.n_heads, args.n_layers, args.seq_len)
    else:
        m = SplitTransformer(args.vocab_size, args.d_model, args.n_heads, args.n_layers,
                             scheme=scheme, weights=weights, max_len=args.seq_len)
    stored = getattr(torch, args.dtype) if args.precision == "params" else torch.float32
    return m.to(device=device, dtype=stored).train()


def _regions(model):
    """What regional compilation compiles: our distinct field modules; the reference's blocks
    (its natural repeated unit)."""
    return accel.field_regions(model) if hasattr(model, "layers") else list(model.h)


def _loss_fn(compute, args):
    """(idx, targets) -> loss, compiled as ``--compile-scope`` says."""
    mode = accel.compile_kwargs(args.compile_mode)
    lm = LMLoss(compute, args.loss, args.loss_chunk)
    if not args.compile:
        return lm
    if args.compile_scope == "model":
        compiled = torch.compile(compute, fullgraph=True, **mode)
        return lambda idx, y: plain_cross_entropy(compiled(idx), y)
    if args.compile_scope == "regional":
        accel.compile_regions(_regions(compute), args.compile_mode)
        lm.head_fn = torch.compile(lm.head_loss, fullgraph=True, dynamic=False, **mode)
        return lm
    return torch.compile(lm, fullgraph=True, **mode)


def make_step(model, args, idx, targets):
    """One timed training step with the levers of ``args``: forward, loss, backward, and the
    AdamW step when ``--optimizer`` is not none (else the gradients are dropped)."""
    dtype = getattr(torch, args.dtype)
    opt, compute = None, model
    if args.optimizer != "none":
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=1e-5, weight_decay=0.1,
                                **accel.adamw_kwargs(args.optimizer, idx.device))
    if args.precision == "master":
        compute = accel.MasterWeights(model, dtype, opt).copy
    fn = _loss_fn(compute, args)
    amp = (torch.autocast(idx.device.type, dtype=dtype) if args.precision == "autocast"
           else nullcontext())
    params = list(compute.parameters())

    def step():
        if args.compile:
            accel.mark_step(args.compile_mode)
        with accel.sdpa_backend(args.sdpa):
            with amp:
                loss = fn(idx, targets)
            loss.backward()
        if opt is not None:
            opt.step()
            opt.zero_grad(set_to_none=True)
        else:
            for p in params:
                p.grad = None
    return step


def peak_flops(args, device) -> float | None:
    if args.peak_tflops:
        return args.peak_tflops * 1e12
    if device.type == "cuda" and args.dtype == "bfloat16":
        name = torch.cuda.get_device_name(device)
        for key, v in PEAK_BF16.items():
            if key in name:
                return v
    return None


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", help="cpu | cuda (default cpu)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float64"])
    p.add_argument("--compile", action="store_true", help="torch.compile both (see the scope)")
    p.add_argument("--compile-scope", default="model+loss", choices=SCOPES)
    p.add_argument("--compile-mode", default="default", choices=COMPILE_MODES)
    p.add_argument("--compile-cache", action="store_true",
                   help="keep inductor's on-disk caches (faster start; compile seconds are then "
                        "warm, not cold)")
    p.add_argument("--loss", default="plain", choices=LOSSES)
    p.add_argument("--loss-chunk", type=positive_int, default=4096,
                   help="rows per chunk (--loss chunked)")
    p.add_argument("--sdpa", default="auto", choices=SDPA_BACKENDS)
    p.add_argument("--optimizer", default="none", choices=("none", *ADAMW_IMPLS[1:]),
                   help="AdamW step in the timed step, by implementation (default none)")
    p.add_argument("--precision", default="params", choices=PRECISIONS)
    p.add_argument("--d-model", type=positive_int, default=256)
    p.add_argument("--n-heads", type=positive_int, default=4)
    p.add_argument("--n-layers", type=positive_int, default=4)
    p.add_argument("--seq-len", type=positive_int, default=128)
    p.add_argument("--batch", type=positive_int, default=8)
    p.add_argument("--vocab-size", type=positive_int, default=256)
    p.add_argument("--pairs", type=nonnegative_int, default=15,
                   help="interleaved pairs (>= 9 for a ratio worth quoting; default 15; 0: no "
                        "comparison with the reference, the per-scheme rows only)")
    p.add_argument("--reps", type=positive_int, default=3,
                   help="fwd+bwd calls per timing (default 3)")
    p.add_argument("--warmup", type=nonnegative_int, default=3,
                   help="untimed calls first (default 3)")
    p.add_argument("--schemes", default="core",
                   help="per-scheme rows: comma-separated names, 'core' (the seven of the "
                        "contract, default), 'all' (every general method of the registry) or "
                        "'none'")
    p.add_argument("--weights", default="shared,per-stage",
                   help="weight layouts of the per-scheme rows (default shared,per-stage)")
    p.add_argument("--scheme-reps", type=positive_int, default=5,
                   help="timings per scheme row (median)")
    p.add_argument("--peak-tflops", type=float, default=None,
                   help="device peak for MFU (default: known CUDA cards in bf16)")
    p.add_argument("--threads", type=positive_int, default=None,
                   help="torch.set_num_threads (default: torch's choice)")
    p.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = p.parse_args(argv)
    if args.schemes not in ("none", "core", "all"):
        for s in (x.strip() for x in args.schemes.split(",") if x.strip()):
            try:
                sn.schemes.resolve(s)
            except ValueError as e:
                p.error(f"--schemes: {e}")
    bad = [w for w in (x.strip() for x in args.weights.split(",")) if w and w not in WEIGHTS]
    if bad:
        p.error(f"--weights: unknown layout {bad[0]!r}; the layouts are {', '.join(WEIGHTS)}")
    if args.precision == "master" and args.optimizer == "none":
        p.error("--precision master needs an --optimizer (the master copy is what it updates)")
    if args.precision != "params" and args.dtype == "float32":
        p.error(f"--precision {args.precision} needs a lower --dtype (bfloat16)")
    if args.compile and args.compile_scope == "model" and args.loss != "plain":
        p.error("--compile-scope model compiles the model alone: use --loss plain")
    return args


def _batch(args, device, batch):
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, args.vocab_size, (batch, args.seq_len), generator=g).to(device)
    targets = torch.randint(0, args.vocab_size, (batch, args.seq_len), generator=g).to(device)
    return idx, targets


def _lt_flops(args) -> float:
    return describe("lie-trotter", weights="shared", d_model=args.d_model, n_heads=args.n_heads,
                    n_layers=args.n_layers, vocab_size=args.vocab_size,
                    seq_len=args.seq_len).flops_train


def part1(args, device, info, peak):
    """Ours against the reference, interleaved, every lever applied to both."""
    from tqdm.auto import tqdm

    idx, targets = _batch(args, device, args.batch)
    models = {"ours": build("ours", args, device), "ref": build("ref", args, device)}
    n = {k: sum(q.numel() for q in m.parameters()) for k, m in models.items()}
    if n["ours"] != n["ref"]:
        raise SystemExit(f"size mismatch: ours {n['ours']} parameters, reference {n['ref']}")
    steps = {k: make_step(m, args, idx, targets) for k, m in models.items()}
    first = {k: time_call(s, device, 1) for k, s in steps.items()}   # compiles
    for _ in range(args.warmup - 1):
        steps["ours"](), steps["ref"]()
    t = {"ours": [], "ref": []}
    for i in tqdm(range(args.pairs), desc="interleaved pairs", unit="pair", file=sys.stderr):
        for k in (("ours", "ref") if i % 2 == 0 else ("ref", "ours")):
            t[k].append(time_call(steps[k], device, args.reps))
    med = {k: statistics.median(v) for k, v in t.items()}
    ntok, fpt = args.batch * args.seq_len, _lt_flops(args)
    res = dict(info, pairs=args.pairs, reps=args.reps, params=n["ours"],
               ours_ms=med["ours"] * 1e3, ref_ms=med["ref"] * 1e3,
               ratio=med["ours"] / med["ref"],
               pair_ratio=statistics.median(a / b for a, b in zip(t["ours"], t["ref"])),
               ours_all_ms=[x * 1e3 for x in t["ours"]], ref_all_ms=[x * 1e3 for x in t["ref"]],
               schemes=[])
    for k in ("ours", "ref"):
        res[f"{k}_tokens_s"] = ntok / med[k]
        res[f"{k}_mfu"] = None if peak is None else fpt * ntok / med[k] / peak
        res[f"{k}_compile_s"] = max(0.0, first[k] - med[k]) if args.compile else None
    _print_part1(res, args)
    return res


def _print_part1(r, args):
    def extra(k):
        mfu = "" if r[f"{k}_mfu"] is None else f"  MFU {100 * r[f'{k}_mfu']:5.1f}%"
        comp = "" if r[f"{k}_compile_s"] is None else f"  compile {r[f'{k}_compile_s']:.1f} s"
        return f"{r[f'{k}_tokens_s']:11.0f} tokens/s{mfu}{comp}"

    print(f"\nparameters: {r['params']} (both)")
    print(f"step median over {args.pairs} interleaved pairs ({args.reps} calls each):")
    print(f"  SplitTransformer(lie-trotter)  {r['ours_ms']:9.2f} ms  {extra('ours')}")
    print(f"  nanoGPT-style reference        {r['ref_ms']:9.2f} ms  {extra('ref')}")
    print(f"  ratio of medians {r['ratio']:.4f}   median of per-pair ratios "
          f"{r['pair_ratio']:.4f}   (target <= 1.05)")


def _oom(e) -> bool:
    return isinstance(e, torch.cuda.OutOfMemoryError) or "out of memory" in str(e).lower()


def scheme_row(args, device, s, w, peak):
    """One per-scheme row (cold compile); the batch halves on an out-of-memory error."""
    batch = args.batch
    while batch >= 1:
        torch._dynamo.reset()
        m = step = None
        try:
            m = build("ours", args, device, scheme=s, weights=w)
            step = make_step(m, args, *_batch(args, device, batch))
            first = time_call(step, device, 1)
            ts = [time_call(step, device, 1) for _ in range(args.scheme_reps)]
            break
        except RuntimeError as e:
            if not (device.type == "cuda" and _oom(e)):
                raise
            batch //= 2
        finally:
            del m, step
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()
    else:
        return {"scheme": s, "weights": w, "error": "out of memory at batch 1"}
    sec, ntok = statistics.median(ts), batch * args.seq_len
    c = describe(s, weights=w, d_model=args.d_model, n_heads=args.n_heads,
                 n_layers=args.n_layers, vocab_size=args.vocab_size, seq_len=args.seq_len)
    rate = c.flops_train * ntok / sec
    return {"scheme": c.scheme, "weights": w, "batch": batch, "ms": sec * 1e3,
            "params": c.params, "evals": c.n_evals, "train_gflop_tok": c.flops_train / 1e9,
            "tokens_s": ntok / sec, "tflops": rate / 1e12,
            "mfu": None if peak is None else rate / peak,
            "compile_s": max(0.0, first - sec) if args.compile else None}


def part2(args, device, peak):
    from tqdm.auto import tqdm

    names = [] if args.schemes == "none" else (
        sn.schemes.available("core") if args.schemes == "core"
        else sn.schemes.available() if args.schemes == "all"
        else [s.strip() for s in args.schemes.split(",") if s.strip()])
    layouts = [w.strip() for w in args.weights.split(",") if w.strip()]
    combos = [(s, w) for s in names for w in layouts]
    rows = [scheme_row(args, device, s, w, peak)
            for s, w in tqdm(combos, desc="schemes", unit="model", file=sys.stderr)]
    if rows:
        print(f"\nper scheme, step median of {args.scheme_reps} ({args.seq_len} tokens x batch):")
        print(f"{'scheme':<14}{'weights':<11}{'batch':>6}{'ms':>10}{'params':>11}"
              f"{'evals/tok':>10}{'GFLOP/tok':>11}{'tokens/s':>11}{'TFLOP/s':>9}{'MFU':>7}"
              f"{'compile s':>10}")
    for r in rows:
        if "error" in r:
            print(f"{r['scheme']:<14}{r['weights']:<11}  {r['error']}")
            continue
        mfu = "-" if r["mfu"] is None else f"{100 * r['mfu']:.1f}%"
        comp = "-" if r["compile_s"] is None else f"{r['compile_s']:.1f}"
        print(f"{r['scheme']:<14}{r['weights']:<11}{r['batch']:6d}{r['ms']:10.1f}"
              f"{r['params']:11d}{r['evals']:10d}{r['train_gflop_tok']:11.4f}"
              f"{r['tokens_s']:11.0f}{r['tflops']:9.3f}{mfu:>7}{comp:>10}")
    return rows


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("bench_layers: --device cuda but torch.cuda.is_available() is False",
              file=sys.stderr)
        return 2
    if args.compile and not args.compile_cache:
        torch._inductor.config.force_disable_caches = True
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    info = {"device": str(device), "dtype": args.dtype, "torch": torch.__version__,
            "threads": torch.get_num_threads(), "d_model": args.d_model,
            "n_heads": args.n_heads, "n_layers": args.n_layers, "seq_len": args.seq_len,
            "batch": args.batch, "vocab_size": args.vocab_size,
            **{k: getattr(args, k) for k in LEVERS}}
    if device.type == "cuda":
        info["device_name"] = torch.cuda.get_device_name(device)
    print("bench_layers: " + ", ".join(f"{k}={v}" for k, v in info.items()))
    peak = peak_flops(args, device)
    results = part1(args, device, info, peak) if args.pairs else dict(info)
    results["schemes"] = part2(args, device, peak)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if math.isfinite(results.get("ratio", 0.0)) else 1


if __name__ == "__main__":
    sys.exit(main())
