"""--task mlm --bpe N: a byte-level BPE trained on the training text, its vocabulary and the mask
token after it, bit-exact resume, the tokenizer in the checkpoint, and every tool that reads the
text through it (evaluate's probe, refine's windows)."""

import random

import pytest
import torch

from splitnet.cli import main
from splitnet.mlm import masking, probe
from splitnet.mlm.tokens import ByteText, TokenCorpus, text_tokens
from splitnet.runs import checkpoint as ck
from splitnet.training.config import TrainConfig

pytest.importorskip("tokenizers")

TINY = ["--task", "mlm", "--bpe", "300", "--d-model", "16", "--n-heads", "2", "--n-layers", "1",
        "--context", "24", "--batch-size", "4", "--eval-every", "2", "--eval-windows", "4",
        "--threads", "1", "--no-progress", "--no-plot"]
WORDS = [f"w{i:03d}{'x' * (i % 5)}" for i in range(150)]


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    rng = random.Random(0)
    p = tmp_path_factory.mktemp("text") / "words.txt"
    p.write_text("".join(" ".join(rng.choice(WORDS) for _ in range(12)) + "\n"
                         for _ in range(2000)))
    return p


def _train(out, text, *extra):
    return main(["train", "--text", str(text), "--out", str(out), *TINY, *extra])


def test_resume_is_bit_exact_and_the_checkpoint_holds_the_tokenizer(text, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert _train(a, text, "--steps", "4") == 0
    assert _train(b, text, "--steps", "4", "--stop-at", "2") == 0
    assert main(["train", "--resume", "--out", str(b), "--no-progress", "--threads", "1"]) == 0
    sa, sb = ck.load(a), ck.load(b)
    assert all(torch.equal(sa["model"][k], sb["model"][k]) for k in sa["model"])
    tok = text_tokens(sa)
    assert tok.kind == "bpe" and 260 < tok.vocab_size <= 300
    assert sa["model_config"]["vocab_size"] == tok.vocab_size + 1      # and the mask token
    assert sa["corpus"]["bytes"] == text.stat().st_size                 # the text's fingerprint


def test_windows_are_tokens_and_the_mask_follows_the_vocabulary(text):
    from splitnet.training.setup import plan

    cfg, corpus = plan(TrainConfig(task="mlm", bpe=300, text=str(text), context=24,
                                   batch_size=8, device="cpu"))
    assert isinstance(corpus, TokenCorpus) and corpus.train.max() < corpus.mask_id
    assert len(corpus.train) < 0.6 * text.stat().st_size    # merges (bytes: 0.95 of it)
    x, y = masking.train_batch(corpus, 0, 8, 24, 0)
    chosen = y != masking.IGNORE
    assert x.max() <= corpus.mask_id == cfg.model.vocab_size - 1
    assert (x[chosen] == corpus.mask_id).any() and not (x[~chosen] == corpus.mask_id).any()
    decoded = corpus.tokenizer.decode(corpus.train[:40].tolist())
    assert decoded == text.read_text()[:len(decoded)]


def test_tools_read_the_text_through_the_tokenizer(text, tmp_path, capsys):
    from splitnet.analyses.sources import checkpoint_source

    out = tmp_path / "run"
    assert _train(out, text, "--steps", "2") == 0
    state = ck.load(out)
    tok = text_tokens(state)
    ids, lengths = probe.encode(["w001x w002xx", ""], 24, tok)
    assert ids[0, :lengths[0]].tolist() == tok.encode("w001x w002xx")
    assert ids[1, 0] == tok.pad_id and lengths.tolist()[1] == 1
    assert probe.encode(["ab"], 8)[0].tolist() == [[97, 98]]             # bytes by default
    assert isinstance(text_tokens({}), ByteText)
    _, _, info = checkpoint_source(out, windows=4)
    assert "tokens (BPE of" in info["corpus"]
    capsys.readouterr()


def test_bad_bpe_options_are_one_line(text, tmp_path, capsys):
    for extra, says in ((["--bpe", "100"], "260 .. 2**20"),
                        (["--task", "lm"], "--bpe")):
        args = ["train", "--text", str(text), "--out", str(tmp_path / "x"), *TINY, *extra]
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and says in err
