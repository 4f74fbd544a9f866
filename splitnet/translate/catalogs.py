"""Gettext catalogues, read robustly: compiled ``.mo`` and source ``.po`` files.

The stdlib's ``gettext.GNUTranslations`` decodes a catalogue's header as UTF-8 before reading
its ``charset=`` and fails on real ones (net-tools' German catalogue is ISO-8859-1), and it
ignores the system-dependent strings (``%<PRIuMAX>``) of revision-1 files. These readers decode
by the declared charset, fall back to latin-1 string by string, read both byte orders and the
system-dependent table, and raise one ``ValueError`` naming the file for a malformed one, so a
corpus can skip that file and go on. Pure Python; checked against GNU ``msgunfmt`` on the
catalogues of this machine (tests/test_pairs.py).
"""

from __future__ import annotations

import codecs
import re
import struct
from typing import NamedTuple

_MO_MAGIC = 0x950412DE


class Message(NamedTuple):
    """One catalogue entry: ``msgstr`` holds one form, or one per plural form."""

    msgid: str
    msgstr: tuple[str, ...]
    context: str = ""
    plural: str = ""
    fuzzy: bool = False


# ---------------------------------------------------------------------------------------------
# catalogue readers


def _charset(header: str) -> str:
    """The codec named by a catalogue header's ``charset=``, UTF-8 when absent or unknown."""
    m = re.search(r"charset=\s*([-\w.:]+)", header)
    if m:
        try:
            return codecs.lookup(m.group(1)).name
        except LookupError:
            pass
    return "utf-8"


def _decoder(charset: str):
    def dec(b: bytes) -> str:
        try:
            return b.decode(charset)
        except UnicodeDecodeError:      # a mislabelled string: latin-1 reads any byte
            return b.decode("latin-1")
    return dec


def _mo_sysdep(data: bytes, order: str, name: str) -> list[tuple[bytes, bytes]]:
    """The system-dependent strings of a revision-1 catalogue (``%<PRIuMAX>`` and the like),
    rebuilt the way ``msgunfmt`` prints them; the stdlib's reader ignores this table."""
    n_seg, seg_off, n_sys, o_sys, t_sys = struct.unpack_from(order + "5I", data, 28)
    seg = []
    for i in range(n_seg):
        length, off = struct.unpack_from(order + "2I", data, seg_off + 8 * i)
        tag = data[off:off + length].rstrip(b"\x00")
        seg.append(tag if tag == b"I" else b"<" + tag + b">")   # "%Id": GNU's digits flag

    def rebuild(table: int, i: int) -> bytes:
        (pos,) = struct.unpack_from(order + "I", data, table + 4 * i)
        (off,) = struct.unpack_from(order + "I", data, pos)
        out = b""
        for q in range(pos + 4, len(data), 8):
            size, ref = struct.unpack_from(order + "2I", data, q)
            out += data[off:off + size]
            off += size
            if ref == 0xFFFFFFFF:
                return out[:-1] if out.endswith(b"\x00") else out
            if ref >= n_seg:
                raise ValueError(f"{name}: system-dependent string {i} names segment {ref}")
            out += seg[ref]
        raise ValueError(f"{name}: system-dependent string {i} has no end")

    return [(rebuild(o_sys, i), rebuild(t_sys, i)) for i in range(n_sys)]


def read_mo(data: bytes, name: str = "<mo>") -> list[Message]:
    """Entries of a compiled catalogue (either byte order), header left out.

    Strings are decoded with the header's charset (latin-1 for a string that is not valid in
    it); a plural entry keeps its singular msgid, the plural msgid and every msgstr form;
    system-dependent strings (revision 1) are read too. A malformed file is a ``ValueError``
    naming ``name``."""
    if len(data) < 28:
        raise ValueError(f"{name}: not a .mo file (only {len(data)} bytes)")
    for order in "<>":
        magic, revision, n, o_tab, t_tab = struct.unpack(order + "5I", data[:20])
        if magic == _MO_MAGIC:
            break
    else:
        raise ValueError(f"{name}: not a .mo file (bad magic number)")
    if revision >> 16 > 1:             # GNU writes majors 0 and 1 (1: the "I" digits flag)
        raise ValueError(f"{name}: unsupported .mo major revision {revision >> 16}")

    def string(table: int, i: int) -> bytes:
        length, off = struct.unpack_from(order + "2I", data, table + 8 * i)
        if off + length > len(data):
            raise ValueError(f"{name}: string {i} runs past the end of the file")
        return data[off:off + length]

    try:
        raw = [(string(o_tab, i), string(t_tab, i)) for i in range(n)]
        if revision & 0xFFFF and len(data) >= 48:
            raw += _mo_sysdep(data, order, name)
    except struct.error:
        raise ValueError(f"{name}: truncated .mo file ({n} entries declared)") from None
    header = next((t for o, t in raw if o == b""), b"").decode("latin-1")
    dec = _decoder(_charset(header))
    out = []
    for orig, trans in raw:
        if orig == b"":
            continue
        ctx, _, orig = orig.rpartition(b"\x04")
        msgid, _, plural = orig.partition(b"\x00")
        out.append(Message(dec(msgid), tuple(dec(s) for s in trans.split(b"\x00")), dec(ctx),
                           dec(plural)))
    return out


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v",
            '"': '"', "\\": "\\", "'": "'", "?": "?"}
_ESCAPE = re.compile(r"\\(x[0-9A-Fa-f]{1,2}|[0-7]{1,3}|.)")
_PO_LINE = re.compile(r'(msgctxt|msgid_plural|msgid|msgstr(?:\[(\d+)\])?)\s*(".*")\s*$|(".*")\s*$')


def _unquote(s: str, name: str, lineno: int) -> str:
    """A C string literal's content (the quotes included in ``s``)."""
    if len(s) < 2 or not s.endswith('"'):
        raise ValueError(f"{name}:{lineno}: unterminated string")

    def esc(m):
        e = m.group(1)
        if e[0] == "x":
            return chr(int(e[1:], 16))
        if e[0] in "01234567":
            return chr(int(e, 8))
        return _ESCAPES.get(e, "\\" + e)
    return _ESCAPE.sub(esc, s[1:-1])


def _po_entry(fields: dict, fuzzy: bool) -> Message | None:
    if "msgid" not in fields:
        return None
    forms = fields.get("msgstr", {})
    msgstr = tuple(forms[k] for k in sorted(forms)) or ("",)
    return Message(fields["msgid"], msgstr, fields.get("msgctxt", ""),
                   fields.get("msgid_plural", ""), fuzzy)


def read_po(data: bytes, name: str = "<po>") -> list[Message]:
    """Entries of a source catalogue, header and obsolete (``#~``) entries left out; ``#, fuzzy``
    entries are returned with ``fuzzy=True`` (the corpus drops and counts them).

    Handles msgctxt, msgid_plural, msgstr[n], continuation lines and C escapes; the text is
    decoded with the header's charset (latin-1 when it is not valid in it). A malformed line is
    a ``ValueError`` naming ``name`` and the line number."""
    m = re.search(rb"charset=\s*([-\w.:]+)", data[:4096])
    text = _decoder(_charset(m.group(0).decode("latin-1") if m else ""))(data)
    out, fields, fuzzy, key = [], {}, False, None

    def flush():
        msg = _po_entry(fields, fuzzy)
        if msg is not None and msg.msgid != "":
            out.append(msg)

    for lineno, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            if s.startswith("#,") and "fuzzy" in s[2:].replace(",", " ").split():
                if fields:
                    flush()
                    fields, key = {}, None
                fuzzy = True
            continue
        m = _PO_LINE.fullmatch(s)
        if m is None:
            raise ValueError(f"{name}:{lineno}: not a .po line: {s[:60]!r}")
        if m.group(4) is not None:                  # a continuation of the current string
            if key is None:
                raise ValueError(f"{name}:{lineno}: string without a keyword")
            value = _unquote(m.group(4), name, lineno)
            if isinstance(key, tuple):
                fields["msgstr"][key[1]] += value
            else:
                fields[key] += value
            continue
        kw, value = m.group(1), _unquote(m.group(3), name, lineno)
        if kw in ("msgctxt", "msgid") and ("msgstr" in fields or kw in fields):
            flush()                                 # a new entry begins, not fuzzy: its
            fields, fuzzy = {}, False               # flag would have flushed the last one
        if kw.startswith("msgstr"):
            key = ("msgstr", int(m.group(2) or 0))
            fields.setdefault("msgstr", {})[key[1]] = value
        else:
            key = kw
            fields[kw] = value
    flush()
    return out


__all__ = ["Message", "read_mo", "read_po"]
