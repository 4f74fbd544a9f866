"""Parallel corpora for translation, offline: sources, cleaning, a stable split, the result.

Sources (:func:`load_pairs`):

* the machine's own gettext catalogues (default): ``/usr/share/locale/<lang>/LC_MESSAGES/*.mo``
  (and ``.po``), msgid -> msgstr as (English, target) pairs; a source language other than
  English joins two languages' catalogues on (catalogue, msgctxt, msgid, msgid_plural). A
  folder laid out the same way (``<lang>/LC_MESSAGES/``) is read the same way.
* a folder of a user's own ``.po`` / ``.mo`` files, or one such file: msgid -> msgstr, the
  target language read from the files (their ``Language:`` header, else a ``<lang>/LC_MESSAGES``
  path, else a file name such as ``de.po``: :func:`splitnet.translate.catalogs.catalogue_language`).
  A folder of several languages needs the target named, and a named target that the files
  contradict is refused.
* a TSV file, ``source<TAB>target`` per line (UTF-8), read with :func:`splitnet._io.read_input`:
  binary or endless input is refused at its first chunk; a FIFO or a device is refused (the
  pairs are read again on ``--resume``, by ``refine`` and by every process of a run).
* ``"bible"``: the World English Bible (en) / Reina-Valera 1909 (es) SWORD modules of Debian's
  ``sword-text-web`` / ``sword-text-sparv``, read with ``pysword`` (extra ``bible``), verse by
  verse.

Catalogues are read by :mod:`splitnet.translate.catalogs` (the stdlib's ``gettext`` fails on real
ones);
a catalogue that cannot be read is skipped and named in the statistics instead of failing the
corpus.

Split: by group (catalogue family, Bible book; a TSV line's source text) with the sha256 rule
of :func:`splitnet.runs.data.is_val_file` over the group name, so a message family never straddles
two splits and the split is the same on every machine. A TSV is split by a hash of each source,
not by position: a line keeps its split when lines are added or reordered, and a file sorted by
length or topic does not put all its longest or last-topic lines in test.

Deduplication runs once over all splits (test first, then valid, then train), so no source
sentence of valid/test is also in train, and a held-out split depends on its own groups alone.
Pure Python (no torch): a command line can describe a corpus quickly. Tokens and batches:
:mod:`splitnet.translate.batches`.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from . import synthetic
from .sources import LOCALE_ROOT, bible_items, new_info, path_items
from .synthetic import TASKS as SYNTHETIC

SPLITS = ("train", "valid", "test")
# Reasons a candidate pair is left out, in the order they are checked (and reported).
DROP_REASONS = ("fuzzy", "unmatched", "empty", "no_text", "too_long", "identical",
                "duplicate", "conflict")
_LANG = re.compile(r"[A-Za-z]{2,3}([_-][A-Za-z0-9]{2,8})*(@[A-Za-z0-9]+)?")


# ---------------------------------------------------------------------------------------------
# cleaning, the split, the corpus

# printf directives (with %n$ positions, %(name)s, and gettext's %<PRIuMAX>) and {braces}
_PLACEHOLDER = re.compile(r"%(?:\d+\$|\([^)]*\))?[-+ #0'I]*(?:\d+|\*)?(?:\.(?:\d+|\*))?"
                          r"(?:<\w+>|(?:hh|h|ll|l|L|q|j|z|Z|t)?[diouxXeEfFgGaAcspn%])|\{[^{}]*\}")


def clean_text(s: str) -> str:
    """Newlines normalised to ``\\n``, trailing whitespace stripped from every line, blank lines
    at both ends removed. Leading spaces stay: aligned help texts use them on both sides."""
    s = s.replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(line.rstrip() for line in s.split("\n")).strip("\n")


def has_text(s: str) -> bool:
    """Whether ``s`` holds a letter once format placeholders are removed (``"%s: %s"``, ``"---"``
    and ``"%d%%"`` do not: nothing to translate)."""
    return any(ch.isalpha() for ch in _PLACEHOLDER.sub("", s))


def split_of(group: str, val_fraction: float, test_fraction: float) -> str:
    """``"train"``, ``"valid"`` or ``"test"`` for a group: the rule of
    :func:`splitnet.runs.data.is_val_file` (sha256 of the name mod 1000, not Python's salted hash)
    with test taking the first ``1000 * test_fraction`` residues and valid the next ones."""
    h = int.from_bytes(hashlib.sha256(group.encode("utf-8")).digest()[:8], "big") % 1000
    n_test = round(1000 * test_fraction)
    return "test" if h < n_test else "valid" if h < n_test + round(1000 * val_fraction) \
        else "train"


_DROP_WORDS = {"no_text": "without text", "too_long": "over max_bytes",
               "duplicate": "duplicates", "conflict": "same source with another target"}
_UNIT_WORDS = {"family": ("catalogue family", "catalogue families"), "book": ("book", "books")}


def _origin(st: dict) -> str:
    """Where the pairs came from and what the split went by, for :meth:`PairCorpus.describe`."""
    files, unit, by = st.get("files", 0), st.get("unit"), st.get("split_by")
    n_files = f"{files:,} file{'s' if files != 1 else ''}"
    if by == "line":
        return f"from {n_files}, split by a hash of each source"
    if by == "message":
        return f"from {n_files}, split by message (too few {unit} groups for three splits)"
    n = sum(st.get("groups", {}).values())
    one, many = _UNIT_WORDS.get(by, (str(by), f"{by}s"))
    return f"from {n:,} {one if n == 1 else many}" + (f" ({n_files})" if by == "family" else "")


@dataclass(frozen=True)
class PairCorpus:
    """(source, target) sentence pairs of the three splits and where they came from.

    ``stats`` is plain data: ``unit`` (what a group is: ``family`` of catalogues, ``book``,
    ``line``), ``split_by`` (the unit the split used: the same, or ``message``),
    ``groups`` and ``bytes`` per split, ``files``, ``unreadable`` (file -> reason), ``entries``
    (candidates read), ``dropped`` (reason -> count), ``identical`` (kept pairs whose two sides
    are equal), ``seconds`` (load time)."""

    train: tuple[tuple[str, str], ...]
    valid: tuple[tuple[str, str], ...]
    test: tuple[tuple[str, str], ...]
    source: str
    src_lang: str
    tgt_lang: str
    stats: dict = field(default_factory=dict, compare=False)

    def split(self, name: str) -> tuple[tuple[str, str], ...]:
        """The pairs of split ``name`` (train, valid or test)."""
        if name not in SPLITS:
            raise ValueError(f"unknown split {name!r}; choose from {', '.join(SPLITS)}")
        return getattr(self, name)

    def __len__(self) -> int:
        return len(self.train) + len(self.valid) + len(self.test)

    def describe(self) -> str:
        """The one start-up line: pairs per split, where from, size, what was dropped and why."""
        st = self.stats
        mb = sum(st.get("bytes", {}).values()) / 1e6
        dropped = ", ".join(f"{n:,} {_DROP_WORDS.get(r, r)}" for r, n in
                            st.get("dropped", {}).items() if n)
        bad = st.get("unreadable", {})
        tail = f"; dropped: {dropped}" if dropped else ""
        if st.get("identical"):
            n = st["identical"]
            tail += f"; {n:,} identical pair{'s' if n > 1 else ''} kept (source = target)"
        if bad:
            tail += (f"; {len(bad)} unreadable file{'s' if len(bad) > 1 else ''} skipped "
                     f"({', '.join(sorted(bad)[:3])}{', ...' if len(bad) > 3 else ''})")
        return (f"{self.src_lang}->{self.tgt_lang} {self.source}: {len(self):,} pairs (train "
                f"{len(self.train):,} / valid {len(self.valid):,} / test {len(self.test):,}) "
                f"{_origin(st)}, {mb:.1f} MB{tail}")

    def fingerprint(self) -> dict:
        """What a checkpoint records to notice a changed corpus on resume: sha256 over every
        pair of every split in order (length-prefixed UTF-8), the counts and the source."""
        h = hashlib.sha256()
        for name in SPLITS:
            h.update(name.encode() + b"\0")
            for pair in getattr(self, name):
                for s in pair:
                    b = s.encode("utf-8")
                    h.update(len(b).to_bytes(8, "big") + b)
        return {"source": self.source, "src_lang": self.src_lang, "tgt_lang": self.tgt_lang,
                "pairs": {n: len(getattr(self, n)) for n in SPLITS},
                "bytes": int(sum(self.stats.get("bytes", {}).values())),
                "sha256": h.hexdigest()}


def _clean_items(items, max_bytes: int, drop_identical: bool,
                 dropped: Counter) -> list[tuple[str, str, str]]:
    """Items whose two cleaned sides have text and fit in ``max_bytes`` UTF-8 bytes each (and
    differ, with ``drop_identical``)."""
    out = []
    for group, src, tgt in items:
        src, tgt = clean_text(src), clean_text(tgt)
        if not src or not tgt:
            dropped["empty"] += 1
        elif not (has_text(src) and has_text(tgt)):
            dropped["no_text"] += 1
        elif max(len(src.encode("utf-8")), len(tgt.encode("utf-8"))) > max_bytes:
            dropped["too_long"] += 1
        elif drop_identical and src == tgt:
            dropped["identical"] += 1
        else:
            out.append((group, src, tgt))
    return out


def _assign(items, val_fraction: float, test_fraction: float, unit: str):
    """The split of every item by its group; by its source text (unit ``message``) when the
    groups are too few for three non-empty splits."""
    groups = {g: split_of(g, val_fraction, test_fraction) for g in dict.fromkeys(
        g for g, _, _ in items)}
    if set(groups.values()) != set(SPLITS):
        unit = "message"
        groups = {s: split_of(s, val_fraction, test_fraction) for s in dict.fromkeys(
            s for _, s, _ in items)}
        return [groups[s] for _, s, _ in items], groups, unit
    return [groups[g] for g, _, _ in items], groups, unit


def _nothing_left(info: dict, entries: int, dropped: Counter) -> ValueError:
    """Why a source gave no pair at all: its files could not be read (the first reason
    quoted), they hold no entry, or every entry was dropped (the counts by reason)."""
    bad, files = info["unreadable"], info["files"]
    why = []
    if bad:
        n = len(bad) + files
        first = bad[sorted(bad)[0]]
        why.append(f"{len(bad)} of {n} file{'s' if n > 1 else ''} unreadable ("
                   f"{'first: ' if len(bad) > 1 else ''}{first})")
    words = {**_DROP_WORDS, "empty": "untranslated or empty",
             "unmatched": "without a match in the other language"}
    reasons = ", ".join(f"{n:,} {words.get(r, r)}" for r, n in dropped.items() if n)
    if reasons:
        why.append(f"all {entries:,} entries dropped: {reasons}")
    elif files:
        why.append(f"no entries in {files} file{'s' if files > 1 else ''}")
    return ValueError(f"{info['description']}: no sentence pairs: {'; '.join(why)}")


def _build(items, info: dict, src: str, tgt: str, opts: dict, t0: float) -> PairCorpus:
    """Clean, split by group, deduplicate by source text once over all splits (test, valid,
    train, each in item order: the first target of a source is kept, every later occurrence
    dropped, so no source of valid/test is also in train)."""
    dropped = Counter(info["dropped"])
    # every entry read, those already dropped (fuzzy, unmatched) too: the reasons sum to it
    entries = len(items) + sum(dropped.values())
    items = _clean_items(items, opts["max_bytes"], opts["drop_identical"], dropped)
    if not items:
        raise _nothing_left(info, entries, dropped)
    where, groups, unit = _assign(items, opts["val_fraction"], opts["test_fraction"],
                                  info["unit"])
    out = {s: [] for s in SPLITS}
    seen: dict[str, str] = {}
    # test first, then valid, then train: a held-out split is a function of its own groups
    # alone (not of which other catalogues a machine has), and train gives up the overlap
    rank = {"test": 0, "valid": 1, "train": 2}
    for i in sorted(range(len(items)), key=lambda i: rank[where[i]]):
        (_, s, t), split = items[i], where[i]
        if s in seen:
            dropped["duplicate" if seen[s] == t else "conflict"] += 1
            continue
        seen[s] = t
        out[split].append((s, t))
    for split in SPLITS:
        if not out[split]:
            total = sum(map(len, out.values()))
            raise ValueError(f"{info['description']}: the {split} split is empty ({total} "
                             f"pairs in all); give more data or larger fractions")
    stats = {"unit": info["unit"], "split_by": unit,
             "groups": {s: sum(v == s for v in groups.values()) for s in SPLITS},
             "bytes": {s: sum(len(a.encode()) + len(b.encode()) for a, b in out[s])
                       for s in SPLITS},
             "files": info["files"], "unreadable": dict(info["unreadable"]), "entries": entries,
             "dropped": {r: dropped[r] for r in DROP_REASONS},
             "identical": sum(a == b for v in out.values() for a, b in v),
             "seconds": round(time.perf_counter() - t0, 3)}
    return PairCorpus(tuple(out["train"]), tuple(out["valid"]), tuple(out["test"]),
                      info["description"], src, tgt, stats)


def _check_args(src, tgt, val_fraction, test_fraction, max_bytes) -> None:
    for name, v in (("src_lang", src), ("tgt_lang", tgt)):
        if v is not None and (not isinstance(v, str) or not _LANG.fullmatch(v)):
            raise ValueError(f"{name} must be a language code such as 'de' or 'pt_BR', "
                             f"got {v!r}")
    if src is not None and src == tgt:
        raise ValueError(f"source and target language are both {src!r}")
    for name, v in (("val_fraction", val_fraction), ("test_fraction", test_fraction)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1:
            raise ValueError(f"{name} must be in (0, 1), got {v!r}")
    if val_fraction + test_fraction >= 1:
        raise ValueError(f"val_fraction + test_fraction must be < 1, got "
                         f"{val_fraction + test_fraction:g}")
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise ValueError(f"max_bytes must be a positive int, got {max_bytes!r}")


NAMED_SOURCES = ("gettext", "bible", *SYNTHETIC)


def load_pairs(source=None, src_lang: str | None = None, tgt_lang: str | None = None, *,
               val_fraction: float = 0.1, test_fraction: float = 0.1,
               max_bytes: int = 512, drop_identical: bool = False) -> PairCorpus:
    """A parallel corpus, cleaned, split and deduplicated.

    ``source``: None or ``"gettext"`` (this machine's catalogues, en->de unless told), a
    locale folder (``<lang>/LC_MESSAGES/``, read the same way), a folder of ``.po``/``.mo``
    files (msgid -> msgstr; the target language read from the files, or the one named),
    a TSV file (``source<TAB>target``), ``"bible"`` (en->es unless told), or ``"copy"`` /
    ``"reverse"``, the synthetic alignment tasks of :mod:`~splitnet.translate.synthetic`. Languages
    default to the source's own; ``max_bytes`` caps each side of a pair in UTF-8 bytes.

    ``val_fraction`` / ``test_fraction`` are fractions of groups (catalogue families, books),
    not of pairs: a group's split depends on its name alone, and groups differ in size.
    Pairs whose two sides are equal ("OK" -> "OK", a place name) are kept and counted: they
    teach what to copy; ``drop_identical=True`` leaves them out."""
    t0 = time.perf_counter()
    _check_args(src_lang, tgt_lang, val_fraction, test_fraction, max_bytes)
    opts = {"val_fraction": val_fraction, "test_fraction": test_fraction,
            "max_bytes": max_bytes, "drop_identical": bool(drop_identical)}
    if source is None or source == "gettext":
        root, source = LOCALE_ROOT, None
    elif source in SYNTHETIC:
        info = new_info("line", f"synthetic {source} task ({synthetic.N_PAIRS} lines over "
                                 f"{synthetic.N_WORDS} pseudo-words)")
        return _build(synthetic.items(source), info, src_lang or "src", tgt_lang or "tgt", opts,
                      t0)
    elif source == "bible":
        src, tgt = src_lang or ("es" if tgt_lang == "en" else "en"), tgt_lang
        tgt = tgt or ("en" if src == "es" else "es")
        info = new_info("book", "bible (World English Bible / Reina-Valera 1909)")
        items = bible_items(src, tgt, info)
        return _build(items, info, src, tgt, opts, t0)
    else:
        root = Path(source)
        if not os.path.exists(root):
            raise ValueError(f"unknown pair source {str(source)!r}: give one of "
                             f"{', '.join(NAMED_SOURCES)}, a folder of .po/.mo files or a TSV "
                             f"file")
    try:
        items, info, src, tgt = path_items(root, source is None, src_lang, tgt_lang)
    except OSError as e:            # a folder that cannot be listed, say
        raise ValueError(f"{e.filename or root}: {e.strerror or e}") from None
    return _build(items, info, src, tgt, opts, t0)


__all__ = [
    "DROP_REASONS",
    "NAMED_SOURCES",
    "SPLITS",
    "PairCorpus",
    "clean_text",
    "has_text",
    "load_pairs",
    "split_of",
]
