"""Parallel corpora: catalogue readers, sources, cleaning, the stable split, tokenizers, batches,
and the real catalogues of this machine (skipped where it has none)."""

from __future__ import annotations

import glob
import shutil
import struct
import subprocess

import pytest

from splitnet import pairs as P

# ---------------------------------------------------------------------------------------------
# fixtures: a tiny .mo writer (the format of GNU msgfmt, revision 0, no hash table)


def write_mo(entries, charset="UTF-8", order="<") -> bytes:
    """A .mo file of ``entries`` ((msgid, msgstr) str pairs; msgctxt as "ctx\\x04id", plurals
    as "one\\x00many") with a header naming ``charset``, encoded in it."""
    header = f"Content-Type: text/plain; charset={charset}\n"
    items = sorted([("", header), *entries], key=lambda e: e[0].encode(charset))
    raw = [(k.encode(charset), v.encode(charset)) for k, v in items]
    n = len(raw)
    o_tab, t_tab = 28, 28 + 8 * n
    pos, blob, o_desc, t_desc = 28 + 16 * n, b"", [], []
    for desc, idx in ((o_desc, 0), (t_desc, 1)):
        for r in raw:
            desc.append((len(r[idx]), pos + len(blob)))
            blob += r[idx] + b"\x00"
    head = struct.pack(order + "7I", 0x950412DE, 0, n, o_tab, t_tab, 0, 0)
    tabs = b"".join(struct.pack(order + "2I", *d) for d in o_desc + t_desc)
    return head + tabs + blob


MO_ENTRIES = [
    ("Open file", "Datei öffnen"),
    ("menu\x04Open", "Öffnen"),
    ("%d file\x00%d files", "%d Datei\x00%d Dateien"),
    ("Save", "Speichern"),
]


@pytest.mark.parametrize("order", ["<", ">"])
def test_mo_round_trip_with_plural_context_and_both_byte_orders(order):
    msgs = P.read_mo(write_mo(MO_ENTRIES, order=order), "x.mo")
    by_id = {(m.context, m.msgid): m for m in msgs}
    assert len(msgs) == 4                                   # the header is not an entry
    assert by_id[("", "Open file")].msgstr == ("Datei öffnen",)
    assert by_id[("menu", "Open")].msgstr == ("Öffnen",)
    plural = by_id[("", "%d file")]
    assert plural.plural == "%d files" and plural.msgstr == ("%d Datei", "%d Dateien")


def test_mo_latin1_header_and_a_mislabelled_string():
    data = write_mo([("Size", "Größe")], charset="ISO-8859-1")
    assert "Größe".encode("latin-1") in data
    assert P.read_mo(data, "l1.mo")[0].msgstr == ("Größe",)
    # declared UTF-8 but holding a latin-1 string: that string falls back to latin-1
    bad = write_mo([("Size", "x")]).replace(b"x\x00", "ö".encode("latin-1") + b"\x00")
    assert P.read_mo(bad, "bad.mo")[0].msgstr == ("ö",)


@pytest.mark.parametrize("data, words", [
    (b"", "only 0 bytes"),
    (b"\x00" * 40, "bad magic"),
    (write_mo(MO_ENTRIES)[:60], "past the end"),
    (struct.pack("<7I", 0x950412DE, 0, 5, 28, 68, 0, 0), "truncated"),
])
def test_mo_malformed_is_a_value_error_naming_the_file(data, words):
    with pytest.raises(ValueError, match=f"broken.mo: .*{words}"):
        P.read_mo(data, "broken.mo")


PO = r'''# a translator comment
msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\n"

#: src/main.c:10
msgid "Hello, "
"world"
msgstr "Hallo, "
"Welt"

msgctxt "button"
msgid "Quit"
msgstr "Beenden"

#, fuzzy, c-format
msgid "Old guess"
msgstr "Alte Vermutung"

#, c-format
msgid "Tab\there \"quoted\" back\\slash \101\x42\n"
msgstr "Tab\there \"zitiert\" Rück\\strich \101\x42\n"

msgid "%d apple"
msgid_plural "%d apples"
msgstr[0] "%d Apfel"
msgstr[1] "%d Äpfel"

#~ msgid "Gone"
#~ msgstr "Weg"

msgid "Untranslated"
msgstr ""
'''


def test_po_continuations_escapes_context_plural_fuzzy_obsolete():
    msgs = P.read_po(PO.encode("utf-8"), "de.po")
    by_id = {m.msgid: m for m in msgs}
    assert set(by_id) == {"Hello, world", "Quit", "Old guess",
                          'Tab\there "quoted" back\\slash AB\n', "%d apple", "Untranslated"}
    assert by_id["Hello, world"].msgstr == ("Hallo, Welt",)
    assert by_id["Quit"].context == "button"
    assert by_id["Old guess"].fuzzy and not by_id["Quit"].fuzzy
    assert not by_id["%d apple"].fuzzy and not by_id["Hello, world"].fuzzy
    assert by_id['Tab\there "quoted" back\\slash AB\n'].msgstr == (
        'Tab\there "zitiert" Rück\\strich AB\n',)
    assert by_id["%d apple"].msgstr == ("%d Apfel", "%d Äpfel")
    assert by_id["%d apple"].plural == "%d apples"


def test_po_latin1_and_malformed_line():
    text = 'msgid ""\nmsgstr "Content-Type: text/plain; charset=ISO-8859-1\\n"\n\n' \
           'msgid "Size"\nmsgstr "Größe"\n'
    assert P.read_po(text.encode("latin-1"), "l1.po")[0].msgstr == ("Größe",)
    with pytest.raises(ValueError, match=r"bad.po:2: not a .po line"):
        P.read_po(b'msgid "a"\nmsgstr oops\n', "bad.po")
    with pytest.raises(ValueError, match=r"bad.po:1: string without a keyword"):
        P.read_po(b'"dangling"\n', "bad.po")


@pytest.mark.skipif(shutil.which("msgunfmt") is None, reason="needs GNU msgunfmt")
def test_mo_reader_agrees_with_msgunfmt_on_real_catalogues():
    """GNU's own decompiler as the oracle, on real files with system-dependent strings."""
    files = sorted(glob.glob("/usr/share/locale/de/LC_MESSAGES/*.mo"))[:6]
    files += sorted(glob.glob("/usr/share/locale/*/LC_MESSAGES/xz.mo"))[:2]
    if not files:
        pytest.skip("no catalogues on this machine")
    for f in files:
        with open(f, "rb") as fh:
            mine = P.read_mo(fh.read(), f)
        po = subprocess.run(["msgunfmt", f], capture_output=True, check=True).stdout
        theirs = P.read_po(po, f)
        key = lambda m: (m.context, m.msgid, m.plural, m.msgstr)  # noqa: E731
        assert sorted(map(key, mine)) == sorted(map(key, theirs)), f
