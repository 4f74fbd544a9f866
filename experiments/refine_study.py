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

Every trained model is then re-integrated (:func:`splitnet.analyses.refine.refinement_study`) with
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
from splitnet.cli._args import csv_seeds, positive_int, seed
from splitnet.configs.config import SplitConfig
from splitnet.runs import lock as run_lock
from splitnet.training.config import TrainConfig

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
    from splitnet.training.train import train

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


# The grids (field evaluations per layer are what they cost; ``exact`` is adaptive dopri5 and
# the most expensive per evaluation). Seed 0 at the first length: every scheme x method; every
# other run: the model's own scheme refined with residual sub-steps, the headline numbers.
FULL = {"schemes": list(SCHEMES), "methods": list(METHODS),
        "substeps": {"euler": [1, 2, 4, 8], "midpoint": [1, 2, 4, 8], "rk4": [1, 2, 4],
                     "exact": [1]}}
HEADLINE = {"schemes": ["OWN-SCHEME"], "methods": ["euler"], "substeps": {"euler": [1, 2, 4, 8]}}


def grid_spec(a, seed: int, steps: int) -> dict:
    """The full grid for seed ``--full-seed`` at the first length, the headline grid for the
    rest (the budget: a full grid took ~11 min of a shared core per model)."""
    full = seed == a.full_seed and steps == a.full_steps
    return {**(FULL if full else HEADLINE), "windows": a.windows}


def evaluate_one(out: Path, name: str, spec: dict, device: str) -> dict:
    """The refinement study of one finished run, cached in ``out/refine.json``."""
    from splitnet.analyses.refine import OWN, refinement_study
    from splitnet.analyses.sources import checkpoint_source

    cache = out / "refine.json"
    if cache.exists():
        d = json.loads(cache.read_text())
        if d.get("spec") == spec:
            return d
    model, evaluate, info = checkpoint_source(out, windows=spec["windows"], device=device)
    schemes = [model.scheme.name if s == "OWN-SCHEME" else s for s in spec["schemes"]]
    schemes += [OWN] if model.config.weights == "per-stage" else []
    t0 = time.perf_counter()
    res = refinement_study(model, evaluate, schemes=schemes, substeps=spec["substeps"],
                           methods=spec["methods"], label=LABELS[name])
    d = {"spec": spec, "result": res.to_dict(), "info": info,
         "eval_s": time.perf_counter() - t0}
    cache.write_text(json.dumps(d))
    return d


def _trained(out: Path, steps: int) -> bool:
    try:
        return ck.load(out)["step"] == steps
    except ValueError:
        return False


def eval_pass(a, todo, runs) -> list:
    """Evaluate every finished run of ``todo``; returns those not trained yet."""
    left = []
    for m, L, s in todo:
        out = run_dir(runs, m, L, s)
        if not _trained(out, L):
            left.append((m, L, s))
            continue
        t0 = time.time()
        d = evaluate_one(out, m, grid_spec(a, s, L), a.device)
        if time.time() - t0 > 1:
            print(f"[{time.strftime('%H:%M:%S')}] evaluated {m} steps {L} seed {s} in "
                  f"{d['eval_s']:.0f} s", flush=True)
    return left


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


def load_results(runs: Path, models, lengths, seeds, a) -> list[dict]:
    out = []
    for m in models:
        for L in lengths:
            for s in seeds:
                f = run_dir(runs, m, L, s) / "refine.json"
                if f.exists():
                    d = json.loads(f.read_text())
                    if d.get("spec") == grid_spec(a, s, L):
                        out.append({"name": m, "steps": L, "seed": s, **d})
    return out


def _mean_sd(v, signed: bool = True) -> str:
    v = np.asarray(v, dtype=float)
    f = "+.3f" if signed else ".3f"
    if len(v) == 0:
        return "—"
    if len(v) == 1:
        return f"{v[0]:{f}} (1 seed)"
    return f"{v.mean():{f}} ± {v.std(ddof=1):.3f}"


def _result(r):
    from splitnet.analyses.refine import RefinementResult

    return RefinementResult.from_dict(r["result"])


def refined_series(res) -> dict:
    """Substeps -> value for the network refined as built: its own stages with residual
    (Euler) sub-steps ("own" when computed, else the own scheme by name: the same for shared
    weights)."""
    ser = res.series()
    key = ("own", "euler") if ("own", "euler") in ser else (res.scheme, "euler")
    return {p.substeps: res.value(p) for p in ser.get(key, [])}


def headline_rows(results, models, lengths) -> list[dict]:
    """Per (model, length): per seed, the as-trained loss and its changes under refinement."""
    rows = []
    for L in lengths:
        for m in models:
            rs = sorted((r for r in results if r["name"] == m and r["steps"] == L),
                        key=lambda r: r["seed"])
            if not rs:
                continue
            per = []
            for r in rs:
                res = _result(r)
                own = res.value(res.own)
                ser = refined_series(res)
                per.append({"seed": r["seed"], "own": own, "recorded": r["info"]["val_bpb"],
                            "ode": res.value(res.ode) - own,
                            **{f"n{k}": ser[k] - own for k in (2, 4, 8) if k in ser}})
            rows.append({"name": m, "steps": L, "per_seed": per})
    return rows


def _col(per, key):
    return [p[key] for p in per if p.get(key) is not None]


def headline_table(rows) -> list[str]:
    out = ["| model | steps | seeds | val bpb as trained (256 windows) | as trained (these 16 "
           "windows) | Δ n=2 | Δ n=4 | Δ n=8 | Δ ODE |",
           "|---|---:|---:|---|---|---|---|---|---|"]
    for r in rows:
        per = r["per_seed"]
        out.append(f"| {LABELS[r['name']]} | {r['steps']} | {len(per)} | "
                   f"{_mean_sd(_col(per, 'recorded'), False)} | "
                   f"{_mean_sd(_col(per, 'own'), False)} | "
                   + " | ".join(_mean_sd(_col(per, k)) for k in ("n2", "n4", "n8", "ode"))
                   + " |")
    return out


def paired(rows, a: str, b: str, L: int, key: str):
    """Paired-by-seed difference a - b of ``key`` at length L: (n, mean, sd, t)."""
    ra = next((r for r in rows if r["name"] == a and r["steps"] == L), None)
    rb = next((r for r in rows if r["name"] == b and r["steps"] == L), None)
    if ra is None or rb is None:
        return None
    va = {p["seed"]: p[key] for p in ra["per_seed"]}
    vb = {p["seed"]: p[key] for p in rb["per_seed"]}
    d = np.array([va[s] - vb[s] for s in sorted(set(va) & set(vb))])
    if len(d) < 2:
        return (len(d), float(d.mean()) if len(d) else float("nan"), float("nan"),
                float("nan"))
    sd = float(d.std(ddof=1))
    return len(d), float(d.mean()), sd, float(d.mean() / (sd / np.sqrt(len(d))))


def grid_table(res) -> list[str]:
    """One model's full grid as markdown: value [field evaluations per layer]."""
    ks = sorted({p.substeps for p in res.points})
    out = ["| scheme | method | " + " | ".join(f"n={k}" for k in ks) + " |",
           "|---|---|" + "---:|" * len(ks)]
    for (sch, meth), pts in res.series().items():
        by = {p.substeps: p for p in pts}
        cells = [f"{res.value(by[k]):.3f} [{by[k].evals:.0f}]" if k in by else "" for k in ks]
        name = "own stages" if sch == "own" else sch
        out.append(f"| {name} | {meth} | " + " | ".join(cells) + " |")
    ode = res.ode
    out.append(f"| unsplit ODE | exact | {res.value(ode):.3f} [{ode.evals:.0f}] |"
               + " |" * (len(ks) - 1))
    return out


def write_report(results, a, models, lengths, seeds, argv) -> None:
    from splitnet.plots import plot_refinement, plot_refinement_summary

    rows = headline_rows(results, models, lengths)
    figs = {}
    for L in lengths:
        full = [r for m in models for r in results if r["name"] == m and r["steps"] == L
                and r["seed"] == a.full_seed and r["spec"]["schemes"] == FULL["schemes"]]
        if full:
            figs[L] = Path(f"{a.figures}_{L}.png")
            plot_refinement([_result(r) for r in full], figs[L], top_above=2.5,
                            title=f"trained {L} steps, seed {a.full_seed}: each network's own "
                                  f"fields re-integrated (lines: substeps 1, 2, 4, 8 left to "
                                  f"right)")
    panels = {}
    for L in lengths:
        cur = {}
        for r in rows:
            if r["steps"] == L and all(f"n{k}" in p for p in r["per_seed"] for k in (2, 4, 8)):
                cur[LABELS[r["name"]]] = [[0.0, p["n2"], p["n4"], p["n8"], p["ode"]]
                                          for p in r["per_seed"]]
        if cur:
            panels[f"trained {L} steps"] = cur
    summary = Path(f"{a.figures}_summary.png")
    if panels:
        plot_refinement_summary(panels, [1, 2, 4, 8, "ODE"], summary,
                                ylabel="validation bpb minus the network as trained",
                                title="the network refined as built (its own stages, residual "
                                      "sub-steps, n per layer) and the ODE of its fields")
    text = render(results, rows, figs, summary if panels else None, a, lengths, seeds, argv)
    Path(a.report).parent.mkdir(parents=True, exist_ok=True)
    start, end = "<!-- BEGIN GENERATED -->", "<!-- END GENERATED -->"
    old = Path(a.report).read_text() if Path(a.report).exists() else ""
    block = f"{start}\n{text.rstrip()}\n{end}"
    if start in old and end in old:
        old = old[:old.index(start)] + block + old[old.index(end) + len(end):]
    else:
        old = (old.rstrip() + "\n\n" if old else "# Refinement\n\n") + block + "\n"
    Path(a.report).write_text(old)
    print(f"report: {a.report} ({len(results)} evaluated runs)", flush=True)


def render(results, rows, figs, summary, a, lengths, seeds, argv) -> str:
    doc = Path(a.report).parent
    cmd = "python experiments/refine_study.py " + " ".join(argv if argv is not None
                                                         else sys.argv[1:])
    lines = ["<!-- generated by experiments/refine_study.py --report-only -->", "",
             "## Headline: the network refined as built, and the ODE of its fields", "",
             (f"Δ = validation bpb of the re-integrated network minus the network as trained, "
              f"on the same {a.windows} validation windows (mean ± sd over seeds, paired by "
              f"seed). Δ n=k: every layer run as k steps of its own scheme with h/k, residual "
              f"(Euler) sub-steps, own sub-layers; Δ ODE: every layer replaced by the exact "
              f"flow of its unsplit ODE dx/dt = D_k + C_k. Seeds requested: {seeds}; lengths "
              f"{lengths} steps."), "", *headline_table(rows), ""]
    lines += ["Paired by seed against the Transformer (model − Transformer; t = mean / standard "
              "error):", "", "| model | steps | paired seeds | Δ n=2 | t | Δ ODE | t |",
              "|---|---:|---:|---|---:|---|---:|"]
    for L in lengths:
        for m in MODELS:
            a2 = paired(rows, m, "transformer", L, "n2") if m != "transformer" else None
            ao = paired(rows, m, "transformer", L, "ode") if m != "transformer" else None
            if a2 and ao and ao[0] >= 2:
                lines.append(f"| {LABELS[m]} | {L} | {ao[0]} | {a2[1]:+.3f} ± {a2[2]:.3f} | "
                             f"{a2[3]:+.1f} | {ao[1]:+.3f} ± {ao[2]:.3f} | {ao[3]:+.1f} |")
            elif a2 and ao and ao[0] == 1:
                lines.append(f"| {LABELS[m]} | {L} | 1 | {a2[1]:+.3f} | — | {ao[1]:+.3f} | — |")
    lines.append("")
    if summary is not None:
        lines += [f"![summary]({summary.relative_to(doc).as_posix()})", ""]
    lines += ["## ODE-consistent training (Lie–Trotter, refine_prob 0.5, substeps 1, 2, 4)", "",
              "| length | paired seeds | Δ val bpb as trained (256 windows), ODE-trained − "
              "plain | sd | t | Δ ODE, ODE-trained − plain | sd | t |",
              "|---:|---:|---|---:|---:|---|---:|---:|"]
    for L in lengths:
        c = paired(rows, "transformer-ode", "transformer", L, "recorded")
        o = paired(rows, "transformer-ode", "transformer", L, "ode")
        if c and o and c[0] >= 2:
            lines.append(f"| {L} | {c[0]} | {c[1]:+.4f} | {c[2]:.4f} | {c[3]:+.1f} | "
                         f"{o[1]:+.3f} | {o[2]:.3f} | {o[3]:+.1f} |")
        elif c and o and c[0] == 1:
            lines.append(f"| {L} | 1 | {c[1]:+.4f} | — | — | {o[1]:+.3f} | — | — |")
    lines += ["", f"## Every scheme x method (seed {a.full_seed}, {a.full_steps} steps)", "",
              ("bpb on the same windows, [field evaluations per layer] in brackets (one "
               "evaluation = one call of D_k or C_k; exact and the unsplit ODE: dopri5 in "
               "float32, rtol 1e-6, atol 1e-8, rejected steps included)."), ""]
    for L in lengths:
        if L in figs:
            lines += [f"![trained {L} steps]({figs[L].relative_to(doc).as_posix()})", ""]
        for r in results:
            if r["steps"] == L and r["seed"] == a.full_seed and \
                    r["spec"]["schemes"] == FULL["schemes"]:
                res = _result(r)
                lines += [f"**{LABELS[r['name']]}, {L} steps** (as trained "
                          f"{res.value(res.own):.3f} bpb on these windows; evaluation took "
                          f"{r['eval_s']:.0f} s)", "", *grid_table(res), ""]
    lines += [f"Command: `{cmd.strip()}`"]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--seeds", type=csv_seeds, default="0,1,2")
    p.add_argument("--lengths", default="300,1200", help="training steps of the two lengths")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--runs", default="runs/refine")
    p.add_argument("--report", default="docs/refine.md")
    p.add_argument("--figures", default="docs/figures/refine",
                   help="figure path prefix (PREFIX_<steps>.png, PREFIX_summary.png)")
    p.add_argument("--windows", type=positive_int, default=16,
                   help="validation windows of 128 bytes per evaluation (the first of the "
                        "run's own 256)")
    p.add_argument("--full-seed", type=seed, default=0,
                   help="the seed whose run at --full-steps gets the full grid (every other "
                        "run: the headline grid)")
    p.add_argument("--full-steps", type=positive_int, default=300,
                   help="the training length whose --full-seed run gets the full grid")
    p.add_argument("--wait", action="store_true",
                   help="--phase eval: wait for runs still training, evaluate them as they end")
    p.add_argument("--phase", choices=["train", "eval", "all"], default="all")
    p.add_argument("--threads", type=positive_int, default=1, help="CPU threads per process")
    p.add_argument("--device", default="cpu", choices=["auto", "cpu", "cuda"])
    p.add_argument("--report-only", action="store_true")
    a = p.parse_args(argv)
    seeds = [int(s) for s in a.seeds.split(",")]
    lengths = [int(s) for s in a.lengths.split(",")]
    models = [m.strip() for m in a.models.split(",") if m.strip()]
    for m in models:
        if m not in MODELS:
            p.error(f"unknown model {m!r}; available: {', '.join(MODELS)}")
    runs = Path(a.runs)
    if not a.report_only:
        import torch

        torch.set_num_threads(a.threads)
        todo = jobs(models, lengths, seeds)
        if a.phase in ("train", "all"):
            for m, L, s in todo:
                print(f"[{time.strftime('%H:%M:%S')}] {m} steps {L} seed {s}", flush=True)
                try:
                    train_one(m, L, s, runs, a.threads, a.device)
                except run_lock.RunLocked:
                    print("    another worker has it: skipped", flush=True)
        while a.phase in ("eval", "all") and todo:
            todo = eval_pass(a, todo, runs)
            if todo and a.phase == "eval" and a.wait:
                time.sleep(60)
            else:
                break
    results = load_results(runs, models, lengths, seeds, a)
    if results:
        write_report(results, a, models, lengths, seeds, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
