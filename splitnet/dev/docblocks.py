"""Tables written into a document between markers: ``<!-- PREFIX:NAME -->`` ... ``<!--
/PREFIX:NAME -->``, and nowhere else, so prose around them stays the author's. Used by the
experiment scripts that regenerate parts of docs/theory.md. Inline counts (``<!-- zoo:methods
-->30<!-- /zoo:methods -->``) are the same for a number inside a sentence."""

from __future__ import annotations

import re
import time
from pathlib import Path


def fill_blocks(text: str, prefix: str, tables: dict[str, str]) -> str:
    """``text`` with each ``tables[name]`` between its markers (a missing marker is an error
    naming it)."""
    for name, body in tables.items():
        pat = re.compile(rf"(<!-- {prefix}:{name} -->\n).*?(<!-- /{prefix}:{name} -->)",
                         re.DOTALL)
        if not pat.search(text):
            raise SystemExit(f"no marker <!-- {prefix}:{name} --> in the document")
        text = pat.sub(lambda m, b=body: m.group(1) + b + "\n" + m.group(2), text)
    return text


def fill_counts(text: str, prefix: str, values: dict[str, object]) -> str:
    """``text`` with each value between its inline markers ``<!-- PREFIX:NAME -->value<!--
    /PREFIX:NAME -->`` (a number inside a sentence: generated, so prose never pins it)."""
    for name, value in values.items():
        pat = re.compile(rf"(<!-- {prefix}:{name} -->)[^<]*(<!-- /{prefix}:{name} -->)")
        if not pat.search(text):
            raise SystemExit(f"no marker <!-- {prefix}:{name} --> in the document")
        text = pat.sub(lambda m, v=value: f"{m.group(1)}{v}{m.group(2)}", text)
    return text


def write_counts(docs, prefix: str, values: dict[str, object]) -> list[Path]:
    """:func:`fill_counts` into each of ``docs`` that has a marker; returns those changed."""
    changed = []
    for doc in docs:
        old = doc.read_text()
        names = {n: v for n, v in values.items() if f"<!-- {prefix}:{n} -->" in old}
        text = fill_counts(old, prefix, names)
        if text != old:
            doc.write_text(text)
            changed.append(doc)
    return changed


def write_blocks(doc: Path, prefix: str, tables: dict[str, str], stamp: bool = False) -> bool:
    """Write ``tables`` into ``doc``; with ``stamp`` also today's date between the
    ``PREFIX:date`` markers. Nothing changed: the file (and its date) is left alone. Returns
    whether it was written."""
    old = doc.read_text()
    text = fill_blocks(old, prefix, tables)
    if text == old:
        return False
    if stamp:
        text = re.sub(rf"(<!-- {prefix}:date -->).*?(<!-- /{prefix}:date -->)",
                      rf"\g<1>{time.strftime('%Y-%m-%d')}\g<2>", text)
    doc.write_text(text)
    return True


__all__ = ["fill_blocks", "fill_counts", "write_blocks", "write_counts"]
