"""Issue 28, the hostile pass after its fixes: what it found, each as a test.

- A source whose every entry was dropped said ``all 1 entries dropped: 1 fuzzy, 1 untranslated
  or empty``: the total left out the entries dropped while the catalogues were read (fuzzy,
  unmatched), so the reasons summed to more than "all". The total now counts every entry read.
"""

from __future__ import annotations

import re

import pytest

from splitnet.translate import pairs as P


def test_every_entry_dropped_counts_every_entry(tmp_path):
    import hostile

    src = hostile.pair_sources(tmp_path)["dropped.po"]
    with pytest.raises(ValueError) as info:
        P.load_pairs(src)
    msg = str(info.value)
    assert msg == (f"catalogue {src}: no sentence pairs: all 2 entries dropped: 1 fuzzy, 1 "
                   f"untranslated or empty")
    total, reasons = re.search(r"all (\d+) entries dropped: (.*)$", msg).groups()
    assert int(total) == sum(int(n) for n in re.findall(r"(\d+) [a-z]", reasons))


def test_a_folder_of_dropped_catalogues_sums_its_reasons(tmp_path):
    """Two catalogues of one language, one all fuzzy, one all untranslated: 4 entries, 4
    reasons."""
    import hostile

    d = tmp_path / "cats"
    d.mkdir()
    (d / "apt.po").write_text(hostile.po("de", [("One thing", "Eins"), ("Two things", "Zwei")],
                                         fuzzy=True))
    (d / "sed.po").write_text(hostile.po("de", [("Three", ""), ("Four", "")]))
    with pytest.raises(ValueError, match=r"no sentence pairs: all 4 entries dropped: 2 fuzzy, "
                                         r"2 untranslated or empty$"):
        P.load_pairs(d)
