"""One network at several depths against separately trained ones -> docs/elastic.md (the study)

    python experiments/elastic_study.py                # train what is missing, then the table
    python experiments/elastic_study.py --report-only  # the table from the cache

Issue 60, item 4, cut to fit the time there was (docs/elastic.md says so): the scale of
experiments/elastic_start.py at 400 steps, and with ``--steps 1200`` (docs/depth.md's length)
for the arms that decide the goals and three controls, seeds 0, 1, 2 where the time allowed
(byte LM of the Python standard library, d_model 64, 4 heads, d_ff 256, context 64, batch 16,
AdamW at lr 2e-3, cosine, warmup 30, 128 validation windows). Arms, each evaluated at 1, 2, 4,
8 and 16 steps (:func:`splitnet.nets.depth.at_depth`) where it can run there:

- ``frontier-L``: the Transformer (Lie–Trotter, Euler) trained at L = 2, 4 and 8 layers (arm
  d); the 8-layer one at 1, 2, 4 and 16 steps, coarsened by the mean or prolonged, is arm a;
- ``layerdrop`` / ``layerdrop-0.2``: the 8-layer Transformer trained with ``--layer-drop 0.5``
  / ``0.2`` (uniform), pruned to every (8/n)-th layer (arm b); ``early-exit``: trained with
  ``--early-exit 2,4,8``, exiting after n layers (arm c); neither runs at 16;
- ``to-basis`` / ``to-basis-8``: the frontier-8 network of the same seed projected by
  ``to_basis`` onto ``legendre:4`` (the continuous arms' parameters) and ``legendre:8`` (exact
  at 8 steps), no training (arm f);
- ``*-train-depths`` / ``strang-distill``: 8 layers, weights ``bernstein:4`` (docs/elastic.md's
  start table: the basis that trains), ``--train-depths 2,4,8``: reversible Strang (also with
  ``--depth-distill``), reversible Yoshida4, plain Lie–Trotter, Macaron (plain Strang with
  per-stage weights) (arm e); ``strang-bernstein8-train-depths``: the same with ``bernstein:8``
  (the 8-layer Transformer's parameters);
- controls (1200 steps): ``strang-layered``, the reversible Strang stack of 8 layers without a
  basis, and ``strang-one-depth``, with ``bernstein:4`` but trained at 8 steps only.

Each finished run's numbers go to experiments/cache/elastic/ (a rerun resumes; ``--arms`` and
``--seeds`` choose what to train), from which the table is rebuilt (``python3 -m splitnet.dev
regen elastic-study``).
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
BASIS = {"depth_basis": "bernstein:4"}
STRANG = {"scheme": "strang", "reversible": True, **BASIS}
DEPTHS3 = {"train_depths": (2, 4, 8)}
ARMS = {   # name -> (network options, train options)
    "frontier-2": ({"n_layers": 2}, {}),
    "frontier-4": ({"n_layers": 4}, {}),
    "frontier-8": ({"n_layers": 8}, {}),
    "layerdrop": ({"n_layers": 8}, {"layer_drop": 0.5}),
    "layerdrop-0.2": ({"n_layers": 8}, {"layer_drop": 0.2}),
    "early-exit": ({"n_layers": 8}, {"early_exit": (2, 4, 8)}),
    "to-basis": ({"n_layers": 8}, {}),          # no training: frontier-8 projected
    "to-basis-8": ({"n_layers": 8}, {}),
    "strang-train-depths": ({"n_layers": 8, **STRANG}, DEPTHS3),
    "strang-distill": ({"n_layers": 8, **STRANG}, {**DEPTHS3, "depth_distill": True}),
    "yoshida4-train-depths": ({"n_layers": 8, **STRANG, "scheme": "yoshida4"}, DEPTHS3),
    "lie-trotter-train-depths": ({"n_layers": 8, **BASIS}, DEPTHS3),
    "macaron-train-depths": ({"n_layers": 8, "scheme": "strang", "weights": "per-stage",
                              **BASIS}, DEPTHS3),
    # what costs the Strang arm its loss (run at 1200 steps): the reversible Strang stack
    # without a basis, the basis trained at 8 steps only, and bernstein:8 (the 8-layer
    # Transformer's parameters) at several depths
    "strang-layered": ({"n_layers": 8, "scheme": "strang", "reversible": True}, {}),
    "strang-one-depth": ({"n_layers": 8, **STRANG}, {}),
    "strang-bernstein8-train-depths": ({"n_layers": 8, **STRANG, "depth_basis": "bernstein:8"},
                                       DEPTHS3),
}
PROJECTED = {"to-basis": "legendre:4", "to-basis-8": "legendre:8"}   # arm -> basis
LABELS = {"frontier-2": "Transformer trained at 2 layers (d)",
          "frontier-4": "Transformer trained at 4 layers (d)",
          "frontier-8": "Transformer trained at 8 layers (d; at other depths: a, coarsened "
                        "by the mean or prolonged)",
          "layerdrop": "Transformer, 8 layers, --layer-drop 0.5, pruned every-other (b)",
          "layerdrop-0.2": "the same with --layer-drop 0.2 (b)",
          "early-exit": "Transformer, 8 layers, --early-exit 2,4,8, exiting (c)",
          "to-basis": "the 8-layer Transformer projected onto legendre:4 (f)",
          "to-basis-8": "the 8-layer Transformer projected onto legendre:8 (f)",
          "strang-train-depths": "reversible Strang, bernstein:4, --train-depths 2,4,8 (e)",
          "strang-distill": "the same with --depth-distill (e)",
          "yoshida4-train-depths": "reversible Yoshida4, bernstein:4, --train-depths 2,4,8 (e)",
          "lie-trotter-train-depths": "Transformer (Lie–Trotter), bernstein:4, "
                                      "--train-depths 2,4,8 (e)",
          "macaron-train-depths": "Macaron (Strang, per-stage), bernstein:4, "
                                  "--train-depths 2,4,8 (e)",
          "strang-layered": "reversible Strang, 8 layers, no basis, trained at 8 (control)",
          "strang-one-depth": "reversible Strang, bernstein:4, trained at 8 only (control)",
          "strang-bernstein8-train-depths": "reversible Strang, bernstein:8, --train-depths "
                                            "2,4,8 (e)"}
DEPTHS = (1, 2, 4, 8, 16)
SEEDS = (0, 1, 2)


def scale(steps: int = SCALE["steps"]) -> dict:
    """The study's scale at ``steps`` training steps (one validation, at the end)."""
    return {**SCALE, "steps": steps, "eval_every": steps}


def cache_dir(steps: int = SCALE["steps"]) -> Path:
    """Where the runs of ``steps`` steps are cached: the 400-step study's folder, or its
    ``steps{N}`` subfolder."""
    return CACHE if steps == SCALE["steps"] else CACHE / f"steps{steps}"


def block(steps: int = SCALE["steps"]) -> tuple[str, Path]:
    """The doc block and figure of the study at ``steps``."""
    if steps == SCALE["steps"]:
        return "study", FIGURE
    return f"study-{steps}", FIGURE.with_name(f"{FIGURE.stem}_{steps}{FIGURE.suffix}")


def _cache_file(arm: str, seed: int, steps: int) -> Path:
    return cache_dir(steps) / f"{arm}-seed{seed}.json"


def _run_dir(runs: Path, arm: str, seed: int, steps: int) -> Path:
    tail = "" if steps == SCALE["steps"] else f"-steps{steps}"
    return runs / f"{arm}-seed{seed}{tail}"


def _train(arm: str, seed: int, runs: Path, steps: int) -> tuple[Path, float]:
    """Train one arm into ``runs``; its run folder and wall time."""
    from splitnet.configs.config import SplitConfig
    from splitnet.training.config import TrainConfig
    from splitnet.training.train import train

    sc, (net, opts), out = scale(steps), ARMS[arm], _run_dir(runs, arm, seed, steps)
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
    return out, wall


def run_one(arm: str, seed: int, runs: Path, steps: int = SCALE["steps"]) -> dict:
    """Train one arm (unless cached; ``to-basis``: project the frontier-8 run of the seed,
    trained first if its checkpoint is missing), evaluate it at each depth of DEPTHS it can
    run at (LayerDrop pruned, early exit exited: the checkpoint's rule)."""
    import torch

    from splitnet.analyses.sources import checkpoint_source
    from splitnet.nets.cost import forward_flops
    from splitnet.nets.depth import at_depth, to_basis
    from splitnet.runs import checkpoint as ck
    from splitnet.training.elastic import restriction_of
    from splitnet.training.setup import flops_per_token

    cache = _cache_file(arm, seed, steps)
    if cache.exists():
        return json.loads(cache.read_text())
    sc, (net, opts) = scale(steps), ARMS[arm]
    extra = {}
    if arm in PROJECTED:
        out = _run_dir(runs, "frontier-8", seed, steps)
        if not (out / ck.CKPT).exists():
            _train("frontier-8", seed, runs, steps)
        t0 = time.perf_counter()
        m, evaluate, _ = checkpoint_source(out, windows=sc["eval_windows"])
        m, res = to_basis(m.eval(), PROJECTED[arm], return_residual=True)
        wall, net = time.perf_counter() - t0, {**net, "depth_basis": PROJECTED[arm]}
        extra = {"source": "frontier-8", "relative_residual": res["relative"]}
    else:
        out, wall = _train(arm, seed, runs, steps)
        m, evaluate, _ = checkpoint_source(out, windows=sc["eval_windows"])
    recs = [r for r in ck.read_metrics(out / ck.METRICS) if "loss" in r]
    tokens = sc["batch_size"] * sc["context"]
    train_flops = (sum(r["step_flops"] for r in recs) if "step_flops" in recs[-1] else
                   flops_per_token(ck.load_model(out), sc["context"]) * tokens * sc["steps"])
    bpb, flops = {}, {}
    L, how = net["n_layers"], restriction_of(opts)
    with torch.no_grad():
        for n in DEPTHS:
            if net.get("depth_basis") is None and ((n % L and L % n) or (how != "mean" and n > L)):
                continue
            v = at_depth(m.eval(), n, restriction=how).eval()
            bpb[str(n)] = float(evaluate(v)) / math.log(2.0)
            flops[str(n)] = forward_flops(v.config, sc["context"])
    d = {"arm": arm, "seed": seed, "scale": sc, "wall_s": wall, "params": m.n_params(),
         "train_flops": train_flops, "bpb": bpb, "inference_flops_per_token": flops, **extra}
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(d, indent=1) + "\n")
    print(f"[{time.strftime('%H:%M:%S')}] {arm} seed {seed}: {wall:.0f} s, "
          + ", ".join(f"{k}: {v:.3f}" for k, v in bpb.items()), file=sys.stderr, flush=True)
    return d


def _ms(values) -> str:
    import numpy as np

    v = np.asarray(values)
    return f"{v.mean():.3f} ± {v.std(ddof=1):.3f}" if len(v) > 1 else f"{v.mean():.3f}"


def _bpb(by: dict, arm: str, n: int, seed: int):
    r = by.get((arm, seed))
    return None if r is None else r["bpb"].get(str(n))


def _diff(by: dict, runs: list, other: str, n: int) -> str:
    """An arm's bpb at ``n`` steps minus arm ``other``'s, paired by seed: the mean and t (one
    seed: the difference; none: a dash)."""
    from splitnet.analyses.seeds import paired

    pairs = [(r["bpb"][str(n)], _bpb(by, other, n, r["seed"])) for r in runs
             if str(n) in r["bpb"] and _bpb(by, other, n, r["seed"]) is not None]
    if runs[0]["arm"] == other or not pairs:
        return "–"
    if len(pairs) == 1:
        return f"{pairs[0][0] - pairs[0][1]:+.3f}"
    p = paired([a for a, _ in pairs], [b for _, b in pairs])
    return f"{p.mean:+.3f} (t = {p.t:.1f}, n = {len(pairs)})"


def table(results: list) -> str:
    """Validation bpb at every depth (mean ± sd over the seeds run, n), training FLOPs, each
    arm minus the frontier (the Transformer trained at that depth) at 2, 4 and 8 steps, and
    minus LayerDrop (0.5 and 0.2) and early exit at half depth (4 steps), paired by seed."""
    by = {(r["arm"], r["seed"]): r for r in results}
    head = ("| arm | seeds | train TFLOP | " + " | ".join(f"{n} steps" for n in DEPTHS) +
            " | − frontier at 2 / 4 / 8 steps (paired over seeds) | − LayerDrop 0.5 / 0.2 / − "
            "early exit at 4 steps |")
    lines = [head, "|---|---:|---:|" + "---|" * len(DEPTHS) + "---|---|"]
    for arm in LABELS:
        runs = [by[(arm, s)] for s in SEEDS if (arm, s) in by]
        if not runs:
            continue
        cells = [_ms([r["bpb"][str(n)] for r in runs]) if all(str(n) in r["bpb"] for r in runs)
                 else "" for n in DEPTHS]
        front = [_diff(by, runs, f"frontier-{n}", n) for n in (2, 4, 8)]
        half = [_diff(by, runs, o, 4) for o in ("layerdrop", "layerdrop-0.2", "early-exit")]
        fl = [r["train_flops"] for r in runs if "train_flops" in r]
        flops = f"{sum(fl) / len(fl) / 1e12:.2f}" if fl else ""
        lines.append(f"| {LABELS[arm]} | {len(runs)} | {flops} | " + " | ".join(cells)
                     + f" | {' / '.join(front)} | {' / '.join(half)} |")
    return "\n".join(lines)


GOAL_ARMS = ("strang-train-depths", "yoshida4-train-depths")   # the goals' network, [order 4]
RATE_GOAL = {"strang-train-depths": 1.8, "yoshida4-train-depths": 3.5}


def _pdiff(by: dict, arm: str, other: str, n: int):
    """``arm`` minus ``other`` at ``n`` steps paired by seed: (mean, text), or None."""
    import numpy as np

    d = [by[(arm, s)]["bpb"][str(n)] - by[(other, s)]["bpb"][str(n)] for s in SEEDS
         if (arm, s) in by and (other, s) in by and str(n) in by[(arm, s)]["bpb"]
         and str(n) in by[(other, s)]["bpb"]]
    if not d:
        return None
    m = float(np.mean(d))
    if len(d) == 1:
        return m, f"{m:+.3f} (1 seed)"
    sd = float(np.std(d, ddof=1))
    if sd == 0:
        return m, f"{m:+.3f} (every seed)"
    return m, f"{m:+.3f}, t = {m / (sd / np.sqrt(len(d))):.1f}"


def _gaps(by: dict, arm: str):
    """The mean-over-seeds loss gaps |bpb(n) - bpb(2n)| and their rates, or None."""
    import numpy as np

    from splitnet.analyses.depth import gap_rates

    runs = [by[(arm, s)] for s in SEEDS if (arm, s) in by]
    if not runs:
        return None
    gaps, rates, _ = gap_rates([(n, float(np.mean([r["bpb"][str(n)] for r in runs])))
                                for n in DEPTHS])
    return [g for _, g in gaps], rates


def _goal_rows(by: dict, arm: str) -> list:
    """(goal, measured text, met) for ``arm``; a measure it lacks is None."""
    rows = []
    for n, bound in ((8, 0.02), (4, 0.02), (2, 0.05)):
        d = _pdiff(by, arm, f"frontier-{n}", n)
        goal = (f"within {bound} bpb of the {n}-layer Transformer at {n} steps" if bound == 0.02
                else f"at most +{bound} against the {n}-layer one at {n} steps")
        rows.append((goal, d and d[1], d and d[0] <= bound))
    runs = [by[(arm, s)] for s in SEEDS if (arm, s) in by]
    up = [r["bpb"]["16"] - r["bpb"]["8"] for r in runs]
    rows.append(("no worse at 16 steps than at 8", ", ".join(f"{u:+.5f}" for u in up) +
                 " by seed" if up else None, bool(up) and max(up) <= 0))
    g = _gaps(by, arm)
    rows.append((f"the gap between n and 2n falling at rate >= {RATE_GOAL[arm]} over the "
                 f"finest two pairs", g and ("gaps " + ", ".join(f"{x:.5f}" for x in g[0]) +
                                           " for n = 1, 2, 4, 8; rates " +
                                           ", ".join(f"{x:.2f}" for x in g[1])),
                 g and g[1][-1] >= RATE_GOAL[arm]))
    for other, name in (("layerdrop", "LayerDrop 0.5"), ("layerdrop-0.2", "LayerDrop 0.2"),
                        ("early-exit", "early exit")):
        d = _pdiff(by, arm, other, 4)
        rows.append((f"at half depth 0.05 bpb better than {name}", d and d[1],
                     d and d[0] <= -0.05))
    fl = [r["train_flops"] for r in runs]
    f8 = [by[("frontier-8", s)]["train_flops"] for s in SEEDS if ("frontier-8", s) in by]
    rows.append(("training at most the FLOPs of the 8-layer run", fl and f8 and
                 f"{sum(fl) / len(fl) / 1e12:.2f} against {sum(f8) / len(f8) / 1e12:.2f} "
                 "TFLOP", bool(fl and f8) and sum(fl) / len(fl) <= sum(f8) / len(f8)))
    return rows


def goals(results: list) -> str:
    """Issue 60's goals for reversible Strang trained at 2, 4, 8 steps, measured (reversible
    Yoshida4's in brackets where it ran): mean over seeds, paired by seed."""
    by = {(r["arm"], r["seed"]): r for r in results}
    main = _goal_rows(by, GOAL_ARMS[0])
    alt = _goal_rows(by, GOAL_ARMS[1]) if any((GOAL_ARMS[1], s) in by for s in SEEDS) else None
    lines = ["| goal | reversible Strang (reversible Yoshida4) | Strang | Yoshida4 |",
             "|---|---|---|---|"]
    for k, (goal, text, met) in enumerate(main):
        other = alt[k] if alt else (None, None, None)
        cell = (text or "not run") + (f" ({other[1]})" if other[1] else "")
        verdict = "met" if met else ("missed" if text else "–")
        lines.append(f"| {goal} | {cell} | {verdict} | "
                     f"{('met' if other[2] else 'missed') if other[1] else '–'} |")
    return "\n".join(lines)


def plot(results: list, path: Path, steps: int = SCALE["steps"]) -> None:
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
    fig, axes = plt.subplots(1, 2, figsize=(12, 6.4))
    colours = dict(zip(LABELS, plt.get_cmap("tab20").colors))      # one colour per arm
    front = [(int(a.split("-")[1]), rs) for a, rs in sorted(by.items()) if a.startswith(
        "frontier")]
    for arm, rs in sorted(by.items(), key=lambda a: list(LABELS).index(a[0])):
        ns = [n for n in DEPTHS if all(str(n) in r["bpb"] for r in rs)]
        y = [np.mean([r["bpb"][str(n)] for r in rs]) for n in ns]
        f = [rs[0]["inference_flops_per_token"][str(n)] / 1e6 for n in ns]
        style = ":" if arm.startswith("frontier") else "-"
        for ax, x in zip(axes, (ns, f)):
            ax.plot(x, y, style, marker="o", ms=3, color=colours[arm],
                    label=f"{LABELS[arm]}, {len(rs)} seed(s)" if arm != "frontier-8" else
                    f"Transformer trained at 8, at other depths (a), {len(rs)} seed(s)")
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
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=2, fontsize=7, frameon=False)
    fig.suptitle(f"one network at several depths against separately trained ones ({steps} "
                 "steps; mean over the seeds run; points above 5 bpb off the scale)")
    fig.tight_layout(rect=(0, 0.25, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def add_study_options(p, runs: Path, arms, steps: int, steps_help: str = "") -> None:
    """The options the elastic studies share: --runs, --report-only, --doc, --arms, --steps."""
    p.add_argument("--runs", type=Path, default=runs)
    p.add_argument("--report-only", action="store_true", help="the table from the cache")
    p.add_argument("--doc", type=Path, default=DOC)
    p.add_argument("--arms", type=lambda v: v.split(","), default=list(arms),
                   help=f"arms to train, comma-separated (default all: {', '.join(arms)})")
    p.add_argument("--steps", type=int, default=steps,
                   help=f"training steps (default {steps}{steps_help})")


def parse_study_args(p, argv, arms):
    """``p``'s arguments, an unknown arm or a step count below 1 refused in one line (exit 2)."""
    a = p.parse_args(argv)
    unknown = [x for x in a.arms if x not in arms]
    if unknown:
        p.error(f"unknown arm(s) {', '.join(unknown)}: the arms are {', '.join(arms)}")
    if a.steps < 1:
        p.error(f"--steps must be >= 1, got {a.steps}")
    return a


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_study_options(p, ROOT / "runs" / "elastic_study", ARMS, SCALE["steps"],
                      "; another count has its own cache folder, table and figure")
    p.add_argument("--seeds", type=lambda v: [int(x) for x in v.split(",")],
                   default=list(SEEDS), help="seeds to train (default 0,1,2)")
    a = parse_study_args(p, argv, ARMS)
    if not a.report_only:
        for seed in a.seeds:
            for arm in a.arms:
                run_one(arm, seed, a.runs, a.steps)
    from splitnet.dev.docblocks import write_blocks

    blocks = {}
    for steps in studied():
        results = [json.loads(f.read_text()) for f in sorted(cache_dir(steps).glob("*.json"))]
        name, figure = block(steps)
        blocks[name] = table(results)
        blocks[name.replace("study", "goals")] = goals(results)
        plot(results, figure, steps)
    changed = write_blocks(a.doc, "elastic", blocks)
    print(f"{a.doc}: {'written' if changed else 'unchanged'}", file=sys.stderr)
    return 0


def studied() -> list[int]:
    """The step counts with cached runs: 400, and each ``steps{N}`` folder's N."""
    more = sorted(int(p.name[5:]) for p in CACHE.glob("steps*") if p.name[5:].isdigit()
                  and any(p.glob("*.json")))
    return [SCALE["steps"], *more]


if __name__ == "__main__":
    sys.exit(main())
