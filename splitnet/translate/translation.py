"""The translation task of the trainer (``splitnet train --task translate``) and of
``splitnet translate``: data, loss, validation, translating lines, BLEU and chrF.

* :func:`load_data`: the sentence pairs (:func:`splitnet.translate.pairs.load_pairs`: a TSV, a
  folder of
  gettext catalogues, the Bible pair; default this machine's catalogues), the tokenizer (bytes,
  or ``--bpe N`` trained on the training split; on ``--resume`` the checkpoint's), the encoded
  splits; the corpus fingerprint is checked against the checkpoint's as for language models.
* :func:`train_batch`: batch ``step`` of rank ``rank``
  (:func:`splitnet.translate.batches.pair_batch`:
  a pure function of seed and step, so resuming needs no sampler state).
* :class:`Seq2SeqLoss`: label-smoothed cross-entropy over the target tokens (padding ignored).
* :func:`validation_loss`: nats per target token on the validation split, no smoothing.
* :func:`translate_lines` and :func:`test_scores`: beam search on source lines, and BLEU / chrF
  (sacrebleu) of the first ``bleu_sentences`` test pairs.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F
from torch import nn

from ..configs.config import PAIR_NAMES
from .batches import (
    ByteTokenizer,
    encode_pairs,
    eval_batches,
    pair_batch,
    tokenizer_from_dict,
    train_bpe,
)
from .pairs import load_pairs


class PairData:
    """What a translation run reads: the corpus, its tokenizer, the encoded train and valid
    splits, the longest sequence (``max_len`` tokens; longer ones are cut)."""

    def __init__(self, corpus, tokenizer, max_len: int):
        self.corpus, self.tokenizer, self.max_len = corpus, tokenizer, max_len
        self.train = encode_pairs(corpus.split("train"), tokenizer)
        self.valid = encode_pairs(corpus.split("valid"), tokenizer)

    def describe(self) -> str:
        tok = self.tokenizer
        what = "byte tokens" if tok.kind == "byte" else f"BPE of {tok.vocab_size:,} tokens"
        cut = self.train.n_truncated(self.max_len)
        return (f"{self.corpus.describe()}; {what}; {cut:,} training pairs longer than "
                f"{self.max_len} tokens are cut")

    def fingerprint(self) -> dict:
        return self.corpus.fingerprint()


def load_data(cfg, state: dict | None, log) -> PairData:
    """The pairs of ``cfg`` (``pairs``, ``src_lang``, ``tgt_lang``), checked against the
    checkpoint ``state`` when resuming, and the tokenizer (the checkpoint's, else bytes or a BPE
    trained on the training split)."""
    _check_legacy_path(cfg, state)
    corpus = load_pairs(cfg.pairs, cfg.src_lang, cfg.tgt_lang)
    for split in ("train", "valid"):
        if not corpus.split(split):
            raise ValueError(f"the {split} split of {corpus.describe()} is empty: give more "
                             f"pairs")
    if state is not None and not same_corpus(state.get("corpus"), corpus.fingerprint()):
        msg = "the sentence pairs changed since the checkpoint was written"
        if not cfg.allow_data_change:
            raise ValueError(msg + "; pass --allow-data-change to go on with the new data")
        log(f"warning: {msg}; going on (--allow-data-change)")
    if state is not None and state.get("tokenizer") is not None:
        tok = tokenizer_from_dict(state["tokenizer"])
    elif cfg.bpe:
        t0 = time.perf_counter()
        texts = [t for pair in corpus.split("train") for t in pair]
        tok = train_bpe(texts, cfg.bpe)
        log(f"BPE of {tok.vocab_size:,} tokens trained on the training pairs in "
            f"{time.perf_counter() - t0:.1f} s")
    else:
        tok = ByteTokenizer()
    return PairData(corpus, tok, cfg.context)


def _check_legacy_path(cfg, state: dict | None) -> None:
    """A checkpoint written before ``--pairs`` was stored resolved holds it relative to the
    folder it was trained in; read from another folder, the path names nothing (or another
    file, which the fingerprint then refuses): say so instead of "unknown pair source"."""
    import os

    stored = ((state or {}).get("train_config") or {}).get("pairs")
    if not isinstance(stored, str) or os.path.isabs(stored) or cfg.pairs is None:
        return
    if not os.path.isabs(cfg.pairs) or os.path.exists(cfg.pairs) or stored in PAIR_NAMES:
        return
    raise ValueError(f"the checkpoint's pairs {stored!r} is relative to the folder it was "
                     f"trained in (an older checkpoint), not found from {os.getcwd()}: run from "
                     f"that folder, or resume with --pairs naming the file")


def same_corpus(recorded, now: dict) -> bool:
    """Whether two corpus fingerprints are the same pairs: equal but for ``source``, the path as
    spelled (a relative ``--pairs``, ``./data/pairs.tsv``, the file seen from another folder
    or moved); the languages, counts and sha256 of every pair decide."""
    if not isinstance(recorded, dict):
        return False
    return {k: v for k, v in recorded.items() if k != "source"} == \
        {k: v for k, v in now.items() if k != "source"}


def model_config(cfg, tokenizer):
    """``cfg.model`` with the tokenizer's vocabulary and special ids."""
    v = tokenizer.vocab_size
    return cfg.model.replace(src_vocab=v, tgt_vocab=v, pad_id=tokenizer.pad_id,
                             bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id)


def train_batch(data: PairData, cfg, step: int, rank: int = 0, world: int = 1):
    """``(src, tgt_in, tgt_out, src_pad_mask, share)`` of step ``step`` for rank ``rank``, and
    the target tokens of the whole global batch. ``share`` (one float per row, all equal) is
    that count divided by ``world x grad_accum``: :class:`Seq2SeqLoss` divides a micro-batch's
    summed loss by it, so the micro-batch losses, averaged over micro-batches and ranks, are
    the mean over every target token of the global batch, whatever the number of processes."""
    pad = cfg.model.pad_id
    whole = pair_batch(data.train, step, cfg.batch_size, cfg.seed, cfg.context)
    n = int(whole[2].ne(pad).sum())
    b = cfg.batch_size // world
    part = [t[rank * b:(rank + 1) * b] for t in whole]   # = pair_batch(..., rank, world)
    share = torch.full((b,), n / (world * cfg.grad_accum), dtype=torch.float64)
    return (*part, share), n


class Seq2SeqLoss(nn.Module):
    """``forward(src, tgt_in, tgt_out, mask, share=None)``: the label-smoothed cross-entropy of
    the target tokens (``pad_id`` ignored), in float32, summed and divided by ``share[0]`` (the
    tokens a micro-batch would hold if the global batch's were spread evenly; see
    :func:`train_batch`), or their mean without ``share``. The model is a submodule (as
    :class:`~splitnet.tasks.losses.LMLoss`), so DDP wraps model and loss together."""

    def __init__(self, model: nn.Module, label_smoothing: float = 0.1):
        super().__init__()
        self.model, self.label_smoothing = model, label_smoothing
        self.pad_id = model.config.pad_id

    def forward(self, src, tgt_in, tgt_out, mask, share=None) -> torch.Tensor:
        logits = self.model(src, tgt_in, mask)
        loss = F.cross_entropy(_at_least_float32(logits).reshape(-1, logits.shape[-1]),
                               tgt_out.reshape(-1), ignore_index=self.pad_id,
                               label_smoothing=self.label_smoothing,
                               reduction="mean" if share is None else "sum")
        return loss if share is None else loss / share[0].to(loss.dtype)


def _at_least_float32(logits: torch.Tensor) -> torch.Tensor:
    """bf16/fp16 logits go up to float32 for the loss; float64 ones stay float64 (a float64
    model is how the trainer is proved equal to a reference: benchmarks/parity.py)."""
    return logits if logits.dtype == torch.float64 else logits.float()


def validation_loss(model, data: PairData, device, batch_size: int = 64) -> float:
    """Mean cross-entropy (nats per target token, eos included, no smoothing) over the
    validation split, accumulated in float64."""
    pad = model.config.pad_id
    tot = torch.zeros((), dtype=torch.float64, device=device)
    n = 0
    with torch.no_grad():
        for src, tin, tout, mask in eval_batches(data.valid, batch_size, data.max_len):
            src, tin, tout, mask = (t.to(device) for t in (src, tin, tout, mask))
            logits = model(src, tin, mask)
            tot += F.cross_entropy(_at_least_float32(logits).reshape(-1, logits.shape[-1]),
                                   tout.reshape(-1), ignore_index=pad, reduction="sum").double()
            n += int(tout.ne(pad).sum())
    return float(tot / max(n, 1))


def translate_lines(model, tokenizer, lines, beam: int = 4, length_penalty: float = 0.6,
                    max_new_tokens: int | None = None, batch_size: int = 32, device="cpu",
                    progress=None) -> list[str]:
    """One translation per source line (an empty line gives an empty line), in batches of
    similar length; ``progress(n)`` is called after each batch with its size."""
    c = model.config
    n_new = min(c.max_len, max_new_tokens or c.max_len)
    ids = [tokenizer.encode(s)[:c.max_len] for s in lines]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out = [""] * len(ids)
    for k in range(0, len(order), batch_size):
        idx = [i for i in order[k:k + batch_size] if ids[i]]
        if idx:
            width = max(len(ids[i]) for i in idx)
            src = torch.tensor([ids[i] + [c.pad_id] * (width - len(ids[i])) for i in idx],
                               device=device)
            rows = model.generate(src, n_new, beam=beam, length_penalty=length_penalty)
            for i, row in zip(idx, rows.tolist()):
                out[i] = tokenizer.decode(row)
        if progress is not None:
            progress(len(order[k:k + batch_size]))
    return out


def test_scores(model, data: PairData, n: int, beam: int, length_penalty: float, device,
                log=None) -> dict:
    """BLEU and chrF (sacrebleu) of beam search on the first ``n`` test pairs."""
    from .scores import bleu_chrf

    test = list(data.corpus.split("test"))[:n]
    if not test:
        return {}
    t0 = time.perf_counter()
    hyps = translate_lines(model, data.tokenizer, [s for s, _ in test], beam, length_penalty,
                           device=device)
    scores = bleu_chrf(hyps, [t for _, t in test])
    scores.update(sentences=len(test), beam=beam, length_penalty=length_penalty,
                  decode_s=time.perf_counter() - t0)
    if log is not None:
        log(f"test: BLEU {scores['bleu']:.2f}, chrF {scores['chrf']:.2f} on {len(test)} pairs "
            f"(beam {beam}, length penalty {length_penalty:g}; {scores['signature']})")
    return scores


def estimate_memory(cfg, world: int = 1, cuda: bool = False) -> float:
    """Rough bytes a translation step needs on one process (as
    :func:`splitnet.training.setup.estimate_memory`): 16 bytes per parameter, and per token of
    source and target about 30 d_model floats and 4 d_ff per layer, plus the attention scores
    (heads x context per layer) and the logits. On CUDA under bf16 autocast (``cuda=True``,
    ``--amp``, float32 weights) the floats kept are 16-bit and fused SDPA keeps no scores."""
    m = cfg.model
    d, ff, L = m.d_model, m.d_ff, m.n_encoder_layers + m.n_decoder_layers
    params = L * (8 * d * d + 2 * d * ff) + 2 * m.tgt_vocab * d
    tokens = 2 * cfg.batch_size // (world * cfg.grad_accum) * cfg.context
    fused = cuda and cfg.amp and cfg.param_dtype == "float32"
    scores = 0 if fused else 2 * m.n_heads * cfg.context
    per_token = L * (30 * d + 4 * ff + scores) + 2 * m.tgt_vocab
    return 16.0 * params + (2.0 if fused else 4.0) * tokens * per_token


__all__ = ["PairData", "Seq2SeqLoss", "estimate_memory", "load_data", "model_config",
           "same_corpus", "test_scores", "train_batch", "translate_lines", "validation_loss"]
