"""Reversible against plain networks as depth grows: peak GPU memory, tokens/s, reconstruction.

For each depth (``--depths``) a plain ``SplitTransformer`` and the same network with
``reversible=True`` (parameters copied) take training steps (forward + cross-entropy + backward,
bf16 autocast, float32 parameters, eager) on the same batch, alternating which goes first.
Reported per depth: ``torch.cuda.max_memory_allocated`` over one step minus the memory held
before it (the activations and gradients, parameters excluded), its ratio to the shallowest
depth's (theory: plain grows linearly with depth, reversible stays flat up to the gradients'
own growth), and the median tokens/s of ``--reps`` steps.

Then the reconstruction: the reversible stack run forward and inverted layer by layer under
bf16 autocast, with and without the exact grid (``reversible_grid``), reports
``max |x_rec - x| / max |x|`` over both blocks (exact mode: 0, bit for bit).

    python3 benchmarks/gpu_reversible.py --device cuda               # GPT-2-small width
    python3 benchmarks/gpu_reversible.py --quick                     # the CPU smoke run
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from splitnet.reversible import run_stack, start_pair

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_reversible import _pair


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _models(a, n_layers, device, **extra):
    return _pair(a, a.scheme, device, n_layers, **extra)


def _step(model, idx, device) -> tuple[float, int]:
    """One training step: (seconds, peak bytes above what was allocated before it)."""
    _sync(device)
    base = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter()
    with torch.autocast(device.type, dtype=torch.bfloat16):
        logits = model(idx)
    F.cross_entropy(logits.float().flatten(0, 1), idx.flatten()).backward()
    _sync(device)
    dt = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated(device) - base if device.type == "cuda" else 0
    for p in model.parameters():
        p.grad = None
    return dt, peak


def depth_row(a, n_layers, device) -> dict:
    plain, rev = _models(a, n_layers, device)
    idx = torch.randint(0, a.vocab, (a.batch, a.seq_len), device=device,
                        generator=torch.Generator(device).manual_seed(1))
    for _ in range(a.warmup):
        _step(plain, idx, device)
        _step(rev, idx, device)
    times = {"plain": [], "rev": []}
    peaks = {"plain": [], "rev": []}
    for i in range(a.reps):
        order = ("plain", "rev") if i % 2 == 0 else ("rev", "plain")
        for k in order:
            dt, pk = _step(plain if k == "plain" else rev, idx, device)
            times[k].append(dt)
            peaks[k].append(pk)
    ntok = a.batch * a.seq_len
    row = {"n_layers": n_layers}
    for k in ("plain", "rev"):
        row[f"{k}_peak_bytes"] = max(peaks[k])
        row[f"{k}_tok_s"] = ntok / statistics.median(times[k])
    del plain, rev
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
    p.add_argument("--depths", default="6,12,24,48")
    p.add_argument("--d-model", type=int, default=768)
    p.add_argument("--n-heads", type=int, default=12)
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--vocab", type=int, default=50304)
    p.add_argument("--reps", type=int, default=6)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--grid", type=int, default=10, help="reversible_grid of the exact mode")
    p.add_argument("--json", default=None)
    p.add_argument("--quick", action="store_true", help="tiny sizes (a CPU smoke run)")
    a = p.parse_args(argv)
    if a.quick:
        a.depths, a.d_model, a.n_heads, a.seq_len, a.batch, a.vocab = "2,4", 16, 2, 16, 2, 64
        a.reps, a.warmup = 2, 0
    device = torch.device(a.device)
    depths = [int(d) for d in a.depths.split(",")]
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"reversible vs plain ({a.scheme}, d_model {a.d_model}, {a.n_heads} heads, batch "
          f"{a.batch} x {a.seq_len}, vocab {a.vocab}, bf16 autocast, eager; {name}, torch "
          f"{torch.__version__})", flush=True)
    rows = [depth_row(a, n, device) for n in depths]
    print("| layers | plain peak GiB | reversible peak GiB | plain / first | reversible / first"
          " | plain tok/s | reversible tok/s | rev / plain speed |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['n_layers']} | {r['plain_peak_bytes'] / 2**30:.2f} | "
              f"{r['rev_peak_bytes'] / 2**30:.2f} | "
              f"{r['plain_peak_bytes'] / max(rows[0]['plain_peak_bytes'], 1):.2f} | "
              f"{r['rev_peak_bytes'] / max(rows[0]['rev_peak_bytes'], 1):.2f} | "
              f"{r['plain_tok_s']:,.0f} | {r['rev_tok_s']:,.0f} | "
              f"{r['rev_tok_s'] / r['plain_tok_s']:.2f} |", flush=True)
    rec = {f"grid={g}": reconstruction(a, depths[-1], g, device) for g in (None, a.grid)}
    print(f"reconstruction after {depths[-1]} layers forward + inverse, bf16 autocast, "
          "max|x_rec - x| / max|x|: " + ", ".join(f"{k}: {v:.3g}" for k, v in rec.items()))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": name, "torch": torch.__version__, "args": vars(a),
                       "rows": rows, "reconstruction": rec}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
