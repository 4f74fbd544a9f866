"""Regenerate docs/translation.md: does the seed's Macaron decoder translate better, at equal
parameters, than the Transformer's, and does a symmetric three-field splitting?

    python3 experiments/translation_study.py             # ~35 min on 2 CPU cores (2 jobs)
    python3 experiments/translation_study.py --report    # the tables again from the cache

Arrangements (encoder / decoder; every one has the Transformer's parameter count up to the
extra feed-forward's LayerNorm and bias):

* **Transformer**: ``lie-trotter`` / ``lie-trotter`` (self, cross, FFN): torch.nn.Transformer.
* **Macaron** (the seed, Lu et al. 2019): ``c:0.5,d:1,c:0.5`` / ``c:0.5,d:1,x:1,c:0.5`` with
  per-stage weights: two half-width feed-forwards per layer. A first-order splitting of the
  decoder's three fields (docs/theory.md, "three fields").
* **Strang**: ``strang`` / ``strang`` over (self, cross, FFN) with shared weights:
  ``s/2 x/2 f x/2 s/2``, symmetric, second order.

Each is trained by ``splitnet.training.train`` (``--task translate``: the same batches for every
arrangement of a seed, AdamW, label smoothing 0.1, the inverse-square-root schedule of Vaswani
et al.) on the machine's gettext catalogues (en -> de, split by catalogue family), byte tokens;
then validation loss (nats per target byte, no smoothing) and BLEU / chrF (sacrebleu) of beam
search (beam 4, length penalty 0.6) on the first test sentences, as the trainer reports them.
Checkpoints go to runs/translation/ (a killed run resumes); results are cached per
(arrangement, seed) in experiments/cache/translation/.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "translation.md"
CACHE = ROOT / "experiments" / "cache" / "translation"
RUNS = ROOT / "runs" / "translation"       # checkpoints (not committed)
ARRANGEMENTS = {   # label -> (encoder scheme, decoder scheme, weights)
    "Transformer": ("lie-trotter", "lie-trotter", "per-stage"),
    "Macaron": ("c:0.5,d:1,c:0.5", "c:0.5,d:1,x:1,c:0.5", "per-stage"),
    "Strang": ("strang", "strang", "shared"),
}
SIZE = {"d_model": 128, "n_heads": 4, "n_encoder_layers": 2, "n_decoder_layers": 2,
        "max_len": 128}
RUN = {"steps": 1200, "batch_size": 32, "lr": 1.5e-3, "warmup": 200, "label_smoothing": 0.1,
       "beam": 4, "length_penalty": 0.6, "test_sentences": 400}
GPU_COMMAND = ("splitnet train --task translate --device cuda --d-model 512 --n-heads 8 "
               "--n-encoder-layers 6 --n-decoder-layers 6 --decoder-scheme "
               "c:0.5,d:1,x:1,c:0.5 --encoder-scheme c:0.5,d:1,c:0.5 --weights per-stage "
               "--dropout 0.1 --schedule inverse-sqrt --warmup 4000 --lr 7e-4 "
               "--batch-size 256 --steps 100000 --beam 5 --length-penalty 1.0 --out runs/mac")


def train_one(label: str, seed: int, corpus_name: str) -> dict:
    """Train one arrangement with one seed through ``splitnet.train`` (its batches, schedule,
    checkpoints and final BLEU); return the record."""

    from splitnet import checkpoint as ck
    from splitnet.configs.config import TrainConfig
    from splitnet.configs.seq2seq import Seq2SeqConfig
    from splitnet.training.train import train
    from splitnet.translate.translation import translate_lines

    enc_s, dec_s, weights = ARRANGEMENTS[label]
    out = RUNS / corpus_name / label.lower() / f"seed{seed}"
    model = Seq2SeqConfig(encoder_scheme=enc_s, decoder_scheme=dec_s, weights=weights,
                          **{k: v for k, v in SIZE.items() if k != "max_len"})
    cfg = TrainConfig(task="translate", model=model, pairs=None if corpus_name == "gettext"
                      else corpus_name, context=SIZE["max_len"], steps=RUN["steps"],
                      batch_size=RUN["batch_size"], lr=RUN["lr"], warmup=RUN["warmup"],
                      schedule="inverse-sqrt", beta2=0.98, weight_decay=0.01, seed=seed,
                      label_smoothing=RUN["label_smoothing"], beam=RUN["beam"],
                      length_penalty=RUN["length_penalty"],
                      bleu_sentences=RUN["test_sentences"], eval_every=RUN["steps"] // 3,
                      ckpt_every=RUN["steps"] // 3, threads=1, progress=False, plot=False,
                      out=str(out), resume=(out / ck.CKPT).exists())
    summary = train(cfg)
    state = ck.load(out)
    from splitnet.translate.batches import tokenizer_from_dict
    from splitnet.translate.pairs import load_pairs

    tok = tokenizer_from_dict(state["tokenizer"])
    m = ck.model_from_state(state, out).eval()
    corpus = load_pairs(cfg.pairs)
    test = sorted(corpus.split("test")[:RUN["test_sentences"]],
                  key=lambda p: len(p[0]))[::40][:4]            # short to longer, readable
    hyps = translate_lines(m, tok, [s for s, _ in test], RUN["beam"], RUN["length_penalty"])
    last = [json.loads(x) for x in (out / ck.METRICS).read_text().splitlines()]
    val = [r["val_loss"] for r in last if "val_loss" in r][-1]
    return {"label": label, "seed": seed, "corpus": corpus.describe(),
            "params": summary["n_params"], "tokens_per_s": summary["tok_per_s"],
            "val_loss": val, "val_bpb": val / math.log(2), "bleu": summary["bleu"],
            "chrf": summary["chrf"], "examples": [[s, h, t] for (s, t), h in zip(test, hyps)]}


def _cached(label: str, seed: int, corpus: str) -> Path:
    return CACHE / f"{corpus}_{label.lower()}_seed{seed}.json"


def _job(args) -> str:
    label, seed, corpus = args
    path = _cached(label, seed, corpus)
    if not path.exists():
        rec = train_one(label, seed, corpus)
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(rec, indent=1))
        tmp.replace(path)                       # atomic: a killed job leaves no half record
    return f"{label} seed {seed}"


def _stats(recs: list[dict], key: str, digits: int = 2) -> str:
    import numpy as np

    v = np.array([r[key] for r in recs], dtype=float)
    return f"{v.mean():.{digits}f} ± {v.std(ddof=1):.{digits}f}" if len(v) > 1 else \
        f"{v.mean():.{digits}f}"


def tables(corpus: str, seeds: list[int]) -> dict[str, str]:
    """The study's markdown tables from the cache (missing runs are listed, not invented)."""
    import numpy as np
    from scipy import stats

    recs = {lab: [json.loads(_cached(lab, s, corpus).read_text()) for s in seeds
                  if _cached(lab, s, corpus).exists()] for lab in ARRANGEMENTS}
    rows = ["| arrangement | encoder / decoder (weights) | parameters | seeds | validation "
            "loss (nats/byte) | BLEU | chrF | train tokens/s |", "|---|---|---:|---:|---:|---:|"
            "---:|---:|"]
    for lab, rs in recs.items():
        if not rs:
            continue
        e, d, w = ARRANGEMENTS[lab]
        rows.append(f"| {lab} | `{e}` / `{d}` ({w}) | {rs[0]['params']:,} | {len(rs)} | "
                    f"{_stats(rs, 'val_loss', 3)} | {_stats(rs, 'bleu')} | "
                    f"{_stats(rs, 'chrf')} | {_stats(rs, 'tokens_per_s', 0)} |")
    base = {r["seed"]: r for r in recs["Transformer"]}
    paired = ["| against the Transformer | Δ validation loss | t | Δ BLEU | t | Δ chrF | t |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for lab, rs in recs.items():
        both = [(r, base[r["seed"]]) for r in rs if r["seed"] in base and lab != "Transformer"]
        if len(both) < 2:
            continue
        cells = []
        for key in ("val_loss", "bleu", "chrf"):
            a = np.array([r[key] for r, _ in both])
            b = np.array([t[key] for _, t in both])
            t = stats.ttest_rel(a, b).statistic
            cells += [f"{(a - b).mean():+.3f}" if key == "val_loss" else f"{(a - b).mean():+.2f}",
                      f"{t:+.2f}"]
        paired.append(f"| {lab} (n = {len(both)} seeds) | " + " | ".join(cells) + " |")
    ex = recs["Transformer"][0]["examples"] if recs["Transformer"] else []
    examples = "\n".join(f"- source: `{s}`  \n  output: `{h}`  \n  reference: `{r}`"
                         for s, h, r in ex)
    setup = (f"Corpus: {recs['Transformer'][0]['corpus'] if recs['Transformer'] else corpus}. "
             f"Model: d_model {SIZE['d_model']}, {SIZE['n_heads']} heads, "
             f"{SIZE['n_encoder_layers']} + {SIZE['n_decoder_layers']} layers, byte tokens; "
             f"{RUN['steps']} steps of {RUN['batch_size']} pairs, AdamW (0.9, 0.98), peak lr "
             f"{RUN['lr']:g} after {RUN['warmup']} warmup steps then 1/sqrt(step), weight decay "
             f"0.01 on matrices, label "
             f"smoothing {RUN['label_smoothing']}, clip 1.0; BLEU and chrF of beam "
             f"{RUN['beam']} (length penalty {RUN['length_penalty']}) on the first "
             f"{RUN['test_sentences']} test pairs; one thread per run, two runs at a time on a "
             f"2-core CPU (tokens/s are per run, with the other run beside it).")
    return {"setup": setup, "results": "\n".join(rows), "paired": "\n".join(paired),
            "examples": examples or "(none yet)", "gpu": f"```\n{GPU_COMMAND}\n```"}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--corpus", default="gettext", help="gettext (default) or a --pairs source")
    p.add_argument("--jobs", type=int, default=2, help="runs at a time (one thread each)")
    p.add_argument("--report", action="store_true", help="only rewrite the doc from the cache")
    a = p.parse_args(argv)
    seeds = [int(s) for s in a.seeds.split(",")]
    if not a.report:
        todo = [(lab, s, a.corpus) for s in seeds for lab in ARRANGEMENTS]
        from tqdm.auto import tqdm

        with mp.get_context("spawn").Pool(max(1, a.jobs)) as pool:
            for done in tqdm(pool.imap_unordered(_job, todo), total=len(todo),
                             desc="translation study", file=sys.stderr):
                tqdm.write(f"done: {done}", file=sys.stderr)
    from splitnet.dev.docblocks import write_blocks

    write_blocks(DOC, "translation_study", tables(a.corpus, seeds), stamp=True)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
