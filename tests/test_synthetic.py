"""The synthetic alignment tasks (splitnet.translate.synthetic): deterministic, hundreds of
distinct words, and a target that needs the source."""

from __future__ import annotations

import collections

import pytest

from splitnet.translate import synthetic
from splitnet.translate.pairs import load_pairs


def test_same_seed_same_pairs_other_seed_other_pairs():
    a, b = synthetic.alignment_pairs("copy"), synthetic.alignment_pairs("copy")
    assert a == b and len(a) == synthetic.N_PAIRS == len(set(a))
    assert synthetic.alignment_pairs("copy", seed=1) != a


def test_hundreds_of_words_each_seen_often():
    pairs = synthetic.alignment_pairs("copy")
    words = collections.Counter(w for s, _ in pairs for w in s.split())
    assert len(words) == synthetic.N_WORDS
    assert min(words.values()) >= 20        # every word is learnable; none is a rare outlier
    # a target is not predictable from the target side: the most common word is < 1% of words
    assert max(words.values()) / sum(words.values()) < 0.01


def test_reverse_is_the_words_backwards_and_copy_the_same_line():
    for (cs, ct), (rs, rt) in zip(synthetic.alignment_pairs("copy")[:50],
                                  synthetic.alignment_pairs("reverse")[:50]):
        assert cs == ct and rs == cs and rt.split() == cs.split()[::-1]


def test_load_pairs_serves_both_tasks_split_by_line():
    c = load_pairs("reverse")
    assert (len(c.train), len(c.valid), len(c.test)) == (3022, 386, 392)
    assert not {s for s, _ in c.train} & {s for s, _ in c.test}
    assert all(t.split() == s.split()[::-1] for s, t in c.valid)


def test_the_readme_describes_the_copy_task_as_built():
    """README's copy task: its line count, words per line, vocabulary and test lines are the
    module's (a changed constant or split would leave the README's numbers stale)."""
    from pathlib import Path

    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    lo, hi = synthetic.WORDS_PER_LINE
    assert (f"(`--pairs copy`: {synthetic.N_PAIRS:,} lines of {lo}–{hi} words drawn from "
            f"{synthetic.N_WORDS} pseudo-words;") in readme
    lengths = {len(s.split()) for s, _ in synthetic.alignment_pairs("copy")}
    assert lengths == set(range(lo, hi + 1))
    assert f"on the {len(load_pairs('copy').test)} test lines" in readme


@pytest.mark.parametrize("kw, msg", [({"task": "sort"}, "unknown synthetic task 'sort'"),
                                     ({"n_pairs": 0}, "n_pairs must be an int >= 1"),
                                     ({"n_words": 3}, "n_words must be an int >= 8"),
                                     ({"n_words": 8, "n_pairs": 10**7}, "do not make")])
def test_bad_arguments_are_one_clear_error(kw, msg):
    with pytest.raises(ValueError, match=msg):
        synthetic.alignment_pairs(**kw)
