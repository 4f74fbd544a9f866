"""Depth is a step size (issue 43): grown against full-depth training -> docs/depth.md

    python experiments/depth_study.py                 # train what is missing, evaluate, report
    python experiments/depth_study.py --report-only   # docs/depth.md from experiments/cache/depth

Language models (byte-level, the Python standard library corpus, the CPU scale of
experiments/unsplit_study.py with 8 layers: d_model 64, 4 heads, d_ff 256, context 64, batch
16, AdamW at lr 2e-3, cosine). Four arms with equal parameters at the final depth, 8 layers:

* ``transformer``  the pre-norm Transformer (Lie–Trotter, Euler sub-layers: first order)
* ``macaron``      Strang with per-stage weights, two half-width feed-forwards (Euler sub-layers)
* ``rev-lt``       reversible Lie–Trotter (shears: order 1)
* ``rev-strang``   reversible Strang (shears: order 2)

Each trained two ways, same steps, schedule and batches: ``full`` at 8 layers from the start,
``grown`` from 2 layers doubled after a third and two thirds of the steps (``--grow-at``,
:mod:`splitnet.training.growth`: 2 -> 4 -> 8). Measured per run: the validation curve (bits per
byte on 128 fixed windows every 40 steps), training FLOPs by closed form
(:func:`splitnet.nets.cost.forward_flops`, 3 x forward per token), the FLOPs a grown run needs
to reach its full-depth twin's final validation loss (paired by seed), and each trained model's
validation loss coarsened to half depth (:func:`splitnet.nets.depth.coarsen`, both
restrictions) and prolonged to twice its depth. The convergence table of prolongation comes
from :func:`splitnet.analyses.depth.prolongation_errors` (the cases of tests/test_depth.py).
Runs go to ``--runs`` (default runs/depth); each finished run's numbers to
experiments/cache/depth/, from which the report is rebuilt.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import sys
import time
from pathlib import Path

import numpy as np

from splitnet.cli._args import csv_seeds, positive_int

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "experiments" / "cache" / "depth"
SCALE = {"d_model": 64, "n_heads": 4, "n_layers": 8, "d_ff": 256, "context": 64,
         "batch_size": 16, "steps": 1200, "lr": 2e-3, "warmup": 30, "eval_every": 40,
         "eval_windows": 128}
START = 2                       # the grown runs' first depth: 2 -> 4 -> 8
ARMS = {"transformer": {"scheme": "lie-trotter"},
        "macaron": {"scheme": "strang", "weights": "per-stage"},
        "rev-lt": {"scheme": "lie-trotter", "reversible": True},
        "rev-strang": {"scheme": "strang", "reversible": True}}
LABELS = {"transformer": "Transformer (Lie–Trotter, Euler)", "macaron": "Macaron (Strang, "
          "per-stage, Euler)", "rev-lt": "reversible Lie–Trotter", "rev-strang":
          "reversible Strang"}
REGIMES = ("full", "grown", "grown-h1")
GROWN = REGIMES[1:]       # grown: from h = 4 (T = 8 throughout); grown-h1: from h = 1 (T = 2)
CONVERGENCE = [("lie-trotter", True, 1), ("strang", True, 2), ("yoshida4", True, 4),
               ("lie-trotter", False, 1), ("strang", False, 1)]


def grow_at(steps: int) -> tuple[int, int]:
    return (steps // 3, 2 * steps // 3)


def train_config(arm: str, regime: str, seed: int, out: Path, steps: int):
    from splitnet.configs.config import SplitConfig
    from splitnet.training.config import TrainConfig

    sc = SCALE
    layers = sc["n_layers"] if regime == "full" else START
    # grown: the same ODE time T = L h = 8 throughout, from h = 4 (2 layers) to the full run's
    # h = 1; grown-h1: from the usual residual step h = 1, so its 8 layers end at h = 1/4
    h = 1.0 if regime == "grown-h1" else sc["n_layers"] / layers
    model = SplitConfig(d_model=sc["d_model"], n_heads=sc["n_heads"], n_layers=layers,
                        d_ff=sc["d_ff"], max_len=sc["context"], step_size=h, **ARMS[arm])
    return TrainConfig(model=model, context=sc["context"], steps=steps,
                       batch_size=sc["batch_size"], lr=sc["lr"], warmup=sc["warmup"],
                       eval_windows=sc["eval_windows"], eval_every=sc["eval_every"],
                       ckpt_every=steps, seed=seed, device="cpu", threads=2, progress=False,
                       plot=False, out=str(out), overwrite=True,
                       grow_at=grow_at(steps) if regime in GROWN else ())


# ---------------------------------------------------------------------------------------------
# one run: train, then its numbers into the cache


def _flops_per_step(model_cfg, batch: int, context: int) -> float:
    from splitnet.nets.cost import forward_flops

    return 3.0 * forward_flops(model_cfg, context) * batch * context


def _curve(cfg, records) -> list:
    """``(step, val_bpb, cumulative training FLOPs)`` at every evaluation, the depth at each
    step from the run's --grow-at."""
    from splitnet.training.depths import grown_config

    per = [_flops_per_step(grown_config(cfg.model, sum(1 for g in cfg.grow_at if g < s)),
                           cfg.batch_size, cfg.context) for s in range(1, cfg.steps + 1)]
    cum = np.cumsum(per)
    return [(r["step"], r["val_bpb"], float(cum[r["step"] - 1]))
            for r in records if "val_bpb" in r]


def _depth_losses(out: Path) -> dict:
    """Validation bpb of the trained model, coarsened by 2 (both restrictions), prolonged by 2."""
    from splitnet.analyses.depth import depth_study
    from splitnet.analyses.sources import checkpoint_source

    model, evaluate, _ = checkpoint_source(out, windows=SCALE["eval_windows"])
    pts = depth_study(model, evaluate, coarsen_factors=(2,), prolong_factors=(2,),
                      progress=False)
    return {p.label(): p.loss / math.log(2.0) for p in pts}


def run_one(job) -> dict:
    arm, regime, seed, runs, steps = job
    import torch

    from splitnet.runs import checkpoint as ck
    from splitnet.training.train import train

    torch.set_num_threads(2)
    cache = CACHE / f"{arm}-{regime}-seed{seed}.json"
    if cache.exists():
        d = json.loads(cache.read_text())
        if d.get("steps") == steps and d.get("scale") == SCALE:
            return d
    out = Path(runs) / arm / regime / f"seed{seed}"
    cfg = train_config(arm, regime, seed, out, steps)
    t0 = time.perf_counter()
    train(cfg)
    wall = time.perf_counter() - t0
    d = {"arm": arm, "regime": regime, "seed": seed, "steps": steps, "scale": SCALE,
         "grow_at": list(cfg.grow_at), "wall_s": wall,
         "curve": _curve(cfg, ck.read_metrics(out / ck.METRICS)),
         "depth": _depth_losses(out)}
    CACHE.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(d))
    print(f"[{time.strftime('%H:%M:%S')}] {arm} {regime} seed {seed}: {wall:.0f} s, "
          f"final {d['curve'][-1][1]:.4f} bpb", flush=True)
    return d


# ---------------------------------------------------------------------------------------------
# report


def convergence_rows() -> list:
    """The prolongation convergence table: tests/test_depth.py's cases, float64."""
    import torch

    from splitnet.analyses.depth import prolongation_errors
    from splitnet.nets.models import SplitTransformer

    rows = []
    for scheme, rev, order in CONVERGENCE:
        torch.manual_seed(0)
        m = SplitTransformer(vocab_size=64, d_model=16, n_heads=2, max_len=16, n_layers=2,
                             scheme=scheme, reversible=rev).double().eval()
        x = m.embed(torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(0)))
        diffs, rates = prolongation_errors(m, x, (1, 2, 4, 8, 16, 32))
        rows.append({"scheme": scheme, "reversible": rev, "order": order, "diffs": diffs,
                     "rates": rates})
    return rows


def _ms(v, fmt=".4f") -> str:
    v = np.asarray([x for x in v if x is not None and math.isfinite(x)], dtype=float)
    if not len(v):
        return "–"
    return f"{v.mean():{fmt}}" + (f" ± {v.std(ddof=1):{fmt.lstrip('+')}}" if len(v) > 1 else "")


def _paired(a: dict, b: dict, fmt="+.4f") -> str:
    """Mean of a − b over the seeds both have, its standard error and t."""
    seeds = sorted(set(a) & set(b))
    if len(seeds) < 2:
        return "–"
    d = np.array([a[s] - b[s] for s in seeds])
    se = d.std(ddof=1) / math.sqrt(len(d))
    t = d.mean() / se if se > 0 else float("inf")
    return f"{d.mean():{fmt}} ± {se:.4f} (t = {t:.1f}, n = {len(d)})"


def to_target(full: dict, grown: dict):
    """The grown run's FLOPs to reach the full run's final validation bpb, and the full run's
    total: ``(grown FLOPs or None, full FLOPs)``."""
    target, total = full["curve"][-1][1], full["curve"][-1][2]
    hit = next((f for _, v, f in grown["curve"] if v <= target), None)
    return hit, total


def _by(results, arm, regime) -> dict:
    return {r["seed"]: r for r in results if r["arm"] == arm and r["regime"] == regime}


def flops_table(results) -> list[str]:
    lines = ["| arm | grown as | final bpb, full | final bpb, grown | grown − full (paired) | "
             "FLOPs to the full run's final bpb, grown / full | saved |",
             "|---|---|---|---|---|---|---|"]
    for arm in ARMS:
        for regime in GROWN:
            lines += _flops_row(results, arm, regime)
    return lines


def _flops_row(results, arm: str, regime: str) -> list[str]:
    full, grown = _by(results, arm, "full"), _by(results, arm, regime)
    seeds = sorted(set(full) & set(grown))
    if seeds:
        ratios = []
        for s in seeds:
            hit, total = to_target(full[s], grown[s])
            ratios.append(None if hit is None else hit / total)
        shown = ", ".join("not reached" if r is None else f"{r:.2f}" for r in ratios)
        reached = [r for r in ratios if r is not None]
        saved = f"{1 - np.mean(reached):.0%} ({len(reached)}/{len(ratios)} seeds)" if reached \
            else "–"
        fa = {s: full[s]["curve"][-1][1] for s in seeds}
        ga = {s: grown[s]["curve"][-1][1] for s in seeds}
        start = "h = 4 → 1" if regime == "grown" else "h = 1 → 1/4"
        return [f"| {LABELS[arm]} | {start} | {_ms(fa.values())} | {_ms(ga.values())} | "
                f"{_paired(ga, fa)} | {shown} | {saved} |"]
    return []


def half_depth_table(results) -> list[str]:
    lines = ["| arm | trained as | val bpb | coarsen 2, mean | coarsen 2, first | prolong 2 |",
             "|---|---|---|---|---|---|"]
    for arm in ARMS:
        for regime in REGIMES:
            rs = list(_by(results, arm, regime).values())
            if not rs:
                continue
            base = [r["depth"]["as trained"] for r in rs]
            cols = [_ms([r["depth"][k] - r["depth"]["as trained"] for r in rs], "+.4f")
                    for k in ("coarsen 2 (mean)", "coarsen 2 (first)", "prolong 2")]
            lines.append(f"| {LABELS[arm]} | {regime} | {_ms(base)} | " + " | ".join(cols) + " |")
    return lines


def half_depth_pairs(results) -> list[str]:
    """Half-depth cost (coarsen 2, mean) of each arm against the Transformer's, paired by
    seed, for each regime."""
    out = []
    for regime in REGIMES:
        ref = {s: r["depth"]["coarsen 2 (mean)"] - r["depth"]["as trained"]
               for s, r in _by(results, "transformer", regime).items()}
        for arm in list(ARMS)[1:]:
            d = {s: r["depth"]["coarsen 2 (mean)"] - r["depth"]["as trained"]
                 for s, r in _by(results, arm, regime).items()}
            out.append(f"- {regime}: {LABELS[arm]} − Transformer: {_paired(d, ref)} bpb")
    return out


def figure(results, path: Path) -> None:
    """Validation bpb against training FLOPs, one panel per arm: full (solid) and grown
    (dashed) runs, one line per seed; the grown runs' growth steps marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from splitnet.plots.style import PALETTE, save_figure

    fig, axes = plt.subplots(1, len(ARMS), figsize=(4.2 * len(ARMS), 3.6), sharey=True)
    for ax, arm in zip(axes, ARMS):
        for j, regime in enumerate(REGIMES):
            for s, r in sorted(_by(results, arm, regime).items()):
                c = np.array(r["curve"])
                ax.plot(c[:, 2] / 1e12, c[:, 1], color=PALETTE[j], lw=1,
                        ls={"full": "-", "grown": "--", "grown-h1": ":"}[regime],
                        label=None if s else {"full": "full (8 layers)",
                                              "grown": "grown 2→4→8 (h 4→1)",
                                              "grown-h1": "grown 2→4→8 (h 1→1/4)"}[regime])
        ax.set_title(LABELS[arm], fontsize=9)
        ax.set_xlabel("training TFLOPs (closed form)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("validation bits per byte")
    lo = min(r["curve"][-1][1] for r in results)
    axes[0].set_ylim(lo - 0.1, lo + 1.2)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


def _stat(results, arm, regime, key) -> float:
    rs = list(_by(results, arm, regime).values())
    return float(np.mean([r["depth"][key] - r["depth"]["as trained"] for r in rs])) if rs \
        else float("nan")


def _grown_minus_full(results, arm, regime: str = "grown") -> tuple[float, float]:
    full, grown = _by(results, arm, "full"), _by(results, arm, regime)
    d = np.array([grown[s]["curve"][-1][1] - full[s]["curve"][-1][1]
                  for s in sorted(set(full) & set(grown))])
    if len(d) < 2:
        return float("nan"), float("nan")
    return float(d.mean()), float(d.mean() / (d.std(ddof=1) / math.sqrt(len(d))))


def _saved(results, regime: str) -> str:
    """Per arm that reached it: the FLOPs saved to the full run's final loss, on how many
    seeds."""
    n = len({r["seed"] for r in results})
    out = []
    for arm in ARMS:
        pairs = [(f, _by(results, arm, regime).get(s)) for s, f in _by(results, arm, "full")
                 .items()]
        h = [to_target(f, g)[0] / to_target(f, g)[1] for f, g in pairs
             if g and to_target(f, g)[0]]
        if h:
            out.append(f"{LABELS[arm].split(' (')[0]} {1 - np.mean(h):.0%} on {len(h)} of {n} "
                       f"seeds")
    return ", ".join(out) or "none"


def _start_reading(results) -> str:
    """The grown-h1 arm's paragraph: does starting the growth at h = 1 close the reversible
    networks' gap?"""
    h1 = {arm: _grown_minus_full(results, arm, "grown-h1") for arm in ARMS}
    if any(math.isnan(d) for d, _ in h1.values()):
        return ""
    rev = [arm for arm in ARMS if arm.startswith("rev")]
    before = float(np.mean([_grown_minus_full(results, a)[0] for a in rev]))
    after = float(np.mean([h1[a][0] for a in rev]))
    verdict = ("removes most of it: the large first step was the cause" if after < 0.5 * before
               else "reduces it in part" if after < before else
               "does not reduce it: the large first step is not the cause")
    shown = ", ".join(f"{LABELS[a]} {d:+.3f} (t = {t:.1f})" for a, (d, t) in h1.items())
    return f"""
**Starting the growth at h = 1** (*grown-h1*: 2 layers at the usual residual step, 8 layers at
h = 1/4 in the end, a shorter ODE time than the full run's) tests the guess that the grown
reversible runs suffer from their first steps at h = 4, where a shear moves one block by four
times a field evaluated at the other. Final bpb against full depth: {shown}. For the reversible
networks the deficit goes from {before:+.3f} to {after:+.3f} on average: starting at h = 1
{verdict}. Reaching the full run's final loss saved: {_saved(results, "grown-h1")}. The
Transformer gains from the small start, so a saving of 40 % or more is there, but for the
first-order Transformer, not for a second-order network.
"""


def reading(results) -> str:
    """The reading, its numbers from the results (so a re-run rewrites them)."""
    v = {}
    for arm in ARMS:
        v[arm] = {k: _stat(results, arm, rg, key) for k, rg, key in (
            ("cf", "full", "coarsen 2 (mean)"), ("ff", "full", "coarsen 2 (first)"),
            ("pf", "full", "prolong 2"), ("cg", "grown", "coarsen 2 (mean)"),
            ("fg", "grown", "coarsen 2 (first)"))}
        v[arm]["d"], v[arm]["t"] = _grown_minus_full(results, arm)
    tf, rl, rs, mc = v["transformer"], v["rev-lt"], v["rev-strang"], v["macaron"]
    saved = _saved(results, "grown")
    pairs = [(f, _by(results, arm, "grown").get(s)) for arm in ARMS
             for s, f in _by(results, arm, "full").items()]
    ratio = np.mean([g["curve"][-1][2] / f["curve"][-1][2] for f, g in pairs if g])
    return f"""The question was whether a higher-order network lets depth be changed more cheaply
than a first-order one. The answer depends on the direction.

**More depth: yes, at the network's order.** Prolonging a trained full-depth network to twice
its layers (each layer copied at half the step) costs reversible Strang {rs['pf']:+.3f} bpb,
reversible Lie–Trotter {rl['pf']:+.3f}, Macaron {mc['pf']:+.3f} and the Transformer
{tf['pf']:+.3f}. A second-order reversible network is an integrator of its fields: halving its
step changes its output at O(h²), so it keeps its loss. The first-order ones (reversible
Lie–Trotter; Euler sub-layers whatever the arrangement) change at O(h) and lose it. The same
ordering as the untrained convergence table above, and as docs/reversible.md's exact-flow test.

**Less depth: no, for a network trained at full depth.** Coarsening to half depth costs every
arm more than 0.3 bpb, the second-order one included: reversible Strang {rs['cf']:+.3f} (mean
of each pair) or {rs['ff']:+.3f} (first of each pair), the Transformer {tf['cf']:+.3f} or
{tf['ff']:+.3f}. A network trained at one depth learns layers that differ from one to the
next; merging two of them is no step of the same ODE, whatever the order of the method. The
issue's goal for half-depth inference (at most 0.02 bpb for reversible Strang) is missed by far.
Networks *grown* to their depth keep much more of it: coarsening a grown network costs
{rs['cg']:+.3f} (reversible Strang), {rl['cg']:+.3f} (reversible Lie–Trotter), {mc['cg']:+.3f}
(Macaron) and {tf['cg']:+.3f} (Transformer). Their layers were copies a third of the training
ago, and the reversible ones drift apart least (paired t against the Transformer below −3).

**The restriction.** For grown networks the mean of each pair is the better restriction in every
arm; for full-depth ones the first of each pair is less bad, but costs more than 0.6 bpb
either way. So `coarsen` defaults to the mean, which is the better choice where coarsening is
usable at all; `restriction="first"` is there for the other case.

**Training by growth: cheaper for the Euler networks, not for the reversible ones.** Grown
2 → 4 → 8 over the same steps, a run costs {ratio:.2f} of the full run's FLOPs. The Transformer ends
level with its full-depth twin ({tf['d']:+.3f} bpb, t = {tf['t']:.1f}), Macaron too
({mc['d']:+.3f}, t = {mc['t']:.1f}). Reaching the full run's final loss saved: {saved}. The
reversible networks end clearly worse when grown: Lie–Trotter {rl['d']:+.3f} (t = {rl['t']:.1f}),
Strang {rs['d']:+.3f} (t = {rs['t']:.1f}), and never reach their twins' loss within the budget.
So the moonshot (at least 40 % fewer FLOPs to the same loss for a second-order network) is
missed. A higher order makes refinement cheap, but at this scale it does not make growth
cheaper, and reversibility makes growth worse.
{_start_reading(results)}"""


def report(results, path: Path, conv: list) -> None:
    rows = ["| network | declared | differences |y_f − y_2f|, f = 1, 2, 4, 8, 16 | observed "
            "rates |", "|---|---|---|---|"]
    for c in conv:
        name = ("reversible " if c["reversible"] else "plain (Euler sub-layers) ") + c["scheme"]
        rows.append(f"| {name} | {c['order']} | "
                    f"{', '.join(f'{d:.2e}' for d in c['diffs'])} | "
                    f"{', '.join(f'{r:.2f}' for r in c['rates'])} |")
    seeds = sorted({r["seed"] for r in results})
    text = TEMPLATE.format(
        convergence="\n".join(rows), flops="\n".join(flops_table(results)),
        half="\n".join(half_depth_table(results)), pairs="\n".join(half_depth_pairs(results)),
        seeds=len(seeds), steps=results[0]["steps"] if results else SCALE["steps"],
        grow=", ".join(map(str, grow_at(results[0]["steps"] if results else SCALE["steps"]))),
        wall=sum(r["wall_s"] for r in results) / 60, eval_every=SCALE["eval_every"],
        reading=reading(results) if results else "(no runs)", not_shown=NOT_SHOWN)
    path.write_text(text)
    print(f"wrote {path}")


NOT_SHOWN = """- One scale: d_model 64, 8 layers, 1200 steps, 3 seeds, one corpus. A longer run or a
  wider model may change the growth comparison, where the Transformer's gain is within seed
  noise.
- One growth schedule: 2 -> 4 -> 8 after a third and two thirds of the steps, from h = 4 or
  h = 1. Other split points and a warm-up after each growth are not tried.
- Yoshida4 networks (fourth order) are in the convergence table only, not trained here.
- Depth changes at inference are measured on the 128 validation windows the runs evaluated on,
  bits per byte only. No downstream task.
- No GPU. FLOPs are the closed form (matmuls, attention dense), not wall time; wall time per run
  is in the cache files."""


TEMPLATE = """# Depth is a step size

Layer k of a network with step h covers [k h, (k + 1) h]. `sn.depth.prolong(model, f)` gives f L
layers at step h / f (layers f k .. f k + f − 1 copies of layer k); `sn.depth.coarsen(model, f)`
gives L / f layers at step f h (each from its f layers: the mean of their weights, or the first
of them); `coarsen(prolong(m, f), f) == m`. `splitnet train --grow-at STEP,...` doubles the
depth during training (AdamW moments copied with the weights, schedule and data unchanged,
`--resume` bit-exact across a growth); `splitnet refine` prints the validation loss of a trained
model coarsened by 2 and 4 and prolonged by 2, and the cost of each layer dropped and of
each adjacent pair run as one step of 2h (`splitnet.analyses.redundancy`; docs/llama.md).
Regenerated by `python3 -m splitnet.dev regen depth` (`experiments/depth_study.py
--report-only`, from `experiments/cache/depth`).

## Prolongation converges at the network's order

A network whose layers hold one set of fields each is a time-independent ODE per layer, so
successive prolongations converge to its exact flow: for a reversible network (shears, whose
Euler step is exact) at its scheme's order, for a plain network of Euler sub-layers at order 1
whatever its scheme. Float64, d_model 16, 2 layers, default initialisation, the final state of
12 tokens (`splitnet.analyses.depth.prolongation_errors`; the cases of `tests/test_depth.py`,
which asserts the fitted slopes):

{convergence}

## Grown against full-depth training

Byte-level language model of the Python standard library, d_model 64, 4 heads, d_ff 256,
context 64, batch 16, {steps} AdamW steps (lr 2e-3, cosine), {seeds} seeds; every arm has the
parameters of an 8-layer Transformer at its final depth. *full*: 8 layers (h = 1) from the
start. *grown*: 2 layers at h = 4, doubled after steps {grow} (4 layers at h = 2, then 8 at
h = 1: the same ODE time throughout). *grown-h1*: the same growth from 2 layers at h = 1 (8
layers at h = 1/4 at the end). Validation: 128 fixed windows every {eval_every} steps.
FLOPs: the closed form of `splitnet.nets.cost` (3 × forward per token), summed over the steps
at each step's depth. *FLOPs to target*: the grown run's training FLOPs when its validation bpb
first reaches its full-depth twin's final one, as a fraction of the full run's total (paired
by seed); *saved*: 1 − their mean over the seeds that reached it.

{flops}

![validation bpb against training FLOPs](figures/depth_curves.png)

## Half depth at inference

Each trained model evaluated (the same 128 windows) as trained, coarsened to half its depth
(4 layers at h = 2; mean or first of each pair) and prolonged to twice it (16 layers at
h = 1/2); the columns are bpb against the model as trained (mean ± sd over seeds).

{half}

Paired by seed, the half-depth cost (coarsen 2, mean) against the Transformer's:

{pairs}

## Reading

{reading}
## What is not shown

{not_shown}

(Training wall time of the {seeds}-seed study: {wall:.0f} min of CPU processes, two threads each.)
"""


def load_cache() -> list:
    return [json.loads(p.read_text()) for p in sorted(CACHE.glob("*.json"))]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=Path, default=ROOT / "runs" / "depth")
    p.add_argument("--seeds", type=csv_seeds, default="0,1,2")
    p.add_argument("--arms", default=",".join(ARMS))
    p.add_argument("--steps", type=positive_int, default=SCALE["steps"])
    p.add_argument("--jobs", type=positive_int, default=1, help="runs at once (two threads each)")
    p.add_argument("--report-only", action="store_true")
    p.add_argument("--report", type=Path, default=ROOT / "docs" / "depth.md")
    a = p.parse_args(argv)
    arms = a.arms.split(",")
    bad = [x for x in arms if x not in ARMS]
    if bad:
        print(f"depth_study: unknown arm {bad[0]!r} (of {', '.join(ARMS)})", file=sys.stderr)
        return 2
    if not a.report_only:
        jobs = [(arm, regime, int(s), str(a.runs), a.steps) for s in a.seeds.split(",")
                for arm in arms for regime in REGIMES]
        if a.jobs > 1:
            with mp.get_context("spawn").Pool(a.jobs) as pool:
                pool.map(run_one, jobs, chunksize=1)
        else:
            for job in jobs:
                run_one(job)
    results = [r for r in load_cache() if r["arm"] in arms]
    figure(results, a.report.parent / "figures" / "depth_curves.png")
    report(results, a.report, convergence_rows())
    return 0


if __name__ == "__main__":
    sys.exit(main())
