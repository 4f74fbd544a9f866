"""The seed's second setting at CPU scale (issue 29, item 3): masked-LM encoders of four
arrangements at equal parameters, pre-trained on the same masked batches, then scored on WN-lex.

    python3 experiments/mlm_study.py --study      # the runs (cached; ~35 min on two threads)
    python3 experiments/mlm_study.py --report     # docs/mlm.md's tables and figure
    python3 experiments/mlm_study.py --corpus austen --study --report
                                                  # the same on Austen's novels (held-out novel)

Arrangements (``ARRANGEMENTS``), each a bidirectional ``SplitTransformer`` (d_model 64, 4 heads,
2 layers, context 64, init xavier): the Transformer (Lie–Trotter), the seed's Macaron encoder
(``c:0.5,d:1,c:0.5`` per stage: two half-width feed-forwards, 121,024 parameters against
120,640), symmetric Strang (shared weights: the feed-forward evaluated twice) and Yoshida's
fourth-order composition (shared: 7 stages a layer). Each pre-trains ``STEPS`` steps (batch 32,
lr 3e-3, cosine) on the standard library's bytes, seeds 0-7; for a seed every arrangement
sees the same batches and masks, so differences are paired (paired t over seeds, against the
Transformer). Reported: the held-out masked loss and accuracy (the trainer's fixed masked
validation windows of the corpus's held-out files), and WN-lex by a linear probe
(``splitnet.mlm.suite``, 20,000 training definitions) when WordNet is installed. With
``--corpus austen`` (``apt-get install r-cran-janeaustenr``) the same runs pre-train on five of
Jane Austen's novels and are scored on the held-out sixth, *Persuasion*; their probes add
WiC-WN and, with the Bing lexicon installed, WN-polarity.

Each run's record is cached under ``experiments/cache/mlm/`` (``.../mlm/austen/`` for Austen;
never trained again); its checkpoint is in ``runs/mlm_study/`` (not committed).
"""

from __future__ import annotations

import argparse
import json
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
# one thread: two-thread runs beside other work (the tests, a second study) ran 20-70 times
# slower, the threads waiting on each other; seeds 0-2 ran on two threads of a quiet machine
THREADS = 1
SEEDS = tuple(range(8))      # 0-2 since issue 29; 3-7 added for issue 48
ARRANGEMENTS = {   # label -> (scheme, weights)
    "Transformer": ("lie-trotter", "shared"),
    "Macaron": ("c:0.5,d:1,c:0.5", "per-stage"),
    "Strang": ("strang", "shared"),
    "Yoshida4": ("yoshida4", "shared"),
}
CORPORA = ("stdlib", "austen")


def setting(corpus: str) -> tuple:
    """(cache, runs, doc block, figure, probe tasks) of a pre-training corpus."""
    if corpus == "stdlib":
        return CACHE, RUNS, "mlm-study", FIGURE, ("wn-lex",)
    return (CACHE / corpus, RUNS / corpus, f"mlm-study-{corpus}",
            FIGURE.with_name(f"mlm_curves_{corpus}.png"), ("wn-lex", "wic-wn", "wn-polarity"))


MODEL = {"d_model": 64, "n_heads": 4, "n_layers": 2, "init": "xavier"}
RUN = {"context": 64, "batch_size": 32, "lr": 3e-3, "eval_every": 300, "ckpt_every": 1000}


def _config(label: str, seed: int, out: Path, resume: bool, corpus: str = "stdlib"):
    from splitnet.configs.config import SplitConfig
    from splitnet.training.config import TrainConfig

    scheme, weights = ARRANGEMENTS[label]
    named = {} if corpus == "stdlib" else {"corpus": corpus}
    return TrainConfig(task="mlm", model=SplitConfig(scheme=scheme, weights=weights, **MODEL),
                       steps=STEPS, seed=seed, threads=THREADS, progress=False, plot=False,
                       out=str(out), resume=resume, overwrite=not resume, **RUN, **named)


def run_one(label: str, seed: int, corpus: str = "stdlib") -> dict:
    from splitnet.mlm import suite, wordnet
    from splitnet.runs import checkpoint as ck
    from splitnet.training.train import train

    _, runs, _, _, tasks = setting(corpus)
    out = runs / f"{label}-{seed}"
    t0 = time.perf_counter()
    summary = train(_config(label, seed, out, (out / ck.CKPT).exists(), corpus))
    if summary.get("signal") is not None or summary.get("step", STEPS) < STEPS:
        # stopped by a signal: the checkpoint resumes next time; a part run is never cached
        sys.exit(f"mlm_study: {label} seed {seed} stopped at step {summary.get('step')} "
                 f"(signal {summary.get('signal')}); run again to resume")
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

    torch.set_num_threads(THREADS)
    for r in suite.evaluate(ck.load_model(out), tasks=tasks, seed=0):
        rec[r["task"].replace("-", "_")] = r
    return rec


def study(corpus: str = "stdlib") -> None:
    cache = setting(corpus)[0]
    cache.mkdir(parents=True, exist_ok=True)
    # arrangement by arrangement: the Transformer and the seed's Macaron (the claim) first
    for label in ARRANGEMENTS:
        for seed in SEEDS:
            path = cache / f"{label}-{seed}.json"
            if path.exists():
                continue
            t0 = time.perf_counter()
            rec = run_one(label, seed, corpus)
            tmp = path.with_suffix(".json.tmp")      # whole or absent, never half written
            tmp.write_text(json.dumps(rec, indent=1))
            tmp.replace(path)
            print(f"{label} seed {seed}: val loss {rec['val_loss']:.4f}, acc "
                  f"{rec['val_acc']:.4f}, wn-lex {rec.get('wn_lex', {}).get('probe')}, "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)


def _records(cache: Path = CACHE) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for label in ARRANGEMENTS:
        recs = [json.loads((cache / f"{label}-{s}.json").read_text()) for s in SEEDS
                if (cache / f"{label}-{s}.json").exists()]
        if recs:
            out[label] = recs
    return out


def _cell(vals: list[float], scale: float = 1.0, digits: int = 3) -> str:
    m = statistics.mean(vals) * scale
    sd = statistics.stdev(vals) * scale if len(vals) > 1 else 0.0
    return f"{m:.{digits}f} ± {sd:.{digits}f}"


def _by_seed(rs: list[dict], key) -> dict[int, float]:
    out = {}
    for r in rs:
        try:
            out[r["seed"]] = float(key(r))
        except (KeyError, TypeError):
            continue
    return out


def _compare(rs: list[dict], base: list[dict], key):
    """The paired comparison (splitnet.analyses.seeds) of ``rs`` against the Transformer's
    ``base`` on the seeds both have, or None under two."""
    from splitnet.analyses.seeds import paired

    a, b = _by_seed(rs, key), _by_seed(base, key)
    common = sorted(set(a) & set(b))
    return paired([a[s] for s in common], [b[s] for s in common]) if len(common) > 1 else None


def _t(label: str, rs: list[dict], base: list[dict], key) -> str:
    """The paired t against the Transformer's runs (— for the Transformer itself)."""
    c = None if label == "Transformer" else _compare(rs, base, key)
    return "—" if c is None else f"{c.t:+.1f}"


PROBES = {"wn_lex": "WN-lex probe", "wic_wn": "WiC-WN probe", "wn_polarity": "WN-polarity probe"}


def _probe(key: str):
    return lambda r: r[key]["probe"]


def _probe_cells(label: str, rs: list[dict], base: list[dict], key: str) -> str:
    vals = [r[key]["probe"] for r in rs if key in r]
    if not vals:
        return "— | — |"
    return f"{_cell(vals, 100, 1)} % | {_t(label, rs, base, _probe(key))} |"


def _fall(rs: list[dict], since: int = STEPS - 900) -> str:
    """How far from flat: the mean fall of the held-out loss over the last 900 steps, and its
    share of the fall from the first validation."""
    falls, shares = [], []
    for r in rs:
        curve = {st: lo for st, lo, _ in r["curve"]}
        first = r["curve"][0][1]
        if since in curve and first > r["val_loss"]:
            falls.append(curve[since] - r["val_loss"])
            shares.append(falls[-1] / (first - r["val_loss"]))
    if not falls:
        return "—"
    return f"{statistics.mean(falls):.3f} ({100 * statistics.mean(shares):.0f} %)"


def table(recs: dict[str, list[dict]]) -> str:
    base = recs["Transformer"]
    probes = [k for k in PROBES if any(k in r for r in base)] or ["wn_lex"]
    rows = ["| arrangement | seeds | params | MFLOP/token | held-out masked loss (nats) | t | "
            "fall, last 900 steps | restored | t | "
            + "".join(f"{PROBES[k]} | t | " for k in probes).rstrip(),
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|" + "---:|---:|" * len(probes)]
    for label, rs in recs.items():
        loss = [r["val_loss"] for r in rs]
        acc = [r["val_acc"] for r in rs]
        rows.append(
            f"| {label} | {len(rs)} | {rs[0]['n_params']:,} | "
            f"{rs[0]['flops_per_token'] / 1e6:.2f} | "
            f"{_cell(loss)} | {_t(label, rs, base, lambda r: r['val_loss'])} | {_fall(rs)} | "
            f"{_cell(acc, 100, 1)} % | {_t(label, rs, base, lambda r: r['val_acc'])} | "
            + " ".join(_probe_cells(label, rs, base, k) for k in probes))
    return "\n".join(rows)


# the verdict on 'better than the Transformer' (claim 0) in words
SAYS = {"confirmed": "yes", "refuted": "no: worse", "undecided": "not shown"}


def paired_table(recs: dict[str, list[dict]]) -> str:
    """Each arrangement against the Transformer, seed by seed: the mean difference, its 95 %
    interval, p, the smallest difference these seeds' spread detects at 80 % power, and the
    verdict on 'better than the Transformer' (splitnet.analyses.seeds)."""
    base = recs["Transformer"]
    measures = [("held-out loss (nats)", lambda r: r["val_loss"], 1.0, -1, 3),
                ("restored (points)", lambda r: r["val_acc"], 100.0, 1, 1)]
    measures += [(f"{PROBES[k]} (points)", _probe(k), 100.0, 1, 1) for k in PROBES
                 if any(k in r for r in base)]
    rows = ["| arrangement | measure | seeds | difference | 95 % interval | p | detectable "
            "at 80 % power | better than the Transformer? |",
            "|---|---|---:|---:|---|---:|---:|---|"]
    for label, rs in recs.items():
        if label == "Transformer":
            continue
        for name, key, scale, better, dg in measures:
            c = _compare(rs, base, key)
            if c is None:
                continue
            rows.append(f"| {label} | {name} | {c.n} | {scale * c.mean:+.{dg}f} | "
                        f"[{scale * c.low:+.{dg}f}, {scale * c.high:+.{dg}f}] | {c.p:.3f} | "
                        f"{scale * c.detectable:.{dg}f} | {SAYS[c.verdict(0, better)]} |")
    return "\n".join(rows)


def figure(recs: dict[str, list[dict]], path: Path = FIGURE, what: str = "") -> None:
    from splitnet.plots import plot_seed_curves

    curves = {f"{label} ({len(rs)} seeds)": [[(st, lo) for st, lo, _ in r["curve"]] for r in rs]
              for label, rs in recs.items()}
    plot_seed_curves(curves, path, "optimiser step", f"held-out masked loss (nats){what}",
                     title="masked-LM pre-training at equal parameters (mean ± sd over seeds)",
                     zoom_from=STEPS // 2)


def report(corpus: str = "stdlib") -> None:
    cache, _, block, fig, _ = setting(corpus)
    recs = _records(cache)
    if "Transformer" not in recs:
        sys.exit(f"mlm_study: no Transformer runs cached in {cache}; run --study first")
    figure(recs, fig, ", Persuasion" if corpus == "austen" else "")
    text = DOC.read_text()
    start, end = f"<!-- {block}:begin -->", f"<!-- {block}:end -->"
    i, j = text.index(start) + len(start), text.index(end)
    text = text[:i] + "\n" + table(recs) + "\n" + text[j:]
    start, end = f"<!-- {block}-paired:begin -->", f"<!-- {block}-paired:end -->"
    i, j = text.index(start) + len(start), text.index(end)
    DOC.write_text(text[:i] + "\n" + paired_table(recs) + "\n" + text[j:])
    print(table(recs))
    print(paired_table(recs))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--study", action="store_true")
    p.add_argument("--report", action="store_true")
    p.add_argument("--corpus", choices=CORPORA, default="stdlib",
                   help="pre-training corpus (austen: apt-get install r-cran-janeaustenr)")
    a = p.parse_args(argv)
    if a.study:
        study(a.corpus)
    if a.report or not a.study:
        report(a.corpus)
    return 0


if __name__ == "__main__":
    sys.exit(main())
