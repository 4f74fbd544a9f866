"""splitnet train --task translate and splitnet translate: a copy task learned from the command
line to high BLEU, bit-exact resume, kill -9, the corpus fingerprint, bad pairs and options."""

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from splitnet import checkpoint as ck
from splitnet.cli import main

pytest.importorskip("sacrebleu")

WORDS = ["ab", "cd", "ef", "gh", "ij", "kl", "mn", "op"]
TINY = ["--task", "translate", "--d-model", "32", "--n-heads", "2", "--n-encoder-layers", "1",
        "--n-decoder-layers", "1", "--context", "24", "--batch-size", "16", "--warmup", "5",
        "--threads", "1", "--no-progress", "--no-plot", "--bleu-sentences", "8"]


def _sentence(rng):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 6)))


@pytest.fixture(scope="module")
def copy_tsv(tmp_path_factory):
    """4,000 pairs 'ab cd ef' -> 'ab cd ef' (split by hash into train / valid / test)."""
    rng = random.Random(0)
    p = tmp_path_factory.mktemp("pairs") / "copy.tsv"
    p.write_text("".join(f"{s}\t{s}\n" for s in (_sentence(rng) for _ in range(4000))))
    return p


def _train(out, pairs, *extra):
    return main(["train", "--pairs", str(pairs), "--out", str(out), *TINY, *extra])


def _metrics(out):
    return [json.loads(x) for x in (Path(out) / ck.METRICS).read_text().splitlines()]


@pytest.mark.heavy
def test_copy_task_to_high_bleu_from_the_command_line(copy_tsv, tmp_path, capsys):
    out = tmp_path / "copy"
    rc = main(["train", "--pairs", str(copy_tsv), "--out", str(out), "--task", "translate",
               "--d-model", "64", "--n-heads", "4", "--n-encoder-layers", "1",
               "--n-decoder-layers", "1", "--context", "24", "--batch-size", "32", "--steps",
               "300", "--lr", "3e-3", "--warmup", "30", "--eval-every", "100", "--threads",
               "1", "--no-progress", "--no-plot", "--bleu-sentences", "100"])
    assert rc == 0
    final = _metrics(out)[-1]
    assert final["test_bleu"] > 80 and final["test_chrf"] > 80, final
    # splitnet translate: a file with references, then stdin (streamed), one line per line
    src = tmp_path / "src.txt"
    lines = ["ab cd ef gh", "", "op mn kl ij ab"]
    src.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["translate", "--checkpoint", str(out), "--input", str(src), "--reference",
                 str(src), "--beam", "4", "--threads", "1"]) == 0
    got = capsys.readouterr()
    assert got.out.splitlines()[1] == "" and len(got.out.splitlines()) == 3
    assert "BLEU" in got.err and "chrF" in got.err
    proc = subprocess.run([sys.executable, "-m", "splitnet", "translate", "--checkpoint",
                           str(out), "--beam", "1"], input="ab cd ef\nkl mn op ab\n", text=True,
                          capture_output=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0 and proc.stdout.splitlines() == ["ab cd ef", "kl mn op ab"]


def test_resume_is_bit_exact(copy_tsv, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert _train(a, copy_tsv, "--steps", "12", "--eval-every", "4", "--ckpt-every", "4") == 0
    assert _train(b, copy_tsv, "--steps", "12", "--eval-every", "4", "--ckpt-every", "4",
                  "--stop-at", "6") == 0
    assert ck.load(b)["step"] == 6
    assert main(["train", "--resume", "--out", str(b), "--no-progress", "--threads", "1"]) == 0
    sa, sb = ck.load(a), ck.load(b)
    assert sa["model_kind"] == "seq2seq" and sa["tokenizer"]["kind"] == "byte"
    assert all(torch.equal(sa["model"][k], sb["model"][k]) for k in sa["model"])
    keys = ("step", "loss", "lr", "grad_norm", "val_loss", "test_bleu", "test_chrf")
    same = [[{k: r[k] for k in keys if k in r} for r in _metrics(x)] for x in (a, b)]
    assert same[0] == same[1] and any("val_loss" in r for r in same[0])


@pytest.mark.heavy
def test_kill9_then_resume(copy_tsv, tmp_path):
    out = tmp_path / "k"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "splitnet", "train", "--pairs",
                             str(copy_tsv), "--out", str(out), *TINY, "--steps", "100000",
                             "--ckpt-every", "4", "--eval-every", "100000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        t0 = time.time()
        while not ((out / ck.CKPT).exists() and len(_lines(out)) >= 10):
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.time() - t0 < 120, "trainer too slow"
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
    step = ck.load(out)["step"]
    assert step >= 4 and step % 4 == 0
    assert main(["train", "--resume", "--out", str(out), "--steps", str(step + 2),
                 "--no-progress", "--threads", "1", "--bleu-sentences", "0"]) == 0
    assert [r["step"] for r in _metrics(out)] == list(range(1, step + 3))


def _lines(out):
    p = out / ck.METRICS
    return p.read_text().splitlines() if p.exists() else []


def test_changed_pairs_are_refused_on_resume(copy_tsv, tmp_path, capsys):
    pairs = tmp_path / "p.tsv"
    pairs.write_text(copy_tsv.read_text())
    out = tmp_path / "f"
    assert _train(out, pairs, "--steps", "4", "--eval-every", "4") == 0
    pairs.write_text(copy_tsv.read_text() + "new line\tneue Zeile\n")
    capsys.readouterr()
    assert main(["train", "--resume", "--out", str(out), "--steps", "6", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "changed since the checkpoint" in err[0]


@pytest.mark.parametrize("content,why", [
    (b"", "empty"), (b"no tab on this line\nnor here\n", "tab"),
    (bytes(range(256)) * 8, "binary|UTF-8|text"), (b"only a source\t\n\tonly a target\n", "")])
def test_bad_pairs_one_line_exit_2_nothing_written(tmp_path, capsys, content, why):
    pairs = tmp_path / "bad.tsv"
    pairs.write_bytes(content)
    out = tmp_path / "o"
    capsys.readouterr()
    assert _train(out, pairs, "--steps", "2") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("splitnet train: error:"), err
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("argv,msg", [
    (["--task", "translate", "--scheme", "strang"], "language-model option"),
    (["--decoder-scheme", "strang", "--n-layers", "2"], "--decoder-scheme: encoder–decoder "
                                                         "option (read by --task translate"),
    (["--task", "lm", "--pairs", "x.tsv"], "--pairs: encoder–decoder option"),
    (["--task", "translate", "--bpe", "7"], "bpe must be"),
    (["--task", "translate", "--text", "x.txt"], "--text: language-model option")])
def test_conflicting_options_are_one_line(tmp_path, capsys, argv, msg):
    capsys.readouterr()
    assert main(["train", "--out", str(tmp_path / "o"), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0], err


def test_translate_refuses_a_language_model_and_sample_a_translation_model(copy_tsv, tmp_path,
                                                                           capsys):
    lm = tmp_path / "lm"
    text = tmp_path / "t.txt"
    text.write_text("def f(x):\n    return x\n" * 200)
    assert main(["train", "--text", str(text), "--out", str(lm), "--steps", "2", "--d-model",
                 "32", "--n-heads", "2", "--n-layers", "1", "--context", "16", "--batch-size",
                 "4", "--no-progress", "--no-plot", "--threads", "1"]) == 0
    mt = tmp_path / "mt"
    assert _train(mt, copy_tsv, "--steps", "2", "--bleu-sentences", "0") == 0
    capsys.readouterr()
    assert main(["translate", "--checkpoint", str(lm), "--input", str(text)]) == 2
    assert "not a translation model" in capsys.readouterr().err
    assert main(["sample", "--checkpoint", str(mt)]) == 2
    assert "translation model" in capsys.readouterr().err
    ref = tmp_path / "ref.txt"
    ref.write_text("one line\n")
    assert main(["translate", "--checkpoint", str(mt), "--input", str(text), "--reference",
                 str(ref)]) == 2
    got = capsys.readouterr()
    assert "one reference per input line" in got.err and got.out == ""


def test_refine_and_trajectories_take_a_translation_checkpoint(copy_tsv, tmp_path, capsys):
    out = tmp_path / "m"
    assert _train(out, copy_tsv, "--steps", "6", "--bleu-sentences", "0") == 0
    capsys.readouterr()
    assert main(["refine", "--checkpoint", str(out), "--substeps", "1,2", "--methods", "euler",
                 "--schemes", "lie-trotter,strang", "--windows", "16", "--no-progress",
                 "--out", str(tmp_path / "r.png"), "--json", str(tmp_path / "r.json"),
                 "--threads", "1"]) == 0
    got = capsys.readouterr().out
    assert "lie-trotter / lie-trotter" in got and "nats/token" in got
    res = json.loads((tmp_path / "r.json").read_text())
    own = [p for p in res["points"] if p["scheme"] == "lie-trotter" and p["substeps"] == 1]
    assert own and own[0]["loss"] == pytest.approx(res["own"]["loss"], rel=1e-6)
    assert main(["trajectories", "--checkpoint", str(out), "--prompt", "ab cd ef", "--target",
                 "ab cd ef", "--out", str(tmp_path / "t.png"), "--threads", "1"]) == 0
    got = capsys.readouterr().out
    assert "decoder scheme lie-trotter" in got and (tmp_path / "t.png").stat().st_size > 0
    assert main(["trajectories", "--checkpoint", str(out), "--compare", "strang", "--out",
                 str(tmp_path / "u.png")]) == 2
    assert "drawn as trained" in capsys.readouterr().err


def test_bpe_is_trained_on_the_training_pairs_and_kept_in_the_checkpoint(copy_tsv, tmp_path,
                                                                       capsys):
    pytest.importorskip("tokenizers")
    out = tmp_path / "bpe"
    assert _train(out, copy_tsv, "--steps", "2", "--bpe", "300", "--bleu-sentences", "0") == 0
    state = ck.load(out)
    assert state["tokenizer"]["kind"] == "bpe" and state["model_config"]["src_vocab"] <= 300
    src = tmp_path / "s.txt"
    src.write_text("ab cd ef\n")
    capsys.readouterr()
    assert main(["translate", "--checkpoint", str(out), "--input", str(src), "--max-new-tokens",
                 "4", "--threads", "1"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1
    assert main(["train", "--resume", "--out", str(out), "--steps", "3", "--no-progress",
                 "--threads", "1", "--bleu-sentences", "0"]) == 0    # the same BPE, restored


@pytest.mark.heavy
@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed not built")
def test_two_gloo_processes_match_one(copy_tsv, tmp_path):
    """The loss is the mean over every target token of the global batch (not a mean of
    per-rank means), so two processes reproduce one, step by step."""
    opts = [*TINY, "--steps", "3", "--eval-every", "3", "--grad-accum", "2", "--device", "cpu",
            "--bleu-sentences", "0", "--batch-size", "8"]
    one, two = tmp_path / "one", tmp_path / "two"
    assert main(["train", "--pairs", str(copy_tsv), "--out", str(one), *opts]) == 0
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                          "--nproc_per_node=2", "-m", "splitnet", "train", "--pairs",
                          str(copy_tsv), "--out", str(two), *opts], capture_output=True,
                         text=True, env=env, timeout=240, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    a, b = _metrics(one), _metrics(two)
    assert [r["step"] for r in a] == [r["step"] for r in b] == [1, 2, 3]
    for ra, rb in zip(a, b):
        assert abs(ra["loss"] - rb["loss"]) < 1e-5 and abs(ra["grad_norm"] - rb["grad_norm"]) \
            < 1e-4, (ra, rb)
    assert abs(a[-1]["val_loss"] - b[-1]["val_loss"]) < 1e-5


def test_a_signal_during_the_final_beam_search_stops_cleanly_and_resume_scores(
        copy_tsv, tmp_path, monkeypatch, capsys):
    """A job scheduler's SIGTERM while the test pairs are translated: the exit status says
    so (128 + 15, no traceback), the last step's checkpoint is whole, and --resume scores."""
    import signal

    from splitnet.translate import translation

    real = translation.test_scores

    def killed(*a, **kw):
        os.kill(os.getpid(), signal.SIGTERM)     # raises at once: the section is armed
        time.sleep(5)
        raise AssertionError("the signal did not stop the beam search")

    out = tmp_path / "run"
    monkeypatch.setattr(translation, "test_scores", killed)
    assert _train(out, copy_tsv, "--steps", "6", "--eval-every", "3") == 128 + signal.SIGTERM
    assert "checkpoint saved at step 6" in capsys.readouterr().err
    assert ck.load(out)["step"] == 6
    assert not any("test_bleu" in r for r in _metrics(out))
    monkeypatch.setattr(translation, "test_scores", real)
    assert main(["train", "--resume", "--out", str(out), "--no-progress", "--threads", "1"]) == 0
    assert next(r for r in _metrics(out) if "test_bleu" in r)["step"] == 6
