"""Synthetic alignment tasks: sentence pairs a decoder can only get right by reading its source.

``copy`` (target = source) and ``reverse`` (target = the source's words in reverse order) over a
vocabulary of hundreds of seeded pseudo-words (2–8 lowercase letters), 4–7 words a line. With
400 distinct words a line's target cannot be memorised or guessed from the target side alone:
a model that ignores the encoder stays near the unigram entropy of the words' letters (about 4
bits per byte), one that reads it falls towards 0. This is the test that an encoder–decoder
trains like ``torch.nn.Transformer`` (``benchmarks/parity.py``) and the first translation a
newcomer runs (``splitnet train --task translate --pairs copy``).

Deterministic: the same ``seed`` gives the same words and lines on every machine (Python's
``random.Random``, no numpy).
"""

from __future__ import annotations

import random
import string

TASKS = ("copy", "reverse")
N_WORDS = 400
N_PAIRS = 3800
WORDS_PER_LINE = (4, 7)
LETTERS = (2, 8)


def pseudo_words(n: int = N_WORDS, seed: int = 0) -> list[str]:
    """``n`` distinct lowercase pseudo-words of 2–8 letters, in a fixed order."""
    rng, words = random.Random(f"splitnet.synthetic.words:{seed}"), {}
    while len(words) < n:
        w = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(*LETTERS)))
        words.setdefault(w, None)
    return list(words)


def alignment_pairs(task: str = "copy", n_pairs: int = N_PAIRS, n_words: int = N_WORDS,
                    seed: int = 0) -> list[tuple[str, str]]:
    """``n_pairs`` distinct (source, target) lines of the task over ``n_words`` words."""
    if task not in TASKS:
        raise ValueError(f"unknown synthetic task {task!r}: give one of {', '.join(TASKS)}")
    for name, v, lo in (("n_pairs", n_pairs, 1), ("n_words", n_words, 8)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    if n_pairs > sum(n_words ** k for k in range(WORDS_PER_LINE[0], WORDS_PER_LINE[1] + 1)) // 4:
        raise ValueError(f"{n_words} words do not make {n_pairs} distinct lines of "
                         f"{WORDS_PER_LINE[0]}-{WORDS_PER_LINE[1]} words")
    words = pseudo_words(n_words, seed)
    rng, lines = random.Random(f"splitnet.synthetic.lines:{seed}"), {}
    while len(lines) < n_pairs:       # at most 1 in 4 of the lines possible: ends quickly
        line = [rng.choice(words) for _ in range(rng.randint(*WORDS_PER_LINE))]
        lines.setdefault(" ".join(line), line[::-1] if task == "reverse" else line)
    return [(src, " ".join(tgt)) for src, tgt in lines.items()]


def items(task: str, seed: int = 0) -> list[tuple[str, str, str]]:
    """The task's pairs as ``load_pairs`` items ``(group, source, target)``: each line its own
    group, so the splits are fractions of lines."""
    return [(f"line-{i}", s, t) for i, (s, t) in enumerate(alignment_pairs(task, seed=seed))]


__all__ = ["LETTERS", "N_PAIRS", "N_WORDS", "TASKS", "WORDS_PER_LINE", "alignment_pairs",
           "items", "pseudo_words"]
