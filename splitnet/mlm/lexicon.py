"""A sentiment lexicon for WN-polarity: word -> positive (1) or negative (0).

Bing Liu's opinion lexicon (6,786 words) ships in the Debian package ``r-cran-tidytext`` as the
``sentiments`` data frame of an R lazy-load database (``data/Rdata.rdx``: a gzipped index of
variables, ``data/Rdata.rdb``: each variable a 4-byte length and a zlib-compressed R
serialisation), which the ``rdata`` package parses. A plain ``word<TAB>positive|negative`` file
serves as well (any other lexicon, and the tests' fixture).
"""

from __future__ import annotations

from pathlib import Path

from .rlazy import read_variable

TIDYTEXT = Path("/usr/lib/R/site-library/tidytext/data/Rdata")
RECIPE = "apt-get install r-cran-tidytext and pip install rdata, or give --lexicon FILE"
LABELS = {"negative": 0, "positive": 1}


def read_tsv(path) -> dict[str, int]:
    """``word<TAB>positive|negative`` lines (blank lines and ``#`` comments skipped)."""
    out = {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text (byte {e.start}); a lexicon is "
                         f"'word<TAB>positive|negative' lines") from None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        word, _, label = line.partition("\t")
        if label.strip() not in LABELS:
            raise ValueError(f"{path} line {n}: expected 'word<TAB>positive|negative', got "
                             f"{line[:60]!r}")
        out[word.strip().lower()] = LABELS[label.strip()]
    return out


def read_tidytext(base: Path = TIDYTEXT) -> dict[str, int]:
    """The Bing lexicon out of tidytext's lazy-load database (module docstring)."""
    try:
        frame = read_variable(base, "sentiments", RECIPE)
    except FileNotFoundError as e:
        raise FileNotFoundError(f"no sentiment lexicon: {e}") from None
    return {str(w).lower(): LABELS[str(s)] for w, s in zip(frame["word"], frame["sentiment"])}


def load_lexicon(path=None) -> dict[str, int]:
    """``path`` (a TSV) when given, else tidytext's Bing lexicon."""
    return read_tsv(path) if path is not None else read_tidytext()


__all__ = ["LABELS", "RECIPE", "TIDYTEXT", "load_lexicon", "read_tidytext", "read_tsv"]
