"""Reversible splitting networks at the CPU scale (issue 27 item 6) -> docs/reversible.md

    python experiments/reversible_study.py                    # everything (~1 h on 2 shared cores)
    python experiments/reversible_study.py --phase train      # only the training runs
    python experiments/reversible_study.py --seeds 0 --steps 40 --runs /tmp/rv   # a smoke run

Four networks with the Transformer's parameters (shared weights, the ``cpu`` scale of
experiments/compare_schemes.py) trained by ``splitnet.training.train``: ``transformer`` (plain
pre-norm), ``rev-lie`` (reversible Lie–Trotter: ``y1 = x1 + A(x2)``, ``y2 = x2 + F(y1)``, the
Reformer block), ``rev-strang`` (``F/2 A F/2`` on the pair, a leapfrog step), ``rev-yoshida4``
(the triple jump of Strang steps). Then, at the study's width: bytes saved for backward against
depth (``saved_tensors_hooks``, parameters excluded), reconstruction error of forward-then-inverse
against depth (float64, float32, float32 with bfloat16 field compute, exact mode), and the
refinement columns of docs/refine.md for each trained model (as trained, Euler substeps 2, 4, 8
of its own scheme, the ODE of its fields).

Runs go to ``--runs DIR/<model>/seed<k>``: a finished run is skipped, an interrupted one resumed;
analyses are cached beside them (``bytes.json``, ``recon.json``, ``refine.json``). The full
study (every model, seeds 0,1,2, the scale's steps) writes docs/reversible.md and
docs/figures/reversible_*.png; a subset writes into the run directory instead.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "experiments") not in sys.path:      # compare_schemes beside this file
    sys.path.insert(0, str(ROOT / "experiments"))

import compare_schemes as cs  # noqa: E402

from splitnet.cli._args import csv_seeds, nonnegative_int, positive_int  # noqa: E402
from splitnet.configs.config import SplitConfig  # noqa: E402

T_LAUNCH = time.perf_counter()
ORDER = ["transformer", "rev-lie", "rev-strang", "rev-yoshida4"]
LABELS = {"transformer": "Transformer (plain Lie–Trotter)",
          "rev-lie": "reversible Lie–Trotter (Reformer)",
          "rev-strang": "reversible Strang", "rev-yoshida4": "reversible Yoshida4"}
SCHEME = {"transformer": "lie-trotter", "rev-lie": "lie-trotter", "rev-strang": "strang",
          "rev-yoshida4": "yoshida4"}
DEPTHS = (4, 8, 16, 32, 64)
EXACT_DEPTHS = DEPTHS + (256,)
SUBSTEPS = (2, 4, 8)


def model_options(name: str, sc: dict, n_layers: int | None = None) -> SplitConfig:
    """The model ``name`` at scale ``sc`` (shared weights; reversible unless the Transformer)."""
    if name not in SCHEME:
        raise ValueError(f"unknown model {name!r}; available: {', '.join(ORDER)}")
    return SplitConfig(d_model=sc["d_model"], n_heads=sc["n_heads"],
                       n_layers=n_layers or sc["n_layers"], d_ff=sc["d_ff"],
                       max_len=sc["context"], scheme=SCHEME[name],
                       reversible=name != "transformer")


# -- 1. training ----------------------------------------------------------------------------------


def run_one(name: str, sc: dict, seed: int, runs: Path, threads: int | None) -> dict:
    """Train (or resume, or skip) one run; its record: validation curve, final bpb, steady
    tokens/s (the trainer's per-step metrics, steps after the first tenth)."""
    from splitnet import checkpoint as ck

    out = runs / name / f"seed{seed}"
    want = cs.train_config(model_options(name, sc), sc, seed, out, "cpu", False, False, threads)
    done = cs._done_step(out, want)
    if done != sc["steps"]:
        cs._train(want, out, done)
    recs = ck.read_metrics(out / ck.METRICS)
    val = [(r["step"], r["val_bpb"]) for r in recs if "val_bpb" in r]
    return {"name": name, "seed": seed, "val_curve": val, "final_val_bpb": val[-1][1],
            "steps": recs[-1]["step"], "tokens_s": cs.steady_tokens_s(recs),
            "corpus": ck.load(out).get("corpus"), "python": platform.python_version()}


def train_all(a, sc: dict, runs: Path) -> list[dict] | None:
    """Every (seed, model), seed-major and cheapest first; results.json rewritten after each.
    None when ``--max-minutes`` stopped it (run again to go on)."""
    res_path = runs / "results.json"
    results = json.loads(res_path.read_text()) if res_path.exists() else []
    todo = [(s, m) for s in a.seed_list for m in a.model_list]
    for i, (seed, m) in enumerate(todo):
        if a.max_minutes is not None and time.perf_counter() - T_LAUNCH > 60 * a.max_minutes:
            print(f"--max-minutes {a.max_minutes:g} reached: {len(todo) - i} runs left; run "
                  f"the same command again to go on", flush=True)
            return None
        t0 = time.time()
        print(f"[{time.strftime('%H:%M:%S')}] {m} seed {seed} ...", flush=True)
        r = run_one(m, sc, seed, runs, a.threads or None)
        results = [x for x in results if (x["name"], x["seed"]) != (m, seed)] + [r]
        res_path.parent.mkdir(parents=True, exist_ok=True)
        res_path.write_text(json.dumps(results))
        print(f"    val bpb {r['final_val_bpb']:.4f}, {r['tokens_s']:,.0f} tokens/s "
              f"({time.time() - t0:.0f} s)", flush=True)
    return results


# -- 2. bytes saved for backward against depth ----------------------------------------------------


def saved_bytes(cfg: SplitConfig, idx, plain: bool) -> int:
    """Bytes autograd holds for backward after one forward of ``idx``: every storage packed
    through ``saved_tensors_hooks`` counted once (a tensor saved by two operations is held
    once), parameters excluded. ``plain``: a reversible network under ``plain_autograd``."""
    import contextlib

    import torch
    from torch.autograd.graph import saved_tensors_hooks

    from splitnet.nets.models import SplitTransformer
    from splitnet.reversible import plain_autograd

    torch.manual_seed(0)
    model = SplitTransformer.from_config(cfg)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    held: dict = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in params:
            held[s.data_ptr()] = max(held.get(s.data_ptr(), 0), s.nbytes())
        return t            # kept by the graph while it lives, so no address is reused
    ctx = plain_autograd(model) if plain else contextlib.nullcontext()
    with ctx, saved_tensors_hooks(pack, lambda t: t):
        out = model(idx)
    del out
    return sum(held.values())


def bytes_vs_depth(sc: dict, depths=DEPTHS, models=ORDER) -> list[dict]:
    """Per depth and model: bytes saved for backward by one forward of one training batch
    (``batch_size`` x ``context`` random bytes); reversible models twice, with the stack's own
    backward (``stored``) and under ``plain_autograd`` (``plain``)."""
    import torch

    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, 256, (sc["batch_size"], sc["context"]), generator=g)
    rows = []
    for n in depths:
        for m in models:
            cfg = model_options(m, sc, n_layers=n)
            for mode in (("plain",) if m == "transformer" else ("stored", "plain")):
                b = saved_bytes(cfg, idx, plain=mode == "plain")
                rows.append({"depth": n, "name": m, "mode": mode, "bytes": b,
                             "per_token": b / idx.numel()})
    return rows


# -- 3. reconstruction error against depth --------------------------------------------------------

# (label, dtype, bfloat16 field compute, grid): the state's precision, the fields' compute
PRECISIONS = [("float64", "float64", False, None), ("float32", "float32", False, None),
              ("float32 state, bf16 compute", "float32", True, None),
              ("exact k=10", "float32", False, 10),
              ("exact k=10, bf16 compute", "float32", True, 10),
              ("exact k=16", "float32", False, 16)]


def reconstruct(model, n: int, idx, bf16: bool) -> dict:
    """The model's layers repeated cyclically to depth ``n`` (layer k is layer k mod L at
    time k h), run forward from the pair ``x1 = x2 = embed(idx)`` (on the grid in exact
    mode), then inverted layer by layer. ``rel``: max over blocks of ||x^ - x|| / ||x||;
    ``moved``: max over blocks of ||y - x|| / ||x||; ``top``: max |y|; ``guard``:
    the exact-mode guard's message if it raised."""
    import torch

    from splitnet.reversible import start_pair

    h, grid = model.config.step_size, model.config.reversible_grid
    layers = [model.layers[k % len(model.layers)] for k in range(n)]
    amp = torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16)
    with torch.no_grad():
        x1, x2 = start_pair(model.embed(idx), grid)
        y1, y2 = x1, x2
        try:
            with amp:
                for k, layer in enumerate(layers):
                    y1, y2 = layer(y1, y2, k * h)
                top = float(torch.maximum(y1.abs().max(), y2.abs().max()))
                moved = _rel(y1, y2, x1, x2)
                for k in reversed(range(n)):
                    y1, y2 = layers[k].inverse(y1, y2, k * h)
        except FloatingPointError as e:
            return {"rel": None, "guard": str(e)}
    return {"rel": _rel(y1, y2, x1, x2), "moved": moved, "top": top,
            "bitwise": bool(torch.equal(y1, x1) and torch.equal(y2, x2))}


def _rel(y1, y2, x1, x2) -> float:
    """max(||y1 - x1||, ||y2 - x2||) / ||x1|| in float64."""
    return max(float((y.double() - x.double()).norm()) for y, x in ((y1, x1), (y2, x2))) \
        / float(x1.double().norm())


def finished(out: Path, steps: int) -> bool:
    """Whether ``out`` holds a checkpoint at ``steps``."""
    from splitnet import checkpoint as ck
    try:
        return ck.load(out)["step"] == steps
    except ValueError:                 # none yet
        return False


def recon_models(sc: dict, runs: Path) -> dict:
    """Weights whose reconstruction is measured: ``random init`` (reversible Strang at the
    study's width, seed 0) and ``trained`` (the rev-strang seed-0 run), as state dicts."""
    import torch

    from splitnet import checkpoint as ck
    from splitnet.nets.models import SplitTransformer

    torch.manual_seed(0)
    out = {"random init": SplitTransformer.from_config(
        model_options("rev-strang", sc)).state_dict()}
    run = runs / "rev-strang" / "seed0"
    if finished(run, sc["steps"]):
        out["trained (rev-strang seed 0)"] = ck.model_from_state(ck.load(run), run).state_dict()
    return out


def recon_vs_depth(sc: dict, weights: dict, depths=DEPTHS, exact_depths=EXACT_DEPTHS,
                   batch: int = 4) -> list[dict]:
    """Per weights x precision x depth: :func:`reconstruct` on ``batch`` windows of text."""
    import torch

    from splitnet.nets.models import SplitTransformer

    raw = Path(argparse.__file__).read_bytes()[:batch * sc["context"]]     # stdlib text
    idx = torch.tensor(list(raw), dtype=torch.long).view(batch, sc["context"])
    rows = []
    for wname, state in weights.items():
        for label, dtype, bf16, grid in PRECISIONS:
            cfg = model_options("rev-strang", sc).replace(reversible_grid=grid)
            model = SplitTransformer.from_config(cfg)
            model.load_state_dict(state)
            model = model.to(getattr(torch, dtype)).eval()
            for n in (exact_depths if grid else depths):
                rows.append({"weights": wname, "precision": label, "depth": n,
                             **reconstruct(model, n, idx, bf16)})
    return rows


# -- 4. refinement --------------------------------------------------------------------------------


def refine_one(out: Path, name: str, windows: int) -> dict:
    """The refinement columns of docs/refine.md for one finished run: the loss as trained, its
    own scheme with Euler substeps n = 2, 4, 8 and the ODE of its fields, on its first
    ``windows`` validation windows; cached in ``out/refine.json``."""
    from splitnet.analyses.refine import refinement_study
    from splitnet.analyses.sources import checkpoint_source

    spec = {"windows": windows, "substeps": list(SUBSTEPS), "scheme": SCHEME[name]}
    cache = out / "refine.json"
    if cache.exists() and json.loads(cache.read_text()).get("spec") == spec:
        return json.loads(cache.read_text())
    model, evaluate, info = checkpoint_source(out, windows=windows)
    t0 = time.perf_counter()
    res = refinement_study(model, evaluate, schemes=[SCHEME[name]], substeps=list(SUBSTEPS),
                           methods=["euler"], label=LABELS[name], progress=False)
    d = {"spec": spec, "result": res.to_dict(), "info": info,
         "eval_s": time.perf_counter() - t0}
    cache.write_text(json.dumps(d))
    return d


def refine_columns(d: dict) -> dict:
    """bpb as trained, and the change under each refinement (n2, n4, n8, ode)."""
    from splitnet.analyses.refine import RefinementResult

    res = RefinementResult.from_dict(d["result"])
    own = res.value(res.own)
    ser = {p.substeps: res.value(p) for pts in res.series().values() for p in pts}
    return {"own": own, **{f"n{k}": ser[k] - own for k in SUBSTEPS if k in ser},
            "ode": res.value(res.ode) - own if res.ode is not None else None}


def refine_all(a, sc: dict, runs: Path) -> list[dict]:
    """Every finished run of the requested models and seeds, refined (cached)."""
    rows = []
    for m in a.model_list:
        for s in a.seed_list:
            out = runs / m / f"seed{s}"
            if not finished(out, sc["steps"]):
                continue
            d = refine_one(out, m, a.windows)
            rows.append({"name": m, "seed": s, "eval_s": d["eval_s"], **refine_columns(d)})
            print(f"    refined {m} seed {s} ({d['eval_s']:.0f} s)", flush=True)
    return rows


# -- 5. report ------------------------------------------------------------------------------------


def _ms(v, f: str = ".4f", signed: bool = False) -> str:
    """mean ± sd over seeds ("(1 seed)" for one, "—" for none)."""
    v = np.asarray([x for x in v if x is not None], dtype=float)
    g = ("+" if signed else "") + f
    if len(v) == 0:
        return "—"
    if len(v) == 1:
        return f"{v[0]:{g}} (1 seed)"
    return f"{v.mean():{g}} ± {v.std(ddof=1):{f}}"


def training_table(results: list[dict], sc: dict) -> list[str]:
    """Final validation bpb per model, paired t against the Transformer, steady tokens/s."""
    out = ["| model | sub-layers of one layer | params | seeds | final val bpb (mean ± sd) | "
           "per seed | Δ vs Transformer (paired) | t | verdict | tokens/s median (range) | "
           "vs Transformer |", "|---|---|---:|---:|---|---|---:|---:|---|---:|---:|"]
    tps = {m: float(np.median([r["tokens_s"] for r in results if r["name"] == m]))
           for m in ORDER if any(r["name"] == m for r in results)}
    for m in ORDER:
        rs = sorted((r for r in results if r["name"] == m), key=lambda r: r["seed"])
        if not rs:
            continue
        opts = model_options(m, sc)
        per = ", ".join(f"{r['final_val_bpb']:.4f}" for r in rs)
        d, t, v = "", "", ""
        if m != "transformer":
            v, info = cs.verdict(results, m, "transformer")
            if info["n"] >= 2:
                d, t = f"{info['mean_diff']:+.4f} ± {info['sd_diff']:.4f}", f"{info['t']:+.1f}"
        rel = f"{tps[m] / tps['transformer']:.2f}x" if "transformer" in tps else ""
        out.append(f"| {LABELS[m]} | `{cs.layer_diagram(opts)}` | {cs.n_params(opts):,} | "
                   f"{len(rs)} | {_ms([r['final_val_bpb'] for r in rs])} | {per} | {d} | {t} "
                   f"| {v} | {tps[m]:,.0f} ({min(r['tokens_s'] for r in rs):,.0f}–"
                   f"{max(r['tokens_s'] for r in rs):,.0f}) | {rel} |")
    return out


def bytes_table(rows: list[dict]) -> list[str]:
    """Bytes saved for backward per token of one batch, per depth and model/mode."""
    cols = list(dict.fromkeys((r["name"], r["mode"]) for r in rows))
    depths = sorted({r["depth"] for r in rows})
    at = {(r["depth"], r["name"], r["mode"]): r["per_token"] for r in rows}
    head = [f"{LABELS[n].split(' (')[0]}, {md}" for n, md in cols]
    out = ["| layers | " + " | ".join(head) + " |", "|---:|" + "---:|" * len(cols)]
    for n in depths:
        out.append(f"| {n} | " + " | ".join(f"{at[(n, *c)] / 1024:,.2f}" for c in cols) + " |")
    lo, hi = depths[0], depths[-1]
    out.append(f"| growth {lo}→{hi} | " + " | ".join(
        f"{at[(hi, *c)] / at[(lo, *c)]:.2f}x" for c in cols) + " |")
    return out


def _recon_cell(r: dict) -> str:
    if r.get("guard"):          # the guard's value and bound, without a table-breaking |x|
        return "guard at t = {1}: max abs(x) {0} ≥ 2^{2}".format(*re.search(
            r"reached (\S+) at .*time ([^,]+), .* 2\^(\d+)", r["guard"]).groups())
    return "0 (bit for bit)" if r["bitwise"] else f"{r['rel']:.1e}"


def recon_table(rows: list[dict], weights: str) -> list[str]:
    """Relative reconstruction error per depth and precision for one set of weights, with
    how far the forward moved the state (float64) and the largest |x| it reached."""
    rs = [r for r in rows if r["weights"] == weights]
    precs = list(dict.fromkeys(r["precision"] for r in rs))
    depths = sorted({r["depth"] for r in rs})
    at = {(r["depth"], r["precision"]): r for r in rs}
    out = ["| layers | ‖y − x‖ / ‖x‖ | max abs(y) | " + " | ".join(precs) + " |",
           "|---:|---:|---:|" + "---:|" * len(precs)]
    for n in depths:        # how far the forward went: the first precision that has it
        f = next((at[(n, p)] for p in precs if at.get((n, p), {}).get("moved") is not None),
                 {"moved": math.nan, "top": math.nan})
        out.append(f"| {n} | {f['moved']:.3g} | {f['top']:.3g} | " + " | ".join(
            _recon_cell(at[(n, p)]) if (n, p) in at else "" for p in precs) + " |")
    return out


def refine_table(rows: list[dict]) -> list[str]:
    """The refinement columns of docs/refine.md per model (mean ± sd over seeds)."""
    out = ["| model | seeds | val bpb as trained (these windows) | Δ n=2 | Δ n=4 | Δ n=8 | "
           "Δ ODE |", "|---|---:|---|---|---|---|---|"]
    for m in ORDER:
        rs = [r for r in rows if r["name"] == m]
        if rs:
            out.append(f"| {LABELS[m]} | {len(rs)} | {_ms([r['own'] for r in rs], '.3f')} | "
                       + " | ".join(_ms([r.get(k) for r in rs], ".3f", True)
                                    for k in ("n2", "n4", "n8", "ode")) + " |")
    return out


def paired_refine(rows: list[dict], a: str, key: str) -> dict | None:
    """``a`` − Transformer in refinement column ``key``, paired by seed (compare_schemes'
    ``verdict``: n, mean_diff, sd_diff, t); None under two pairs."""
    as_runs = [{"name": r["name"], "seed": r["seed"], "final_val_bpb": r.get(key)}
               for r in rows if r.get(key) is not None]
    info = cs.verdict(as_runs, a, "transformer")[1]
    return info if info["n"] >= 2 else None


def figures(results, byt, rec, refined, paths: dict, sc: dict) -> None:
    """The curves (mean ± sd over seeds), bytes and reconstruction figures."""
    from splitnet.plots import plot_against_depth, plot_seed_curves, series_style

    tok = sc["batch_size"] * sc["context"] / 1e3
    curves = {f"{LABELS[m]} (n={sum(r['name'] == m for r in results)})":
              [[(st * tok, v) for st, v in r["val_curve"]] for r in results if r["name"] == m]
              for m in ORDER if any(r["name"] == m for r in results)}
    if curves:
        plot_seed_curves(curves, paths["curves"], xlabel="training tokens (thousands)",
                         ylabel="validation bpb", zoom_from=sc["steps"] / 2 * tok,
                         title="validation bits per byte (mean ± sd over seeds)")
    series, styles = {}, {}
    for r in byt:       # colour per model, dashed = plain autograd; markers shrink so that
        lab = f"{LABELS[r['name']].split(' (')[0]}, {r['mode']}"     # coinciding lines show
        i = ORDER.index(r["name"])
        styles[lab] = {**series_style(i), "ls": "--" if r["mode"] == "plain" else "-",
                       "ms": 10 - 2 * i}
        series.setdefault(lab, []).append((r["depth"], r["per_token"] / 1024))
    plot_against_depth({"one forward of one training batch": series}, paths["bytes"],
                       ylabel="KiB saved for backward per token (parameters excluded)",
                       title="reversible networks store the final pair only", styles=styles)
    panels: dict = {}
    for r in rec:
        v = None if r.get("guard") else (0.0 if r["bitwise"] else r["rel"])
        panels.setdefault(r["weights"], {}).setdefault(r["precision"], []).append(
            (r["depth"], v))
    plot_against_depth(panels, paths["recon"], ylabel="‖x̂ − x‖ / ‖x‖ after forward + "
                       "inverse", title="reconstruction error of reversible Strang against "
                       "depth (layers repeated cyclically)")


def render(results, byt, rec, refined, paths: dict, sc: dict, a, argv) -> str:
    """The generated block of the report: set-up (command, date, machine and load, torch,
    corpus) and every table."""
    import torch

    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    doc = paths["report"].parent
    rel = {k: Path(paths[k]).resolve().relative_to(doc.resolve()).as_posix()
           for k in ("curves", "bytes", "recon")}
    lines = ["<!-- generated by experiments/reversible_study.py; rewritten on every run -->", "",
             "## Set-up", "",
             f"Command: `{' '.join(['python experiments/reversible_study.py', *argv])}`", "",
             f"Report written {time.strftime('%Y-%m-%d %H:%M %Z')}; torch {torch.__version__}, "
             f"Python {platform.python_version()}, {platform.machine()} with {os.cpu_count()} "
             f"CPU cores shared with other jobs (load average {load} when written), one thread "
             f"per run, no GPU.", "", *cs.corpus_lines(results), "",
             (f"Scale `cpu` of experiments/compare_schemes.py: d_model {sc['d_model']}, "
              f"{sc['n_heads']} heads, {sc['n_layers']} layers, d_ff {sc['d_ff']}, context "
              f"{sc['context']}, batch {sc['batch_size']}, {sc['steps']} steps, AdamW lr "
              f"{sc['lr']} (warmup {sc['warmup']}, cosine), validation on {sc['eval_windows']} "
              f"windows; shared weights, so every model has the Transformer's parameters "
              f"(asserted). Seeds {a.seed_list}."), "",
             "## 1. Training", "", *training_table(results, sc), "",
             ("Δ = model − Transformer in final validation bpb, paired by seed (same data order "
              "and initialisation); t = mean Δ / its standard error; verdict on \"the model is "
              "lower\" by compare_schemes' rule (t ≤ −2 supported, |t| < 1 inconclusive, "
              "t ≥ 2 contradicted). tokens/s: each run's steady rate (median step after the "
              "first tenth), median over seeds; a shared CPU, so relative cost only."), "",
             f"![validation curves]({rel['curves']})", "",
             "## 2. Bytes saved for backward against depth", "",
             (f"KiB per token held by autograd after one forward of one training batch "
              f"({sc['batch_size']} x {sc['context']} tokens) at the study's width; every "
              f"storage packed by `saved_tensors_hooks` counted once, parameters excluded. "
              f"*stored*: the reversible stack's own backward; *plain*: the same network "
              f"under `plain_autograd`."), "", *bytes_table(byt), "",
             f"![bytes against depth]({rel['bytes']})", "",
             "## 3. Reconstruction error against depth", "",
             ("Reversible Strang at the study's width, its 4 layers repeated cyclically to the "
              "depth (layer k is layer k mod 4 at time k h), from the pair x1 = x2 = embedding "
              "of 4 windows of text; forward, then the inverse layer by layer; the cell is "
              "max over blocks of ‖x̂ − x‖ / ‖x‖ (‖y − x‖ / ‖x‖: how far the forward moved "
              "the state). *bf16 compute*: the fields under `torch.autocast('cpu', "
              "bfloat16)`, the state float32. *exact k*: increments on a 2^-k grid "
              "(`reversible_grid`)."), ""]
    for w in dict.fromkeys(r["weights"] for r in rec):
        lines += [f"**{w}**", "", *recon_table(rec, w), ""]
    lines += [f"![reconstruction against depth]({rel['recon']})", "",
              "## 4. Refinement: is a reversible network an ODE solver of its fields?", "",
              (f"The columns of docs/refine.md on the first {a.windows} validation windows of "
               f"each run: bpb as trained, and its change when every layer is run as n steps "
               f"of its own scheme with h/n (Euler sub-steps: for a reversible network the "
               f"exact flows of its shears), and when every layer is replaced by the exact "
               f"flow of its ODE (dopri5; the partitioned ODE of the pair for a reversible "
               f"network)."), "", *refine_table(refined), "",
              "Paired against the Transformer (model − Transformer):", "",
              "| model | Δ n=2 | t | Δ n=8 | t | Δ ODE | t |", "|---|---|---:|---|---:|---|---:|"]
    for m in ORDER[1:]:
        cells = [paired_refine(refined, m, k) for k in ("n2", "n8", "ode")]
        if all(cells):
            lines.append(f"| {LABELS[m]} | " + " | ".join(
                f"{c['mean_diff']:+.3f} ± {c['sd_diff']:.3f} | {c['t']:+.1f}" for c in cells)
                + " |")
    return "\n".join(lines)


def write_block(path: Path, text: str) -> None:
    """Replace the generated block of ``path`` (or start the file with it)."""
    start, end = "<!-- BEGIN GENERATED -->", "<!-- END GENERATED -->"
    old = path.read_text() if path.exists() else ""
    block = f"{start}\n{text.rstrip()}\n{end}"
    if start in old and end in old:
        old = old[:old.index(start)] + block + old[old.index(end) + len(end):]
    else:
        old = (old.rstrip() + "\n\n" if old else "# Reversible splitting networks\n\n") + \
            block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(old)


def cached(path: Path, key: dict, compute):
    """``compute()`` cached in ``path`` under ``key`` (recomputed when the key differs)."""
    if path.exists():
        d = json.loads(path.read_text())
        if d.get("key") == key:
            return d["rows"]
    rows = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": key, "rows": rows}))
    return rows


def output_paths(a, runs: Path) -> dict:
    """docs/ for the full study, else the run directory (a subset never overwrites it)."""
    doc, fig = (Path("docs"), Path("docs/figures")) if a.full else (runs, runs)
    return {"report": doc / ("reversible.md" if a.full else "report.md"),
            **{k: fig / f"reversible_{k}.png" for k in ("curves", "bytes", "recon")}}


# -- main -----------------------------------------------------------------------------------------


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--seeds", type=csv_seeds, default="0,1,2")
    p.add_argument("--models", default=",".join(ORDER), help="comma-separated subset")
    p.add_argument("--steps", type=positive_int, default=None, help="override the scale's steps")
    p.add_argument("--runs", default="runs/reversible-cpu", help="run directory")
    p.add_argument("--phase", choices=["all", "train", "analyse"], default="all",
                   help="train: the runs only; analyse: the rest and the report")
    p.add_argument("--threads", type=nonnegative_int, default=1,
                   help="CPU threads (0 = torch's default)")
    p.add_argument("--max-minutes", type=float, default=None,
                   help="start no new training run after this many minutes")
    p.add_argument("--windows", type=positive_int, default=32,
                   help="validation windows per refinement evaluation (the run's first)")
    a = p.parse_args(argv)
    a.seed_list = [int(s) for s in a.seeds.split(",") if s.strip()]
    a.model_list = [m.strip() for m in a.models.split(",") if m.strip()]
    for m in a.model_list:
        if m not in ORDER:
            p.error(f"unknown model {m!r}; available: {', '.join(ORDER)}")
    a.full = (a.model_list == ORDER and a.seed_list == [0, 1, 2] and not a.steps)
    return a


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = parse(argv)
    sc = dict(cs.SCALES["cpu"])
    if a.steps:
        sc["steps"] = a.steps
    p0 = cs.n_params(model_options("transformer", sc))
    for m in a.model_list:                      # equal parameters, asserted
        n = cs.n_params(model_options(m, sc))
        assert n == p0, f"{m}: {n} parameters, the Transformer has {p0}"
    print(f"parameters: {p0:,} each ({', '.join(a.model_list)})", flush=True)
    runs = Path(a.runs)
    if a.phase in ("all", "train") and train_all(a, sc, runs) is None:
        return 3
    if a.phase == "train":
        return 0
    import torch

    torch.set_num_threads(a.threads or torch.get_num_threads())
    res_path = runs / "results.json"
    results = [r for r in (json.loads(res_path.read_text()) if res_path.exists() else [])
               if r["name"] in a.model_list and r["seed"] in a.seed_list]
    dims = {k: sc[k] for k in ("d_model", "n_heads", "d_ff", "context", "batch_size")}
    t0 = time.time()
    byt = cached(runs / "bytes.json", {**dims, "depths": list(DEPTHS), "models": a.model_list},
                 lambda: bytes_vs_depth(sc, DEPTHS, a.model_list))
    weights = recon_models(sc, runs)
    rec = cached(runs / "recon.json", {**dims, "weights": list(weights), "steps": sc["steps"]},
                 lambda: recon_vs_depth(sc, weights))
    print(f"bytes and reconstruction: {time.time() - t0:.0f} s", flush=True)
    refined = refine_all(a, sc, runs)
    paths = output_paths(a, runs)
    figures(results, byt, rec, refined, paths, sc)
    write_block(paths["report"], render(results, byt, rec, refined, paths, sc, a, argv))
    print(f"report: {paths['report']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
