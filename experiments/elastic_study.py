"""One network at several depths against separately trained ones -> docs/elastic.md (the study)

    python experiments/elastic_study.py                # train what is missing, then the table
    python experiments/elastic_study.py --report-only  # the table from the cache

Issue 60, item 4, cut to fit the time there was (docs/elastic.md says so): the scale of
experiments/elastic_start.py, 400 steps where docs/depth.md trains 1200, and seeds 0, 1, 2, of
which only seed 0 was run (byte LM of the Python standard library, d_model 64, 4 heads, d_ff
256, context 64, batch 16, 400 AdamW steps at lr 2e-3, cosine, warmup 30, 128 validation
windows). Arms, each evaluated at 1,
2, 4, 8 and 16 steps (:func:`splitnet.nets.depth.at_depth`) where it can run there:

- ``frontier-L``: the Transformer (Lie–Trotter, Euler) trained at L = 2, 4 and 8 layers (arm
  d); the 8-layer one at 1, 2, 4 and 16 steps, coarsened by the mean or prolonged, is arm a;
- ``strang-train-depths`` / ``strang-distill``: reversible Strang, 8 layers, weights
  ``bernstein:4`` (docs/elastic.md's start table: the basis that trains), ``--train-depths
  2,4,8`` without and with ``--depth-distill`` (arm e).

Arms b (LayerDrop), c (early exit), f (to_basis) and the other schemes of arm e were not run
(see docs/elastic.md). Each finished run's numbers go to experiments/cache/elastic/ (a rerun
resumes), from which the table is rebuilt (``python3 -m splitnet.dev regen elastic-study``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "experiments" / "cache" / "elastic"
DOC = ROOT / "docs" / "elastic.md"
FIGURE = ROOT / "docs" / "figures" / "elastic_study.png"
SCALE = {"d_model": 64, "n_heads": 4, "d_ff": 256, "context": 64, "batch_size": 16,
         "steps": 400, "lr": 2e-3, "warmup": 30, "eval_every": 400, "eval_windows": 128}
STRANG = {"scheme": "strang", "reversible": True, "depth_basis": "bernstein:4"}
ARMS = {   # name -> (network options, train options)
    "frontier-2": ({"n_layers": 2}, {}),
    "frontier-4": ({"n_layers": 4}, {}),
    "frontier-8": ({"n_layers": 8}, {}),
    "strang-train-depths": ({"n_layers": 8, **STRANG}, {"train_depths": (2, 4, 8)}),
    "strang-distill": ({"n_layers": 8, **STRANG}, {"train_depths": (2, 4, 8),
                                                   "depth_distill": True}),
}
LABELS = {"frontier-2": "Transformer trained at 2 layers (d)",
          "frontier-4": "Transformer trained at 4 layers (d)",
          "frontier-8": "Transformer trained at 8 layers (d; at other depths: a, coarsened "
                        "by the mean or prolonged)",
          "strang-train-depths": "reversible Strang, bernstein:4, --train-depths 2,4,8 (e)",
          "strang-distill": "the same with --depth-distill (e)"}
DEPTHS = (1, 2, 4, 8, 16)
SEEDS = (0, 1, 2)


def _cache_file(arm: str, seed: int) -> Path:
    return CACHE / f"{arm}-seed{seed}.json"


def run_one(arm: str, seed: int, runs: Path) -> dict:
    """Train one arm (unless cached), evaluate it at each depth of DEPTHS it can run at."""
    import torch

    from splitnet.analyses.sources import checkpoint_source
    from splitnet.configs.config import SplitConfig
    from splitnet.nets.cost import forward_flops
    from splitnet.nets.depth import at_depth
    from splitnet.runs import checkpoint as ck
    from splitnet.training.config import TrainConfig
    from splitnet.training.setup import flops_per_token
    from splitnet.training.train import train

    cache = _cache_file(arm, seed)
    if cache.exists():
        return json.loads(cache.read_text())
    sc, (net, opts), out = SCALE, ARMS[arm], runs / f"{arm}-seed{seed}"
    model = SplitConfig(d_model=sc["d_model"], n_heads=sc["n_heads"], d_ff=sc["d_ff"],
                        max_len=sc["context"], **net)
    cfg = TrainConfig(model=model, context=sc["context"], steps=sc["steps"],
                      batch_size=sc["batch_size"], lr=sc["lr"], warmup=sc["warmup"],
                      eval_windows=sc["eval_windows"], eval_every=sc["eval_every"],
                      ckpt_every=sc["steps"], seed=seed, device="cpu", threads=1,
                      progress=False, plot=False, out=str(out), overwrite=True, **opts)
    t0 = time.perf_counter()
    summary = train(cfg)
    wall = time.perf_counter() - t0
    if summary["step"] != sc["steps"]:      # stopped by a signal: nothing cached, rerun resumes
        raise SystemExit(f"{arm} seed {seed} stopped at step {summary['step']}")
    m, evaluate, _ = checkpoint_source(out, windows=sc["eval_windows"])
    recs = [r for r in ck.read_metrics(out / ck.METRICS) if "loss" in r]
    tokens = sc["batch_size"] * sc["context"]
    train_flops = (sum(r["step_flops"] for r in recs) if opts.get("train_depths") else
                   flops_per_token(m, sc["context"]) * tokens * sc["steps"])
    bpb, flops = {}, {}
    L = net["n_layers"]
    with torch.no_grad():
        for n in DEPTHS:
            if net.get("depth_basis") is None and n % L and L % n:
                continue
            v = at_depth(m.eval(), n).eval()
            bpb[str(n)] = float(evaluate(v)) / math.log(2.0)
            flops[str(n)] = forward_flops(v.config, sc["context"])
    d = {"arm": arm, "seed": seed, "scale": sc, "wall_s": wall, "params": m.n_params(),
         "train_flops": train_flops, "bpb": bpb, "inference_flops_per_token": flops}
    CACHE.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(d, indent=1) + "\n")
    print(f"[{time.strftime('%H:%M:%S')}] {arm} seed {seed}: {wall:.0f} s, "
          + ", ".join(f"{k}: {v:.3f}" for k, v in bpb.items()), file=sys.stderr, flush=True)
    return d


def _ms(values) -> str:
    import numpy as np

    v = np.asarray(values)
    return f"{v.mean():.3f} ± {v.std(ddof=1):.3f}" if len(v) > 1 else f"{v.mean():.3f}"


def _frontier(by: dict, n: int, seed: int):
    r = by.get((f"frontier-{n}", seed))
    return None if r is None else r["bpb"].get(str(n))


def table(results: list) -> str:
    """Validation bpb at every depth (mean ± sd over the seeds run, n), training FLOPs, and
    each arm minus the frontier (the Transformer trained at that depth) at 2, 4 and 8 steps,
    paired by seed."""
    from splitnet.analyses.seeds import paired

    by = {(r["arm"], r["seed"]): r for r in results}
    head = ("| arm | seeds | train TFLOP | " + " | ".join(f"{n} steps" for n in DEPTHS) +
            " | − frontier at 2 / 4 / 8 steps (paired over seeds, t) |")
    lines = [head, "|---|---:|---:|" + "---|" * len(DEPTHS) + "---|"]
    for arm in LABELS:
        runs = [by[(arm, s)] for s in SEEDS if (arm, s) in by]
        if not runs:
            continue
        cells = [_ms([r["bpb"][str(n)] for r in runs]) if all(str(n) in r["bpb"] for r in runs)
                 else "" for n in DEPTHS]
        diffs = []
        for n in (2, 4, 8):
            pairs = [(r["bpb"][str(n)], _frontier(by, n, r["seed"])) for r in runs
                     if str(n) in r["bpb"] and _frontier(by, n, r["seed"]) is not None]
            if arm == f"frontier-{n}" or not pairs:
                diffs.append("–")
            elif len(pairs) == 1:             # one seed: the difference, no test
                diffs.append(f"{pairs[0][0] - pairs[0][1]:+.3f}")
            else:
                p = paired([a for a, _ in pairs], [b for _, b in pairs])
                diffs.append(f"{p.mean:+.3f} (t = {p.t:.1f})")
        fl = [r["train_flops"] for r in runs if "train_flops" in r]
        flops = f"{sum(fl) / len(fl) / 1e12:.2f}" if fl else ""
        lines.append(f"| {LABELS[arm]} | {len(runs)} | {flops} | " + " | ".join(cells)
                     + f" | {' / '.join(diffs)} |")
    return "\n".join(lines)


def plot(results: list, path: Path) -> None:
    """bpb against steps and against inference FLOPs per token (mean over the seeds run): each
    arm at every depth it ran, and the frontier (each Transformer at its own depth) as one
    line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    by = {}
    for r in results:
        by.setdefault(r["arm"], []).append(r)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    front = [(int(a.split("-")[1]), rs) for a, rs in sorted(by.items()) if a.startswith(
        "frontier")]
    for arm, rs in by.items():
        ns = [n for n in DEPTHS if all(str(n) in r["bpb"] for r in rs)]
        y = [np.mean([r["bpb"][str(n)] for r in rs]) for n in ns]
        f = [rs[0]["inference_flops_per_token"][str(n)] / 1e6 for n in ns]
        style = ":" if arm.startswith("frontier") else "-"
        for ax, x in zip(axes, (ns, f)):
            ax.plot(x, y, style, marker="o", ms=3, label=LABELS[arm] if arm != "frontier-8"
                    else "Transformer trained at 8, at other depths (a)")
    if front:
        front.sort()
        ns = [n for n, _ in front]
        y = [np.mean([r["bpb"][str(n)] for r in rs]) for n, rs in front]
        f = [rs[0]["inference_flops_per_token"][str(n)] / 1e6 for n, rs in front]
        for ax, x in zip(axes, (ns, f)):
            ax.plot(x, y, "k-", lw=2.5, alpha=0.5, label="frontier: each trained at its depth (d)")
    for ax, xl in zip(axes, ("steps (layers run)", "inference MFLOP per token")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel(xl)
        ax.set_ylabel("validation bits per byte")
        ax.set_ylim(3.0, 5.0)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle("one network at several depths against separately trained ones (400 steps)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=Path, default=ROOT / "runs" / "elastic_study")
    p.add_argument("--report-only", action="store_true", help="the table from the cache")
    p.add_argument("--doc", type=Path, default=DOC)
    a = p.parse_args(argv)
    if not a.report_only:
        for seed in SEEDS:
            for arm in ARMS:
                run_one(arm, seed, a.runs)
    results = [json.loads(f.read_text()) for f in sorted(CACHE.glob("*.json"))]
    from splitnet.dev.docblocks import write_blocks

    changed = write_blocks(a.doc, "elastic", {"study": table(results)})
    plot(results, FIGURE)
    print(f"{a.doc}: {'written' if changed else 'unchanged'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
