"""Named corpora (``--corpus NAME``) for the language-model tasks, from Debian packages any
machine can install; the default stays what a fresh machine has (the standard library).

* ``stdlib``: the Python standard library's .py files, split by file (the default; ``--text``
  reads a user's files).
* ``austen``: Jane Austen's six novels (``r-cran-janeaustenr``, 717,537 words, public domain;
  an R lazy-load database read with ``rdata``). The validation split is the held-out novel,
  *Persuasion*: a masked LM pre-trained on five novels is scored on text it never saw, by the
  same author (``--val-fraction`` does not apply).
* ``wordnet``: WordNet 3.0's glosses (definitions and example sentences, ``wordnet-base``), one
  line per synset, split by a hash of the synset with ``--val-fraction``. The evaluation suite's
  tasks are built from the same glosses: pre-training on this corpus has seen their test
  definitions as unlabelled text (as BERT's Wikipedia held GLUE's kind of text).

A missing package is a one-line FileNotFoundError naming the ``apt-get install``."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from ..runs import data as D
from .rlazy import read_variable
from .wordnet import read_synsets

CORPORA = ("stdlib", "austen", "wordnet")      # configs.config.CORPORA: equal, by a test
AUSTEN = Path("/usr/lib/R/site-library/janeaustenr/data/Rdata")
AUSTEN_RECIPE = "apt-get install r-cran-janeaustenr, and pip install rdata"
# in publication order; the last is the held-out novel
AUSTEN_NOVELS = ("sensesensibility", "prideprejudice", "mansfieldpark", "emma",
                 "northangerabbey", "persuasion")


def _corpus(train: list[bytes], val: list[bytes], names: list[str], source: str) -> D.Corpus:
    h = hashlib.sha256()
    for name, b in zip(names, train + val):
        h.update(name.encode() + b"\0" + hashlib.sha256(b).digest())
    arr = lambda parts: np.frombuffer(b"".join(parts), dtype=np.uint8)    # noqa: E731
    return D.Corpus(arr(train), arr(val), source, (len(train), len(val)), 0, h.hexdigest())


def load_austen(base: Path | None = None) -> D.Corpus:
    """The six novels, one text each (lines joined by newlines); *Persuasion* is validation.
    ``base``: the database without suffix (default :data:`AUSTEN`)."""
    base = AUSTEN if base is None else Path(base)
    if not Path(str(base) + ".rdx").is_file():
        raise FileNotFoundError(f"--corpus austen: Jane Austen's novels are not installed "
                                f"({base}.rdx is missing): {AUSTEN_RECIPE}")
    texts = [("\n".join(str(x) for x in read_variable(base, n, AUSTEN_RECIPE)) + "\n")
             .encode("utf-8") for n in AUSTEN_NOVELS]
    return _corpus(texts[:-1], texts[-1:], list(AUSTEN_NOVELS),
                   f"Jane Austen's novels ({base}.rdb; {AUSTEN_NOVELS[-1]} held out)")


def load_wordnet(val_fraction: float = 0.05, root=None) -> D.Corpus:
    """Every synset's gloss as one line (``definition; "example"; ...``), split by synset."""
    try:
        synsets = read_synsets(root)
    except FileNotFoundError as e:
        raise FileNotFoundError(f"--corpus wordnet: {e}") from None
    train, val = [], []
    for s in synsets:
        line = "; ".join([s.definition, *(f'"{x}"' for x in s.examples)]) + "\n"
        (val if D.is_val_file(s.id, val_fraction) else train).append(line.encode("utf-8"))
    source = f"WordNet glosses ({len(synsets):,} synsets)"
    return _corpus([b"".join(train)], [b"".join(val)], ["train", "val"], source)


def load_run_corpus(text=None, corpus=None, val_fraction: float = 0.05, exclude=()) -> D.Corpus:
    """The corpus of a language-model run: ``corpus`` (a name of :data:`CORPORA`), else
    ``text`` (:func:`splitnet.runs.data.load_text`), else the standard library."""
    if corpus is None or corpus == "stdlib":
        return D.load_corpus(text, val_fraction, exclude)
    if corpus == "austen":
        return load_austen()
    if corpus == "wordnet":
        return load_wordnet(val_fraction)
    raise ValueError(f"unknown corpus {corpus!r}: one of {', '.join(CORPORA)}")


__all__ = ["AUSTEN", "AUSTEN_NOVELS", "AUSTEN_RECIPE", "CORPORA", "load_austen", "load_run_corpus",
           "load_wordnet"]
