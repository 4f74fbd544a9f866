"""Named corpora (--corpus, splitnet.mlm.corpora): one list of names, the held-out novel, the
WordNet glosses split by synset, one-line errors naming the package, and a --corpus run that
resumes and is scored by refine on the same windows."""

from pathlib import Path

import numpy as np
import pytest

from splitnet.analyses.sources import checkpoint_source
from splitnet.cli import main
from splitnet.configs import config as C
from splitnet.mlm import corpora
from splitnet.runs import checkpoint as ck

FIXTURE = Path(__file__).parent / "data" / "wordnet"
TINY = ["--d-model", "16", "--n-heads", "2", "--n-layers", "1", "--context", "32",
        "--batch-size", "4", "--threads", "1", "--no-progress", "--no-plot"]


def test_one_list_of_names():
    assert C.CORPORA == corpora.CORPORA


def _fake_austen(tmp_path, monkeypatch):
    base = tmp_path / "Rdata"
    Path(str(base) + ".rdx").write_bytes(b"")
    novels = {n: np.array([f"{n} line {i}" for i in range(3)]) for n in corpora.AUSTEN_NOVELS}
    monkeypatch.setattr(corpora, "read_variable", lambda b, name, recipe: novels[name])
    return base


def test_austen_holds_out_persuasion(tmp_path, monkeypatch):
    c = corpora.load_austen(_fake_austen(tmp_path, monkeypatch))
    val, train = bytes(c.val).decode(), bytes(c.train).decode()
    assert val == "persuasion line 0\npersuasion line 1\npersuasion line 2\n"
    assert "persuasion" not in train and train.count("\n") == 15 and c.files == (5, 1)
    assert c.fingerprint() == corpora.load_austen(tmp_path / "Rdata").fingerprint()


def test_the_real_novels_when_installed():
    if not Path(str(corpora.AUSTEN) + ".rdx").is_file():
        pytest.skip("r-cran-janeaustenr is not installed")
    pytest.importorskip("rdata")
    c = corpora.load_austen()
    assert bytes(c.val[:10]) == b"Persuasion" and len(c.train) > 3_000_000


def test_a_missing_package_is_one_line_naming_the_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(corpora, "AUSTEN", tmp_path / "none" / "Rdata")
    assert main(["train", "--task", "mlm", "--corpus", "austen", "--out",
                 str(tmp_path / "r"), *TINY]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "apt-get install r-cran-janeaustenr" in err
    monkeypatch.setenv("WNSEARCHDIR", str(tmp_path / "none"))
    assert main(["train", "--task", "mlm", "--corpus", "wordnet", "--out",
                 str(tmp_path / "r"), *TINY]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "apt-get install wordnet-base" in err
    assert not (tmp_path / "r" / ck.CKPT).exists()


def test_wordnet_glosses_split_by_synset(monkeypatch):
    monkeypatch.setenv("WNSEARCHDIR", str(FIXTURE))
    c = corpora.load_wordnet(0.2)
    train = bytes(c.train).decode().splitlines()
    val = bytes(c.val).decode().splitlines()
    assert len(train) + len(val) == 56 and not set(train) & set(val) and val
    assert any('"' in line for line in train)                # the examples are kept, quoted


def test_text_and_corpus_contradict_and_translation_refuses_it(tmp_path, capsys):
    for extra in (["--text", str(FIXTURE / "data.noun")], ["--task", "translate"]):
        assert main(["train", "--corpus", "wordnet", *extra, "--out", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--corpus" in err


def test_a_corpus_run_resumes_and_refine_reads_the_same_windows(tmp_path, monkeypatch):
    monkeypatch.setenv("WNSEARCHDIR", str(FIXTURE))
    out = tmp_path / "run"
    base = ["train", "--task", "mlm", "--corpus", "wordnet", "--val-fraction", "0.2",
            "--out", str(out), "--eval-every", "2", "--eval-windows", "4", *TINY]
    assert main([*base, "--steps", "4", "--stop-at", "2"]) == 0
    assert main(["train", "--resume", "--out", str(out), "--no-progress", "--threads", "1"]) == 0
    state = ck.load(out)
    assert state["step"] == 4 and state["train_config"]["corpus"] == "wordnet"
    assert state["corpus"] == corpora.load_wordnet(0.2).fingerprint()
    _, _, info = checkpoint_source(out, windows=4)
    assert info["corpus"].startswith("WordNet glosses (56 synsets)")
