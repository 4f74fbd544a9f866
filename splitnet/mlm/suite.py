"""``splitnet evaluate --suite wordnet``: a pre-trained encoder scored on offline tasks built
from WordNet (:mod:`.wordnet`), each beside the baselines of :mod:`.probe`.

Tasks (``TASKS``), trained on (up to ``max_train`` of) the train split, scored on the test
split, the splits disjoint by synset and lemma: **wn-lex**, a synset's definition -> its
lexicographer class (45 classes); **wic-wn**, two example sentences using one lemma -> same
synset or not (balanced; a pair's features are ``[a * b, |a - b|]`` of the two texts');
**wn-polarity**, an adjective synset's definition -> the polarity of its head lemma in a
sentiment lexicon (:mod:`.lexicon`: Bing's, from tidytext, or a TSV), left out with a note when
no lexicon is at hand.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import torch

from . import probe
from . import wordnet as W
from .lexicon import load_lexicon

TASKS = ("wn-lex", "wic-wn", "wn-polarity")
SUITES = ("wordnet",)


def task_data(name: str, splits: dict, lexicon: dict | None = None
              ) -> tuple[tuple[list, list], tuple[list, list], int]:
    """``((train inputs, labels), (test inputs, labels), classes)`` of task ``name``; an
    input is a text, or a pair of texts. ``lexicon``: wn-polarity's word -> polarity."""
    if name == "wn-polarity":
        if lexicon is None:
            raise ValueError("wn-polarity needs a sentiment lexicon")
        train = W.wn_polarity(splits["train"], lexicon)
        if not train[0]:
            raise ValueError("wn-polarity: the lexicon names the head lemma of no adjective in "
                             "the training split (is it a lexicon of English words?)")
        return train, W.wn_polarity(splits["test"], lexicon), 2
    if name == "wn-lex":
        return W.wn_lex(splits["train"]), W.wn_lex(splits["test"]), len(W.LEXNAMES)
    if name == "wic-wn":
        return W.wic_wn(splits["train"]), W.wic_wn(splits["test"]), 2
    raise ValueError(f"unknown task {name!r}; the suite has: {', '.join(TASKS)}")


def _features(model, inputs: list, device, step, tokens=None):
    if inputs and not isinstance(inputs[0], str):
        fa = probe.features(model, [a for a, _ in inputs], device=device, progress=step,
                            tokens=tokens)
        fb = probe.features(model, [b for _, b in inputs], device=device, progress=step,
                            tokens=tokens)
        return probe.pair_features(fa, fb)
    return probe.features(model, inputs, device=device, progress=step, tokens=tokens)


def _subsample(texts: list, labels: list, n: int | None, seed: int):
    if n is None or len(texts) <= n:
        return texts, labels
    keep = sorted(random.Random(seed).sample(range(len(texts)), n))
    return [texts[i] for i in keep], [labels[i] for i in keep]


def evaluate(model, root=None, tasks=TASKS, max_train: int | None = 20000, seed: int = 0,
             device="cpu", progress: Callable[[str, int], Callable[[int], None]] | None = None,
             fine_tune: int = 0, lexicon=None, warn: Callable[[str], None] | None = None,
             tokens=None) -> list[dict]:
    """One record per task: sizes, the encoder's linear-probe accuracy, the baselines', and
    with ``fine_tune`` steps the fine-tuned encoder's (:func:`probe.fine_tune_accuracy`).
    ``progress(description, total)`` returns an ``update(n)`` for the feature passes;
    ``tokens``: how the encoder reads text (:func:`splitnet.mlm.tokens.text_tokens`)."""
    splits = W.split_synsets(W.read_synsets(root), seed=seed)
    words = None
    if "wn-polarity" in tasks:
        try:
            words = load_lexicon(lexicon)
        except FileNotFoundError as e:
            if lexicon is not None:
                raise
            tasks = [t for t in tasks if t != "wn-polarity"]
            if warn is not None:
                warn(f"wn-polarity left out: {e}")
    out = []
    for name in tasks:
        data = _task_or_note(name, splits, words, warn)
        if data is None:
            continue
        (tx, ty), (ex, ey), k = data
        tx, ty = _subsample(tx, ty, max_train, seed)
        ytr, yte = torch.tensor(ty), torch.tensor(ey)
        texts = (len(tx) + len(ex)) * (1 if isinstance(tx[0], str) else 2)
        step = progress(name, texts) if progress else None
        ftr = _features(model, tx, device, step, tokens)
        fte = _features(model, ex, device, step, tokens)
        rec = {"task": name, "classes": k, "train": len(tx), "test": len(ex),
               "probe": probe.probe_accuracy(ftr, ytr, fte, yte, k)}
        rec.update(probe.baselines(tx, ty, ex, ey, k))
        if fine_tune:
            rec["fine_tune"] = probe.fine_tune_accuracy(model, tx, ty, ex, ey, k,
                                                        steps=fine_tune, seed=seed,
                                                        device=device, tokens=tokens)
            rec["fine_tune_steps"] = fine_tune
        out.append(rec)
    if not out:
        raise ValueError("no task left to evaluate (see the notes above)")
    return out


def _task_or_note(name: str, splits: dict, words, warn):
    """:func:`task_data`, or None with a note when wn-polarity's lexicon covers too few
    adjectives (the lexicon's doing: the other tasks go on; issue 49 D8). An empty split of
    another task means truncated WordNet files: ValueError."""
    try:
        (tx, ty), (ex, ey), k = task_data(name, splits, words)
        if not tx or not ex:
            raise ValueError(f"{name}: the split left {len(tx)} training and {len(ex)} test "
                             f"examples")
    except ValueError as e:
        if name != "wn-polarity":
            raise ValueError(f"{e}; WordNet's data files look truncated (try another --seed, "
                             f"or the full 'wordnet-base')") from None
        if warn is not None:
            warn(f"wn-polarity left out: {e} (a lexicon of English sentiment words covers "
                 f"hundreds of WordNet's adjectives)")
        return None
    return (tx, ty), (ex, ey), k


def table(records: list[dict]) -> str:
    tuned = any("fine_tune" in r for r in records)
    lines = ["| task | classes | train | test | encoder (linear probe) | "
             + ("encoder (fine-tuned) | " if tuned else "") + "bag of words | majority |",
             "|---|---:|---:|---:|---:|" + ("---:|" if tuned else "") + "---:|---:|"]
    for r in records:
        ft = f"{r['fine_tune']:.1%} | " if "fine_tune" in r else ("— | " if tuned else "")
        lines.append(f"| {r['task']} | {r['classes']} | {r['train']:,} | {r['test']:,} | "
                     f"{r['probe']:.1%} | {ft}{r['bag_of_words']:.1%} | {r['majority']:.1%} |")
    return "\n".join(lines)


__all__ = ["SUITES", "TASKS", "evaluate", "table", "task_data"]
