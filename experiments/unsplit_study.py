"""Beyond splitting (issue 21): unsplit and learned integrators as LMs -> docs/unsplit.md

    python experiments/unsplit_study.py                  # train what is missing, evaluate, report
    python experiments/unsplit_study.py --phase train    # only train (resumable; run it again)
    python experiments/unsplit_study.py --report-only    # docs/unsplit.md from what finished

Models (byte-level, the Python standard library corpus, the CPU scale of
experiments/compare_schemes.py: d_model 64, 4 heads, 4 layers, d_ff 256, context 64, batch 16,
400 AdamW steps at lr 2e-3; every model has shared weights, so the fixed-coefficient models have
equal parameters and the learned ones 4 x stages more, the coefficients):

* ``lie-trotter``  the pre-norm Transformer, x += D(x); x += C(x)
* ``parallel``     GPT-J / GPT-NeoX's parallel block, x += D(x) + C(x) (scheme parallel, euler)
* ``strang``       C/2, D, C/2 with one C per layer (Strang shared)
* ``rk4-block``    classical RK4 of D + C per layer (scheme parallel, method rk4): the "RK4
                   block" of the whole layer, 4 evaluations of each field
* ``yoshida4``     the triple jump of Strang steps, shared weights
* ``learned-X`` / ``learned-X-pen``  the coefficients of X (lie-trotter, strang, yoshida4)
                   learned per layer (``learn_coefficients``), without and with the order
                   penalty λ = 1 (squared order conditions up to X's declared order)

Each finished run is evaluated once (cached in ``RUN/unsplit.json``): validation bits per byte,
and the refinement study of :mod:`splitnet.refine` on ``--windows`` validation windows: the own
stages (learned coefficients as they are) with 1, 2, 4 Euler substeps per layer and each layer's
unsplit ODE solved exactly; for learned models the final coefficients, their sums, the order
conditions by degree and ``check_order``'s verdict per layer. Runs go to ``--runs``
(default runs/unsplit) ``/<model>/seed<k>``; a finished run is skipped, an interrupted one
resumed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from splitnet import checkpoint as ck
from splitnet.cli._args import csv_seeds, positive_int
from splitnet.configs.config import SplitConfig
from splitnet.training.config import TrainConfig

ROOT = Path(__file__).resolve().parents[1]
SCALE = {"d_model": 64, "n_heads": 4, "n_layers": 4, "d_ff": 256, "context": 64,
         "batch_size": 16, "steps": 400, "lr": 2e-3, "warmup": 30, "eval_every": 50,
         "eval_windows": 128}
PENALTY = 1.0
FIXED = {"lie-trotter": {"scheme": "lie-trotter"}, "parallel": {"scheme": "parallel"},
         "strang": {"scheme": "strang"}, "rk4-block": {"scheme": "parallel", "method": "rk4"},
         "yoshida4": {"scheme": "yoshida4"}}
# learned-X: free; -pen: the order penalty; -proj: projected onto the order conditions after
# every optimiser step (project_coefficients: exactly a method of X's order throughout)
LEARNED = {f"learned-{k}{'-' + mode if mode else ''}": (s, mode)
           for k, s in (("lt", "lie-trotter"), ("strang", "strang"), ("y4", "yoshida4"))
           for mode in (None, "pen", "proj")}
ORDER = list(FIXED) + list(LEARNED)
LABELS = {"lie-trotter": "Lie–Trotter (Transformer)", "parallel": "parallel (GPT-J/NeoX)",
          "strang": "Strang shared", "rk4-block": "RK4 block (parallel, rk4)",
          "yoshida4": "Yoshida4 shared",
          **{k: f"learned from {s}" + {None: "", "pen": f", penalty λ={PENALTY:g}",
                                        "proj": ", projected"}[mode]
             for k, (s, mode) in LEARNED.items()}}
# relative cost of a step (field evaluations per layer), to order the runs cheapest first
COST = {"lie-trotter": 2, "parallel": 2, "strang": 3, "rk4-block": 8, "yoshida4": 9,
        "learned-lt": 2, "learned-lt-pen": 2.2, "learned-strang": 3, "learned-strang-pen": 3.3,
        "learned-y4": 9, "learned-y4-pen": 10, "learned-lt-proj": 2.3,
        "learned-strang-proj": 3.4, "learned-y4-proj": 10.5}
SUBSTEPS = (1, 2, 4)
# the figures' file names start with it (--figure-prefix: another report beside docs/unsplit.md)
FIGURE_PREFIX = ["unsplit"]
TITLE = ["Beyond splitting: unsplit and learned integrators as language models"]


def model_config(name: str) -> SplitConfig:
    base = {k: SCALE[k] for k in ("d_model", "n_heads", "n_layers", "d_ff")}
    if name in FIXED:
        return SplitConfig(**base, max_len=SCALE["context"], **FIXED[name])
    scheme, mode = LEARNED[name]
    return SplitConfig(**base, max_len=SCALE["context"], scheme=scheme, learn_coefficients=True,
                       project_coefficients=mode == "proj")


def train_config(name: str, seed: int, out: Path, threads, resume=False) -> TrainConfig:
    pen = name in LEARNED and LEARNED[name][1] == "pen"
    sc = SCALE
    return TrainConfig(model=model_config(name), context=sc["context"], steps=sc["steps"],
                       batch_size=sc["batch_size"], lr=sc["lr"], warmup=sc["warmup"],
                       eval_windows=sc["eval_windows"], eval_every=sc["eval_every"],
                       ckpt_every=sc["eval_every"], seed=seed, device="cpu", threads=threads,
                       progress=False, plot=False, out=str(out), resume=resume,
                       overwrite=not resume, order_penalty=PENALTY if pen else 0.0)


def _done_step(out: Path, want: TrainConfig) -> int | None:
    try:
        state = ck.load(out)
        stored = TrainConfig.from_dict({**state["train_config"], "out": str(out)})
    except (ValueError, KeyError, TypeError):
        return None
    same = stored.replace(threads=want.threads, progress=False, plot=False) == \
        want.replace(resume=False, overwrite=False)
    return state["step"] if same else None


def train_one(name: str, seed: int, runs: Path, threads) -> Path:
    from splitnet.training.train import train

    out = runs / name / f"seed{seed}"
    want = train_config(name, seed, out, threads)
    done = _done_step(out, want)
    if done != SCALE["steps"]:
        t0 = time.perf_counter()
        summary = train(want.replace(resume=done is not None, overwrite=done is None))
        if summary.get("signal"):
            raise KeyboardInterrupt
        (out / "wall.json").write_text(json.dumps({"wall_s": time.perf_counter() - t0,
                                                   "tok_per_s": summary.get("tok_per_s")}))
        print(f"[{time.strftime('%H:%M:%S')}] trained {name} seed {seed} in "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
    return out


# ---------------------------------------------------------------------------------------------
# evaluation of one finished run


def coefficient_summary(model) -> list[dict]:
    """Per learned layer: coefficients, field sums, order conditions by degree, and
    check_order's verdict as they are and with each field rescaled to sum 1."""
    import splitnet as sn
    from splitnet.order.algebra import lie_defects
    from splitnet.stagelists.stages import coefficient_sums, per_field_normalized

    declared = model.scheme.order
    out = []
    for stages, chk in zip(model.coefficients(), sn.check_order(model)):
        norm = per_field_normalized(stages)
        rescaled = None if norm is None else sn.check_order(list(norm), order=declared)
        out.append({"coeffs": [st.coeff for st in stages],
                    "sums": coefficient_sums(stages),
                    "defects": [float(x) for x in lie_defects(stages, max(2, min(declared, 4)))],
                    "verdict": chk.verdict,
                    "rescaled_tail": None if rescaled is None else float(rescaled.tail),
                    "rescaled_verdict": None if rescaled is None else rescaled.verdict})
    return out


def evaluate_one(out: Path, name: str, windows: int) -> dict:
    from splitnet.analyses.refine import OWN, refinement_study
    from splitnet.analyses.sources import checkpoint_source

    cache = out / "unsplit.json"
    spec = {"windows": windows, "substeps": list(SUBSTEPS), "version": 1}
    if cache.exists():
        d = json.loads(cache.read_text())
        if d.get("spec") == spec:
            return d
    model, evaluate, info = checkpoint_source(out, windows=windows)
    t0 = time.perf_counter()
    res = refinement_study(model, evaluate, schemes=[OWN], substeps=list(SUBSTEPS),
                           methods=["euler"] if model.config.method == "euler" else
                           [model.config.method], label=LABELS[name], progress=False)
    recs = ck.read_metrics(out / ck.METRICS)
    d = {"spec": spec, "name": name, "refine": res.to_dict(), "info": info,
         "final_val_bpb": [r["val_bpb"] for r in recs if "val_bpb" in r][-1],
         "val_curve": [(r["step"], r["val_bpb"]) for r in recs if "val_bpb" in r],
         "coefficient_curve": [(r["step"], r["coefficients"], r["order_defect"])
                               for r in recs if "coefficients" in r],
         "n_params": model.n_params(),
         "tok_per_s": json.loads((out / "wall.json").read_text()).get("tok_per_s")
         if (out / "wall.json").exists() else None,
         "coefficients": coefficient_summary(model) if model.config.learn_coefficients
         else None, "eval_s": None}
    d["eval_s"] = time.perf_counter() - t0
    cache.write_text(json.dumps(d))
    return d


# ---------------------------------------------------------------------------------------------
# report


def _ms(v, signed: bool = False, sci: bool = False) -> str:
    v = np.asarray([x for x in v if x is not None and math.isfinite(x)], dtype=float)
    if not len(v):
        return "–"
    f = ".1e" if sci else ("+.3f" if signed else ".3f")
    sd = f" ± {v.std(ddof=1):{'.1e' if sci else '.3f'}}" if len(v) > 1 else ""
    return f"{v.mean():{f}}{sd}"


def paired(results, a: str, b: str, key=lambda r: r["final_val_bpb"]) -> str:
    """Mean paired difference a − b over the seeds both have, ± its standard error, and t."""
    ra = {r["seed"]: key(r) for r in results if r["name"] == a}
    rb = {r["seed"]: key(r) for r in results if r["name"] == b}
    seeds = sorted(set(ra) & set(rb))
    if len(seeds) < 2:
        return "–"
    d = np.array([ra[s] - rb[s] for s in seeds])
    se = d.std(ddof=1) / math.sqrt(len(d))
    t = d.mean() / se if se > 0 else math.inf
    return f"{d.mean():+.3f} ± {se:.3f} (t = {t:+.1f}, n = {len(d)})"


def _refined(r, k) -> float:
    """bpb of the model re-integrated with its own stages in k substeps per layer ("ode": each
    layer's unsplit ODE solved exactly), on the study's validation windows."""
    if k == "ode":
        return r["refine"]["ode"]["loss"] / math.log(2)
    pts = {p["substeps"]: p["loss"] for p in r["refine"]["points"]}
    return pts.get(k, float("nan")) / math.log(2)


def _drift(r, k) -> float:
    return _refined(r, k) - _refined(r, 1)


def refine_cells(rs) -> str:
    """n = 1 on the study's windows, then the change at 2 and 4 substeps and for the ODE."""
    return (f"{_ms([_refined(r, 1) for r in rs])} | {_ms([_drift(r, 2) for r in rs], True)} | "
            f"{_ms([_drift(r, 4) for r in rs], True)} | "
            f"{_ms([_drift(r, 'ode') for r in rs], True)}")


REFINE_HEAD = ("as trained, study windows | 2 substeps (change) | 4 substeps (change) | layer "
               "ODE, exact (change)")


def fixed_table(results) -> list[str]:
    lines = [f"| model | params | field evaluations / layer | val bpb (mean ± sd) | vs "
             f"Lie–Trotter (paired) | {REFINE_HEAD} | tokens/s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name in [n for n in ORDER if n in FIXED]:
        rs = [r for r in results if r["name"] == name]
        if not rs:
            continue
        own = rs[0]["refine"]["own"]
        speed = np.median([r["tok_per_s"] for r in rs if r["tok_per_s"]])
        lines.append(
            f"| {LABELS[name]} (n={len(rs)}) | {rs[0]['n_params']:,} | {own['evals']:g} | "
            f"{_ms([r['final_val_bpb'] for r in rs])} | "
            f"{'–' if name == 'lie-trotter' else paired(results, name, 'lie-trotter')} | "
            f"{refine_cells(rs)} | {speed:,.0f} |")
    return lines


def _sum_drift(r) -> float:
    """Largest |sum of a field's coefficients − 1| over the layers."""
    return max(abs(v - 1) for layer in r["coefficients"] for v in layer["sums"].values())


def _verdicts(rs) -> str:
    """check_order per layer over the runs: as is / with each field rescaled to sum 1."""
    counts: dict = {}
    for r in rs:
        for layer in r["coefficients"]:
            tail = layer["rescaled_tail"]
            shown = round(tail) if tail is not None and math.isfinite(tail) else tail
            key = (layer["verdict"], "–" if tail is None else
                   f"{layer['rescaled_verdict']} (order {shown})")
            counts[key] = counts.get(key, 0) + 1
    return "; ".join(f"{n}× {a} / {b}" for (a, b), n in sorted(counts.items()))


def learned_table(results) -> list[str]:
    lines = [f"| model | val bpb | vs the same scheme fixed (paired) | max \\|Σ_f − 1\\| | "
             f"order defect | {REFINE_HEAD} |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name in [n for n in ORDER if n in LEARNED]:
        rs = [r for r in results if r["name"] == name]
        if not rs:
            continue
        defects = [r["coefficient_curve"][-1][2] for r in rs if r["coefficient_curve"]]
        lines.append(
            f"| {LABELS[name]} (n={len(rs)}) | {_ms([r['final_val_bpb'] for r in rs])} | "
            f"{paired(results, name, LEARNED[name][0])} | "
            f"{_ms([_sum_drift(r) for r in rs])} | {_ms(defects, sci=True)} | "
            f"{refine_cells(rs)} |")
    return lines


def _defects(rs) -> str:
    """Largest order condition of each degree (over the layers), mean over the runs."""
    degrees = len(rs[0]["coefficients"][0]["defects"])
    per = [[max(layer["defects"][d] for layer in r["coefficients"]) for r in rs]
           for d in range(degrees)]
    return ", ".join(f"{np.mean(v):.1e}" for v in per)


def verdict_table(results) -> list[str]:
    lines = ["| model | largest order condition by degree 1, 2, … (max over layers, mean over "
             "seeds) | check_order per layer, all seeds: coefficients as they are / each field "
             "rescaled to sum 1 (the method they are for the fields s_f F_f) |", "|---|---|---|"]
    for name in [n for n in ORDER if n in LEARNED]:
        rs = [r for r in results if r["name"] == name]
        if rs:
            lines.append(f"| {LABELS[name]} | {_defects(rs)} | {_verdicts(rs)} |")
    return lines


def coefficient_rows(results) -> list[str]:
    """Every layer of seed 0 of every learned model: where the coefficients went (initial value
    -> final), and each field's sum."""
    from splitnet.integrators.schemes import get

    lines = ["| model | layer | stages: initial → learned (seed 0) | sums |", "|---|---:|---|---|"]
    for name in [n for n in ORDER if n in LEARNED]:
        r = next((r for r in results if r["name"] == name and r["seed"] == 0), None)
        if r is None:
            continue
        init = get(LEARNED[name][0]).stages
        for k, layer in enumerate(r["coefficients"]):
            cells = ", ".join(f"{st.field[0]} {st.coeff:.3f}→{c:.3f}"
                              for st, c in zip(init, layer["coeffs"]))
            sums = ", ".join(f"{f[0]} {v:.3f}" for f, v in layer["sums"].items())
            lines.append(f"| {LABELS[name]} | {k} | {cells} | {sums} |")
    return lines


def figures(results, figdir: Path) -> list[Path]:
    from splitnet.plots import plot_seed_curves

    figdir.mkdir(parents=True, exist_ok=True)
    curves = {LABELS[n]: [r["val_curve"] for r in results if r["name"] == n]
              for n in ORDER if any(r["name"] == n for r in results)}
    out = [figdir / f"{FIGURE_PREFIX[0]}_val.png"]
    plot_seed_curves(curves, out[0], "step", "validation bpb",
                     title="validation bits per byte (mean ± sd over seeds)",
                     zoom_from=SCALE["steps"] / 2)
    sums, defect = {}, {}
    for n in (n for n in ORDER if n in LEARNED):
        rs = [r for r in results if r["name"] == n and r["coefficient_curve"]]
        if not rs:
            continue
        defect[LABELS[n]] = [[(s, math.log10(max(d, 1e-12))) for s, _, d in
                              r["coefficient_curve"]] for r in rs]
        for field in ("diffusion", "convection"):
            idx = [i for i, st in enumerate(_stages(n)) if st.field == field]
            sums[f"{LABELS[n]}: {field}"] = [
                [(s, float(np.mean([sum(layer[i] for i in idx) for layer in cs])))
                 for s, cs, _ in r["coefficient_curve"]] for r in rs]
    if defect:
        out.append(figdir / f"{FIGURE_PREFIX[0]}_defect.png")
        plot_seed_curves(defect, out[-1], "step", "log10 order defect (all layers)",
                         title="learned coefficients: squared order conditions up to the "
                               "declared order")
        out.append(figdir / f"{FIGURE_PREFIX[0]}_sums.png")
        plot_seed_curves(sums, out[-1], "step", "coefficient sum (mean over layers)",
                         title="learned coefficients: each field's sum (1 = consistent)")
    return out


def _stages(name: str):
    from splitnet.integrators.schemes import get

    return get(LEARNED[name][0]).stages


READING = ("<!-- BEGIN READING (hand-written; kept when the tables are regenerated) -->",
           "<!-- END READING -->")
COLUMNS = (
    "Columns. *val bpb*: validation bits per byte at the last step on the run's 128 fixed "
    "windows (mean ± sd over seeds); *paired*: the mean over seeds of the difference to the "
    "named model with the same seed (same initialisation draw and batches), ± its standard "
    "error, and t = mean / se. *As trained, study windows*: the same model on the first "
    "{windows} validation windows, where the refinement study runs; then the change in bpb when "
    "every layer is re-integrated with its own stages (learned coefficients as they are) in 2 "
    "and 4 substeps of h/n, and when every layer is replaced by the exact flow of its unsplit "
    "ODE (`splitnet.refine`): a network that is an ODE solver of its fields changes little. "
    "*Order defect*: the order penalty's value (squared order conditions up to the declared "
    "order, all layers) at the last evaluation. *Field evaluations / layer*: calls of D and C "
    "per layer and token.")


def _reading(path: Path) -> list[str]:
    """The hand-written reading of an existing report, to keep it."""
    if not path.exists():
        return [READING[0], "", "(not written yet)", "", READING[1]]
    text = path.read_text()
    if READING[0] not in text:
        return [READING[0], "", "(not written yet)", "", READING[1]]
    a, b = text.index(READING[0]), text.index(READING[1]) + len(READING[1])
    return text[a:b].splitlines()


def write_report(results, path: Path, seeds, argv, windows: int = 64) -> None:
    figs = figures(results, path.parent / "figures")
    corpora = {json.dumps(r["info"].get("corpus")) for r in results}
    sc = SCALE
    text = [
        "<!-- generated by experiments/unsplit_study.py; rewritten after every evaluation -->",
        "", f"# {TITLE[0]}", "",
        f"Command: `python3 experiments/unsplit_study.py {' '.join(argv)}` (`python3 -m "
        f"splitnet.dev regen {FIGURE_PREFIX[0]}`). Scale: d_model {sc['d_model']}, "
        f"{sc['n_heads']} heads, "
        f"{sc['n_layers']} layers, d_ff {sc['d_ff']}, context {sc['context']}, batch "
        f"{sc['batch_size']}, {sc['steps']} steps (AdamW lr {sc['lr']}, warmup {sc['warmup']}, "
        f"cosine to 10 %), shared weights, seeds {seeds}; CPU, one thread per run. Learned "
        f"coefficients: one per stage and layer, initialised from the scheme, trained with the "
        f"other weights (no weight decay), with the order penalty λ = {PENALTY:g}, without, or "
        f"projected onto the order conditions after every optimiser step "
        f"(`project_coefficients`: float64, every condition below 1e-13). "
        f"Corpus: {'; '.join(sorted(corpora))}.", "", *_reading(path), "",
        "## Parallel, Lie–Trotter, Strang, an RK4 block", "", *fixed_table(results), "",
        COLUMNS.format(windows=windows), "",
        "## Learned coefficients", "", *learned_table(results), "", *verdict_table(results),
        "", *coefficient_rows(results), "",
        *[f"![{f.stem}](figures/{f.name})" for f in figs], ""]
    path.write_text("\n".join(text))
    print(f"wrote {path}", file=sys.stderr)


# ---------------------------------------------------------------------------------------------


def jobs(models, seeds) -> list[tuple[str, int]]:
    return [(m, s) for s in seeds for m in sorted(models, key=lambda m: COST[m])]


def load(runs: Path, models, seeds, windows) -> list[dict]:
    out = []
    for m in models:
        for s in seeds:
            f = runs / m / f"seed{s}" / "unsplit.json"
            if f.exists():
                d = json.loads(f.read_text())
                if d["spec"]["windows"] == windows:
                    out.append({**d, "seed": s})
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=Path, default=ROOT / "runs" / "unsplit")
    p.add_argument("--seeds", type=csv_seeds, default="0,1,2")
    p.add_argument("--models", default=",".join(ORDER))
    p.add_argument("--windows", type=positive_int, default=64)
    p.add_argument("--threads", type=positive_int, default=1)
    p.add_argument("--phase", choices=("all", "train", "eval"), default="all")
    p.add_argument("--report-only", action="store_true")
    p.add_argument("--report", type=Path, default=ROOT / "docs" / "unsplit.md")
    p.add_argument("--figure-prefix", default="unsplit",
                   help="the figures' names start with it (default unsplit)")
    p.add_argument("--title", default=TITLE[0], help="the report's title")
    p.add_argument("--steps", type=positive_int, default=SCALE["steps"],
                   help="training steps (a smoke test; the report says which)")
    a = p.parse_args(argv)
    SCALE.update(steps=a.steps, eval_every=min(SCALE["eval_every"], a.steps))
    FIGURE_PREFIX[0], TITLE[0] = a.figure_prefix, a.title
    seeds = [int(s) for s in a.seeds.split(",")]
    models = [m for m in a.models.split(",") if m]
    bad = [m for m in models if m not in ORDER]
    if bad:
        p.error(f"unknown model(s) {bad}; available: {', '.join(ORDER)}")
    import torch

    torch.set_num_threads(a.threads)
    if not a.report_only:
        for m, s in jobs(models, seeds):
            if a.phase in ("all", "train"):
                out = train_one(m, s, a.runs, a.threads)
            else:
                out = a.runs / m / f"seed{s}"
            if a.phase in ("all", "eval") and (out / ck.CKPT).exists() and \
                    ck.load(out)["step"] == SCALE["steps"]:
                evaluate_one(out, m, a.windows)
                write_report(load(a.runs, models, seeds, a.windows), a.report, seeds, argv,
                             a.windows)
    write_report(load(a.runs, models, seeds, a.windows), a.report, seeds, argv, a.windows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
