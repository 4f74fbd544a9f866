"""WordNet 3.0 as offline evaluation data (the Debian package ``wordnet-base``).

``data.{noun,verb,adj,adv}`` hold one synset a line::

    offset lex_filenum ss_type w_cnt (word lex_id){w_cnt} p_cnt pointers... [frames] | gloss

``w_cnt`` in hexadecimal; the gloss is a definition, then example sentences in double quotes,
separated by ``; ``. ``lex_filenum`` names one of the 45 lexicographer classes
(:data:`LEXNAMES`: noun.animal, verb.motion, ...), WN-lex's label; the example sentences that
use a lemma make WiC-WN's pairs (same synset or not).

Splits (:func:`split_synsets`) keep every synset and every lemma on one side: synsets that share
a lemma are joined (union-find), and each group goes to train, valid or test whole, by a hash of
its smallest synset id; the groups of more than ``giant`` synsets (one joins 32,397 synsets of
117,659 through polysemous lemmas: break, run, ...) always go to train, so the held-out splits are
the small groups' ~10 % each.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
from dataclasses import dataclass
from pathlib import Path

# the lexicographer files of WordNet 3.0, by lex_filenum (WordNet's lexnames(5WN))
LEXNAMES = (
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact",
    "noun.attribute", "noun.body", "noun.cognition", "noun.communication", "noun.event",
    "noun.feeling", "noun.food", "noun.group", "noun.location", "noun.motive", "noun.object",
    "noun.person", "noun.phenomenon", "noun.plant", "noun.possession", "noun.process",
    "noun.quantity", "noun.relation", "noun.shape", "noun.state", "noun.substance", "noun.time",
    "verb.body", "verb.change", "verb.cognition", "verb.communication", "verb.competition",
    "verb.consumption", "verb.contact", "verb.creation", "verb.emotion", "verb.motion",
    "verb.perception", "verb.possession", "verb.social", "verb.stative", "verb.weather",
    "adj.ppl")
POS_FILES = ("noun", "verb", "adj", "adv")
POS_LETTER = {"noun": "n", "verb": "v", "adj": "a", "adv": "r"}   # WordNet's own letters
DEFAULT_ROOT = "/usr/share/wordnet"
INSTALL = "apt-get install wordnet-base"
SPLITS = ("train", "valid", "test")


@dataclass(frozen=True)
class Synset:
    """One line of a data file: ``id`` is the part of speech's letter (n, v, a, r) and the
    offset (offsets are unique within a file, not across files)."""

    id: str
    lex: int
    lemmas: tuple[str, ...]
    definition: str
    examples: tuple[str, ...]


def wordnet_root(root=None) -> Path:
    """The folder holding ``data.noun`` ...: ``root``, ``$WNSEARCHDIR`` or
    /usr/share/wordnet; a one-line FileNotFoundError naming the package when absent."""
    path = Path(root or os.environ.get("WNSEARCHDIR") or DEFAULT_ROOT).expanduser()
    missing = [f"data.{p}" for p in POS_FILES if not (path / f"data.{p}").is_file()]
    if missing:
        raise FileNotFoundError(f"WordNet not found in {path} (no {', '.join(missing)}): "
                                f"'{INSTALL}' installs it, or give the folder holding its "
                                f"data.* files")
    return path


def _gloss(text: str) -> tuple[str, tuple[str, ...]]:
    """``definition; "example"; "example"`` -> (definition, examples)."""
    parts = [p.strip() for p in text.strip().split(";")]
    quoted = [p for p in parts if p.startswith('"')]
    definition = "; ".join(p for p in parts if not p.startswith('"'))
    examples = tuple(p.strip('"').strip() for p in quoted if p.strip('"').strip())
    return definition, examples


def parse_line(line: str, pos: str) -> Synset | None:
    """A data-file line -> :class:`Synset` (None for the licence header's lines)."""
    if not line.strip() or line.startswith("  "):
        return None
    head, sep, gloss = line.partition(" | ")
    f = head.split()
    try:
        offset, lex, n = f[0], int(f[1]), int(f[3], 16)
        lemmas = tuple(f[4 + 2 * i].lower() for i in range(n))
    except (IndexError, ValueError) as e:
        raise ValueError(f"not a WordNet data line ({type(e).__name__}): {line[:60]!r}") from e
    if not sep or not 0 <= lex < len(LEXNAMES):
        raise ValueError(f"not a WordNet data line: {line[:60]!r}")
    definition, examples = _gloss(gloss)
    return Synset(f"{POS_LETTER[pos]}{offset}", lex, lemmas, definition, examples)


def read_synsets(root=None) -> list[Synset]:
    """Every synset of the four data files, in file order."""
    path = wordnet_root(root)
    out = []
    for pos in POS_FILES:
        f = path / f"data.{pos}"
        with open(f, encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                try:
                    s = parse_line(line, pos)
                except ValueError as e:      # the file and the line, not only the text
                    raise ValueError(f"{f} line {n}: {e}") from None
                if s is not None:
                    out.append(s)
    return out


def _groups(synsets: list[Synset]) -> dict[int, list[int]]:
    """Synset indices joined through shared lemmas, by their group's root."""
    parent = list(range(len(synsets)))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    first: dict[str, int] = {}
    for i, s in enumerate(synsets):
        for lemma in s.lemmas:
            if lemma in first:
                parent[find(i)] = find(first[lemma])
            else:
                first[lemma] = i
    groups: dict[int, list[int]] = {}
    for i in range(len(synsets)):
        groups.setdefault(find(i), []).append(i)
    return groups


def split_synsets(synsets: list[Synset], held_out: float = 0.1, giant: int = 1000,
                  seed: int = 0) -> dict[str, list[Synset]]:
    """Train / valid / test, disjoint by synset and by lemma (module docstring): a group goes
    to valid or test with probability ``held_out`` each, by a hash of (seed, its smallest
    synset id); groups of more than ``giant`` synsets go to train."""
    out: dict[str, list[Synset]] = {k: [] for k in SPLITS}
    for members in _groups(synsets).values():
        key = min(synsets[i].id for i in members)
        u = int(hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()[:12], 16) / 16 ** 12
        split = ("train" if len(members) > giant or u >= 2 * held_out else
                 "valid" if u < held_out else "test")
        out[split] += [synsets[i] for i in sorted(members)]
    return out


def _occurrences(split: list[Synset]) -> dict[str, list[tuple[str, str]]]:
    """lemma -> ``(synset id, example)`` for each example sentence that contains the lemma as
    a whole word (underscores read as spaces, any case)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for s in split:
        for lemma in s.lemmas:
            pat = re.compile(r"\b" + re.escape(lemma.replace("_", " ")) + r"\b", re.IGNORECASE)
            out.setdefault(lemma, []).extend((s.id, ex) for ex in s.examples if pat.search(ex))
    return out


def wic_wn(split: list[Synset], seed: int = 0) -> tuple[list[tuple[str, str]], list[int]]:
    """WiC-WN: two example sentences that use one lemma -> 1 when they illustrate the same
    synset, 0 when two of its synsets; per lemma as many of each as the rarer kind allows, so
    the task is balanced (a seeded choice). The splits being disjoint by lemma, no lemma is in
    two splits' pairs."""
    rng = random.Random(seed)
    pairs, labels = [], []
    for _, occ in sorted(_occurrences(split).items()):
        same = [(a, b) for i, a in enumerate(occ) for b in occ[i + 1:] if a[0] == b[0]]
        other = [(a, b) for i, a in enumerate(occ) for b in occ[i + 1:] if a[0] != b[0]]
        n = min(len(same), len(other))
        for label, kind in ((1, same), (0, other)):
            for a, b in rng.sample(kind, n):
                pairs.append((a[1], b[1]))
                labels.append(label)
    return pairs, labels


def wn_polarity(split: list[Synset], lexicon: dict[str, int]) -> tuple[list[str], list[int]]:
    """WN-polarity (an SST-2 analogue): an adjective synset whose head lemma the sentiment
    ``lexicon`` lists -> its polarity (1 positive, 0 negative), from the synset's definition."""
    keep = [s for s in split if s.id[0] == "a" and s.definition and s.lemmas[0] in lexicon]
    return [s.definition for s in keep], [lexicon[s.lemmas[0]] for s in keep]


def wn_lex(split: list[Synset]) -> tuple[list[str], list[int]]:
    """WN-lex: each synset's definition -> its lexicographer class (an index of LEXNAMES)."""
    keep = [s for s in split if s.definition]
    return [s.definition for s in keep], [s.lex for s in keep]


__all__ = ["DEFAULT_ROOT", "INSTALL", "LEXNAMES", "POS_FILES", "POS_LETTER", "SPLITS", "Synset",
           "parse_line", "read_synsets", "split_synsets", "wic_wn", "wn_lex", "wn_polarity",
           "wordnet_root"]
