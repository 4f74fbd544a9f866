"""Scoring a pre-trained encoder on a labelled text task, beside two baselines computed the same
way (issue 29):

* **fine-tuning** (optional): the encoder and a linear head on its pooled features trained
  together (:func:`fine_tune_accuracy`);
* **linear probe**: the encoder frozen; each text's bytes (cut to the model's context, padded
  with spaces) run through it, the final states (after the last norm) averaged over the text's
  own positions; a multinomial logistic regression on the standardised features;
* **bag of words**: the same regression on ``log(1 + count)`` of the training texts' words
  (lower-case letters, at least 2 occurrences, at most ``max_words``), a sparse matrix;
* **majority**: the commonest training label.

The regression minimises ``mean CE(X W + b, y) + l2 ||W||^2`` by L-BFGS (full batch, strong
Wolfe line search), deterministic for given data.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from .tokens import BYTE_PAD, ByteText

PAD_BYTE = BYTE_PAD     # a space: the texts are prose; its positions are left out of the mean


def encode(texts: Sequence[str], context: int, tokens=None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids (N, T), lengths (N,))``: each text's ids cut to ``context``, padded to the longest
    (T <= context) with the padding id; an empty text is one padding id. ``tokens``: the
    checkpoint's (:func:`splitnet.mlm.tokens.text_tokens`; default UTF-8 bytes, padded with
    spaces)."""
    tokens = ByteText() if tokens is None else tokens
    raw = [tokens.encode(t)[:context] or [tokens.pad_id] for t in texts]
    T = max((len(r) for r in raw), default=1)
    ids = torch.full((len(raw), T), tokens.pad_id, dtype=torch.long)
    for i, r in enumerate(raw):
        ids[i, :len(r)] = torch.tensor(list(r), dtype=torch.long)
    return ids, torch.tensor([len(r) for r in raw])


def pooled(model, texts: Sequence[str], device="cpu", tokens=None) -> torch.Tensor:
    """Mean final state (after the last norm) over each text's own positions, (N, d_model),
    on ``device``, differentiable."""
    ids, lengths = encode(texts, model.config.max_len, tokens)
    ids, lengths = ids.to(device), lengths.to(device)
    h = model.norm(model.run_layers(model.embed(ids))).float()
    keep = (torch.arange(ids.shape[1], device=device)[None, :] < lengths[:, None]).float()
    return (h * keep[..., None]).sum(1) / lengths[:, None].float()


@torch.no_grad()
def features(model, texts: Sequence[str], batch_size: int = 64, device="cpu",
             progress: Callable[[int], None] | None = None, tokens=None) -> torch.Tensor:
    """:func:`pooled` of every text, float32 on the CPU, the model in eval mode. Texts are
    sorted by length so a batch pads little."""
    model.eval()
    order = sorted(range(len(texts)), key=lambda i: len(texts[i].encode("utf-8")))
    out = torch.zeros(len(texts), model.config.d_model)
    for k in range(0, len(order), batch_size):
        rows = order[k:k + batch_size]
        out[rows] = pooled(model, [texts[i] for i in rows], device, tokens).cpu()
        if progress is not None:
            progress(len(rows))
    return out


def _inputs_features(model, inputs: Sequence, device, tokens=None) -> torch.Tensor:
    """:func:`pooled` of texts, or :func:`pair_features` of two texts' (differentiable)."""
    if inputs and not isinstance(inputs[0], str):
        return pair_features(pooled(model, [a for a, _ in inputs], device, tokens),
                             pooled(model, [b for _, b in inputs], device, tokens))
    return pooled(model, inputs, device, tokens)


def fine_tune_accuracy(model, train_x: Sequence, train_y, test_x: Sequence, test_y,
                       n_classes: int, steps: int = 500, batch_size: int = 32, lr: float = 3e-4,
                       seed: int = 0, device="cpu", tokens=None) -> float:
    """Fine-tuning: a copy of the encoder and a linear head on its pooled features (a pair's:
    ``[a * b, |a - b|]``) trained together, cross-entropy, AdamW (``lr``, linear warm-up over
    the first tenth of ``steps``, batches drawn with a seeded generator), then scored on the
    test inputs. ``model`` itself is left unchanged."""
    import copy

    torch.manual_seed(seed)
    enc = copy.deepcopy(model).to(device).train()
    width = model.config.d_model * (1 if not train_x or isinstance(train_x[0], str) else 2)
    head = torch.nn.Linear(width, n_classes).to(device)
    params = [*enc.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm))
    g = torch.Generator().manual_seed(seed)
    ytr = torch.as_tensor(train_y)
    for _ in range(steps):
        rows = torch.randint(0, len(train_x), (batch_size,), generator=g).tolist()
        logits = head(_inputs_features(enc, [train_x[i] for i in rows], device, tokens))
        loss = F.cross_entropy(logits, ytr[rows].to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
    enc.eval()
    right = 0
    with torch.no_grad():
        for k in range(0, len(test_x), 64):
            pred = head(_inputs_features(enc, list(test_x[k:k + 64]), device,
                                         tokens)).argmax(-1)
            right += int((pred.cpu() == torch.as_tensor(test_y[k:k + 64])).sum())
    return right / len(test_x)


def fit_logistic(X: torch.Tensor, y: torch.Tensor, n_classes: int, l2: float = 1e-4,
                 iters: int = 200) -> Callable[[torch.Tensor], torch.Tensor]:
    """L-BFGS on the regularised cross-entropy (module docstring); ``X`` dense or sparse
    (float32). Returns ``predict(X) -> labels``."""
    torch.manual_seed(0)
    W = torch.zeros(X.shape[1], n_classes, requires_grad=True)
    b = torch.zeros(n_classes, requires_grad=True)
    opt = torch.optim.LBFGS([W, b], lr=1.0, max_iter=iters, history_size=20,
                            line_search_fn="strong_wolfe")

    def mm(A):
        return torch.sparse.mm(A, W) if A.is_sparse else A @ W

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(mm(X) + b, y) + l2 * (W * W).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return lambda A: (mm(A) + b).argmax(-1).detach()


def probe_accuracy(train_x, train_y, test_x, test_y, n_classes: int) -> float:
    """Linear-probe accuracy: features standardised by the training set's mean and spread."""
    mu, sd = train_x.mean(0), train_x.std(0, correction=0).clamp_min(1e-6)   # one row: 0
    predict = fit_logistic((train_x - mu) / sd, train_y, n_classes)
    return float((predict((test_x - mu) / sd) == test_y).float().mean())


_WORD = re.compile(r"[a-z]+")


def bag_of_words(train: Sequence[str], test: Sequence[str], max_words: int = 20000,
                 vocab_texts: Sequence[str] | None = None):
    """Sparse ``log(1 + count)`` matrices of ``train`` and ``test`` over the words of
    ``vocab_texts`` (default ``train``) seen at least twice (the ``max_words`` commonest)."""
    source = train if vocab_texts is None else vocab_texts
    counts = Counter(w for t in source for w in _WORD.findall(t.lower()))
    vocab = {w: i for i, (w, c) in enumerate(counts.most_common(max_words)) if c >= 2}

    def matrix(texts):
        rows, cols, vals = [], [], []
        for r, t in enumerate(texts):
            for w, c in Counter(_WORD.findall(t.lower())).items():
                if w in vocab:
                    rows.append(r)
                    cols.append(vocab[w])
                    vals.append(math.log1p(c))
        idx = torch.tensor([rows, cols], dtype=torch.long).reshape(2, -1)
        return torch.sparse_coo_tensor(idx, torch.tensor(vals, dtype=torch.float32),
                                       (len(texts), max(1, len(vocab))), check_invariants=True)

    return matrix(train).coalesce(), matrix(test).coalesce()


def pair_features(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Symmetric features of a pair of rows: ``[a * b, |a - b|]`` (dense or sparse)."""
    if a.is_sparse:
        return torch.cat([(a * b).coalesce(), (a - b).coalesce().abs()], dim=1).coalesce()
    return torch.cat([a * b, (a - b).abs()], dim=1)


def _bow(train, test):
    """Bag-of-words matrices of single texts, or pair features of two texts' matrices."""
    if not train or isinstance(train[0], str):
        return bag_of_words(train, test)
    flat = [t for pair in train for t in pair]
    ta, ea = bag_of_words([a for a, _ in train], [a for a, _ in test], vocab_texts=flat)
    tb, eb = bag_of_words([b for _, b in train], [b for _, b in test], vocab_texts=flat)
    return pair_features(ta, tb), pair_features(ea, eb)


def baselines(train_texts, train_y, test_texts, test_y, n_classes: int) -> dict:
    """``{"majority": accuracy, "bag_of_words": accuracy}`` (module docstring); texts, or
    pairs of texts (:func:`pair_features` of their bags)."""
    ytr, yte = torch.as_tensor(train_y), torch.as_tensor(test_y)
    majority = float((yte == torch.bincount(ytr, minlength=n_classes).argmax()).float().mean())
    Xtr, Xte = _bow(list(train_texts), list(test_texts))
    predict = fit_logistic(Xtr, ytr, n_classes)
    return {"majority": majority, "bag_of_words": float((predict(Xte) == yte).float().mean())}


__all__ = ["PAD_BYTE", "bag_of_words", "baselines", "encode", "features", "fine_tune_accuracy",
           "fit_logistic", "pair_features", "pooled", "probe_accuracy"]
