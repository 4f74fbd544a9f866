"""Reversible against plain and against activation checkpointing: a training step's time and
the bytes it saves for backward.

For each scheme, three networks with the same parameters run forward + cross-entropy + backward
on the same batch, in a rotating order, ``--pairs`` rounds:

* **plain**: ``SplitTransformer(scheme)``, ordinary autograd (every activation stored);
* **checkpointed**: the same network with each layer under ``torch.utils.checkpoint``
  (non-reentrant, what torchtitan and Megatron use at scale): stores each layer's input,
  recomputes the layer in backward;
* **reversible**: ``SplitTransformer(scheme, reversible=True)``: stores the final pair only and
  reconstructs every stage's input from its output.

Reported: the median time of each, the medians of the per-round ratios reversible / plain
(theory: about 4/3 -- the backward recomputes each field once more, a forward being about a
third of a step) and reversible / checkpointed (theory: about 1 -- both recompute one forward),
and the bytes autograd saves for backward (:func:`splitnet.reversible.saved_bytes`, parameters
excluded). Two sizes by default, one thread: ``host`` (d_model 16, 48 layers, batch 2 x 32: the
Python and autograd-engine work per stage dominates, as on a GPU) and ``compute`` (d_model 128,
8 layers, batch 8 x 128: the arithmetic dominates).

    python3 benchmarks/bench_reversible.py                   # the docs numbers (CPU)
    python3 benchmarks/bench_reversible.py --quick           # a smoke run
    python3 benchmarks/bench_reversible.py --parts           # where the step goes
    python3 benchmarks/bench_reversible.py --device cuda --d-model 768 --n-heads 12 \\
        --n-layers 12 --seq-len 1024 --batch 8               # one size, on a GPU
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from splitnet.cli._args import (
    nonnegative_int,
    positive_int,
    set_stdout_guard,
    torch_device,
)
from splitnet.integrators.checkpointed import CheckpointedStack
from splitnet.nets.models import SplitTransformer
from splitnet.reversible import backprop, saved_bytes

# the two sizes of the issue: (d_model, n_heads, n_layers, seq_len, batch)
PRESETS = {"host": (16, 2, 48, 32, 2), "compute": (128, 4, 8, 128, 8)}
SIZE = ("d_model", "n_heads", "n_layers", "seq_len", "batch")
VARIANTS = ("plain", "checkpointed", "reversible")


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


def checkpointed(plain: SplitTransformer) -> SplitTransformer:
    """A copy of ``plain`` (the same parameter values) with each layer checkpointed."""
    m = copy.deepcopy(plain)
    m.layers = CheckpointedStack(m.layers, m.layers.step_size)
    return m


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
    """The three networks' step times (rotating order) and saved bytes at ``a``'s size."""
    plain, rev = _pair(a, scheme, device)
    models = {"plain": plain, "checkpointed": checkpointed(plain), "reversible": rev}
    idx = torch.randint(0, a.vocab, (a.batch, a.seq_len), device=device,
                        generator=torch.Generator(device).manual_seed(1))
    for _ in range(a.warmup):
        for m in models.values():
            _step(m, idx, device)
    times = {k: [] for k in VARIANTS}
    for i in range(a.pairs):
        for k in VARIANTS[i % 3:] + VARIANTS[:i % 3]:
            times[k].append(_step(models[k], idx, device))
    out = {"scheme": scheme, **{k: getattr(a, k) for k in SIZE}}
    for k in VARIANTS:
        out[f"{k}_ms"] = 1e3 * statistics.median(times[k])
        out[f"{k}_saved"] = saved_bytes(models[k], idx)
    out["ratio"] = statistics.median(r / p for p, r in zip(times["plain"],
                                                            times["reversible"]))
    out["ratio_ckpt"] = statistics.median(r / c for c, r in zip(times["checkpointed"],
                                                                times["reversible"]))
    return out


# the parts of a step --parts times, each as a share of the plain step
PARTS = ("plain_forward", "layers_nograd", "reversible_step", "reversible_forward", "walk",
         "walk_no_products")


@contextlib.contextmanager
def _no_products():
    """Inside: the reversible walk's vector-Jacobian products return zeros (cached, so no
    allocation): the walk then costs its recomputation and glue only, the adds included."""
    zeros: dict = {}

    def vjp(dx, inputs, g):
        out = []
        for t in inputs:
            z = zeros.get((id(t), t.shape))
            if z is None:         # a parameter once; a stage's input once per shape
                z = zeros[id(t), t.shape] = torch.zeros_like(t)
            out.append(z)
        return out
    old, backprop._vjp = backprop._vjp, vjp
    try:
        yield
    finally:
        backprop._vjp = old


def _walk(rev, idx):
    """The reversible stack's backward walk alone (``backprop._backward``) on the pair its
    forward ends at, from a fixed output gradient: what the autograd Function's backward runs."""
    with torch.no_grad():
        x = rev.embed(idx)
        run = backprop._Run(rev.layers, rev.layers.step_size, {}, x.device)
        y = run.forward(x, x)
    g = [torch.full_like(y[0], 1e-3), torch.full_like(y[1], 1e-3)]
    params = run.index.params()
    return lambda: backprop._backward(run, list(y), list(g), None, params)


def parts(a, scheme, device) -> dict:
    """Where the reversible step's time goes against the plain step's: each part's median
    per-round ratio to the plain step, the parts interleaved. ``plain_forward``: the plain
    network's forward with its graph (its backward is the rest); ``layers_nograd``: the layers'
    forward without one (what the reversible forward runs); ``walk``: the backward walk over
    the stages; ``walk_no_products``: the same with every product replaced by zeros (its
    recomputation and glue)."""
    plain, rev = _pair(a, scheme, device)
    idx = torch.randint(0, a.vocab, (a.batch, a.seq_len), device=device,
                        generator=torch.Generator(device).manual_seed(1))
    walk = _walk(rev, idx)

    def no_products():
        with _no_products():
            walk()

    def nograd():
        with torch.no_grad():
            plain(idx)
    jobs = {"plain": lambda: _step(plain, idx, device), "plain_forward": lambda: plain(idx),
            "layers_nograd": nograd, "reversible_step": lambda: _step(rev, idx, device),
            "reversible_forward": lambda: rev(idx), "walk": walk,
            "walk_no_products": no_products}
    times = {k: [] for k in jobs}
    for i in range(a.warmup + a.pairs):
        for k, job in jobs.items():
            t0 = time.perf_counter()
            job()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if i >= a.warmup:
                times[k].append(time.perf_counter() - t0)
    out = {"scheme": scheme, **{k: getattr(a, k) for k in SIZE},
           "plain_ms": 1e3 * statistics.median(times["plain"])}
    for k in PARTS:
        out[k] = statistics.median(t / p for t, p in zip(times[k], times["plain"]))
    return out


def parts_table(rows: list[dict]) -> list[str]:
    """The markdown table of :func:`parts` results (shares of the plain step)."""
    out = ["| scheme | size | plain step ms | plain: forward | backward | forward without graph | "
           "reversible step | its forward | walk: recomputation and glue | walk: products | "
           "rest |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        size = f"d{r['d_model']}, {r['n_layers']} layers, {r['batch']} x {r['seq_len']}"
        rest = r["reversible_step"] - r["reversible_forward"] - r["walk"]
        out.append(f"| {r['scheme']} | {size} | {r['plain_ms']:.1f} | "
                   f"{r['plain_forward']:.2f} | {1 - r['plain_forward']:.2f} | "
                   f"{r['layers_nograd']:.2f} | **{r['reversible_step']:.2f}** | "
                   f"{r['reversible_forward']:.2f} | "
                   f"{r['walk_no_products']:.2f} | {r['walk'] - r['walk_no_products']:.2f} | "
                   f"{rest:.2f} |")
    return out


def table(rows: list[dict]) -> list[str]:
    """The markdown table of :func:`row` results."""
    out = ["| scheme | size | plain ms | checkpointed ms | reversible ms | rev / plain | "
           "rev / checkpointed | saved: plain | checkpointed | reversible |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        size = f"d{r['d_model']}, {r['n_layers']} layers, {r['batch']} x {r['seq_len']}"
        out.append(f"| {r['scheme']} | {size} | {r['plain_ms']:.1f} | "
                   f"{r['checkpointed_ms']:.1f} | {r['reversible_ms']:.1f} | "
                   f"**{r['ratio']:.2f}** | **{r['ratio_ckpt']:.2f}** | "
                   f"{r['plain_saved'] / 2**20:.2f} MiB | {r['checkpointed_saved'] / 2**20:.2f}"
                   f" MiB | {r['reversible_saved'] / 2**20:.2f} MiB |")
    return out


def _sizes(a) -> list[tuple]:
    """The sizes to run: the given flags (one size), else the presets named."""
    given = [getattr(a, k) for k in SIZE]
    if any(v is not None for v in given):
        base = PRESETS["compute"]
        return [tuple(b if v is None else v for v, b in zip(given, base))]
    return [PRESETS[p] for p in a.presets.split(",")]


def _check(p, a) -> torch.device:
    """Bad input as one line and exit 2 (argparse's ``error``), before anything is timed: the
    presets, the device, where the JSON goes, and every network the run would build."""
    bad = [x for x in a.presets.split(",") if x not in PRESETS]
    if bad:
        p.error(f"unknown preset {bad[0]!r}; the presets are {', '.join(PRESETS)}")
    try:
        device = torch_device(a.device)
    except ValueError as e:
        p.error(str(e))
    if a.json and not Path(a.json).resolve().parent.is_dir():
        p.error(f"--json {a.json}: no such folder {Path(a.json).resolve().parent}")
    for size in _sizes(a):
        kw = dict(zip(SIZE, size))
        for s in a.schemes.split(","):
            try:
                SplitTransformer(a.vocab, kw["d_model"], kw["n_heads"], 1, scheme=s,
                                 max_len=kw["seq_len"], reversible=True)
            except (ValueError, KeyError) as e:
                why = e.args[0] if isinstance(e, KeyError) and e.args else e
                p.error(f"scheme {s!r} at d_model {kw['d_model']}, {kw['n_heads']} heads: {why}")
    return device


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--schemes", default="lie-trotter,strang")
    p.add_argument("--presets", default="host,compute",
                   help=f"sizes to run, of {', '.join(PRESETS)} (ignored when a size flag is "
                        f"given)")
    for k in SIZE:
        p.add_argument(f"--{k.replace('_', '-')}", type=positive_int, default=None)
    p.add_argument("--vocab", type=positive_int, default=256)
    p.add_argument("--pairs", type=positive_int, default=11, help="rounds of the three networks")
    p.add_argument("--warmup", type=nonnegative_int, default=2)
    p.add_argument("--threads", type=positive_int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--json", default=None, help="also write the rows here")
    p.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    p.add_argument("--parts", action="store_true",
                   help="where the reversible step's time goes, as shares of the plain step")
    a = p.parse_args(argv)
    if a.quick:
        a.d_model, a.n_heads, a.n_layers, a.seq_len, a.batch = 16, 2, 2, 16, 2
        a.pairs, a.warmup = 1, 0
    device = _check(p, a)
    set_stdout_guard()           # a reader gone (| head): the run still ends and writes --json
    torch.set_num_threads(a.threads)
    print(f"plain, checkpointed and reversible training steps ({device}, {a.threads} "
          f"thread(s), {a.pairs} rotating rounds, torch {torch.__version__})", flush=True)
    rows = []
    render, measure = (parts_table, parts) if a.parts else (table, row)
    print("\n".join(render([])), flush=True)
    for size in _sizes(a):
        for k, v in zip(SIZE, size):
            setattr(a, k, v)
        for s in a.schemes.split(","):
            rows.append(measure(a, s, device))
            print(render(rows[-1:])[-1], flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": str(device), "threads": a.threads, "pairs": a.pairs,
                       "torch": torch.__version__, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
