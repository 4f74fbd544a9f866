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

Each is trained with the same batches (``splitnet.pair_batches.pair_batch``: a pure function of
seed and step, the batches of ``splitnet train --task translate``), AdamW, label smoothing 0.1
and the inverse-square-root schedule of Vaswani et al., on the machine's gettext catalogues
(en -> de, split by catalogue family), byte tokens; then validation loss (nats per target
byte, no smoothing) and BLEU / chrF (sacrebleu) of beam search (beam 4, length penalty 0.6)
on the first test sentences. Results are cached per (arrangement, seed) in
experiments/cache/translation/ (a killed study resumes where it stopped).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "translation.md"
CACHE = ROOT / "experiments" / "cache" / "translation"
ARRANGEMENTS = {   # label -> (encoder scheme, decoder scheme, weights)
    "Transformer": ("lie-trotter", "lie-trotter", "per-stage"),
    "Macaron": ("c:0.5,d:1,c:0.5", "c:0.5,d:1,x:1,c:0.5", "per-stage"),
    "Strang": ("strang", "strang", "shared"),
}
SIZE = {"d_model": 128, "n_heads": 4, "n_encoder_layers": 2, "n_decoder_layers": 2,
        "max_len": 128}
RUN = {"steps": 1200, "batch_size": 32, "lr": 1.5e-3, "warmup": 200, "label_smoothing": 0.1,
       "beam": 4, "length_penalty": 0.6, "test_sentences": 400, "max_new_tokens": 128}
GPU_COMMAND = ("splitnet train --task translate --device cuda --d-model 512 --n-heads 8 "
               "--n-encoder-layers 6 --n-decoder-layers 6 --decoder-scheme "
               "c:0.5,d:1,x:1,c:0.5 --encoder-scheme c:0.5,d:1,c:0.5 --weights per-stage "
               "--dropout 0.1 --schedule inverse-sqrt --warmup 4000 --lr 7e-4 "
               "--batch-size 256 --steps 100000 --beam 5 --length-penalty 1.0 --out runs/mac")


def _lr(step: int) -> float:
    """Inverse square root with linear warmup, peak RUN['lr'] at the end of warmup."""
    w = RUN["warmup"]
    return RUN["lr"] * min((step + 1) / w, math.sqrt(w / (step + 1)))


def train_one(label: str, seed: int, corpus_name: str) -> dict:
    """Train one arrangement with one seed; evaluate; return the record."""
    import torch
    import torch.nn.functional as F

    from splitnet.pair_batches import ByteTokenizer, encode_pairs, eval_batches, pair_batch
    from splitnet.pairs import load_pairs
    from splitnet.scores import bleu_chrf
    from splitnet.seq2seq import SplitSeq2Seq

    torch.set_num_threads(1)
    corpus = load_pairs(None if corpus_name == "gettext" else corpus_name)
    tok = ByteTokenizer()
    enc = encode_pairs(corpus.split("train"), tok)
    enc_s, dec_s, weights = ARRANGEMENTS[label]
    torch.manual_seed(seed)
    model = SplitSeq2Seq(tok.vocab_size, tok.vocab_size, encoder_scheme=enc_s,
                         decoder_scheme=dec_s, weights=weights, pad_id=tok.pad_id,
                         bos_id=tok.bos_id, eos_id=tok.eos_id, **SIZE)
    opt = torch.optim.AdamW(model.parameters(), lr=RUN["lr"], betas=(0.9, 0.98),
                            weight_decay=0.01)
    t0, n_tok = time.perf_counter(), 0
    for step in range(RUN["steps"]):
        for g in opt.param_groups:
            g["lr"] = _lr(step)
        src, tin, tout, mask = pair_batch(enc, step, RUN["batch_size"], seed, SIZE["max_len"])
        logits = model(src, tin, mask)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tout.reshape(-1),
                               ignore_index=tok.pad_id, label_smoothing=RUN["label_smoothing"])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        n_tok += int(tout.ne(tok.pad_id).sum())
    train_s = time.perf_counter() - t0
    return {"label": label, "seed": seed, "corpus": corpus.describe(),
            "params": model.n_params(), "train_s": train_s, "tokens_per_s": n_tok / train_s,
            **_evaluate(model, corpus, tok, torch, F, encode_pairs, eval_batches, bleu_chrf)}


def _evaluate(model, corpus, tok, torch, F, encode_pairs, eval_batches, bleu_chrf) -> dict:
    model.eval()
    val = encode_pairs(corpus.split("valid"), tok)
    tot, n = 0.0, 0
    with torch.no_grad():
        for src, tin, tout, mask in eval_batches(val, 64, SIZE["max_len"]):
            logits = model(src, tin, mask)
            tot += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                         tout.reshape(-1), ignore_index=tok.pad_id,
                                         reduction="sum"))
            n += int(tout.ne(tok.pad_id).sum())
    test = corpus.split("test")[:RUN["test_sentences"]]
    hyps, t0 = [], time.perf_counter()
    for k in range(0, len(test), 32):
        src = [tok.encode(s)[:SIZE["max_len"]] or [tok.eos_id] for s, _ in test[k:k + 32]]
        width = max(map(len, src))
        batch = torch.tensor([s + [tok.pad_id] * (width - len(s)) for s in src])
        out = model.generate(batch, RUN["max_new_tokens"], beam=RUN["beam"],
                             length_penalty=RUN["length_penalty"])
        hyps += [tok.decode([t for t in row if t not in (tok.pad_id, tok.eos_id)])
                 for row in out.tolist()]
    scores = bleu_chrf(hyps, [t for _, t in test])
    return {"val_loss": tot / n, "bleu": scores["bleu"], "chrf": scores["chrf"],
            "decode_s": time.perf_counter() - t0, "examples": list(zip(
                [s for s, _ in test[:3]], hyps[:3], [t for _, t in test[:3]]))}


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


def _stats(recs: list[dict], key: str) -> str:
    import numpy as np

    v = np.array([r[key] for r in recs], dtype=float)
    return f"{v.mean():.2f} ± {v.std(ddof=1):.2f}" if len(v) > 1 else f"{v.mean():.2f}"


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
                    f"{_stats(rs, 'val_loss')} | {_stats(rs, 'bleu')} | "
                    f"{_stats(rs, 'chrf')} | {_stats(rs, 'tokens_per_s')} |")
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
             f"{RUN['lr']:g} after {RUN['warmup']} warmup steps then 1/sqrt(step), label "
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
