"""The readers of each pair source (:func:`splitnet.translate.pairs.load_pairs` calls them):
each returns ``(group, source text, target text)`` items in a deterministic order and fills
an ``info`` dict (files read, unreadable files, drops that happen before cleaning).

* this machine's gettext catalogues, or a folder laid out the same way (a language's
  catalogues joined with another's on catalogue, context and msgid);
* a folder of a user's ``.po`` / ``.mo`` files, or one such file;
* a TSV file, ``source<TAB>target`` per line;
* the Bible's SWORD modules, verse by verse (``pysword``, extra ``bible``).

Pure Python (no torch).
"""

from __future__ import annotations

import functools
import html
import re
from collections import Counter
from pathlib import Path

from .._io import input_kind, read_input
from ..configs.config import require
from .catalogs import (
    Catalogue,
    Message,
    catalogue_language,
    read_catalogue,
    serves,
    target_language,
)

LOCALE_ROOT = Path("/usr/share/locale")
SWORD_ROOT = Path("/usr/share/sword")
BIBLE_MODULES = {"en": "engWEB2015eb", "es": "spaRV1909eb"}
MAX_CATALOGUE = 64 << 20    # bytes of one catalogue (Debian's largest: about 1 MB)


# ---------------------------------------------------------------------------------------------
# sources: each returns (group, source text, target text) items in a deterministic order and
# fills ``info`` (files read, unreadable files, drops that happen before cleaning)


def new_info(unit: str, description: str) -> dict:
    return {"unit": unit, "description": description, "files": 0, "unreadable": {},
            "dropped": Counter()}


def _read_catalogues(files, root: Path, info: dict) -> dict[Path, Catalogue]:
    """The catalogues of ``files`` (under ``root``) that can be read; an unreadable one is
    recorded with its reason and skipped (one broken catalogue must not cost the corpus)."""
    out: dict[Path, Catalogue] = {}
    for path in files:
        rel = path.relative_to(root).as_posix()
        try:
            data = read_input(path, rel, limit=MAX_CATALOGUE)
            out[path] = read_catalogue(data, rel, path.suffix)
        except ValueError as e:
            info["unreadable"][rel] = str(e)
    return out


def _grouped(cats: dict[Path, Catalogue], group, info: dict) -> dict[str, list[Message]]:
    """group -> messages of the catalogues ``cats`` (``group(path)``); fuzzy entries are
    counted and dropped."""
    out: dict[str, list[Message]] = {}
    for path, cat in cats.items():
        info["files"] += 1
        info["dropped"]["fuzzy"] += sum(m.fuzzy for m in cat.messages)
        out.setdefault(group(path), []).extend(m for m in cat.messages if not m.fuzzy)
    return out


def _catalogue_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix in (".mo", ".po") and p.is_file()) \
        if folder.is_dir() else []


def catalogue_family(name: str) -> str:
    """A catalogue's group: its name without trailing version or part numbers. ``iso_639-3``
    and ``iso_639_3`` (the same catalogue under its old and new name) and ``iso_3166-2`` are
    one family ``iso``, ``postgres-15`` is ``postgres`` on a machine with version 16 too."""
    return re.sub(r"([-_.]?\d+)+$", "", name) or name


def installed_languages(root: Path | str = LOCALE_ROOT) -> list[str]:
    """Languages with at least one catalogue under a locale root, sorted."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(d.name for d in root.iterdir() if _catalogue_files(d / "LC_MESSAGES"))


def _locale_side(root: Path, lang: str, info: dict) -> dict[str, list[Message]]:
    files = _catalogue_files(root / lang / "LC_MESSAGES")
    if not files:
        have = installed_languages(root)
        listed = ", ".join(have[:12]) + (", ..." if len(have) > 12 else "")
        raise ValueError(f"no gettext catalogues for {lang!r} under {root}; installed "
                         f"languages: {listed or 'none'}")
    return _grouped(_read_catalogues(files, root, info), lambda p: catalogue_family(p.stem),
                    info)


def _gettext_items(root: Path, src: str, tgt: str, info: dict) -> list[tuple[str, str, str]]:
    """msgid -> msgstr when one side is English (``en`` means the msgids); otherwise the two
    languages' msgstr joined on (catalogue, msgctxt, msgid, msgid_plural)."""
    if "en" in (src, tgt):
        other = tgt if src == "en" else src
        cats = _locale_side(root, other, info)
        flip = src != "en"
        return [(g, *((m.msgstr[0], m.msgid) if flip else (m.msgid, m.msgstr[0])))
                for g in sorted(cats) for m in cats[g]]
    a, b = _locale_side(root, src, info), _locale_side(root, tgt, info)
    items, unmatched = [], 0
    for g in sorted(set(a) | set(b)):
        by_key = {(m.context, m.msgid, m.plural): m.msgstr[0] for m in b.get(g, ())}
        seen = 0
        for m in a.get(g, ()):
            t = by_key.get((m.context, m.msgid, m.plural))
            if t is None:
                unmatched += 1
            else:
                items.append((g, m.msgstr[0], t))
                seen += 1
        unmatched += len(by_key) - seen
    info["dropped"]["unmatched"] += unmatched
    return items


def _folder_items(root: Path, files: list[Path], tgt: str | None, info: dict,
                  where: str | None = None) -> tuple[list, str]:
    """msgid -> msgstr of the catalogues ``files`` under ``root``, grouped by relative path
    without suffix, and the target language (:func:`~.catalogs.target_language`): with ``tgt``
    named, the files in it and those that declare no language (the user named it); without,
    every file, which must then be of one language. ``where`` names them (default ``root``)."""
    cats = _read_catalogues(files, root, info)
    langs = {p: catalogue_language(p.absolute(), c.header) for p, c in cats.items()}
    if cats:
        tgt = target_language(langs.values(), tgt, where or str(root))
    keep = {p: c for p, c in cats.items() if serves(tgt, langs[p])}
    groups = _grouped(keep, lambda p: p.relative_to(root).with_suffix("").as_posix(), info)
    return [(g, m.msgid, m.msgstr[0]) for g in sorted(groups) for m in groups[g]], tgt or "und"


def _tsv_items(path: Path, info: dict) -> list[tuple[str, str, str]]:
    """``source<TAB>target`` lines; any bad line refuses the file, naming the line (a silently
    shortened corpus is worse than an error). Blank lines are skipped; a BOM is allowed."""
    data = read_input(path, str(path), text=True)     # NUL or not UTF-8: at its first chunk
    if not data.strip():
        raise ValueError(f"{path}: empty file (expected source<TAB>target lines)")
    text = data.decode("utf-8").removeprefix("\ufeff")
    items = []
    for i, line in enumerate(text.split("\n"), 1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 2:
            raise ValueError(f"{path}:{i}: expected source<TAB>target, found {len(parts)} "
                             f"field{'s' if len(parts) > 1 else ''}: {line[:50]!r}")
        for side, s in zip(("source", "target"), parts):
            if not s.strip():
                raise ValueError(f"{path}:{i}: one-sided pair (empty {side}): {line[:50]!r}")
        items.append((parts[0].strip(), parts[0], parts[1]))
    info["files"] = 1
    return items


_OSIS_DROP = re.compile(r'<note\b.*?</note>|<title\b(?![^>]*canonical="true").*?</title>', re.S)
_OSIS_INLINE = re.compile(r"</?(?:w|q|transChange|seg|hi|foreign|divineName|name|catchWord|rdg)"
                          r"\b[^>]*>")


def _osis_text(s: str) -> str:
    """Plain text of an OSIS verse: footnotes and editorial headings dropped (the other Bible
    has none), word markup removed, other elements read as a space."""
    s = _OSIS_INLINE.sub("", _OSIS_DROP.sub(" ", s))
    s = html.unescape(re.sub(r"<[^>]*>", " ", s))
    return re.sub(r" ([,.;:!?’”)])", r"\1", re.sub(r"\s+", " ", s)).strip()


def bible_items(src: str, tgt: str, info: dict) -> list[tuple[str, str, str]]:
    """Verse pairs of the books both Bibles have, grouped by book, in canonical order."""
    if {src, tgt} != set(BIBLE_MODULES):
        raise ValueError(f"the bible corpus pairs en and es, not {src}->{tgt}")
    require("pysword", extra="bible", feature="the bible corpus")
    from pysword.modules import SwordModules

    mods = SwordModules(str(SWORD_ROOT))
    try:
        found = mods.parse_modules()
    except OSError:
        found = {}
    if not set(BIBLE_MODULES.values()) <= set(found):
        raise ValueError(f"the bible corpus needs the SWORD modules "
                         f"{' and '.join(BIBLE_MODULES.values())} under {SWORD_ROOT} "
                         f"(Debian: apt-get install sword-text-web sword-text-sparv)")
    bibles, books = {}, {}
    for lang, name in BIBLE_MODULES.items():
        bible = mods.get_bible_from_module(name)
        if hasattr(bible, "_decompressed_text"):
            # pysword inflates a whole book for every verse (5 ms each, minutes per Bible);
            # remembering the last few blocks makes a book one inflation
            bible._decompressed_text = functools.lru_cache(maxsize=4)(bible._decompressed_text)
        bibles[lang] = bible
        books[lang] = {b.osis_name: b for t in bible.get_structure().get_books().values()
                       for b in t}
    items, unmatched = [], 0
    for osis, book in books["es"].items():         # the 66 books of the KJV order
        other = books["en"].get(osis)
        if other is None:
            continue
        for c, lens in enumerate(zip(book.chapter_lengths, other.chapter_lengths), 1):
            text = {lang: list(bibles[lang].get_iter(books=[osis], chapters=[c], clean=False))
                    for lang in ("es", "en")}
            if [len(text["es"]), len(text["en"])] != list(lens):
                unmatched += sum(lens)              # a verse skipped by pysword: no alignment
                continue
            unmatched += abs(lens[0] - lens[1])
            items += [(osis, _osis_text(text[src][v]), _osis_text(text[tgt][v]))
                      for v in range(min(lens))]
    info["files"] = 2
    info["dropped"]["unmatched"] += unmatched
    return items


def path_items(root: Path, machine: bool, src_lang, tgt_lang):
    """``(items, info, src, tgt)`` of a pair source on disk: a TSV file, one catalogue, a
    locale tree (``machine``: this machine's), or a folder of catalogues. A FIFO or device is
    refused: the pairs are read again on --resume, by refine and by every process of a run."""
    kind = input_kind(root, "pair source", folder=True)
    if kind == "file" and root.suffix not in (".po", ".mo"):
        info = new_info("line", f"TSV {root}")
        return _tsv_items(root, info), info, src_lang or "src", tgt_lang or "tgt"
    if kind == "folder" and (machine or any(_catalogue_files(d / "LC_MESSAGES")
                                            for d in root.iterdir())):
        src, tgt = src_lang or "en", tgt_lang or ("de" if src_lang in (None, "en") else "en")
        if src == tgt:
            raise ValueError(f"source and target language are both {src!r}")
        info = new_info("family", f"gettext catalogues under {root}")
        return _gettext_items(root, src, tgt, info), info, src, tgt
    if src_lang not in (None, "en"):
        raise ValueError(f"{root}: a catalogue pairs msgid (en) with its translations; "
                         f"joining {src_lang} needs a <lang>/LC_MESSAGES tree")
    if kind == "file":
        info = new_info("family", f"catalogue {root}")
        items, tgt = _folder_items(root.parent, [root], tgt_lang, info, str(root))
        return items, info, "en", tgt
    files = sorted(p for p in root.rglob("*") if p.suffix in (".mo", ".po") and p.is_file()
                   and not any(s.startswith(".") for s in p.relative_to(root).parts))
    if not files:
        raise ValueError(f"no .po or .mo files under {root}")
    info = new_info("family", f"catalogues under {root}")
    items, tgt = _folder_items(root, files, tgt_lang, info)
    return items, info, "en", tgt


__all__ = ["BIBLE_MODULES", "LOCALE_ROOT", "MAX_CATALOGUE", "SWORD_ROOT", "bible_items",
           "catalogue_family", "installed_languages", "new_info", "path_items"]
