"""What a basis of depth does to training at one depth -> docs/elastic.md (the start table)

    python experiments/elastic_start.py                # train what is missing, then the table
    python experiments/elastic_start.py --report-only  # the table from the cache

Before training at several depths (issue 60, item 2): networks with weights that are functions
of depth (``depth_basis``), trained at 4 steps as the layered networks are, at the CPU scale of
experiments/compare_schemes.py (byte LM of the Python standard library, d_model 64, 4 heads,
4 layers, d_ff 256, context 64, batch 16, 400 AdamW steps at lr 2e-3, cosine, warmup 30, 128
validation windows; seeds 0, 1, 2). Arms, for the plain Transformer (Lie–Trotter, Euler) and
for reversible Strang: ``layered`` (one set of weights per layer), ``legendre:4``,
``bernstein:4``, ``linear:4`` (K = 4 functions: the parameters of the layered network) and
``legendre:1`` (weights constant in depth: a quarter of them). Every depth field starts
constant at the weights the initialisation rule draws. Each trained network is then evaluated
at 1, 2, 4, 8 and 16 steps (:func:`splitnet.nets.depth.at_depth`; a layered one coarsened by the
mean, or prolonged). Finished runs' numbers go to experiments/cache/elastic_start/, from which
the table is rebuilt (``python3 -m splitnet.dev regen elastic-start``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "experiments" / "cache" / "elastic_start"
DOC = ROOT / "docs" / "elastic.md"
SCALE = {"d_model": 64, "n_heads": 4, "n_layers": 4, "d_ff": 256, "context": 64,
         "batch_size": 16, "steps": 400, "lr": 2e-3, "warmup": 30, "eval_every": 100,
         "eval_windows": 128}
NETWORKS = {"transformer": {}, "rev-strang": {"scheme": "strang", "reversible": True}}
LABELS = {"transformer": "Transformer (Lie–Trotter, Euler)", "rev-strang": "reversible Strang"}
BASES = ("layered", "legendre:4", "bernstein:4", "linear:4", "legendre:1")
DEPTHS = (1, 2, 4, 8, 16)
SEEDS = (0, 1, 2)


def _cache_file(net: str, basis: str, seed: int) -> Path:
    return CACHE / f"{net}-{basis.replace(':', '')}-seed{seed}.json"


def run_one(net: str, basis: str, seed: int, runs: Path) -> dict:
    """Train one arm (unless cached) and evaluate it at every depth of DEPTHS."""
    import torch

    from splitnet.analyses.sources import checkpoint_source
    from splitnet.configs.config import SplitConfig
    from splitnet.nets.depth import at_depth
    from splitnet.training.config import TrainConfig
    from splitnet.training.train import train

    cache = _cache_file(net, basis, seed)
    if cache.exists():
        return json.loads(cache.read_text())
    sc, out = SCALE, runs / f"{net}-{basis.replace(':', '')}-seed{seed}"
    model = SplitConfig(d_model=sc["d_model"], n_heads=sc["n_heads"], n_layers=sc["n_layers"],
                        d_ff=sc["d_ff"], max_len=sc["context"],
                        depth_basis=None if basis == "layered" else basis, **NETWORKS[net])
    cfg = TrainConfig(model=model, context=sc["context"], steps=sc["steps"],
                      batch_size=sc["batch_size"], lr=sc["lr"], warmup=sc["warmup"],
                      eval_windows=sc["eval_windows"], eval_every=sc["eval_every"],
                      ckpt_every=sc["steps"], seed=seed, device="cpu", threads=1,
                      progress=False, plot=False, out=str(out), overwrite=True)
    t0 = time.perf_counter()
    train(cfg)
    wall = time.perf_counter() - t0
    m, evaluate, _ = checkpoint_source(out, windows=sc["eval_windows"])
    bpb = {}
    with torch.no_grad():
        for n in DEPTHS:
            bpb[str(n)] = float(evaluate(at_depth(m.eval(), n).eval())) / math.log(2.0)
    d = {"net": net, "basis": basis, "seed": seed, "scale": sc, "wall_s": wall,
         "params": m.n_params(), "bpb": bpb}
    CACHE.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(d, indent=1) + "\n")
    print(f"[{time.strftime('%H:%M:%S')}] {net} {basis} seed {seed}: {wall:.0f} s, "
          f"{bpb['4']:.4f} bpb at 4 steps", file=sys.stderr, flush=True)
    return d


def _ms(values) -> str:
    import numpy as np

    v = np.asarray(values)
    return f"{v.mean():.3f} ± {v.std(ddof=1):.3f}" if len(v) > 1 else f"{v.mean():.3f}"


def table(results: list) -> str:
    """Validation bpb at every depth (mean ± sd over seeds), and each basis against the
    layered network at 4 steps, paired by seed."""
    from splitnet.analyses.seeds import paired

    by = {(r["net"], r["basis"], r["seed"]): r for r in results}
    head = ("| network | weights | params | " + " | ".join(f"{n} steps" for n in DEPTHS) +
            " | at 4 steps − layered (paired, t) |")
    lines = [head, "|---|---|---:|" + "---|" * len(DEPTHS) + "---|"]
    for net in NETWORKS:
        base = {s: by[(net, "layered", s)]["bpb"]["4"] for s in SEEDS
                if (net, "layered", s) in by}
        for basis in BASES:
            runs = [by[(net, basis, s)] for s in SEEDS if (net, basis, s) in by]
            if not runs:
                continue
            cells = [_ms([r["bpb"][str(n)] for r in runs]) for n in DEPTHS]
            seeds = [r["seed"] for r in runs if r["seed"] in base]
            diff = ""
            if basis != "layered" and len(seeds) > 1:
                p = paired([by[(net, basis, s)]["bpb"]["4"] for s in seeds],
                           [base[s] for s in seeds])
                diff = f"{p.mean:+.3f} (t = {p.t:.1f}, n = {p.n})"
            lines.append(f"| {LABELS[net]} | {basis} | {runs[0]['params']:,} | "
                         + " | ".join(cells) + f" | {diff} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=Path, default=ROOT / "runs" / "elastic_start")
    p.add_argument("--report-only", action="store_true", help="the table from the cache")
    p.add_argument("--doc", type=Path, default=DOC)
    a = p.parse_args(argv)
    if not a.report_only:
        for seed in SEEDS:
            for net in NETWORKS:
                for basis in BASES:
                    run_one(net, basis, seed, a.runs)
    results = [json.loads(f.read_text()) for f in sorted(CACHE.glob("*.json"))]
    from splitnet.dev.docblocks import write_blocks

    changed = write_blocks(a.doc, "elastic", {"start": table(results)})
    print(f"{a.doc}: {'written' if changed else 'unchanged'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
