"""Gettext catalogues, read robustly: compiled ``.mo`` and source ``.po`` files.

The stdlib's ``gettext.GNUTranslations`` decodes a catalogue's header as UTF-8 before reading
its ``charset=`` and fails on real ones (net-tools' German catalogue is ISO-8859-1), and it
ignores the system-dependent strings (``%<PRIuMAX>``) of revision-1 files. These readers decode
by the declared charset, fall back to latin-1 string by string, read both byte orders and the
system-dependent table, and raise one ``ValueError`` naming the file for a malformed one, so a
corpus can skip that file and go on. Pure Python; checked against GNU ``msgunfmt`` on the
catalogues of this machine (tests/test_pairs.py).

A catalogue's language (:func:`catalogue_language`) is its header's ``Language:`` field (the
header is the translation of the empty msgid: in a ``.mo`` file, a string of the string table,
anywhere in the file), else its path (``<lang>/LC_MESSAGES/name.mo``), else a file name that is
a language code (``de.po``, ``pt_BR.mo``; ``apt.mo`` and ``sed.mo`` are not).
"""

from __future__ import annotations

import codecs
import locale
import re
import struct
from pathlib import PurePath
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
    """Entries of a compiled catalogue (either byte order), header left out (see
    :func:`_read_mo`)."""
    return _read_mo(data, name)[1]


def _read_mo(data: bytes, name: str) -> tuple[str, list[Message]]:
    """The header (the translation of the empty msgid, decoded) and the entries of a compiled
    catalogue (either byte order).

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
    header = next((t for o, t in raw if o == b""), b"")
    dec = _decoder(_charset(header.decode("latin-1")))
    out = []
    for orig, trans in raw:
        if orig == b"":
            continue
        ctx, _, orig = orig.rpartition(b"\x04")
        msgid, _, plural = orig.partition(b"\x00")
        out.append(Message(dec(msgid), tuple(dec(s) for s in trans.split(b"\x00")), dec(ctx),
                           dec(plural)))
    return dec(header), out


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
    return _read_po(data, name)[1]


def _read_po(data: bytes, name: str) -> tuple[str, list[Message]]:
    """The header (the msgstr of the first empty msgid) and the entries of :func:`read_po`."""
    m = re.search(rb"charset=\s*([-\w.:]+)", data[:4096])
    text = _decoder(_charset(m.group(0).decode("latin-1") if m else ""))(data)
    out, fields, fuzzy, key = [], {}, False, None
    header: list[str] = []

    def flush():
        msg = _po_entry(fields, fuzzy)
        if msg is not None and msg.msgid != "":
            out.append(msg)
        elif msg is not None and not msg.context and not header:
            header.append(msg.msgstr[0])

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
    return (header[0] if header else ""), out


# ---------------------------------------------------------------------------------------------
# the catalogue as a whole: header and language


class Catalogue(NamedTuple):
    """A catalogue file read whole: its header fields (``Language``, ``Content-Type``, ...) and
    its entries (header left out)."""

    header: dict[str, str]
    messages: list[Message]


def header_fields(header: str) -> dict[str, str]:
    """``Key: value`` lines of a catalogue header, as a dict (values stripped)."""
    out = {}
    for line in header.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            out.setdefault(key.strip(), value.strip())
    return out


def read_catalogue(data: bytes, name: str, suffix: str) -> Catalogue:
    """A ``.mo`` (``suffix == ".mo"``) or ``.po`` catalogue's header fields and entries; a
    malformed file is a ``ValueError`` naming ``name``."""
    header, msgs = _read_mo(data, name) if suffix == ".mo" else _read_po(data, name)
    return Catalogue(header_fields(header), msgs)


_CODE = re.compile(r"([A-Za-z]{2,3})([_-][A-Za-z0-9]{2,8})*(@[A-Za-z0-9]+)?")


def language_code(value: str | None) -> str | None:
    """``value`` as a language code (``de``, ``pt_BR``, ``sr@latin``; ``-`` read as ``_``),
    or None when it is not one (empty, a language's name such as ``German``)."""
    value = (value or "").strip().replace("-", "_")
    return value if _CODE.fullmatch(value) else None


def base_language(code: str) -> str:
    """The language of a code without region or variant: ``pt_BR`` -> ``pt``."""
    return re.split(r"[_@]", code, maxsplit=1)[0].lower()


def _known_language(stem: str) -> bool:
    """Whether a file name's stem is a language the C library knows (``de``, ``pt_BR``):
    ``apt``, ``sed`` or ``xz`` are programs, not languages."""
    if not _CODE.fullmatch(stem.replace("-", "_")):
        return False
    base = base_language(stem)
    return locale.locale_alias.get(base, "").lower().startswith(base)


def catalogue_language(path, header: dict[str, str]) -> str | None:
    """A catalogue's language: its header's ``Language:``, else the ``<lang>`` of a
    ``<lang>/LC_MESSAGES/`` path, else a file name that is a language code; None when none
    says."""
    code = language_code(header.get("Language"))
    if code:
        return code
    p = PurePath(path)
    if p.parent.name == "LC_MESSAGES" and language_code(p.parent.parent.name):
        return language_code(p.parent.parent.name)
    return p.stem.replace("-", "_") if _known_language(p.stem) else None


def _matches(tgt: str, code: str) -> bool:
    """Whether a catalogue in ``code`` serves target ``tgt``: the same code, or ``tgt`` is its
    language (``de`` takes ``de_DE`` and ``de_AT``; ``pt_BR`` does not take ``pt``)."""
    return tgt.lower() in (code.lower(), base_language(code))


def target_language(languages, tgt: str | None, where: str) -> str:
    """The one target language of catalogues whose languages (:func:`catalogue_language`, None
    where unknown) are ``languages``. Without ``tgt``: their one language (one code, or the
    language of several variants such as ``es`` and ``es_ES``); several languages, or none
    known, is a ValueError asking to name it. With ``tgt``: ``tgt``, unless catalogues name
    languages and none of them is ``tgt`` (the files contradict it). ``where`` names the
    catalogues in the messages."""
    declared = sorted({c for c in languages if c})
    bases = sorted({base_language(c) for c in declared})
    found = ", ".join(declared)
    if tgt is None:
        if len(bases) > 1:
            raise ValueError(f"{where} holds catalogues of several languages ({found}); name "
                             f"the target language (--tgt-lang) to read only its catalogues")
        if not bases:
            raise ValueError(f"{where}: no catalogue says its language (no Language: header, "
                             f"no <lang>/LC_MESSAGES/ path, no file named like de.po); name the "
                             f"target language (--tgt-lang)")
        return declared[0] if len(declared) == 1 else bases[0]
    if declared and not any(_matches(tgt, c) for c in declared):
        raise ValueError(f"no catalogues for {tgt!r} in {where}: its catalogues are in "
                         f"{found}")
    return tgt


def serves(tgt: str, code: str | None) -> bool:
    """Whether a catalogue of language ``code`` (None: unknown, the user named it) belongs to a
    corpus with target ``tgt``."""
    return code is None or _matches(tgt, code)


__all__ = ["Catalogue", "Message", "base_language", "catalogue_language", "header_fields",
           "language_code", "read_catalogue", "read_mo", "read_po", "serves", "target_language"]
