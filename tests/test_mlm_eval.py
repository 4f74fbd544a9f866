"""The offline evaluation suite of masked language models (splitnet.mlm.wordnet, .probe,
.suite; splitnet evaluate): WordNet's format, splits disjoint by synset and lemma, the
baselines, the command. A made-up fixture in WordNet's format (tests/data/wordnet) stands in
for the package; the real files are checked when installed."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from splitnet.mlm import probe as P
from splitnet.mlm import suite as S
from splitnet.mlm import wordnet as W

FIXTURE = Path(__file__).parent / "data" / "wordnet"
REAL = Path(W.DEFAULT_ROOT)
has_real = pytest.mark.skipif(not (REAL / "data.noun").is_file(),
                              reason=f"WordNet not installed ({W.INSTALL})")


def test_a_data_line_is_parsed():
    s = W.parse_line('00001740 29 v 04 breathe 0 take_a_breath 0 respire 0 suspire 3 021 * '
                     '00005041 v 0000 01 + 02 00 | draw air into, and expel out of, the lungs; '
                     '"I can breathe better"; "The patient is respiring"  \n', "verb")
    assert s == W.Synset("v00001740", 29, ("breathe", "take_a_breath", "respire", "suspire"),
                         "draw air into, and expel out of, the lungs",
                         ("I can breathe better", "The patient is respiring"))
    assert W.LEXNAMES[29] == "verb.body" and len(W.LEXNAMES) == 45
    assert W.parse_line("  1 This software and database is provided", "noun") is None
    with pytest.raises(ValueError, match="not a WordNet data line"):
        W.parse_line("00001740 99 v 01 x 0 000 | gloss", "verb")
    with pytest.raises(ValueError, match="not a WordNet data line"):
        W.parse_line("hello world", "noun")


def test_the_fixture_reads_with_a_hexadecimal_word_count():
    syn = W.read_synsets(FIXTURE)
    assert len(syn) == 56
    many = [s for s in syn if len(s.lemmas) == 11]
    assert len(many) == 1 and many[0].lemmas[-1] == "thing10"


def _disjoint(splits):
    ids = [{s.id for s in v} for v in splits.values()]
    lemmas = [{x for s in v for x in s.lemmas} for v in splits.values()]
    for i in range(3):
        for j in range(i + 1, 3):
            assert not ids[i] & ids[j] and not lemmas[i] & lemmas[j]


@pytest.mark.parametrize("seed", range(6))
def test_splits_are_disjoint_by_synset_and_lemma(seed):
    syn = W.read_synsets(FIXTURE)
    sp = W.split_synsets(syn, held_out=0.2, seed=seed)
    _disjoint(sp)
    assert sum(len(v) for v in sp.values()) == len(syn)
    joined = {s.id for s in sp["train"]}          # dog and cat share a synset: together
    assert ("n00000100" in joined) == ("n00000137" in joined)


@has_real
def test_the_real_wordnet_splits():
    syn = W.read_synsets()
    sp = W.split_synsets(syn)
    assert len(syn) == 117_659 == len({s.id for s in syn})      # ids unique across files
    _disjoint(sp)
    sizes = {k: len(v) for k, v in sp.items()}
    assert sizes["valid"] > 8000 and sizes["test"] > 8000          # the small groups' 10 %
    x, y = W.wn_lex(sp["test"])
    assert len(x) == len(y) and set(y) <= set(range(45)) and len(set(y)) > 30


def test_the_baselines_on_the_fixture():
    """The fixture's definitions name their class ('an animal called ...'): words separate
    them, so the bag of words is perfect on the test synsets; majority is the commonest
    training class's share of the test."""
    sp = W.split_synsets(W.read_synsets(FIXTURE), seed=4)
    (tx, ty), (ex, ey), k = S.task_data("wn-lex", sp)
    b = P.baselines(tx, ty, ex, ey, k)
    assert b["bag_of_words"] == 1.0
    common = max(set(ty), key=ty.count)
    assert b["majority"] == pytest.approx(ey.count(common) / len(ey))


def test_wic_pairs_are_balanced_and_share_a_lemma():
    """Positive pairs illustrate one synset, negative pairs two synsets of the same lemma, as
    many of each per lemma; on the fixture the words tell them apart (a bag of words is
    perfect), which a real WordNet does not allow."""
    syn = W.read_synsets(FIXTURE)
    by_id = {s.id: s for s in syn}
    sp = W.split_synsets(syn, seed=4)
    pairs, labels = W.wic_wn(sp["train"])
    assert len(pairs) == 12 and sum(labels) == 6
    def synsets_of(text):
        return {i for i, s in by_id.items() if text in s.examples}
    for (a, b), y in zip(pairs, labels):
        shared = {x for s in synsets_of(a) for x in by_id[s].lemmas} & \
                 {x for s in synsets_of(b) for x in by_id[s].lemmas}
        assert shared and (y == 1) == bool(synsets_of(a) & synsets_of(b))
    (tx, ty), (ex, ey), k = S.task_data("wic-wn", sp)
    assert k == 2 and P.baselines(tx, ty, ex, ey, k) == {"majority": 0.5, "bag_of_words": 1.0}


def test_the_lexicon_and_wn_polarity(tmp_path):
    from splitnet.mlm import lexicon as L

    lex = L.read_tsv(FIXTURE / "lexicon.tsv")
    assert len(lex) == 9 and lex["happy"] == 1 and lex["bitter"] == 0
    bad = tmp_path / "bad.tsv"
    bad.write_text("happy\tglad\n")
    with pytest.raises(ValueError, match=r"line 1: expected 'word<TAB>positive\|negative'"):
        L.read_tsv(bad)
    syn = W.read_synsets(FIXTURE)
    x, y = W.wn_polarity(syn, lex)
    assert len(x) == 9 and sum(y) == 5 and all(t.startswith("being ") for t in x)
    with pytest.raises(ValueError, match="names the head lemma of no adjective"):
        S.task_data("wn-polarity", {"train": syn, "test": syn}, {"zzz": 1})
    with pytest.raises(FileNotFoundError, match="r-cran-tidytext"):
        L.read_tidytext(tmp_path / "Rdata")


def test_encode_pads_with_spaces_and_features_ignore_the_padding():
    torch.manual_seed(0)
    from splitnet.nets.models import SplitTransformer
    m = SplitTransformer(257, 16, 2, 1, max_len=32, causal=False)
    ids, n = P.encode(["ab", "abcd", ""], 32)
    assert ids.tolist()[0] == [97, 98, 32, 32] and n.tolist() == [2, 4, 1]
    alone = P.features(m, ["ab"])
    mixed = P.features(m, ["abcdefgh", "ab"])         # padded beside a longer text
    with torch.no_grad():                             # the mean over the text's own 2 bytes
        ids = torch.tensor([[97, 98, 32, 32, 32, 32, 32, 32]])
        h = m.norm(m.run_layers(m.embed(ids)))[0, :2].mean(0)
    torch.testing.assert_close(mixed[1], h, rtol=1e-5, atol=1e-6)
    assert torch.equal(P.features(m, ["ab", "abcdefgh"])[0], mixed[1])
    assert not torch.allclose(alone[0], mixed[1])    # bidirectional: the pads are seen


@pytest.mark.heavy
def test_fine_tuning_trains_a_copy_and_is_deterministic():
    """The encoder passed in is unchanged; the same seed gives the same accuracy; on the
    fixture's pairs (their words tell them apart) a copy learns them beyond chance."""
    from splitnet.nets.models import SplitTransformer

    torch.manual_seed(0)
    m = SplitTransformer(257, 16, 2, 1, max_len=64, causal=False, init="xavier")
    before = {k: v.clone() for k, v in m.state_dict().items()}
    sp = W.split_synsets(W.read_synsets(FIXTURE), seed=4)
    (tx, ty), (ex, ey), k = S.task_data("wn-lex", sp)
    a = P.fine_tune_accuracy(m, tx, ty, ex, ey, k, steps=30, lr=3e-3)
    assert a == P.fine_tune_accuracy(m, tx, ty, ex, ey, k, steps=30, lr=3e-3)
    assert all(torch.equal(v, m.state_dict()[n]) for n, v in before.items())
    train_acc = P.fine_tune_accuracy(m, tx, ty, tx, ty, k, steps=150, lr=3e-3)
    assert train_acc > 0.6                    # 5 classes on the training synsets


def _train(out):
    r = subprocess.run([sys.executable, "-m", "splitnet", "train", "--task", "mlm", "--d-model",
                        "16", "--n-heads", "2", "--n-layers", "1", "--context", "32",
                        "--batch-size", "4", "--steps", "3", "--threads", "1", "--no-plot",
                        "--no-progress", "--out", str(out)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr


def _evaluate(*args):
    return subprocess.run([sys.executable, "-m", "splitnet", "evaluate", "--threads", "1",
                           *map(str, args)], capture_output=True, text=True, timeout=300)


@pytest.mark.heavy
def test_the_command_on_the_fixture(tmp_path):
    _train(tmp_path / "mlm")
    r = _evaluate("--checkpoint", tmp_path / "mlm", "--wordnet", FIXTURE, "--seed", "4",
                  "--json", tmp_path / "e.json", "--fine-tune", "5")
    assert r.returncode == 0, r.stderr
    assert "| wn-lex | 45 |" in r.stdout
    rec = json.loads((tmp_path / "e.json").read_text())["records"][0]
    assert rec["test"] == 7 and rec["bag_of_words"] == 1.0 and 0.0 <= rec["probe"] <= 1.0
    wic = json.loads((tmp_path / "e.json").read_text())["records"][1]
    assert wic["task"] == "wic-wn" and wic["test"] == 4 and "| wic-wn | 2 |" in r.stdout
    assert "encoder (fine-tuned)" in r.stdout and wic["fine_tune_steps"] == 5
    # wn-polarity with the fixture's lexicon; without a lexicon it is left out with a note
    r = _evaluate("--checkpoint", tmp_path / "mlm", "--wordnet", FIXTURE, "--seed", "4",
                  "--lexicon", FIXTURE / "lexicon.tsv")
    assert r.returncode == 0, r.stderr
    assert "| wn-polarity | 2 |" in r.stdout
    # a lexicon that covers no adjective leaves wn-polarity out with a note, the others kept
    # (issue 49 D8: it was blamed on a truncated WordNet and every task thrown away)
    small = tmp_path / "small.tsv"
    small.write_text("zzz\tpositive\n")
    r = _evaluate("--checkpoint", tmp_path / "mlm", "--wordnet", FIXTURE, "--seed", "4",
                  "--lexicon", small)
    assert r.returncode == 0, r.stderr
    assert "wn-polarity left out: wn-polarity: the lexicon names the head lemma of no " \
        "adjective" in r.stderr and "| wn-lex | 45 |" in r.stdout and "truncated" not in r.stderr
    # one line and exit 2: no WordNet, not a masked LM, a split with no test synsets
    r = _evaluate("--checkpoint", tmp_path / "mlm", "--wordnet", tmp_path / "none")
    assert r.returncode == 2 and W.INSTALL in r.stderr and r.stderr.count("\n") == 1
    r = _evaluate("--checkpoint", tmp_path / "mlm", "--wordnet", FIXTURE, "--seed", "2")
    assert r.returncode == 2 and "0 test" in r.stderr and r.stderr.count("\n") == 1


@pytest.mark.heavy
def test_a_causal_language_model_is_refused(tmp_path):
    r = subprocess.run([sys.executable, "-m", "splitnet", "train", "--d-model", "16",
                        "--n-heads", "2", "--n-layers", "1", "--context", "16", "--batch-size",
                        "4", "--steps", "1", "--threads", "1", "--no-plot", "--no-progress",
                        "--out", str(tmp_path / "lm")], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    r = _evaluate("--checkpoint", tmp_path / "lm", "--wordnet", FIXTURE)
    assert r.returncode == 2 and "not a masked language model" in r.stderr
