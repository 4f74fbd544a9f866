"""Compare splitting schemes as byte-level language models at equal parameters and tokens.

    python experiments/compare_schemes.py                 # CPU scale, 8 seeds (~1 h on 2 cores)
    python experiments/compare_schemes.py --scale gpu --device cuda --compile
    python experiments/compare_schemes.py --scale gpu-deep --device cuda --compile \
        --models transformer,sandwich --seeds 0,1,2     # 16 layers, sandwich k = 7

Six models and a control, each trained by ``splitnet.training.train`` with the same data order (per
seed), optimiser, schedule and number of tokens:

* ``transformer``   Lie–Trotter, shared weights: the pre-norm Transformer, (sf)^n.
* ``macaron``       Strang per-stage: ½FFN, attention, ½FFN with half-width FFNs (Macaron Net).
* ``strang-shared`` Strang with one FFN per layer used for both half steps (same parameters
                    as the Transformer, 2 FFN calls per layer).
* ``yoshida4-shared`` Yoshida's triple jump of Strang steps, shared weights, stages not merged
                    (6 FFN and 3 attention calls per layer).
* ``sandwich``      the pattern s^k (sf)^(n-k) f^k (k = ``sandwich_k`` of the scale; 7 of 16 at
                    ``gpu-deep``, as Press et al.'s 16-layer Toronto Books model, ~0.4 n)
                    as ONE per-stage layer with h = n, so every
                    sub-layer is ``x + f(x)`` and the sub-layers are exactly the Transformer's
                    n attention and n FFN blocks, only reordered (equal parameters by
                    construction).
* ``sdu-gates``     the Transformer with sigmoid SDU gates on both fields of the bottom two
                    layers (Highway Transformer); d_ff is shrunk so parameters match.
* ``interleaved``   control: (sf)^n built exactly like the sandwich; must tie with the
                    Transformer.

Runs go to ``--runs DIR/<model>/seed<k>``; a finished run is skipped and an interrupted one is
resumed, so the script can be restarted at any time. After every run ``results.json`` and the
report (``--report``, default docs/results.md) and figure are rewritten from what has finished;
a subset (fewer models or seeds, other steps, lr or corpus) writes them into the run directory
instead, so it never overwrites the tracked docs.
The report records the corpus each run was trained on (its fingerprint: source with the Python
version for the default corpus, files, bytes, hash), since the default corpus differs between
installations, and each model's steady-state tokens/s. ``--max-minutes`` stops starting new runs
after that long (a time-sliced job: run the command again to go on).

Start-up is light: parameter counts are taken on the meta device, only for the requested models,
and torch, the trainer and matplotlib are imported when first needed.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np

from splitnet.cli._args import csv_seeds, positive_int
from splitnet.configs.config import SplitConfig
from splitnet.training.config import TrainConfig

T_LAUNCH = time.perf_counter()

SCALES = {
    # d_model 64, 4 layers, context 64, 16 x 64 tokens per step, 400 steps = 410k bytes/run
    # (sized so 18 runs fit in about an hour on 2 cores shared with other jobs).
    "cpu": {"d_model": 64, "n_heads": 4, "n_layers": 4, "d_ff": 256, "context": 64,
            "batch_size": 16, "steps": 400, "lr": 2e-3, "warmup": 30, "eval_every": 50,
            "eval_windows": 128, "sandwich_k": 2},
    # The same models trained 4x longer (1.64M bytes/run): does the ranking survive?
    "cpu-long": {"d_model": 64, "n_heads": 4, "n_layers": 4, "d_ff": 256, "context": 64,
                 "batch_size": 16, "steps": 1600, "lr": 2e-3, "warmup": 30, "eval_every": 200,
                 "eval_windows": 128, "sandwich_k": 2},
    # GPT-2-small-like width at 6 layers: 64 x 256 tokens per step, 5000 steps = 82M tokens.
    "gpu": {"d_model": 384, "n_heads": 6, "n_layers": 6, "d_ff": 1536, "context": 256,
            "batch_size": 64, "steps": 5000, "lr": 1e-3, "warmup": 200, "eval_every": 250,
            "eval_windows": 1024, "sandwich_k": 2},
    # The depth at which the sandwich paper reported its language-modelling gains: 16 layers,
    # sandwich coefficient k = 7 (Press et al. 2020, Toronto Books, 16 layers: k = 7, ~0.4 n).
    "gpu-deep": {"d_model": 384, "n_heads": 6, "n_layers": 16, "d_ff": 1536, "context": 256,
                 "batch_size": 64, "steps": 5000, "lr": 1e-3, "warmup": 200, "eval_every": 250,
                 "eval_windows": 1024, "sandwich_k": 7},
}

ORDER = ["transformer", "macaron", "strang-shared", "yoshida4-shared", "sandwich", "sdu-gates",
         "interleaved"]
LABELS = {
    "transformer": "Lie–Trotter (Transformer)",
    "macaron": "Strang per-stage (Macaron)",
    "strang-shared": "Strang shared",
    "yoshida4-shared": "Yoshida4 shared",
    "sandwich": "Sandwich pattern",
    "sdu-gates": "Lie–Trotter + SDU gates (layers 0,1)",
    "interleaved": "Interleaved pattern (control)",
}


def sandwich_pattern(n: int, k: int) -> str:
    """s^k (sf)^(n-k) f^k (Press et al. 2020)."""
    if not 0 < k < n:
        raise ValueError(f"sandwich needs 0 < k < n, got k={k}, n={n}")
    return "s" * k + "sf" * (n - k) + "f" * k


def model_options(name: str, sc: dict) -> SplitConfig:
    """The model ``name`` at scale ``sc`` (the gated model's d_ff solved for parameter
    parity)."""
    base = SplitConfig(d_model=sc["d_model"], n_heads=sc["n_heads"], n_layers=sc["n_layers"],
                       d_ff=sc["d_ff"], max_len=sc["context"])
    n = sc["n_layers"]
    variants = {
        "transformer": {},
        "macaron": {"scheme": "strang", "weights": "per-stage"},
        "strang-shared": {"scheme": "strang"},
        "yoshida4-shared": {"scheme": "yoshida4"},
        "sandwich": {"scheme": sandwich_pattern(n, sc["sandwich_k"]), "weights": "per-stage",
                     "n_layers": 1, "step_size": float(n)},
        # (sf)^n built exactly like the sandwich: the Transformer again
        "interleaved": {"scheme": "sf" * n, "weights": "per-stage", "n_layers": 1,
                        "step_size": float(n)},
    }
    if name in variants:
        return base.replace(**variants[name])
    if name == "sdu-gates":
        g = base.replace(gate="sigmoid", gate_layers=(0, 1))
        # parameters are affine in d_ff: solve n(d_ff) = n(transformer) from two widths
        a, b = n_params(g.replace(d_ff=64)), n_params(g.replace(d_ff=128))
        d_ff = round(64 + (n_params(base) - a) * 64 / (b - a))
        return g.replace(d_ff=d_ff)
    raise ValueError(f"unknown model {name!r}; available: {', '.join(ORDER)}")


def layer_diagram(opts: SplitConfig) -> str:
    """Sub-layers of one layer with their step c*h (``f.5`` = x + 0.5 f(x))."""
    out = []
    for st in opts.resolved_scheme().stages:
        c = st.coeff * opts.step_size
        tag = "s" if st.field == "diffusion" else "f"
        out.append(tag if abs(c - 1) < 1e-12 else f"{tag}{c:.3g}".replace("0.", "."))
    return " ".join(out)


def n_params(cfg: SplitConfig) -> int:
    """Parameters of the model, counted on the meta device (no memory, no time)."""
    import torch

    from splitnet.nets.models import SplitTransformer

    with torch.device("meta"):
        return SplitTransformer.from_config(cfg).n_params()


def train_config(opts: SplitConfig, sc: dict, seed: int, out: Path, device: str,
                 compile_: bool, resume: bool, threads: int | None = None) -> TrainConfig:
    return TrainConfig(model=opts, text=sc.get("text"), context=sc["context"], steps=sc["steps"],
                       batch_size=sc["batch_size"], lr=sc["lr"], warmup=sc["warmup"],
                       eval_windows=sc["eval_windows"], eval_every=sc["eval_every"],
                       ckpt_every=sc["eval_every"], seed=seed, device=device,
                       compile=compile_, threads=threads, progress=False, out=str(out),
                       resume=resume, overwrite=not resume)


def _done_step(out: Path, want: TrainConfig) -> int | None:
    """The step of a resumable checkpoint of the same configuration in ``out``, else None."""
    from splitnet import checkpoint as ck

    try:
        state = ck.load(out)
        stored = TrainConfig.from_dict({**state["train_config"], "out": str(out)})
    except (ValueError, KeyError, TypeError):      # none, unreadable or another layout
        return None
    same = stored.replace(device=want.device, compile=want.compile, threads=want.threads,
                          progress=False) == want.replace(resume=False, overwrite=False)
    return state["step"] if same else None


FIRST_STEP: dict = {}     # launch -> first training step, seconds (the first run trained here)


def _train(want: TrainConfig, out: Path, done_step) -> None:
    from splitnet.training.train import train

    t0 = time.perf_counter()
    summary = train(want.replace(resume=done_step is not None, overwrite=done_step is None))
    wall = time.perf_counter() - t0
    if summary.get("signal"):
        raise KeyboardInterrupt
    if not FIRST_STEP and summary.get("first_step_s") is not None:
        FIRST_STEP["s"] = t0 - T_LAUNCH + summary["startup_s"] + summary["first_step_s"]
        print(f"    launch -> first training step: {FIRST_STEP['s']:.1f} s", flush=True)
    (out / "wall.json").write_text(json.dumps({
        "wall_s": wall, "resumed": done_step, "tok_per_s": summary.get("tok_per_s"),
        "mfu": summary.get("mfu"), "compile_s": summary.get("compile_s")}))


def steady_tokens_s(recs: list[dict]) -> float:
    """Tokens per step / the median step time over the steps after the first tenth (at least
    two): the trainer's own steady-state figure (compilation and warm-up left out)."""
    skip = min(len(recs) - 1, max(2, len(recs) // 10))
    return recs[0]["tokens"] / recs[0]["step"] / float(np.median([r["step_s"]
                                                                  for r in recs[skip:]]))


def run_one(name, sc, seed, runs: Path, device, compile_, threads=None) -> dict:
    """Train (or resume, or skip) one run; return its record from metrics.jsonl, with the
    corpus it was trained on (the checkpoint's fingerprint) and its steady tokens/s."""
    from splitnet import checkpoint as ck

    out = runs / name / f"seed{seed}"
    opts = model_options(name, sc)
    want = train_config(opts, sc, seed, out, device, compile_, False, threads)
    done_step = _done_step(out, want)
    if done_step != sc["steps"]:
        _train(want, out, done_step)
    recs = ck.read_metrics(out / ck.METRICS)
    wall = None
    if (out / "wall.json").exists():
        wall = json.loads((out / "wall.json").read_text())["wall_s"]
    val = [(r["step"], r["val_bpb"]) for r in recs if "val_bpb" in r]
    train_curve = [(r["step"], r["bpb"]) for r in recs]
    ms_step = float(np.median([r["tokens"] / r["step"] / r["tok_per_s"] * 1e3 for r in recs]))
    corpus = ck.load(out).get("corpus")
    return {"name": name, "seed": seed, "n_params": n_params(opts),
            "options": opts.to_dict(), "val_curve": val, "train_curve": train_curve,
            "final_val_bpb": val[-1][1], "steps": recs[-1]["step"], "tokens": recs[-1]["tokens"],
            "wall_s": wall, "median_ms_per_step": ms_step, "tokens_s": steady_tokens_s(recs),
            "corpus": corpus, "python": platform.python_version(), "device": device}


# ----------------------------------------------------------------------------------------------
# report

def _mean_std(v):
    v = np.asarray(v, dtype=float)
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else float("nan")


def verdict(results, a: str, b: str, at=None, tie: bool = False) -> tuple[str, dict]:
    """Does ``a`` reach a lower validation bpb than ``b``? Paired by seed (same data order).

    ``at``: compare at this eval step instead of the last. With t = mean paired difference /
    its standard error (negative = a lower): t <= -2 *supported*; -2 < t <= -1 *weakly
    supported*; |t| < 1 *inconclusive*; 1 <= t < 2 *weakly contradicted*; t >= 2 *contradicted
    (the opposite holds)*. ``tie``: a control expected to tie; |t| < 2 is *consistent with a
    tie*.
    """
    def val_at(r):
        if at is None:
            return r["final_val_bpb"]
        return {int(s): v for s, v in r["val_curve"]}.get(at)

    ra = {r["seed"]: val_at(r) for r in results if r["name"] == a}
    rb = {r["seed"]: val_at(r) for r in results if r["name"] == b}
    seeds = sorted(s for s in set(ra) & set(rb) if ra[s] is not None and rb[s] is not None)
    if len(seeds) < 2:
        return "not enough paired seeds", {"n": len(seeds)}
    d = np.array([ra[s] - rb[s] for s in seeds])
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    se = sd / math.sqrt(len(d))
    t = mean / se if se > 0 else math.copysign(math.inf, mean)
    info = {"n": len(seeds), "mean_diff": mean, "sd_diff": sd, "se": se, "t": t,
            "wins": int((d < 0).sum())}
    if tie:
        v = "consistent with a tie" if abs(t) < 2 else "differs (check the set-up)"
    elif t <= -2:
        v = "supported"
    elif t <= -1:
        v = "weakly supported"
    elif t < 1:
        v = "inconclusive (within seed noise)"
    elif t < 2:
        v = "weakly contradicted"
    else:
        v = "contradicted (the opposite holds)"
    return v, info


def plot(results, path: Path, sc: dict) -> None:
    """Validation curves per model (mean ± std over seeds), via splitnet.plots."""
    from splitnet.plots import plot_seed_curves

    curves = {}
    tok_per_step = sc["batch_size"] * sc["context"]
    for name in ORDER:
        rs = [r for r in results if r["name"] == name]
        if rs:
            curves[f"{LABELS[name]} (n={len(rs)})"] = [
                [(s * tok_per_step / 1e3, v) for s, v in r["val_curve"]] for r in rs]
    plot_seed_curves(curves, path, xlabel="training tokens (thousands)",
                     ylabel="validation bpb",
                     title="validation bits per byte (mean ± std over seeds)",
                     zoom_from=sc["steps"] / 2 * tok_per_step / 1e3)


def _tokens_s(r: dict, sc: dict) -> float:
    """A run's steady tokens/s; records written before it was kept: from its median step."""
    if r.get("tokens_s"):
        return r["tokens_s"]
    return sc["batch_size"] * sc["context"] / (r["median_ms_per_step"] / 1e3)


def corpus_lines(results) -> list[str]:
    """Which corpus the table's runs were trained on: one line per distinct fingerprint (the
    default corpus differs between installations, so a figure is comparable only on the same
    fingerprint), and a warning when the runs saw different corpora."""
    from splitnet.runs.data import describe_fingerprint

    seen: dict = {}
    for r in results:
        fp, py = r.get("corpus"), r.get("python")
        key = json.dumps(fp, sort_keys=True) + str(py)
        seen.setdefault(key, [fp, py, 0])[2] += 1
    lines = []
    for fp, py, n in seen.values():
        what = (describe_fingerprint(fp) if fp else "not recorded (runs made before the corpus "
                "fingerprint was kept)")
        lines.append(f"Corpus ({n} runs): {what}" + (f"; Python {py}" if py else "") + ".")
    if len(seen) > 1:
        lines.append("**Warning: these runs were trained on different corpora; compare only "
                     "runs with the same fingerprint.**")
    return lines or ["Corpus: no run finished yet."]


def write_report(results, path: Path, fig: Path, sc: dict, scale: str, cmd: str,
                 seeds: list[int], extra: str = "", models=None) -> None:
    base = [r for r in results if r["name"] == "transformer"]
    p0 = base[0]["n_params"] if base else None
    lines = [("<!-- generated by experiments/compare_schemes.py; table rewritten after every run "
             "-->"), "", f"## Comparison table: scale `{scale}`", "",
             (f"Scale `{scale}`: d_model {sc['d_model']}, {sc['n_heads']} heads, "
             f"{sc['n_layers']} layers (steps of the scheme), d_ff {sc['d_ff']}, context "
             f"{sc['context']}, batch {sc['batch_size']} sequences, {sc['steps']} steps = "
             f"{sc['steps'] * sc['batch_size'] * sc['context']:,} training bytes per run, AdamW "
             f"lr {sc['lr']} (warmup {sc['warmup']}, cosine to 10%), validation on "
             f"{sc['eval_windows']} fixed windows of the held-out files every "
             f"{sc['eval_every']} steps. Seeds requested: {seeds}."), "",
             f"Command: `{cmd}`", "", *corpus_lines(results), "",
             ("| model | sub-layers of one layer (c·h) | params | Δ params | seeds done "
              "| final val bpb (mean ± std) | per seed | median ms/step* | tokens/s* |"),
             "|---|---|---:|---:|---:|---|---|---:|---:|"]
    shown = [m for m in ORDER if models is None or m in models
             or any(r["name"] == m for r in results)]
    for name in shown:
        rs = sorted((r for r in results if r["name"] == name), key=lambda r: r["seed"])
        opts = model_options(name, sc)
        pat = f"`{layer_diagram(opts)}` (x{opts.n_layers}"
        pat += f", h={opts.step_size:g})" if opts.n_layers != sc["n_layers"] else ")"
        np_ = n_params(opts)
        dp = f"{100 * (np_ - p0) / p0:+.2f}%" if p0 else "?"
        if rs:
            m, s = _mean_std([r["final_val_bpb"] for r in rs])
            ms = float(np.median([r["median_ms_per_step"] for r in rs]))
            tps = float(np.median([_tokens_s(r, sc) for r in rs]))
            per = ", ".join(f"{r['final_val_bpb']:.4f}" for r in rs)
            sd = f"{m:.4f} ± {s:.4f}" if len(rs) > 1 else f"{m:.4f} (one seed)"
            lines.append(f"| {LABELS[name]} | {pat} | {np_:,} | {dp} | {len(rs)} | {sd} | "
                         f"{per} | {ms:.0f} | {tps:,.0f} |")
        else:
            lines.append(f"| {LABELS[name]} | {pat} | {np_:,} | {dp} | 0 | not run | | | |")
    lines += ["", ("*Median over seeds of each run's median milliseconds per step and of its "
              "steady-state tokens/s (steps after the first tenth). On a CPU shared with other "
              "jobs (1 thread per run) they indicate relative cost only; on a GPU they are "
              "the card's throughput at this size."), "",
              f"![validation curves]({fig.relative_to(path.parent).as_posix()})", "",
              f"## Verdicts at scale `{scale}` (computed from the table)", "",
              ("Paired by seed (a seed fixes the batch sequence and the initialisation, so "
               "paired runs see the same bytes). Δ = claimed winner − baseline (negative = the "
               "claim holds); t = mean Δ / its standard error over seeds. Rule: t ≤ −2 "
               "*supported*; −2 < t ≤ −1 *weakly supported*; |t| < 1 *inconclusive*; "
               "1 ≤ t < 2 *weakly contradicted*; t ≥ 2 *contradicted*. Controls expected to "
               "tie: |t| < 2 is *consistent with a tie*."), ""]
    mid = sc["steps"] // 4 // sc["eval_every"] * sc["eval_every"] or sc["eval_every"]
    claims = [("Macaron beats the Transformer (Lu et al. 2019)", "macaron", "transformer",
               None),
              ("Sandwich beats interleaving for LM (Press et al. 2020)", "sandwich",
               "transformer", None),
              ("Sandwich vs the interleaved pattern built the same way (control)", "sandwich",
               "interleaved", None),
              ("Control: interleaved pattern vs Transformer (same network, should tie)",
               "interleaved", "transformer", None, True),
              ((f"SDU gates speed convergence (Chai et al. 2020): val bpb at step {mid} "
               f"(a quarter of training)"), "sdu-gates", "transformer", mid),
              ("SDU gates: final val bpb", "sdu-gates", "transformer", None),
              ("Strang shared vs Transformer (same weights, more calls)", "strang-shared",
               "transformer", None),
              ("Yoshida4 shared vs Transformer", "yoshida4-shared", "transformer", None)]
    lines += [("| claim | paired seeds | mean Δ bpb | sd of Δ | t = Δ / s.e. | claimed winner "
               "lower on | verdict |"), "|---|---:|---:|---:|---:|---:|---|"]
    for text, a, b, at, *tie in claims:
        if a not in shown or b not in shown:
            continue
        v, info = verdict(results, a, b, at, tie=bool(tie))
        if info.get("n", 0) >= 2:
            t = info["t"]
            lines.append(f"| {text} | {info['n']} | {info['mean_diff']:+.4f} | "
                         f"{info['sd_diff']:.4f} | {t:+.1f} | {info['wins']}/{info['n']} | {v} |")
        else:
            lines.append(f"| {text} | {info.get('n', 0)} | | | | | {v} |")
    lines += ["", extra]
    path.parent.mkdir(parents=True, exist_ok=True)
    text = path.read_text() if path.exists() else ""
    start, end = f"<!-- BEGIN GENERATED {scale} -->", f"<!-- END GENERATED {scale} -->"
    block = start + "\n" + "\n".join(lines).rstrip() + "\n" + end
    if start in text and end in text:
        text = text[:text.index(start)] + block + text[text.index(end) + len(end):]
    else:
        text = (text.rstrip() + "\n\n" if text else "# Results\n\n") + block + "\n"
    path.write_text(text)


def outputs(a, models: list, runs: Path, default_seeds: str) -> tuple[Path, Path]:
    """(report, figure): docs/results.md and docs/figures/compare_SCALE.png for the full
    comparison (every model, the default seeds, the scale's own steps, lr and corpus), else
    RUNS/report.md and RUNS/compare.png, so a subset never overwrites the tracked study;
    --report and --figure win."""
    full = (models == list(ORDER) and a.seeds == default_seeds
            and not (a.steps or a.lr or a.text))
    fig = Path(a.figure or (f"docs/figures/compare_{a.scale}.png" if full
                            else runs / "compare.png"))
    report = Path(a.report or ("docs/results.md" if full else runs / "report.md"))
    return report, fig


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--scale", choices=sorted(SCALES), default="cpu")
    p.add_argument("--seeds", type=csv_seeds, default="0,1,2,3,4,5,6,7",
                   help="comma-separated seeds (the cpu default, 8 seeds x 7 models, took about "
                        "50 minutes on a loaded 2-core machine)")
    p.add_argument("--models", default=",".join(ORDER), help="comma-separated subset")
    p.add_argument("--steps", type=positive_int, default=None, help="override the scale's steps")
    p.add_argument("--lr", type=float, default=None,
                   help="override the scale's peak learning rate (use another --runs)")
    p.add_argument("--runs", default=None, help="run directory (default runs/compare-SCALE)")
    p.add_argument("--report", default=None,
                   help="report path (default docs/results.md for the full comparison: every "
                        "model, the default seeds and the scale's own steps, lr and corpus; "
                        "RUNS/report.md for a subset, so a partial study never overwrites the "
                        "tracked one)")
    p.add_argument("--figure", default=None,
                   help="figure path (default docs/figures/compare_SCALE.png for the full "
                        "comparison, RUNS/compare.png for a subset)")
    p.add_argument("--text", default=None,
                   help="corpus (default: the Python standard library's .py files)")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--compile", action="store_true")
    p.add_argument("--threads", type=positive_int, default=1,
                   help="CPU threads per run (1 is fastest on a shared 2-core machine: with 2 "
                        "threads and other load, OpenMP waits made a step 8x slower); 0 = torch's "
                        "default")
    p.add_argument("--params-only", action="store_true",
                   help="print the parameter counts and exit")
    p.add_argument("--max-minutes", type=float, default=None,
                   help="start no new run after this many minutes (run again to go on: "
                        "finished runs are skipped, an interrupted one resumes)")
    p.add_argument("--report-only", action="store_true",
                   help="rewrite the report and figure from RUNS/results.json and exit")
    a = p.parse_args(argv)
    sc = dict(SCALES[a.scale])
    if a.steps:
        sc["steps"] = a.steps
    if a.lr:
        sc["lr"] = a.lr
    if a.text:
        sc["text"] = a.text
    seeds = [int(s) for s in a.seeds.split(",") if s.strip()]
    models = [m.strip() for m in a.models.split(",") if m.strip()]
    for m in models:
        if m not in ORDER:
            p.error(f"unknown model {m!r}; available: {', '.join(ORDER)}")
    p0 = n_params(model_options("transformer", sc))
    for m in models:
        o = model_options(m, sc)
        n = n_params(o)
        print(f"{m:<16} params {n:>10,} ({100 * (n - p0) / p0:+.2f}%)  scheme {o.scheme} "
              f"weights {o.weights} d_ff {o.d_ff} layers {o.n_layers} h {o.step_size}",
              flush=True)
        if abs(n - p0) / p0 > 0.02:
            raise SystemExit(f"{m}: parameter count off by more than 2%")
    if a.params_only:
        return 0
    runs = Path(a.runs or f"runs/compare-{a.scale}")
    report, fig = outputs(a, models, runs, p.get_default("seeds"))
    cmd = "python experiments/compare_schemes.py " + " ".join(argv if argv is not None
                                                             else sys.argv[1:])
    res_path = runs / "results.json"
    if a.report_only:
        results = json.loads(res_path.read_text())
        plot(results, fig, sc)
        write_report(results, report, fig, sc, a.scale, cmd.replace(" --report-only", "").strip(),
                     seeds, models=models)
        return 0
    results = json.loads(res_path.read_text()) if res_path.exists() else []
    # Seed-major, cheapest first: a partial run has every model at seed 0 first, and the
    # expensive Yoshida4 (9 sub-layer calls per layer) never blocks the others.
    by_cost = sorted(models, key=lambda m: m == "yoshida4-shared")
    todo = [(seed, m) for seed in seeds for m in by_cost]
    for i, (seed, m) in enumerate(todo):
        if a.max_minutes is not None and time.perf_counter() - T_LAUNCH > 60 * a.max_minutes:
            print(f"--max-minutes {a.max_minutes:g} reached: {len(todo) - i} runs left; run the "
                  f"same command again to go on", flush=True)
            return 3
        t0 = time.time()
        print(f"[{time.strftime('%H:%M:%S')}] {m} seed {seed} ...", flush=True)
        r = run_one(m, sc, seed, runs, a.device, a.compile, a.threads or None)
        results = [x for x in results if (x["name"], x["seed"]) != (m, seed)] + [r]
        res_path.parent.mkdir(parents=True, exist_ok=True)
        res_path.write_text(json.dumps(results))
        plot(results, fig, sc)
        write_report(results, report, fig, sc, a.scale, cmd.strip(), seeds, models=models)
        print(f"    val bpb {r['final_val_bpb']:.4f}, {r['tokens_s']:,.0f} tokens/s "
              f"({time.time() - t0:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
