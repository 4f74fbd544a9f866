"""Reversible against plain and activation-checkpointed networks as depth grows: peak GPU
memory, tokens/s, reconstruction.

For each depth (``--depths``) and compilation (``--compile``: ``none`` eager, ``regional``
each distinct field module compiled, as ``splitnet train --compile-scope regional``) the
networks of ``--variants`` take training steps (forward + cross-entropy + backward, bf16
autocast, float32 parameters) on the same batch, in a rotating order:

* ``plain``: ordinary autograd;
* ``checkpointed``: each layer under non-reentrant ``torch.utils.checkpoint``;
* ``reversible``: ``reversible=True`` (parameters copied from the plain network);
* ``two-streams``: the reversible network under :func:`splitnet.reversible.two_streams`.

Reported per depth: ``torch.cuda.max_memory_allocated`` over one step minus the memory held
before it (activations and gradients, parameters excluded) and the median tokens/s of ``--reps``
steps, and each variant's speed against plain. Then the reconstruction: the reversible stack
run forward and inverted layer by layer under bf16 autocast, with and without the exact grid
(``reversible_grid``), reports ``max |x_rec - x| / max |x|`` over both blocks (exact mode: 0).

    python3 benchmarks/gpu_reversible.py --device cuda               # GPT-2-small width
    python3 benchmarks/gpu_reversible.py --quick                     # the CPU smoke run
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from splitnet.cli._args import nonnegative_int, positive_int, torch_device
from splitnet.reversible import run_stack, start_pair, two_streams
from splitnet.training.accel import compile_regions, field_regions

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_reversible import _pair, checkpointed
from gpu_table import VARIANTS
from gpu_table import reversible_table as table

COMPILES = ("none", "regional", "regional-cudagraphs")


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _models(a, n_layers, device, **extra):
    with device:         # initialised where they run: a 48-layer network in seconds
        return _pair(a, a.scheme, device, n_layers, **extra)


def _step(model, idx, device, ctx) -> tuple[float, int, float]:
    """One training step: (seconds, peak bytes above what was allocated before it, seconds
    until the host returned from backward, before waiting for the device)."""
    _sync(device)
    base = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    if getattr(model, "_cudagraphs", False):
        torch.compiler.cudagraph_mark_step_begin()
    t0 = time.perf_counter()
    with ctx(), torch.autocast(device.type, dtype=torch.bfloat16):
        logits = model(idx)
    F.cross_entropy(logits.float().flatten(0, 1), idx.flatten()).backward()
    host = time.perf_counter() - t0       # the CPU's own work: ~ dt when the step is host-bound
    _sync(device)
    dt = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated(device) - base if device.type == "cuda" else 0
    for p in model.parameters():
        p.grad = None
    return dt, peak, host


def _variants(a, n_layers, device, compiled: str) -> dict:
    """``name -> (model, context)`` of ``a.variants``; ``compiled``: ``none``, ``regional``
    (each distinct field module compiled) or ``regional-cudagraphs`` (the same in
    ``reduce-overhead`` mode: CUDA graphs)."""
    plain, rev = _models(a, n_layers, device)
    models = {"plain": (plain, contextlib.nullcontext),
              "checkpointed": (checkpointed(plain), contextlib.nullcontext),
              "reversible": (rev, contextlib.nullcontext),
              "two-streams": (rev, lambda: two_streams(rev))}
    models = {k: v for k, v in models.items() if k in a.variants}
    if compiled != "none":
        mode = "reduce-overhead" if compiled == "regional-cudagraphs" else "default"
        done = set()
        for m, _ in models.values():
            if id(m) not in done:
                done.add(id(m))
                inner = SimpleNamespace(layers=[getattr(la, "layer", la) for la in m.layers])
                compile_regions(field_regions(inner), mode)
                m._cudagraphs = mode == "reduce-overhead"
    return models


def depth_row(a, n_layers, device, compiled: str) -> dict:
    models = _variants(a, n_layers, device, compiled)
    idx = torch.randint(0, a.vocab, (a.batch, a.seq_len), device=device,
                        generator=torch.Generator(device).manual_seed(1))
    names, failed = list(models), {}
    t0 = time.perf_counter()
    for k in list(names):
        try:                    # a variant that fails is reported, the others measured
            for _ in range(max(a.warmup, 1)):
                _step(models[k][0], idx, device, models[k][1])
        except RuntimeError as e:        # CUDA out-of-memory is one too
            failed[k] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            print(f"{k} at {n_layers} layers failed: {failed[k]}", flush=True)
            names.remove(k)
    warm = time.perf_counter() - t0
    times, peaks, hosts = ({k: [] for k in names} for _ in range(3))
    for i in range(a.reps):
        for k in names[i % len(names):] + names[:i % len(names)]:
            dt, pk, host = _step(models[k][0], idx, device, models[k][1])
            times[k].append(dt)
            peaks[k].append(pk)
            hosts[k].append(host)
    ntok = a.batch * a.seq_len
    row = {"n_layers": n_layers, "compile": compiled, "warmup_s": warm, "variants": {},
           "failed": failed}
    for k in names:
        row["variants"][k] = {"peak_bytes": max(peaks[k]),
                              "tok_s": ntok / statistics.median(times[k]),
                              "step_s": statistics.median(times[k]),
                              "host_s": statistics.median(hosts[k])}
    del models
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return row


@torch.no_grad()
def reconstruction(a, n_layers, grid, device) -> float:
    _, rev = _models(a, n_layers, device, reversible_grid=grid)
    idx = torch.randint(0, a.vocab, (a.batch, a.seq_len), device=device,
                        generator=torch.Generator(device).manual_seed(2))
    x1, x2 = start_pair(rev.embed(idx), grid)
    h = rev.config.step_size
    with torch.autocast(device.type, dtype=torch.bfloat16):
        y1, y2 = run_stack(rev.layers, x1, x2, h)
        for k in reversed(range(n_layers)):
            y1, y2 = rev.layers[k].inverse(y1, y2, k * h)
    err = max((y1 - x1).abs().max().item(), (y2 - x2).abs().max().item())
    return err / x1.abs().max().item()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--scheme", default="strang")
    p.add_argument("--depths", default="12,48")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--compile", default=None,
                   help="of none (eager), regional, regional-cudagraphs, comma-separated "
                        "(default none,regional; --quick: none)")
    p.add_argument("--d-model", type=positive_int, default=768)
    p.add_argument("--n-heads", type=positive_int, default=12)
    p.add_argument("--seq-len", type=positive_int, default=1024)
    p.add_argument("--batch", type=positive_int, default=8)
    p.add_argument("--vocab", type=positive_int, default=50304)
    p.add_argument("--reps", type=positive_int, default=6)
    p.add_argument("--warmup", type=nonnegative_int, default=2)
    p.add_argument("--grid", type=int, default=10, help="reversible_grid of the exact mode")
    p.add_argument("--json", default=None)
    p.add_argument("--quick", action="store_true", help="tiny sizes (a CPU smoke run)")
    a = p.parse_args(argv)
    if a.quick:
        a.depths, a.d_model, a.n_heads, a.seq_len, a.batch, a.vocab = "2,4", 16, 2, 16, 2, 64
        a.reps, a.warmup = 2, 0
    if a.compile is None:
        a.compile = "none" if a.quick else "none,regional"
    a.variants = [v for v in a.variants.split(",") if v]
    bad = [v for v in a.variants if v not in VARIANTS] + \
        [c for c in a.compile.split(",") if c not in COMPILES]
    if bad:
        p.error(f"unknown variant or compile mode {bad[0]!r}")
    try:
        device = torch_device(a.device)
    except ValueError as e:
        p.error(str(e))
    try:
        depths = [positive_int(d) for d in a.depths.split(",")]
    except argparse.ArgumentTypeError as e:
        p.error(f"--depths {a.depths!r}: {e}")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"plain / checkpointed / reversible ({a.scheme}, d_model {a.d_model}, {a.n_heads} "
          f"heads, batch {a.batch} x {a.seq_len}, vocab {a.vocab}, bf16 autocast; {name}, "
          f"torch {torch.__version__})", flush=True)
    print("\n".join(table([], a.variants)), flush=True)
    rows, rec = [], {}

    def save():                 # after every row: a run stopped by a time limit keeps its rows
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"device": name, "torch": torch.__version__, "version": 2,
                           "date": time.strftime("%Y-%m-%d", time.gmtime()),
                           "args": vars(a), "rows": rows, "reconstruction": rec}, f, indent=1)
    for c in a.compile.split(","):
        for n in depths:
            rows.append(depth_row(a, n, device, c))
            print(table(rows, a.variants)[-1], flush=True)
            save()
    rec.update({f"grid={g}": reconstruction(a, depths[-1], g, device) for g in (None, a.grid)})
    print(f"reconstruction after {depths[-1]} layers forward + inverse, bf16 autocast, "
          "max|x_rec - x| / max|x|: " + ", ".join(f"{k}: {v:.3g}" for k, v in rec.items()))
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
