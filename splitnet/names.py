"""The message for a name that is not in a registry: a few close candidates and where the whole
list is, never the whole (growing) registry itself.

    >>> unknown_name("scheme", "yoshda4", ["yoshida4", "yoshida6", "strang"])
    "unknown scheme 'yoshda4'; did you mean yoshida4, yoshida6? (splitnet schemes lists them all)"

No count either: a message (and docs/errors.md, which quotes them) stays the same when the
registry grows, unless the new name is close to the one asked for.

Standard library only: the command line builds these messages before importing torch.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

__all__ = ["IDENTIFIER", "LISTED_BY", "check_identifier", "close_names", "unknown_name"]

# Where each kind of name is listed in full (a command, or the Python name of the registry).
LISTED_BY = {
    "scheme": "splitnet schemes",
    "method": "splitnet.integrators.subflows.METHODS",
    "command": "splitnet --help",
    "target": "python3 -m splitnet.dev regen --list",
    "zoo method": "splitnet schemes",
    "task": "splitnet train --help",
    "stack kind": "sn.stacks.available()",
}
# What a registry name may be: a non-empty identifier of letters, digits, _ and -, not first a
# digit (nor a dash: it would read as an option on the command line).
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def check_identifier(what: str, name) -> str:
    """``name`` if it may name an entry of a registry (:data:`IDENTIFIER`), else a ValueError
    saying what ``what`` (``"a task"``) may be called."""
    if not isinstance(name, str) or not IDENTIFIER.fullmatch(name):
        raise ValueError(f"{what}'s name must be a non-empty identifier (letters, digits, _ and "
                         f"-, not first a digit or a dash), got {name!r}")
    return name


def close_names(name, candidates: Iterable[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """Up to ``n`` of ``candidates`` closest to ``name`` (``difflib``, case-insensitive), best
    first; the candidates' own spelling."""
    by_lower = {}
    for c in candidates:
        by_lower.setdefault(str(c).lower(), str(c))
    hits = difflib.get_close_matches(str(name).lower(), list(by_lower), n=n, cutoff=cutoff)
    return [by_lower[h] for h in hits]


def unknown_name(kind: str, name, names: Iterable[str], aliases: Iterable[str] = (),
                 listed_by: str | None = None) -> str:
    """``unknown KIND 'NAME'; did you mean A, B? (COMMAND lists them all)``: candidates among
    ``names`` and ``aliases`` (at most three, best first); ``listed_by`` (default
    ``LISTED_BY[kind]``) is what lists them all. When nothing is close it says so."""
    close = close_names(name, [*names, *aliases])
    hint = f"did you mean {', '.join(close)}?" if close else f"no {kind} has a close name"
    where = listed_by or LISTED_BY.get(kind)
    tail = f" ({where} lists them all)" if where else ""
    return f"unknown {kind} {name!r}; {hint}{tail}"
