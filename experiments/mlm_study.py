"""The seed's second setting at CPU scale (issue 29, item 3): masked-LM encoders of four
arrangements at equal parameters, pre-trained on the same masked batches, then scored on WN-lex.

    python3 experiments/mlm_study.py --study      # the runs (cached; ~35 min on two threads)
    python3 experiments/mlm_study.py --report     # docs/mlm.md's tables and figure

Arrangements (``ARRANGEMENTS``), each a bidirectional ``SplitTransformer`` (d_model 64, 4 heads,
2 layers, context 64, init xavier): the Transformer (Lie–Trotter), the seed's Macaron encoder
(``c:0.5,d:1,c:0.5`` per stage: two half-width feed-forwards, 121,024 parameters against
120,640), symmetric Strang (shared weights: the feed-forward evaluated twice) and Yoshida's
fourth-order composition (shared: 7 stages a layer). Each pre-trains ``STEPS`` steps (batch 32,
lr 3e-3, cosine) on the standard library's bytes, seeds 0, 1, 2; for a seed every arrangement
sees the same batches and masks, so differences are paired (paired t over seeds, against the
Transformer). Reported: the held-out masked loss and accuracy (the trainer's fixed masked
validation windows: the corpus's held-out files, not a held-out novel -- the Austen package is
not on a fresh machine), and WN-lex by a linear probe (``splitnet.mlm.suite``, 20,000 training
definitions) when WordNet is installed.

Each run's record is cached under ``experiments/cache/mlm/`` (never trained again); its
checkpoint is in ``runs/mlm_study/`` (not committed).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "mlm.md"
FIGURE = ROOT / "docs" / "figures" / "mlm_curves.png"
CACHE = ROOT / "experiments" / "cache" / "mlm"
RUNS = ROOT / "runs" / "mlm_study"
STEPS = 3000
SEEDS = (0, 1, 2)
ARRANGEMENTS = {   # label -> (scheme, weights)
    "Transformer": ("lie-trotter", "shared"),
    "Macaron": ("c:0.5,d:1,c:0.5", "per-stage"),
    "Strang": ("strang", "shared"),
    "Yoshida4": ("yoshida4", "shared"),
}
MODEL = {"d_model": 64, "n_heads": 4, "n_layers": 2, "init": "xavier"}
RUN = {"context": 64, "batch_size": 32, "lr": 3e-3, "eval_every": 300, "ckpt_every": 1000}


def _config(label: str, seed: int, out: Path, resume: bool):
    from splitnet.configs.config import SplitConfig, TrainConfig

    scheme, weights = ARRANGEMENTS[label]
    return TrainConfig(task="mlm", model=SplitConfig(scheme=scheme, weights=weights, **MODEL),
                       steps=STEPS, seed=seed, threads=2, progress=False, plot=False,
                       out=str(out), resume=resume, overwrite=not resume, **RUN)


def run_one(label: str, seed: int) -> dict:
    from splitnet.mlm import suite, wordnet
    from splitnet.runs import checkpoint as ck
    from splitnet.training.train import train

    out = RUNS / f"{label}-{seed}"
    t0 = time.perf_counter()
    summary = train(_config(label, seed, out, resume=(out / ck.CKPT).exists()))
    wall = time.perf_counter() - t0
    metrics = [json.loads(x) for x in (out / ck.METRICS).read_text().splitlines() if x.strip()]
    curve = [(r["step"], r["val_loss"], r["val_acc"]) for r in metrics if "val_loss" in r]
    rec = {"label": label, "seed": seed, "steps": STEPS, "scheme": ARRANGEMENTS[label],
           "n_params": summary["n_params"], "flops_per_token": summary["flops_per_token"],
           "train_wall_s": wall, "tok_per_s": summary.get("tok_per_s"), "curve": curve,
           "val_loss": curve[-1][1], "val_acc": curve[-1][2]}
    try:
        wordnet.wordnet_root()
    except FileNotFoundError:
        return rec
    import torch

    torch.set_num_threads(2)
    rec["wn_lex"] = suite.evaluate(ck.load_model(out), tasks=("wn-lex",), seed=0)[0]
    return rec


def study() -> None:
    CACHE.mkdir(parents=True, exist_ok=True)
    for seed in SEEDS:
        for label in ARRANGEMENTS:
            path = CACHE / f"{label}-{seed}.json"
            if path.exists():
                continue
            t0 = time.perf_counter()
            rec = run_one(label, seed)
            path.write_text(json.dumps(rec, indent=1))
            print(f"{label} seed {seed}: val loss {rec['val_loss']:.4f}, acc "
                  f"{rec['val_acc']:.4f}, wn-lex {rec.get('wn_lex', {}).get('probe')}, "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)


def _paired_t(a: list[float], b: list[float]) -> float:
    d = [x - y for x, y in zip(a, b)]
    sd = statistics.stdev(d) if len(d) > 1 else 0.0
    return math.inf if sd == 0 else statistics.mean(d) / (sd / math.sqrt(len(d)))


def _records() -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for label in ARRANGEMENTS:
        recs = [json.loads((CACHE / f"{label}-{s}.json").read_text()) for s in SEEDS
                if (CACHE / f"{label}-{s}.json").exists()]
        if recs:
            out[label] = recs
    return out


def _cell(vals: list[float], scale: float = 1.0, digits: int = 3) -> str:
    m = statistics.mean(vals) * scale
    sd = statistics.stdev(vals) * scale if len(vals) > 1 else 0.0
    return f"{m:.{digits}f} ± {sd:.{digits}f}"


def _t(label: str, vals: list[float], base: list[dict], key) -> str:
    """The paired t against the Transformer's runs (— for the Transformer itself)."""
    if label == "Transformer" or len(vals) != len(base):
        return "—"
    return f"{_paired_t(vals, [key(r) for r in base]):+.1f}"


def table(recs: dict[str, list[dict]]) -> str:
    base = recs["Transformer"]
    rows = ["| arrangement | params | MFLOP/token | held-out masked loss (nats) | t | restored "
            "| t | WN-lex probe | t |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, rs in recs.items():
        loss = [r["val_loss"] for r in rs]
        acc = [r["val_acc"] for r in rs]
        wn = [r["wn_lex"]["probe"] for r in rs if "wn_lex" in r]
        wbase = [r for r in base if "wn_lex" in r]
        rows.append(
            f"| {label} | {rs[0]['n_params']:,} | {rs[0]['flops_per_token'] / 1e6:.2f} | "
            f"{_cell(loss)} | {_t(label, loss, base, lambda r: r['val_loss'])} | "
            f"{_cell(acc, 100, 1)} % | {_t(label, acc, base, lambda r: r['val_acc'])} | "
            f"{_cell(wn, 100, 1) + ' %' if wn else '—'} | "
            f"{_t(label, wn, wbase, lambda r: r['wn_lex']['probe']) if wn else '—'} |")
    return "\n".join(rows)


def figure(recs: dict[str, list[dict]]) -> None:
    from splitnet.plots import plot_seed_curves

    curves = {f"{label} ({len(rs)} seeds)": [[(st, lo) for st, lo, _ in r["curve"]] for r in rs]
              for label, rs in recs.items()}
    plot_seed_curves(curves, FIGURE, "optimiser step", "held-out masked loss (nats)",
                     title="masked-LM pre-training at equal parameters (mean ± sd over seeds)",
                     zoom_from=STEPS // 2)


def report() -> None:
    recs = _records()
    if "Transformer" not in recs:
        sys.exit("mlm_study: no Transformer runs cached; run --study first")
    figure(recs)
    text = DOC.read_text()
    start, end = "<!-- mlm-study:begin -->", "<!-- mlm-study:end -->"
    i, j = text.index(start) + len(start), text.index(end)
    DOC.write_text(text[:i] + "\n" + table(recs) + "\n" + text[j:])
    print(table(recs))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--study", action="store_true")
    p.add_argument("--report", action="store_true")
    a = p.parse_args(argv)
    if a.study:
        study()
    if a.report or not a.study:
        report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
