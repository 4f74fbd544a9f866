"""R lazy-load databases: the ``data/Rdata.rdx`` / ``data/Rdata.rdb`` pair in which Debian's
``r-cran-*`` packages ship their data sets. The index (``.rdx``) is an R serialisation of the
variables' ``(offset, length)`` in the database; each entry of ``.rdb`` is a 4-byte big-endian
length and a zlib-compressed R serialisation, which the ``rdata`` package parses."""

from __future__ import annotations

import struct
import warnings
import zlib
from pathlib import Path


def _rdata(recipe: str):
    try:
        import rdata
    except ImportError:
        raise FileNotFoundError(f"reading R's data files needs the rdata package "
                                f"({recipe})") from None
    return rdata


# what a damaged database raises inside zlib, struct and the rdata parser (issue 49 D9)
_DAMAGE = (zlib.error, struct.error, NotImplementedError, ValueError, EOFError, KeyError,
           IndexError, TypeError, AttributeError, UnicodeDecodeError)


def _damaged(path, e: BaseException, recipe: str) -> ValueError:
    first = (str(e).strip().splitlines() or [""])[0]
    return ValueError(f"{path} is damaged and cannot be read ({type(e).__name__}"
                      f"{': ' + first if first else ''}); install it again ({recipe})")


def variables(base: Path, recipe: str) -> dict[str, tuple[int, int]]:
    """name -> (offset, length) of every variable in ``base``.rdb (``base`` without suffix)."""
    rdata = _rdata(recipe)
    index = Path(str(base) + ".rdx")
    if not index.is_file():
        raise FileNotFoundError(f"{index} is missing ({recipe})")
    try:
        with warnings.catch_warnings():     # rdata names the R classes it maps to Python ones
            warnings.simplefilter("ignore", UserWarning)
            table = rdata.read_rds(index)["variables"]
        return {str(k): (int(v[0]), int(v[1])) for k, v in table.items()}
    except _DAMAGE as e:
        raise _damaged(index, e, recipe) from None


def read_variable(base: Path, name: str, recipe: str):
    """The R object ``name`` of the database ``base``, converted by rdata (a character vector
    -> a numpy array of str, a data frame -> a pandas DataFrame)."""
    rdata = _rdata(recipe)
    table = variables(base, recipe)
    if name not in table:
        raise ValueError(f"{base}.rdb has no variable {name!r} (it has {', '.join(table)})")
    offset, length = table[name]
    with open(str(base) + ".rdb", "rb") as fh:
        fh.seek(offset)
        raw = fh.read(length)
    try:
        (size,) = struct.unpack(">I", raw[:4])
        data = zlib.decompress(raw[4:])
        if len(data) != size:
            raise ValueError(f"the entry {name!r} is {len(data)} bytes, its header says {size}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return rdata.conversion.convert(rdata.parser.parse_data(data, expand_altrep=True))
    except _DAMAGE as e:
        raise _damaged(f"{base}.rdb", e, recipe) from None


__all__ = ["read_variable", "variables"]
