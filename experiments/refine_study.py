"""Is a trained network an ODE solver of its own fields? (issue 11) -> docs/refine.md

    python experiments/refine_study.py                       # everything (train, evaluate, report)
    python experiments/refine_study.py --phase train &        # two training processes share
    python experiments/refine_study.py --phase train &        # the runs (locked directories)
    python experiments/refine_study.py --phase eval           # evaluate what has finished
    python experiments/refine_study.py --report-only          # docs/refine.md and the figures

Models (``splitnet train`` at its default size: d_model 128, 4 heads, 4 layers, context 128,
batch 16, AdamW lr 2e-3, the standard-library corpus), each trained for two lengths and three
seeds (paired by seed: a seed fixes the initialisation and the batch sequence):

* ``transformer``      Lie–Trotter, shared weights (the pre-norm Transformer)
* ``strang-shared``    Strang, shared weights
* ``yoshida4-shared``  Yoshida's triple jump of Strang steps, shared weights, stages unmerged
* ``macaron``          Strang, per-stage weights (Macaron Net)
* ``transformer-ode``  Lie–Trotter trained with ``refine_prob=0.5``, ``refine_substeps=1,2,4``
                       (ODE-consistent training: half the steps run 1, 2 or 4 substeps)

Every trained model is then re-integrated (:func:`splitnet.refine.refinement_study`) with
every scheme (lie-trotter, strang, yoshida4; per-stage models also their own stages) x method
(euler, midpoint, rk4: substeps 1, 2, 4, 8; exact: substeps 1 only, see ``--exact-substeps``)
on the first ``--windows`` of the run's own validation windows. Runs go to
``--runs DIR/<model>/steps<L>/seed<k>``; a finished run is skipped and an interrupted one
resumed; each evaluation is cached in the run directory (``refine.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from splitnet import checkpoint as ck
from splitnet.config import SplitConfig, TrainConfig

MODELS = {
    "transformer": ({}, {}),
    "strang-shared": ({"scheme": "strang"}, {}),
    "yoshida4-shared": ({"scheme": "yoshida4"}, {}),
    "macaron": ({"scheme": "strang", "weights": "per-stage"}, {}),
    "transformer-ode": ({}, {"refine_prob": 0.5, "refine_substeps": (1, 2, 4)}),
}
LABELS = {
    "transformer": "Lie–Trotter (Transformer)",
    "strang-shared": "Strang shared",
    "yoshida4-shared": "Yoshida4 shared",
    "macaron": "Strang per-stage (Macaron)",
    "transformer-ode": "Lie–Trotter, ODE-consistent training (p = 0.5)",
}
# relative cost of a training step (sub-layer calls per layer, measured order of magnitude)
COST = {"transformer": 1.0, "strang-shared": 1.4, "yoshida4-shared": 3.5, "macaron": 1.3,
        "transformer-ode": 1.7}
SCHEMES = ("lie-trotter", "strang", "yoshida4")
SUBSTEPS = (1, 2, 4, 8)
METHODS = ("euler", "midpoint", "rk4", "exact")


def train_config(name: str, steps: int, seed: int, out: Path, threads: int | None,
                 device: str, resume: bool = False) -> TrainConfig:
    model, run = MODELS[name]
    return TrainConfig(model=SplitConfig(**model), steps=steps, seed=seed, out=str(out),
                       threads=threads, device=device, progress=False, eval_every=100,
                       ckpt_every=100, resume=resume, overwrite=not resume, **run)


def run_dir(runs: Path, name: str, steps: int, seed: int) -> Path:
    return runs / name / f"steps{steps}" / f"seed{seed}"


def _done_step(out: Path, want: TrainConfig) -> int | None:
    """The step of a resumable checkpoint of the same configuration in ``out``, else None."""
    try:
        state = ck.load(out)
        stored = TrainConfig.from_dict({**state["train_config"], "out": str(out)})
    except (ValueError, KeyError, TypeError):
        return None
    same = stored.replace(device=want.device, threads=want.threads, progress=False) == \
        want.replace(resume=False, overwrite=False)
    return state["step"] if same else None


def train_one(name, steps, seed, runs, threads, device) -> Path:
    """Train (or resume, or skip) one run."""
    from splitnet.train import train

    out = run_dir(runs, name, steps, seed)
    want = train_config(name, steps, seed, out, threads, device)
    done = _done_step(out, want)
    if done != steps:
        t0 = time.perf_counter()
        summary = train(want.replace(resume=done is not None, overwrite=done is None))
        if summary.get("signal"):
            raise KeyboardInterrupt
        (out / "wall.json").write_text(json.dumps({"wall_s": time.perf_counter() - t0,
                                                   "resumed": done}))
    return out


def grid_spec(a) -> dict:
    schemes = list(SCHEMES)
    return {"schemes": schemes, "substeps": list(a.substeps), "methods": list(METHODS),
            "exact_substeps": list(a.exact_substeps), "windows": a.windows}


def evaluate_one(out: Path, name: str, spec: dict, device: str) -> dict:
    """The refinement study of one finished run, cached in ``out/refine.json``."""
    from splitnet.refine import OWN, checkpoint_source, refinement_study

    cache = out / "refine.json"
    if cache.exists():
        d = json.loads(cache.read_text())
        if d.get("spec") == spec:
            return d
    model, evaluate, info = checkpoint_source(out, windows=spec["windows"], device=device)
    schemes = spec["schemes"] + ([OWN] if model.config.weights == "per-stage" else [])
    t0 = time.perf_counter()
    res = refinement_study(model, evaluate, schemes=schemes, substeps=spec["substeps"],
                           methods=spec["methods"], exact_substeps=spec["exact_substeps"],
                           label=LABELS[name])
    d = {"spec": spec, "result": res.to_dict(), "info": info,
         "eval_s": time.perf_counter() - t0}
    cache.write_text(json.dumps(d))
    return d


# the order of the long runs: the Transformer and its ODE-consistent twin first
LONG_ORDER = ("transformer", "transformer-ode", "macaron", "strang-shared", "yoshida4-shared")


def jobs(models, lengths, seeds) -> list[tuple]:
    """Every run in priority order: the shortest length for every seed first (cheapest model
    first), then each longer length seed by seed (``LONG_ORDER``). Several workers take them in
    this order; a run another worker holds is skipped (its directory is locked)."""
    out = []
    for i, L in enumerate(sorted(lengths)):
        order = sorted(models, key=lambda m: COST[m]) if i == 0 else \
            [m for m in LONG_ORDER if m in models]
        out += [(m, L, s) for s in seeds for m in order]
    return out


# ----------------------------------------------------------------------------------------------
# report


def load_results(runs: Path, models, lengths, seeds, spec) -> list[dict]:
    out = []
    for m in models:
        for L in lengths:
            for s in seeds:
                f = run_dir(runs, m, L, s) / "refine.json"
                if f.exists():
                    d = json.loads(f.read_text())
                    if d.get("spec") == spec:
                        out.append({"name": m, "steps": L, "seed": s, **d})
    return out


def _mean_sd(v) -> str:
    v = np.asarray(v, dtype=float)
    if len(v) == 0:
        return "—"
    if len(v) == 1:
        return f"{v[0]:+.3f} (1 seed)"
    return f"{v.mean():+.3f} ± {v.std(ddof=1):.3f}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--lengths", default="300,1200", help="training steps of the two lengths")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--runs", default="runs/refine")
    p.add_argument("--report", default="docs/refine.md")
    p.add_argument("--figures", default="docs/figures/refine",
                   help="figure path prefix (PREFIX_<steps>.png, PREFIX_summary.png)")
    p.add_argument("--windows", type=int, default=32,
                   help="validation windows of 128 bytes per evaluation (the first of the "
                        "run's own 256)")
    p.add_argument("--substeps", default="1,2,4,8")
    p.add_argument("--exact-substeps", default="1",
                   help="substeps for the exact method (dopri5: ~30-150 field evaluations per "
                        "sub-flow, so these dominate the cost)")
    p.add_argument("--phase", choices=["train", "eval", "all"], default="all")
    p.add_argument("--threads", type=int, default=1, help="CPU threads per process")
    p.add_argument("--device", default="cpu", choices=["auto", "cpu", "cuda"])
    p.add_argument("--report-only", action="store_true")
    a = p.parse_args(argv)
    seeds = [int(s) for s in a.seeds.split(",")]
    lengths = [int(s) for s in a.lengths.split(",")]
    models = [m.strip() for m in a.models.split(",") if m.strip()]
    for m in models:
        if m not in MODELS:
            p.error(f"unknown model {m!r}; available: {', '.join(MODELS)}")
    a.substeps = [int(k) for k in a.substeps.split(",")]
    a.exact_substeps = [int(k) for k in a.exact_substeps.split(",")]
    runs = Path(a.runs)
    spec = grid_spec(a)
    if not a.report_only:
        import torch

        torch.set_num_threads(a.threads)
        for m, L, s in jobs(models, lengths, seeds):
            t0 = time.time()
            print(f"[{time.strftime('%H:%M:%S')}] {m} steps {L} seed {s}", flush=True)
            out = run_dir(runs, m, L, s)
            if a.phase in ("train", "all"):
                try:
                    train_one(m, L, s, runs, a.threads, a.device)
                except ck.RunLocked:
                    print("    another worker has it: skipped", flush=True)
                    continue
            if a.phase in ("eval", "all"):
                if not (out / ck.CKPT).exists() or ck.load(out)["step"] != L:
                    print("    not trained yet: skipped", flush=True)
                    continue
                d = evaluate_one(out, m, spec, a.device)
                print(f"    evaluated in {d['eval_s']:.0f} s", flush=True)
            print(f"    done ({time.time() - t0:.0f} s)", flush=True)
    results = load_results(runs, models, lengths, seeds, spec)
    if results:
        write_report(results, a, models, lengths, seeds, spec, argv)
    return 0


def write_report(results, a, models, lengths, seeds, spec, argv) -> None:
    """Placeholder until the report is written (see below)."""
    print(f"{len(results)} evaluated runs", flush=True)


if __name__ == "__main__":
    sys.exit(main())
