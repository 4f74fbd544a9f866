"""``splitnet evaluate --suite wordnet``: a pre-trained encoder scored on offline tasks built
from WordNet (:mod:`.wordnet`), each beside the baselines of :mod:`.probe`.

Tasks (``TASKS``): **wn-lex**, a synset's definition -> its lexicographer class (45 classes),
trained on (up to ``max_train`` of) the train split, scored on the test split, the splits
disjoint by synset and lemma. (WN-polarity and WiC-WN, issue 29's other two, are not built yet.)
"""

from __future__ import annotations

import random
from collections.abc import Callable

import torch

from . import probe
from . import wordnet as W

TASKS = ("wn-lex",)
SUITES = ("wordnet",)


def task_data(name: str, splits: dict) -> tuple[tuple[list, list], tuple[list, list], int]:
    """``((train texts, labels), (test texts, labels), classes)`` of task ``name``."""
    if name != "wn-lex":
        raise ValueError(f"unknown task {name!r}; the suite has: {', '.join(TASKS)}")
    return W.wn_lex(splits["train"]), W.wn_lex(splits["test"]), len(W.LEXNAMES)


def _subsample(texts: list, labels: list, n: int | None, seed: int):
    if n is None or len(texts) <= n:
        return texts, labels
    keep = sorted(random.Random(seed).sample(range(len(texts)), n))
    return [texts[i] for i in keep], [labels[i] for i in keep]


def evaluate(model, root=None, tasks=TASKS, max_train: int | None = 20000, seed: int = 0,
             device="cpu", progress: Callable[[str, int], Callable[[int], None]] | None = None
             ) -> list[dict]:
    """One record per task: sizes, the encoder's linear-probe accuracy, the baselines'.
    ``progress(description, total)`` returns an ``update(n)`` for the feature passes."""
    splits = W.split_synsets(W.read_synsets(root), seed=seed)
    out = []
    for name in tasks:
        (tx, ty), (ex, ey), k = task_data(name, splits)
        if not tx or not ex:
            raise ValueError(f"{name}: the split left {len(tx)} training and {len(ex)} test "
                             f"examples; WordNet's data files look truncated (try another "
                             f"--seed, or the full 'wordnet-base')")
        tx, ty = _subsample(tx, ty, max_train, seed)
        ytr, yte = torch.tensor(ty), torch.tensor(ey)
        step = progress(name, len(tx) + len(ex)) if progress else None
        ftr = probe.features(model, tx, device=device, progress=step)
        fte = probe.features(model, ex, device=device, progress=step)
        rec = {"task": name, "classes": k, "train": len(tx), "test": len(ex),
               "probe": probe.probe_accuracy(ftr, ytr, fte, yte, k)}
        rec.update(probe.baselines(tx, ty, ex, ey, k))
        out.append(rec)
    return out


def table(records: list[dict]) -> str:
    lines = ["| task | classes | train | test | encoder (linear probe) | bag of words | "
             "majority |", "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['task']} | {r['classes']} | {r['train']:,} | {r['test']:,} | "
              f"{r['probe']:.1%} | {r['bag_of_words']:.1%} | {r['majority']:.1%} |"
              for r in records]
    return "\n".join(lines)


__all__ = ["SUITES", "TASKS", "evaluate", "table", "task_data"]
