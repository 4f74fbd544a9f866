"""Masked-LM training parity: a bidirectional Lie–Trotter ``SplitTransformer`` against
``torch.nn.TransformerEncoder(norm_first=True)`` (issue 29), each from its own default
initialisation.

The reference is written here: token embedding times sqrt(d) plus learned positions, the
encoder with a final norm, a head tied to the token embedding, xavier-uniform on every matrix
(PyTorch's tutorial convention, as ``benchmarks/parity.py`` uses for translation). Both train
with the same loop -- AdamW (0.9, 0.95), weight decay 0.1 on matrices, linear warmup then
cosine, gradient clip 1 -- on the same masked batches of the standard library's bytes
(:mod:`splitnet.mlm.masking`: 15 %, 80/10/10), and are scored on the same masked held-out
windows: mean cross-entropy (nats) and accuracy over the masked bytes, against the unigram
cross-entropy of those bytes (what a network that ignores its context reaches).

    python3 benchmarks/parity_mlm.py                  # ~1 min on one thread
    python3 benchmarks/parity_mlm.py --steps 1000 --d-model 128
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from splitnet.cli._args import nonnegative_int, positive_int, seed
from splitnet.mlm import IGNORE, MLM_VOCAB, masking
from splitnet.nets.models import SplitTransformer
from splitnet.runs import data as D


class RefMLM(nn.Module):
    """``torch.nn.TransformerEncoder`` between an embedding and a tied head."""

    def __init__(self, d: int, heads: int, layers: int, context: int):
        super().__init__()
        self.d = d
        self.tok = nn.Embedding(MLM_VOCAB, d)
        self.pos = nn.Embedding(context, d)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, activation="gelu",
                                               norm_first=True, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(d),
                                             enable_nested_tensor=False)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def forward(self, x):
        h = self.tok(x) * math.sqrt(self.d) + self.pos(torch.arange(x.shape[1]))
        return self.enc(h) @ self.tok.weight.T


def _optimizer(model, lr):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                              {"params": rest, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.95))


def _lr(s, a):
    if s < a.warmup:
        return a.lr * (s + 1) / a.warmup
    q = (s - a.warmup) / max(1, a.steps - a.warmup)
    return a.lr * (0.1 + 0.9 * (1 + math.cos(math.pi * q)) / 2)


@torch.no_grad()
def held_out(model, inputs, labels) -> tuple[float, float]:
    model.eval()
    logits = model(inputs)
    keep = labels != IGNORE
    loss = F.cross_entropy(logits[keep], labels[keep]).item()
    acc = (logits[keep].argmax(-1) == labels[keep]).float().mean().item()
    model.train()
    return loss, acc


def train(model, corpus, val, a, seed) -> list[tuple[int, float, float]]:
    opt = _optimizer(model, a.lr)
    curve = []
    for s in range(a.steps):
        x, y = masking.train_batch(corpus, s, a.batch, a.context, seed)
        for g in opt.param_groups:
            g["lr"] = _lr(s, a)
        loss = F.cross_entropy(model(x).reshape(-1, MLM_VOCAB), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if (s + 1) % a.eval_every == 0:
            curve.append((s + 1, *held_out(model, *val)))
    return curve


def unigram(corpus, labels) -> float:
    f = np.bincount(corpus.train, minlength=256).astype(float) + 1.0
    lab = labels[labels != IGNORE].numpy()
    return float(-np.log(f[lab] / f.sum()).mean())


def run(a) -> dict:
    torch.set_num_threads(a.threads)
    corpus = D.load_corpus(None, 0.05)
    starts = D.val_starts(corpus, a.windows, a.context)
    val = masking.masked_windows(corpus, starts, a.context, 0)
    out = {"unigram": unigram(corpus, val[1]), "curves": {}, "seconds": {}}
    for name in ("ours", "reference"):
        torch.manual_seed(a.seed)
        model = (SplitTransformer(MLM_VOCAB, a.d_model, a.n_heads, a.n_layers,
                                  scheme="lie-trotter", max_len=a.context, causal=False,
                                  init=a.init)
                 if name == "ours" else RefMLM(a.d_model, a.n_heads, a.n_layers, a.context))
        t0 = time.perf_counter()
        out["curves"][name] = train(model, corpus, val, a, a.seed)
        out["seconds"][name] = time.perf_counter() - t0
    return out


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=positive_int, default=400)
    p.add_argument("--warmup", type=nonnegative_int, default=50)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--d-model", type=positive_int, default=64)
    p.add_argument("--n-heads", type=positive_int, default=4)
    p.add_argument("--n-layers", type=positive_int, default=2)
    p.add_argument("--context", type=positive_int, default=64)
    p.add_argument("--batch", type=positive_int, default=32)
    p.add_argument("--windows", type=positive_int, default=128)
    p.add_argument("--eval-every", type=positive_int, default=100)
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument("--init", default="xavier", help="ours: gpt2 or xavier (the mlm default)")
    p.add_argument("--threads", type=positive_int, default=1)
    return p


def main(argv=None) -> int:
    a = parser().parse_args(argv)
    r = run(a)
    print(f"masked LM, d_model {a.d_model}, {a.n_layers} layers, context {a.context}, batch "
          f"{a.batch}, lr {a.lr:g}, seed {a.seed}, ours init {a.init}; unigram cross-entropy "
          f"of the held-out masked bytes {r['unigram']:.3f} nats")
    print("| step | ours loss | ours acc | reference loss | reference acc |")
    print("|---:|---:|---:|---:|---:|")
    for (s, lo, ao), (_, lr_, ar) in zip(r["curves"]["ours"], r["curves"]["reference"]):
        print(f"| {s} | {lo:.3f} | {ao:.3f} | {lr_:.3f} | {ar:.3f} |")
    print(f"seconds: ours {r['seconds']['ours']:.1f}, reference {r['seconds']['reference']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
