"""One network at several depths on translation -> docs/elastic.md (issue 60, item 4's last line)

    python3 experiments/elastic_translation.py                # train what is missing, the table
    python3 experiments/elastic_translation.py --report-only  # the table from the cache

The gettext study's scale (experiments/translation_study.py's chosen configuration: en->de
gettext catalogues of /usr/share/locale, BPE 4000, d_model 128, 4 heads, d_ff 512, batch 32,
lr 1.5e-3 inverse-sqrt with warmup 200, label smoothing 0.1, tied head, one thread), one seed,
and ``STEPS`` steps: half that study's 9,840, to fit the CPU time there was (docs/elastic.md
says so). Arms, each run at 1, 2, 4 and 8 steps of both stacks
(:func:`splitnet.nets.depth.at_depth`) where it can run there:

- ``frontier-L``: the Transformer (Lie–Trotter, per-stage weights, the study's baseline) with
  L = 1, 2, 4 encoder and decoder layers, each trained at its depth (arm d); the 4 + 4 one
  coarsened by the mean to 2 and 1 and prolonged to 8 is arm a;
- ``strang-train-depths``: reversible Strang, ``bernstein:4`` weights, 4 + 4 steps,
  ``--train-depths 1,2,4`` (the language-model study's best elastic arm; its other one,
  reversible Yoshida4, costs three times as much per step and was not run); the other arm
  is the 4 + 4 Transformer coarsened (arm a). A plain Lie–Trotter network with ``bernstein:4``
  weights was planned and not run (CPU time).

Measured at each depth: the validation loss (nats per target token, no smoothing) and BLEU /
chrF of beam search (beam 4, length penalty 0.6) on the first ``BLEU_SENTENCES`` test pairs.
Each finished run is one JSON record in experiments/cache/elastic_translation/ (``python3 -m
splitnet.dev regen elastic-translation`` rebuilds the table from it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "experiments" / "cache" / "elastic_translation"
DOC = ROOT / "docs" / "elastic.md"
STEPS = 4920
BLEU_SENTENCES = 200
SCALE = {"d_model": 128, "n_heads": 4, "bpe": 4000, "lr": 1.5e-3, "warmup": 200,
         "batch_size": 32, "tie_head": True, "context": 128, "label_smoothing": 0.1,
         "beam": 4, "length_penalty": 0.6, "schedule": "inverse-sqrt", "beta2": 0.98,
         "weight_decay": 0.01}
ELASTIC = {"n_encoder_layers": 4, "n_decoder_layers": 4, "depth_basis": "bernstein:4"}
ARMS = {   # name -> (network options, train options)
    "frontier-1": ({"n_encoder_layers": 1, "n_decoder_layers": 1}, {}),
    "frontier-2": ({"n_encoder_layers": 2, "n_decoder_layers": 2}, {}),
    "frontier-4": ({"n_encoder_layers": 4, "n_decoder_layers": 4}, {}),
    "strang-train-depths": ({**ELASTIC, "encoder_scheme": "strang", "decoder_scheme": "strang",
                             "weights": "shared", "reversible": True},
                            {"train_depths": (1, 2, 4)}),
}
LABELS = {"frontier-1": "Transformer trained at 1 + 1 layers (d)",
          "frontier-2": "Transformer trained at 2 + 2 layers (d)",
          "frontier-4": "Transformer trained at 4 + 4 layers (d; at other depths: a, "
                        "coarsened by the mean or prolonged)",
          "strang-train-depths": "reversible Strang, bernstein:4, --train-depths 1,2,4 (e)"}
DEPTHS = (1, 2, 4, 8)
SEED = 0


def _config(arm: str, out: Path, steps: int):
    from splitnet.configs.seq2seq import Seq2SeqConfig
    from splitnet.training.config import TrainConfig

    net, opts = ARMS[arm]
    sc = SCALE
    model = Seq2SeqConfig(d_model=sc["d_model"], n_heads=sc["n_heads"],
                          tie_head=sc["tie_head"], **{"encoder_scheme": "lie-trotter",
                                                      "decoder_scheme": "lie-trotter",
                                                      "weights": "per-stage", **net})
    fixed = {k: sc[k] for k in ("bpe", "lr", "warmup", "batch_size", "context",
                                "label_smoothing", "beam", "length_penalty", "schedule",
                                "beta2", "weight_decay")}
    return TrainConfig(task="translate", model=model, steps=steps, eval_every=steps,
                       ckpt_every=max(steps // 8, 1), bleu_sentences=0, seed=SEED,
                       threads=1, device="cpu", progress=False, plot=False, out=str(out),
                       **fixed, **opts)


def _evaluate(out: Path) -> dict:
    """Validation loss and test BLEU / chrF of the run in ``out`` at each depth it can run."""
    import torch

    from splitnet.nets.cost import seq2seq_costs
    from splitnet.nets.depth import at_depth
    from splitnet.runs import checkpoint as ck
    from splitnet.training.config import TrainConfig
    from splitnet.translate.translation import load_data, test_scores, validation_loss

    state = ck.load(out)
    model = ck.model_from_state(state, out).eval()
    cfg = TrainConfig.from_dict(state["train_config"])
    data = load_data(cfg, state, log=lambda m: None)
    c, res = model.config, {}
    for n in DEPTHS:
        layered = c.depth_basis is None
        if layered and n % c.n_decoder_layers and c.n_decoder_layers % n:
            continue
        v = at_depth(model, n).eval()
        with torch.no_grad():
            loss = validation_loss(v, data, "cpu")
            scores = test_scores(v, data, BLEU_SENTENCES, cfg.beam, cfg.length_penalty, "cpu")
        res[str(n)] = {"val_loss": loss, "bleu": scores["bleu"], "chrf": scores["chrf"],
                       "decode_s": scores["decode_s"],
                       "flops_per_token": sum(r["flops"] for r in seq2seq_costs(v.config, 48))}
    return res


def run_one(arm: str, runs: Path, steps: int = STEPS) -> dict:
    """Train one arm (unless cached; a killed run resumes from its checkpoint), then measure
    it at every depth of DEPTHS."""
    from splitnet.runs import checkpoint as ck
    from splitnet.training.train import train

    cache = CACHE / f"{arm}-seed{SEED}.json"
    if cache.exists():
        return json.loads(cache.read_text())
    out = runs / f"{arm}-seed{SEED}"
    cfg = _config(arm, out, steps)
    if (out / ck.CKPT).exists():
        cfg = type(cfg).from_dict({**cfg.to_dict(), "resume": True, "overwrite": False})
    t0 = time.perf_counter()
    summary = train(cfg)
    wall = time.perf_counter() - t0
    if summary["step"] != steps:
        raise SystemExit(f"{arm} stopped at step {summary['step']}")
    recs = [r for r in ck.read_metrics(out / ck.METRICS) if "loss" in r]
    d = {"arm": arm, "seed": SEED, "steps": steps, "scale": SCALE, "wall_s": wall,
         "params": ck.load_model(out).n_params(),
         "train_flops": sum(r.get("step_flops", 0.0) for r in recs) or None,
         "depths": _evaluate(out), "host": "2-core CPU, one thread"}
    CACHE.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(d, indent=1) + "\n")
    print(f"[{time.strftime('%H:%M:%S')}] {arm}: {wall:.0f} s, " + ", ".join(
        f"{n}: {r['val_loss']:.3f} / BLEU {r['bleu']:.1f}" for n, r in d["depths"].items()),
        file=sys.stderr, flush=True)
    return d


def table(results: list) -> str:
    """Validation loss and BLEU at every depth, and each minus the frontier at its depth."""
    by = {r["arm"]: r for r in results}
    head = ("| arm | params | " + " | ".join(f"{n} steps: loss / BLEU" for n in DEPTHS) +
            " | − frontier at 1 / 2 / 4 steps: loss, BLEU |")
    lines = [head, "|---|---:|" + "---|" * len(DEPTHS) + "---|"]
    for arm in LABELS:
        r = by.get(arm)
        if r is None:
            continue
        d = r["depths"]
        cells = [f"{d[str(n)]['val_loss']:.3f} / {d[str(n)]['bleu']:.2f}" if str(n) in d
                 else "" for n in DEPTHS]
        diffs = []
        for n in (1, 2, 4):
            f = by.get(f"frontier-{n}")
            if arm == f"frontier-{n}" or f is None or str(n) not in d:
                diffs.append("–")
                continue
            fd = f["depths"][str(n)]
            diffs.append(f"{d[str(n)]['val_loss'] - fd['val_loss']:+.3f}, "
                         f"{d[str(n)]['bleu'] - fd['bleu']:+.2f}")
        lines.append(f"| {LABELS[arm]} | {r['params']:,} | " + " | ".join(cells)
                     + f" | {' / '.join(diffs)} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    from elastic_study import add_study_options, parse_study_args  # experiments/, beside this

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_study_options(p, ROOT / "runs" / "elastic_translation", ARMS, STEPS)
    a = parse_study_args(p, argv, ARMS)
    if not a.report_only:
        for arm in a.arms:
            run_one(arm, a.runs, a.steps)
    results = [json.loads(f.read_text()) for f in sorted(CACHE.glob("*.json"))]
    from splitnet.dev.docblocks import write_blocks

    changed = write_blocks(a.doc, "elastic", {"translation": table(results)})
    print(f"{a.doc}: {'written' if changed else 'unchanged'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
