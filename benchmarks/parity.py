"""Training parity: splitnet's trainer against independent minimal PyTorch loops (issue 34).

**(a) Mapped weights.** A Lie–Trotter ``SplitSeq2Seq`` and ``torch.nn.Transformer(norm_first=
True)`` with learned positions, one token embedding and a head tied to it (the LM: a Lie–Trotter
``SplitTransformer`` and nanoGPT's GPT, :class:`splitnet.nets.reference.RefGPT`) start from the
same weights (:func:`splitnet.nets.reference.load_into_torch_transformer` and
``load_into_gpt``) and train ``--steps`` steps on
the same batches in float64. Ours runs the trainer's own pieces (``training.setup.build_model``
and ``wrap_model``: ``Seq2SeqLoss`` / ``LMLoss``; ``build_optimizer``; ``lr_at``; the update of
``training.train._train_step``); the reference is a loop written here from the formulas::

    loss    = (1/N) sum_{i: y_i != pad} [(1 - eps) CE(z_i, y_i) + eps (1/V) sum_v -log p_v(z_i)]
    lr(s)   = lr (s + 1) / W                                        s < W
            = lr [r + (1 - r) (1 + cos(pi (s - W) / (S - W))) / 2]  s >= W
    g      <- g min(1, c / ||g||_2)                  (global norm over every parameter)
    AdamW(beta1, beta2), decoupled decay lambda on parameters with dim >= 2, none on the rest

The table gives ``max_s |loss_ours(s) - loss_ref(s)|``.

**(b) Own initialisations.** Each side from its own default initialisation (ours: the config's
``init``; the reference: ``torch.nn.Transformer``'s xavier-uniform, as PyTorch's translation
tutorial applies it to every matrix, token embeddings times sqrt(d); nanoGPT's N(0, 0.02)),
same batches, same schedule, on tasks that need the source: **copy** and **word reversal**
(target = the source's words in reverse order) over ``--words`` seeded pseudo-words, and an LM on
the standard library's source. Reported: optimiser steps until the validation loss (checked every
``--eval-every`` steps) is at most ``--threshold`` bits per target byte (LM: ``--lm-threshold``
bits per byte), ours against the reference, and their ratio.

    python3 benchmarks/parity.py --part a            # seconds
    python3 benchmarks/parity.py --out parity.md     # both parts: ~15 min on one thread
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import statistics
import sys
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn

from splitnet.cli._args import nonnegative_int, positive_int
from splitnet.configs.config import SplitConfig
from splitnet.configs.seq2seq import Seq2SeqConfig
from splitnet.nets.reference import RefGPT, load_into_gpt, load_into_torch_transformer
from splitnet.runenv import RunEnv
from splitnet.runs import data as D
from splitnet.training.config import TrainConfig
from splitnet.training.setup import build_model, build_optimizer, lr_at, wrap_model
from splitnet.translate.batches import ByteTokenizer, encode_pairs, eval_batches
from splitnet.translate.translation import train_batch

LN2 = math.log(2.0)
TASKS = ("copy", "reverse", "lm")
REF_INITS = ("tutorial", "torch")

# ---------------------------------------------------------------------------------------------
# data


def pseudo_words(n: int, seed: int, length: tuple[int, int] = (2, 8)) -> list[str]:
    """``n`` distinct seeded lowercase words of ``length[0]..length[1]`` letters."""
    lo, hi = length
    if 26 ** hi < 2 * n:
        raise ValueError(f"{n} distinct words need longer words than {lo}..{hi} letters")
    rng, out = random.Random(f"words-{seed}"), {}
    while len(out) < n:
        w = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(lo, hi)))
        out.setdefault(w, None)
    return list(out)


def alignment_pairs(task: str, n_words: int = 400, n_pairs: int = 3800, seed: int = 0,
                    line_words: tuple[int, int] = (4, 7), word_len: tuple[int, int] = (2, 8)):
    """``n_pairs`` lines of ``line_words`` (4..7) words drawn from ``pseudo_words(n_words)``;
    the target is the line (``copy``) or its words in reverse order (``reverse``). The same
    lines for every task, and for every model seed (``seed`` is the data's)."""
    if task not in ("copy", "reverse"):
        raise ValueError(f"alignment task must be copy or reverse, got {task!r}")
    words, rng = pseudo_words(n_words, 0, word_len), random.Random(f"lines-{seed}")
    pairs = []
    for _ in range(n_pairs):
        line = [rng.choice(words) for _ in range(rng.randint(*line_words))]
        pairs.append((" ".join(line), " ".join(line if task == "copy" else line[::-1])))
    return pairs


def split_pairs(pairs, n_valid: int):
    """Byte-encoded (train, valid) splits: the last ``n_valid`` pairs validate."""
    tok = ByteTokenizer()
    return encode_pairs(pairs[:-n_valid], tok), encode_pairs(pairs[-n_valid:], tok)


# ---------------------------------------------------------------------------------------------
# the reference networks


class RefSeq2Seq(nn.Module):
    """``torch.nn.Transformer(norm_first=True)`` with learned positions, one token embedding for
    source and target (times ``emb_scale``) and a head: ``forward(src, tgt_in, mask)`` ->
    logits. ``init="tutorial"`` (PyTorch's translation tutorial): xavier-uniform on every
    matrix, head tied to the embedding, emb_scale sqrt(d). ``init="torch"``: each module's own
    default (embeddings and positions N(0, 1), nn.Transformer's xavier, an untied nn.Linear
    head), emb_scale 1: the loop the issue saw learn copy in 250 steps."""

    def __init__(self, vocab: int, d: int, n_heads: int, layers: int, max_len: int,
                 init: str = "tutorial"):
        super().__init__()
        if init not in REF_INITS:
            raise ValueError(f"reference init must be one of {', '.join(REF_INITS)}, got {init!r}")
        self.emb = nn.Embedding(vocab, d)
        self.src_pos, self.tgt_pos = nn.Embedding(max_len, d), nn.Embedding(max_len, d)
        with warnings.catch_warnings():      # "enable_nested_tensor ... norm_first": expected
            warnings.simplefilter("ignore", UserWarning)
            self.tt = nn.Transformer(d, n_heads, layers, layers, 4 * d, dropout=0.0,
                                     activation="gelu", norm_first=True, batch_first=True)
        self.head = nn.Linear(d, vocab, bias=False)
        self.emb_scale = 1.0
        if init == "tutorial":
            self.head.weight = self.emb.weight
            self.emb_scale = math.sqrt(d)
            for p in self.parameters():
                if p.dim() > 1:
                    nn.init.xavier_uniform_(p)

    def forward(self, src, tgt_in, mask=None):
        ps, pt = torch.arange(src.shape[1]), torch.arange(tgt_in.shape[1])
        e_src = self.emb(src) * self.emb_scale + self.src_pos(ps)
        e_tgt = self.emb(tgt_in) * self.emb_scale + self.tgt_pos(pt)
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1],
                                                                dtype=e_tgt.dtype)
        y = self.tt(e_src, e_tgt, tgt_mask=causal, src_key_padding_mask=mask,
                    memory_key_padding_mask=mask, tgt_is_causal=True)
        return self.head(y)


def _copy(dst: torch.Tensor, src: torch.Tensor) -> None:
    with torch.no_grad():
        dst.copy_(src)


def embedding_scale(ours) -> float:
    """The factor ``ours`` multiplies token embeddings by (1, or sqrt(d) under an init that
    scales them), read off the network: ``embed_source(i) = s emb(i) + pos(0)``."""
    ids = torch.tensor([[3]])
    with torch.no_grad():
        w = ours.src_emb(ids)
        e = ours.embed_source(ids) - ours.src_pos(torch.zeros(1, dtype=torch.long))
    return float((e * w).sum() / (w * w).sum())


def map_seq2seq(ours, ref: RefSeq2Seq) -> None:
    """Give ``ref`` the weights of a Lie–Trotter ``SplitSeq2Seq`` ``ours`` (shared embeddings,
    tied head): the sub-layers by the tests' mapping, embeddings, positions and scale here."""
    if not (ours.config.shared_embeddings and ours.config.tie_head):
        raise ValueError("map_seq2seq needs shared_embeddings and tie_head (the reference's)")
    load_into_torch_transformer(ref.tt, ours)
    _copy(ref.emb.weight, ours.src_emb.weight)
    _copy(ref.src_pos.weight, ours.src_pos.weight)
    _copy(ref.tgt_pos.weight, ours.tgt_pos.weight)
    ref.emb_scale = embedding_scale(ours)


def map_gpt(ours, ref: RefGPT) -> None:
    """Give nanoGPT's ``ref`` the weights of a Lie–Trotter ``SplitTransformer`` ``ours``."""
    load_into_gpt(ref, ours)


# ---------------------------------------------------------------------------------------------
# the two training steps


class OursRun:
    """splitnet's training step from the trainer's own pieces: ``build_model`` (seeded by
    ``cfg.seed``, the config's init), ``wrap_model`` (the loss module), the AdamW groups of
    ``build_optimizer``, the ``lr_at`` schedule and the update of ``_train_step`` (one process,
    one micro-batch). ``dtype`` other than float32: the model cast and the optimiser rebuilt."""

    def __init__(self, cfg: TrainConfig, dtype=torch.float32):
        env = RunEnv(1, 0, 0, torch.device("cpu"))
        self.cfg = cfg
        self.model, self.opt, self.sched, _ = build_model(cfg, None, env)
        if dtype != torch.float32:
            self.model.to(dtype)
            self.opt = build_optimizer(self.model, cfg)
            self.sched = torch.optim.lr_scheduler.LambdaLR(
                self.opt, lambda s: lr_at(s, cfg.warmup, cfg.steps, cfg.min_lr_ratio,
                                          cfg.schedule))
        self.fwd, self.step_fn = wrap_model(self.model, self.opt, cfg, env)

    def step(self, batch) -> float:
        loss = self.step_fn(self.fwd, *batch)
        loss.backward()
        if self.cfg.clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip)
        self.opt.step()
        self.sched.step()
        self.opt.zero_grad(set_to_none=True)
        return float(loss.detach())


def reference_lr(s: int, cfg: TrainConfig) -> float:
    """The module docstring's lr(s), written out again (not splitnet's ``lr_at``)."""
    if s < cfg.warmup:
        return cfg.lr * (s + 1) / cfg.warmup
    if cfg.steps <= cfg.warmup:
        return cfg.lr
    p = min(1.0, (s - cfg.warmup) / (cfg.steps - cfg.warmup))
    r = cfg.min_lr_ratio
    return cfg.lr * (r + (1.0 - r) * 0.5 * (1.0 + math.cos(math.pi * p)))


def seq2seq_loss(model, batch, eps: float, pad: int, dtype=None):
    """Label-smoothed mean cross-entropy over the non-pad targets, in the logits' dtype (or
    ``dtype``: float32 imitates ``Seq2SeqLoss``, which casts float64 logits down)."""
    src, tgt_in, tgt_out, mask = batch[:4]
    logits = model(src, tgt_in, mask)
    logits = logits if dtype is None else logits.to(dtype)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                           ignore_index=pad, label_smoothing=eps)


def lm_loss(model, batch, eps: float = 0.0, pad: int = -100):
    x, y = batch
    logits = model(x)
    return F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))


class RefRun:
    """A minimal loop: AdamW with two groups (decay on matrices), the learning rate set by hand
    every step (:func:`reference_lr`), global-norm clipping, ``F.cross_entropy`` in the model's
    dtype (label smoothing and padding for translation)."""

    def __init__(self, model: nn.Module, cfg: TrainConfig, loss_fn, pad: int = -100):
        self.model, self.cfg, self.loss_fn, self.pad, self.s = model, cfg, loss_fn, pad, 0
        decay = [p for p in model.parameters() if p.dim() >= 2]
        rest = [p for p in model.parameters() if p.dim() < 2]
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                                      {"params": rest, "weight_decay": 0.0}],
                                     lr=cfg.lr, betas=(cfg.beta1, cfg.beta2))

    def step(self, batch) -> float:
        for g in self.opt.param_groups:
            g["lr"] = reference_lr(self.s, self.cfg)
        eps = self.cfg.label_smoothing if self.cfg.task == "translate" else 0.0
        loss = self.loss_fn(self.model, batch, eps, self.pad)
        loss.backward()
        if self.cfg.clip > 0:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.s += 1
        return float(loss.detach())


# ---------------------------------------------------------------------------------------------
# configurations and data of a run


def init_options(cls, init: str | None) -> dict:
    """``{"init": init}`` when given (and the config has the option), else {}: the default."""
    if init is None:
        return {}
    if "init" not in {f.name for f in dataclasses.fields(cls)}:
        raise ValueError(f"{cls.__name__} has no init option in this splitnet; leave --init out")
    return {"init": init}


def translate_config(a, seed: int, steps: int, warmup: int | None = None,
                     tied: bool | None = None) -> TrainConfig:
    """The translation run of part (a) (``tied=True``: the head tied, as the mapped reference
    has it) or (b) (None: the config's own default)."""
    model = Seq2SeqConfig(d_model=a.d_model, n_heads=a.n_heads, n_encoder_layers=a.layers,
                          n_decoder_layers=a.layers, **init_options(Seq2SeqConfig, a.init),
                          **({} if tied is None else {"tie_head": tied}))
    return TrainConfig(task="translate", model=model, context=a.max_len, batch_size=a.batch,
                       steps=steps, lr=a.lr, warmup=a.warmup if warmup is None else warmup,
                       seed=seed, device="cpu", bleu_sentences=0, progress=False, plot=False)


def lm_config(a, seed: int, steps: int, warmup: int | None = None) -> TrainConfig:
    model = SplitConfig(d_model=a.d_model, n_heads=a.n_heads, n_layers=a.lm_layers,
                        scheme="lie-trotter", **init_options(SplitConfig, a.lm_init))
    return TrainConfig(task="lm", model=model, context=a.lm_context, batch_size=a.batch,
                       steps=steps, lr=a.lr, warmup=a.warmup if warmup is None else warmup,
                       seed=seed, device="cpu", progress=False, plot=False)


def lm_corpus(a):
    return D.load_corpus(a.text)


def _translation_data(a, task: str):
    pairs = alignment_pairs(task, a.words, a.pairs, 0, a.line_words, a.word_len)
    train, valid = split_pairs(pairs, a.valid)
    return SimpleNamespace(train=train), valid


def _runs(a, task: str, seed: int, steps: int, dtype, warmup=None, corpus=None, ref_init=None,
          tied=None):
    """(ours, reference, batch_at(step), cfg) of one task, each side from its own init (the
    translation reference's: ``ref_init``, default ``a.ref_init``)."""
    if task == "lm":
        cfg = lm_config(a, seed, steps, warmup)
        ours = OursRun(cfg, dtype)
        torch.manual_seed(seed)
        ref = RefRun(RefGPT(256, a.d_model, a.n_heads, a.lm_layers, a.lm_context).to(dtype),
                     cfg, lm_loss)
        return ours, ref, lambda s: D.train_batch(corpus, s, a.batch, a.lm_context, seed), cfg
    cfg = translate_config(a, seed, steps, warmup, tied)
    data = corpus
    ours = OursRun(cfg, dtype)
    torch.manual_seed(seed)
    ref = RefRun(RefSeq2Seq(cfg.model.tgt_vocab, a.d_model, a.n_heads, a.layers, a.max_len,
                            ref_init or a.ref_init).to(dtype), cfg, seq2seq_loss, cfg.model.pad_id)
    return ours, ref, lambda s: train_batch(data, cfg, s)[0], cfg


# ---------------------------------------------------------------------------------------------
# (a) mapped weights


def _logit_diff(ours, ref, batch, task: str) -> float:
    with torch.no_grad():
        if task == "lm":
            return float((ours(batch[0]) - ref(batch[0])).abs().max())
        src, tin, _, mask = batch[:4]
        return float((ours(src, tin, mask) - ref(src, tin, mask)).abs().max())


def mapped_curves(a, task: str, steps: int = 20, dtype=torch.float64, corpus=None,
                  ref_loss_dtype=None) -> dict:
    """Part (a) for ``task`` ("translate" or "lm"): the reference takes ours' weights, both
    train ``steps`` steps on the same batches (warmup a quarter of them, cosine over the rest);
    the losses of every step, their largest difference, and the logits' before and after.
    ``ref_loss_dtype``: the reference's translation loss computed in that dtype."""
    if task == "translate":
        corpus = corpus or _translation_data(a, "copy")[0]
    ours, ref, batch_at, _ = _runs(a, task, 0, steps, dtype, max(1, steps // 4), corpus,
                                   ref_init="tutorial", tied=True)   # the mapping: a tied head
    if ref_loss_dtype is not None:
        ref.loss_fn = lambda m, b, eps, pad: seq2seq_loss(m, b, eps, pad, ref_loss_dtype)
    (map_gpt if task == "lm" else map_seq2seq)(ours.model, ref.model)
    first = batch_at(0)
    before = _logit_diff(ours.model, ref.model, first, task)
    lo, lr = [], []
    for s in range(steps):
        b = batch_at(s)
        lo.append(ours.step(b))
        lr.append(ref.step(b))
    return {"task": task, "steps": steps, "dtype": str(dtype).replace("torch.", ""),
            "ref_loss": str(ref_loss_dtype or dtype).replace("torch.", ""),
            "ours": lo, "ref": lr, "logits_before": before,
            "logits_after": _logit_diff(ours.model, ref.model, first, task),
            "max_diff": max(abs(x - y) for x, y in zip(lo, lr)),
            "loss_drop": lo[0] - lo[-1]}


# ---------------------------------------------------------------------------------------------
# (b) own initialisations: steps to a validation threshold


def seq2seq_valid_bits(model, valid, max_len: int, pad: int, batch: int = 100) -> float:
    """Bits per target token (bytes and eos; no smoothing) on the validation pairs."""
    tot, n = 0.0, 0
    model.eval()
    with torch.no_grad():
        for src, tin, tout, mask in eval_batches(valid, batch, max_len):
            logits = model(src, tin, mask)
            tot += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(),
                                         tout.reshape(-1), ignore_index=pad, reduction="sum"))
            n += int(tout.ne(pad).sum())
    model.train()
    return tot / n / LN2


def lm_valid_bits(model, corpus, starts, context: int) -> float:
    """Bits per byte on fixed validation windows."""
    tot, n = 0.0, 0
    model.eval()
    with torch.no_grad():
        for x, y in D.val_batches(corpus, starts, 64, context):
            logits = model(x)
            tot += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(),
                                         y.reshape(-1), reduction="sum"))
            n += y.numel()
    model.train()
    return tot / n / LN2


def race(run, batch_at, valid_bits, threshold: float, max_steps: int, eval_every: int) -> dict:
    """Train ``run`` until ``valid_bits(model) <= threshold`` (checked every ``eval_every``
    steps) or ``max_steps``: the step it got there (None: never), the curve, seconds."""
    t0, curve = time.perf_counter(), []
    for s in range(max_steps):
        run.step(batch_at(s))
        if (s + 1) % eval_every == 0 or s + 1 == max_steps:
            v = valid_bits(run.model)
            curve.append((s + 1, v))
            if v <= threshold:
                return {"steps": s + 1, "curve": curve, "s": time.perf_counter() - t0}
    return {"steps": None, "curve": curve, "s": time.perf_counter() - t0}


def own_init(a, task: str, seed: int, corpus=None) -> dict:
    """Part (b) for one task and seed: steps to the threshold, ours and the reference's."""
    if task == "lm":
        starts = D.val_starts(corpus, a.lm_eval_windows, a.lm_context)
        valid = lambda m: lm_valid_bits(m, corpus, starts, a.lm_context)  # noqa: E731
        threshold, data = a.lm_threshold, corpus
    else:
        data, enc = _translation_data(a, task)
        valid = lambda m: seq2seq_valid_bits(m, enc, a.max_len, enc.pad_id)  # noqa: E731
        threshold = a.threshold
    ours, ref, batch_at, cfg = _runs(a, task, seed, a.max_steps, torch.float32, None, data)
    out = {"task": task, "seed": seed, "threshold": threshold, "ref_init": a.ref_init,
           "init": getattr(cfg.model, "init", "gpt2 (no init option)")}
    for side, run in (("ours", ours), ("ref", ref)):
        out[side] = race(run, batch_at, valid, threshold, a.max_steps, a.eval_every)
    o, r = out["ours"]["steps"], out["ref"]["steps"]
    out["ratio"] = o / r if o and r else None
    return out


# ---------------------------------------------------------------------------------------------
# tables and the command line


def table_a(rows) -> str:
    lines = ["| network | steps | weights | reference loss in | max abs loss diff | "
             "logits before | logits after | loss drop |", "|---|---:|---|---|---:|---:|---:|---:|"]
    for r in rows:
        what = ("SplitSeq2Seq vs nn.Transformer" if r["task"] == "translate"
                else "SplitTransformer vs nanoGPT")
        lines.append(f"| {what} | {r['steps']} | {r['dtype']} | {r['ref_loss']} | "
                     f"{r['max_diff']:.1e} | "
                     f"{r['logits_before']:.1e} | {r['logits_after']:.1e} | "
                     f"{r['loss_drop']:.3f} |")
    return "\n".join(lines)


def _steps(r: dict) -> str:
    return str(r["steps"]) if r["steps"] else f">{r['curve'][-1][0]}"


def table_b(rows) -> str:
    lines = ["| task | seed | ours init | reference | threshold (bits) | ours steps | "
             "reference steps | ratio | ours / ref s |",
             "|---|---:|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        ref = "nanoGPT" if r["task"] == "lm" else f"nn.Transformer, {r.get('ref_init')}"
        lines.append(f"| {r['task']} | {r['seed']} | {r['init']} | {ref} | {r['threshold']:g} | "
                     f"{_steps(r['ours'])} | {_steps(r['ref'])} | {ratio} | "
                     f"{r['ours']['s']:.0f} / {r['ref']['s']:.0f} |")
    return "\n".join(lines)


def summary_b(rows) -> str:
    """Median ratio per task (runs where a side never got there are named)."""
    out = []
    for task in dict.fromkeys(r["task"] for r in rows):
        rs = [r["ratio"] for r in rows if r["task"] == task]
        done = [x for x in rs if x is not None]
        med = f"{statistics.median(done):.2f}" if done else "-"
        miss = len(rs) - len(done)
        out.append(f"{task}: median ours/ref {med} over {len(done)} seed(s)" +
                   (f", {miss} not reached by a side" if miss else ""))
    return "; ".join(out)


def _span(text: str) -> tuple[int, int]:
    try:
        lo, hi = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LO,HI such as 4,7, got {text!r}") from None
    if not 1 <= lo <= hi:
        raise argparse.ArgumentTypeError(f"expected 1 <= LO <= HI, got {text!r}")
    return lo, hi


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 2)[2])
    p.add_argument("--part", choices=("a", "b", "all"), default="all")
    p.add_argument("--tasks", default="copy,reverse,lm", help="part b: of copy,reverse,lm")
    p.add_argument("--seeds", default="0,1", help="part b: model and batch seeds")
    p.add_argument("--d-model", type=positive_int, default=64)
    p.add_argument("--n-heads", type=positive_int, default=4)
    p.add_argument("--layers", type=positive_int, default=2, help="encoder and decoder layers each")
    p.add_argument("--lm-layers", type=positive_int, default=4)
    p.add_argument("--batch", type=positive_int, default=32)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup", type=nonnegative_int, default=50)
    p.add_argument("--words", type=positive_int, default=400)
    p.add_argument("--pairs", type=positive_int, default=3800)
    p.add_argument("--valid", type=positive_int, default=200, help="validation pairs (of --pairs)")
    p.add_argument("--line-words", type=_span, default=(4, 7), help="words per line: LO,HI")
    p.add_argument("--word-len", type=_span, default=(2, 8), help="letters per word: LO,HI")
    p.add_argument("--max-len", type=positive_int, default=64)
    p.add_argument("--threshold", type=float, default=0.5, help="bits per target token")
    p.add_argument("--lm-threshold", type=float, default=2.8, help="bits per byte")
    p.add_argument("--lm-context", type=positive_int, default=64)
    p.add_argument("--lm-eval-windows", type=positive_int, default=256)
    p.add_argument("--text", default=None, help="LM corpus (default: the stdlib's source)")
    p.add_argument("--max-steps", type=positive_int, default=3000,
                   help="the horizon: cosine schedule length and the most steps a side gets")
    p.add_argument("--eval-every", type=positive_int, default=25)
    p.add_argument("--mapped-steps", type=positive_int, default=20)
    p.add_argument("--init", default=None, help="Seq2SeqConfig init (default: its default)")
    p.add_argument("--lm-init", default=None, help="SplitConfig init (default: its default)")
    p.add_argument("--ref-init", choices=REF_INITS, default="tutorial",
                   help="part b: the nn.Transformer reference's initialisation")
    p.add_argument("--threads", type=positive_int, default=1)
    p.add_argument("--out", default=None, help="write the tables as markdown to this file")
    p.add_argument("--json", default=None, help="write every row (curves included) as JSON")
    return p


def _check(a) -> list[str]:
    tasks = [t for t in a.tasks.split(",") if t]
    bad = [t for t in tasks if t not in TASKS]
    if bad or not tasks:
        raise ValueError(f"--tasks takes {', '.join(TASKS)}, got {a.tasks!r}")
    try:
        a.seed_list = [int(s) for s in a.seeds.split(",") if s]
    except ValueError:
        raise ValueError(f"--seeds takes integers such as 0,1, got {a.seeds!r}") from None
    if a.valid >= a.pairs or a.pairs - a.valid < a.batch:
        raise ValueError(f"--pairs {a.pairs} must exceed --valid {a.valid} by --batch {a.batch}")
    return tasks


def run(a, rows_out: dict | None = None) -> str:
    """Both parts as asked; prints as it goes and returns the markdown (``rows_out`` gets the
    rows of each part, curves included)."""
    tasks = _check(a)
    torch.set_num_threads(a.threads)
    corpus = lm_corpus(a) if "lm" in tasks or a.part != "b" else None
    md, rows_out = [], {} if rows_out is None else rows_out
    if a.part in ("a", "all"):
        # the translation row twice: the reference's loss in float64, then in float32 as
        # Seq2SeqLoss computes it (which isolates what the float64 difference comes from)
        rows = [mapped_curves(a, t, a.mapped_steps, corpus=corpus if t == "lm" else None,
                              ref_loss_dtype=cast)
                for t, cast in (("translate", None), ("translate", torch.float32), ("lm", None))]
        rows_out["a"] = rows
        md += ["(a) mapped weights, same batches, float64", "", table_a(rows), ""]
        print(md[-2], flush=True)
    if a.part in ("b", "all"):
        rows = rows_out["b"] = []
        for task in tasks:
            for seed in a.seed_list:
                rows.append(own_init(a, task, seed, corpus if task == "lm" else None))
                print(table_b(rows[-1:]).splitlines()[-1], flush=True)
        md += ["(b) own initialisations: steps to the validation threshold", "",
               table_b(rows), "", summary_b(rows), ""]
        print(md[-2], flush=True)
    return "\n".join(md)


def main(argv=None) -> int:
    a = parser().parse_args(argv)
    rows: dict = {}
    try:
        md = run(a, rows)
    except ValueError as e:
        print(f"parity: {e}", file=sys.stderr)
        return 2
    if a.out:
        Path(a.out).write_text(md)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
