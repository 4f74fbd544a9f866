"""Issue 28, input files: the language of a folder of catalogues (the ``Language:`` header far
into a ``.mo`` file, the path, a mixed folder, a contradicted --tgt-lang), one rule for input
files (pipes, /dev/stdin, /dev/null, folders, FIFOs, /dev/zero), a single catalogue as --pairs,
the reason when no pair is left, and a relative --pairs resumed or refined from elsewhere.
Each refusal: one line on stderr, exit 2, no traceback, nothing written."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from splitnet._io import input_kind, read_input
from splitnet.cli import main
from splitnet.configs.config import PAIR_NAMES
from splitnet.runs import checkpoint as ck
from splitnet.translate import catalogs as C
from splitnet.translate import pairs as P
from splitnet.translate import sources as PS

ROOT = str(Path(__file__).resolve().parents[1])
ENV = {**os.environ, "OMP_NUM_THREADS": "1",
       "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)}
TINY = ["--task", "translate", "--d-model", "16", "--n-heads", "2", "--n-encoder-layers", "1",
        "--n-decoder-layers", "1", "--context", "16", "--batch-size", "4", "--warmup", "1",
        "--threads", "1", "--no-progress", "--no-plot", "--bleu-sentences", "0"]
WORDS = ["ab", "cd", "ef", "gh", "ij", "kl"]


# ---------------------------------------------------------------------------------------------
# fixtures: catalogues written as GNU msgfmt does (originals, then translations: the header,
# the translation of the empty msgid, is the first translation, after every original string)


def write_mo(entries, language: str | None) -> bytes:
    """A revision-0 little-endian .mo of ``(msgid, msgstr)`` pairs with a header that names
    ``language`` (no Language: line when None)."""
    header = "Content-Type: text/plain; charset=UTF-8\n"
    if language is not None:
        header = f"Project-Id-Version: x\nLanguage: {language}\n" + header
    raw = sorted([(b"", header.encode()), *((k.encode(), v.encode()) for k, v in entries)])
    n = len(raw)
    pos, blob, desc = 28 + 16 * n, b"", {0: [], 1: []}
    for side in (0, 1):
        for r in raw:
            desc[side].append((len(r[side]), pos + len(blob)))
            blob += r[side] + b"\x00"
    head = struct.pack("<7I", 0x950412DE, 0, n, 28, 28 + 8 * n, 0, 0)
    return head + b"".join(struct.pack("<2I", *d) for d in desc[0] + desc[1]) + blob


def entries(lang: str, n: int = 120, tag: str = ""):
    return [(f"Message number {i} of the program {tag}, a sentence long enough to translate",
             f"{lang} Nachricht {i} {tag}")
            for i in range(n)]


def german_folder(root: Path, names=("apt", "bash", "sed", "tar", "grep", "xz")) -> Path:
    """German catalogues named like programs (``apt.mo`` is not Aptic), the Language: header
    past the first 8 KiB."""
    root.mkdir(parents=True, exist_ok=True)
    for name in names:
        (root / f"{name}.mo").write_bytes(write_mo(entries("de", tag=name), "de"))
    return root


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert "Traceback" not in err and len(lines) == 1, err
    return lines[0]


def _refused(capsys, argv, words: str, out: Path | None = None) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    line = _one_line(capsys.readouterr().err)
    assert words in line, line
    assert out is None or not out.exists() or not any(out.iterdir())
    return line


def _cli(*argv, stdin=None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "splitnet", *argv], input=stdin,
                          capture_output=True, env=ENV, timeout=300, check=False, cwd=cwd)


# ---------------------------------------------------------------------------------------------
# 1. the language of catalogues


def test_the_header_is_read_past_8_kib_and_the_program_name_is_no_language(tmp_path):
    data = write_mo(entries("de", tag="apt"), "de")
    assert data.index(b"Language: de") > 8192            # where the old search never looked
    cat = C.read_catalogue(data, "apt.mo", ".mo")
    assert cat.header["Language"] == "de" and len(cat.messages) == 120
    assert C.catalogue_language(tmp_path / "apt.mo", cat.header) == "de"
    assert C.catalogue_language(tmp_path / "apt.mo", {}) is None      # apt is a program
    assert C.catalogue_language(tmp_path / "pt_BR.po", {}) == "pt_BR"
    assert C.catalogue_language(tmp_path / "fr" / "LC_MESSAGES" / "apt.mo", {}) == "fr"
    assert C.catalogue_language(tmp_path / "fr" / "LC_MESSAGES" / "a.mo",
                                {"Language": "de-AT"}) == "de_AT"     # the header first


def test_a_german_folder_trains_as_en_to_de(tmp_path, capsys):
    root = german_folder(tmp_path / "cats")
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(["train", "--pairs", str(root), "--out", str(out), "--steps", "1", *TINY]) == 0
    assert capsys.readouterr().err.startswith(f"splitnet train: en->de catalogues under {root}")
    state = ck.load(out)
    assert (state["corpus"]["src_lang"], state["corpus"]["tgt_lang"]) == ("en", "de")


def test_a_target_language_the_files_contradict_is_refused(tmp_path, capsys):
    root = german_folder(tmp_path / "cats")
    out = tmp_path / "run"
    line = _refused(capsys, ["train", "--pairs", str(root), "--tgt-lang", "fr", "--out",
                             str(out), "--steps", "1", *TINY], "no catalogues for 'fr'", out)
    assert line.endswith("its catalogues are in de")


def test_a_mixed_folder_needs_the_target_named_and_then_reads_only_it(tmp_path, capsys):
    root = german_folder(tmp_path / "cats", names=("apt", "bash", "sed"))
    for name in ("tar", "grep", "xz"):
        (root / f"{name}.mo").write_bytes(write_mo(entries("fr", tag=name), "fr_FR"))
    out = tmp_path / "run"
    _refused(capsys, ["train", "--pairs", str(root), "--out", str(out), "--steps", "1", *TINY],
             "holds catalogues of several languages (de, fr_FR); name the target language", out)
    _refused(capsys, ["train", "--pairs", str(root), "--tgt-lang", "it", "--out", str(out),
                      "--steps", "1", *TINY], "its catalogues are in de, fr_FR", out)
    c = P.load_pairs(root, tgt_lang="fr")
    assert c.tgt_lang == "fr" and len(c) == 360
    assert all(t.startswith("fr ") for split in (c.train, c.valid, c.test) for _, t in split)


def test_variants_of_one_language_are_one_language(tmp_path):
    root = german_folder(tmp_path / "cats", names=("apt",))
    (root / "bash.mo").write_bytes(write_mo(entries("de", tag="bash"), "de_DE"))
    assert P.load_pairs(root).tgt_lang == "de"
    assert P.load_pairs(root, tgt_lang="de_DE").tgt_lang == "de_DE"


def test_the_path_says_the_language_when_the_header_does_not(tmp_path, capsys):
    for name in ("apt", "bash", "sed"):
        d = tmp_path / "tree" / "proj" / "de" / "LC_MESSAGES"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{name}.mo").write_bytes(write_mo(entries("de", tag=name), None))
    assert P.load_pairs(tmp_path / "tree").tgt_lang == "de"
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "apt.mo").write_bytes(write_mo(entries("de"), None))
    out = tmp_path / "run"
    _refused(capsys, ["train", "--pairs", str(flat), "--out", str(out), "--steps", "1", *TINY],
             "no catalogue says its language", out)
    assert P.load_pairs(flat, tgt_lang="de").tgt_lang == "de"      # named: the user's word


@pytest.mark.parametrize("suffix", [".po", ".mo"])
def test_one_catalogue_as_pairs_is_a_catalogue_not_a_tsv(tmp_path, suffix):
    f = tmp_path / f"apt{suffix}"
    if suffix == ".mo":
        f.write_bytes(write_mo(entries("de"), "de"))
    else:
        f.write_text('msgid ""\nmsgstr "Language: de\\n"\n\n' + "".join(
            f'msgid "{s}"\nmsgstr "{t}"\n\n' for s, t in entries("de")))
    c = P.load_pairs(f)
    assert (c.src_lang, c.tgt_lang, len(c)) == ("en", "de", 120)
    assert c.source == f"catalogue {f}" and c.stats["files"] == 1
    with pytest.raises(ValueError, match=f"no catalogues for 'fr' in {f}"):
        P.load_pairs(f, tgt_lang="fr")


def test_every_catalogue_unreadable_says_why(tmp_path, capsys):
    root = tmp_path / "cats"
    root.mkdir()
    (root / "de.mo").write_bytes(b"garbage")
    (root / "fr.mo").write_bytes(b"\xde\xad" * 30)
    out = tmp_path / "run"
    line = _refused(capsys, ["train", "--pairs", str(root), "--out", str(out), "--steps", "1",
                             *TINY], f"catalogues under {root}: no sentence pairs: 2 of 2 "
                                     f"files unreadable (first: de.mo: not a .mo file", out)
    assert "split is empty" not in line


def test_every_pair_dropped_says_why(tmp_path, capsys):
    po = tmp_path / "de.po"
    po.write_text('msgid ""\nmsgstr "Language: de\\n"\n\nmsgid "Hello"\nmsgstr ""\n\n'
                  'msgid "%s"\nmsgstr "%s"\n\n#, fuzzy\nmsgid "Bye"\nmsgstr "Tschüss"\n')
    out = tmp_path / "run"
    _refused(capsys, ["train", "--pairs", str(po), "--out", str(out), "--steps", "1", *TINY],
             f"catalogue {po}: no sentence pairs: all 3 entries dropped: 1 fuzzy, 1 "
             f"untranslated or empty, 1 without text", out)
    tsv = tmp_path / "n.tsv"
    tsv.write_text("1\t2\n3\t4\n")
    _refused(capsys, ["train", "--pairs", str(tsv), "--out", str(out), "--steps", "1", *TINY],
             f"TSV {tsv}: no sentence pairs: all 2 entries dropped: 2 without text", out)


# ---------------------------------------------------------------------------------------------
# 2. one rule for input files


def test_the_rule_itself(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    assert input_kind(tmp_path / "fifo", "--x", stream=True) == "stream"
    assert input_kind("/dev/null", "--x", stream=True) == "stream"
    assert input_kind(tmp_path, "--x", folder=True) == "folder"
    for path, kw, words in [(tmp_path / "fifo", {}, "is a FIFO, which can be read only once"),
                            ("/dev/zero", {"folder": True}, "is a character device"),
                            (tmp_path, {"stream": True}, "is a directory; give a file"),
                            (tmp_path / "no", {}, "no such file")]:
        with pytest.raises(ValueError, match=f"^--x {path}.*{words}"):
            input_kind(path, "--x", **kw)
    # an endless binary stream is refused at its first chunk (reading to the end never ends)
    with pytest.raises(ValueError, match=r"^/dev/zero:1: binary file"):
        read_input("/dev/zero", "/dev/zero", text=True)
    assert read_input("/dev/null", text=True) == b""


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "/dev/null", "folder of nothing"])
def test_pairs_a_fifo_or_a_device_is_one_line(kind, tmp_path, capsys):
    path = {"fifo": tmp_path / "fifo", "folder of nothing": tmp_path}.get(kind, Path(kind))
    if kind == "fifo":
        os.mkfifo(path)                    # never opened: a read would block the test
    words = {"fifo": "is a FIFO, which can be read only once",
             "folder of nothing": "no .po or .mo files under"}.get(kind, "is a character device")
    out = tmp_path / "run"
    _refused(capsys, ["train", "--pairs", str(path), "--out", str(out), "--steps", "1", *TINY],
             words, out)


def test_a_huge_binary_pair_file_is_refused_at_its_first_chunk(tmp_path, capsys):
    big = tmp_path / "zeros.tsv"
    with open(big, "wb") as f:               # sparse: 8 GiB of NUL bytes, no disk used
        f.truncate(8 << 30)
    out = tmp_path / "run"
    _refused(capsys, ["train", "--pairs", str(big), "--out", str(out), "--steps", "1", *TINY],
             f"{big}:1: binary file (NUL byte)", out)


def test_text_a_fifo_is_one_line(tmp_path, capsys):
    os.mkfifo(tmp_path / "fifo")
    out = tmp_path / "run"
    _refused(capsys, ["train", "--text", str(tmp_path / "fifo"), "--out", str(out), "--steps",
                      "1", "--no-progress"], "is a FIFO, which can be read only once", out)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A translation checkpoint of one step (what it says does not matter, that it runs does)."""
    root = tmp_path_factory.mktemp("mt")
    rows = [" ".join(WORDS[(i * k) % 6] for k in range(1, 5)) for i in range(300)]
    (root / "p.tsv").write_text("".join(f"{r} {i}\t{r} {i}\n" for i, r in enumerate(rows)))
    assert main(["train", "--pairs", str(root / "p.tsv"), "--out", str(root / "run"), "--steps",
                 "1", *TINY]) == 0
    return root / "run"


def _translate(model, *argv, stdin=b""):
    return _cli("translate", "--checkpoint", str(model), "--beam", "1", "--max-new-tokens", "3",
                "--threads", "1", *argv, stdin=stdin)


@pytest.mark.heavy
@pytest.mark.parametrize("how", ["pipe", "/dev/stdin"])
def test_translate_reads_a_pipe_and_dev_stdin(model, how, tmp_path):
    if how == "pipe":
        r = subprocess.run(f"{sys.executable} -m splitnet translate --checkpoint {model} "
                           f"--beam 1 --max-new-tokens 3 --threads 1 --input "
                           f"<(printf 'ab cd\\nef\\n\\n')", shell=True, executable="/bin/bash",
                           capture_output=True, env=ENV, timeout=300, check=False)
    else:
        r = _translate(model, "--input", "/dev/stdin", stdin=b"ab cd\nef\n\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count(b"\n") == 3 and r.stdout.endswith(b"\n\n")   # empty line: empty


@pytest.mark.heavy
def test_translate_dev_null_is_no_lines(model):
    r = _translate(model, "--input", "/dev/null")
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")


@pytest.mark.heavy
@pytest.mark.parametrize("flag", ["--input", "--reference"])
def test_translate_a_folder_is_called_a_folder(model, flag, tmp_path):
    r = _translate(model, flag, str(tmp_path), *(["--input", "/dev/null"] if flag ==
                                                  "--reference" else []))
    assert r.returncode == 2 and r.stdout == b""
    assert _one_line(r.stderr.decode()) == (f"splitnet translate: error: {flag} {tmp_path} is a "
                                            f"directory; give a file")


@pytest.mark.heavy
def test_translate_dev_zero_is_one_line(model):
    r = _translate(model, "--input", "/dev/zero")
    assert r.returncode == 2 and r.stdout == b""
    assert "--input /dev/zero line 1 is not text" in _one_line(r.stderr.decode())


# ---------------------------------------------------------------------------------------------
# 3. a relative --pairs, resumed and refined from elsewhere


def test_named_pair_sources_are_the_configs_list():
    assert set(PAIR_NAMES) == set(P.NAMED_SOURCES)


def test_a_relative_pairs_resumes_and_refines_from_anywhere(model, tmp_path, monkeypatch,
                                                            capsys):
    work = tmp_path / "work"
    (work / "data").mkdir(parents=True)
    (work / "data" / "pairs.tsv").write_text((model.parent / "p.tsv").read_text())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = work / "run"
    monkeypatch.chdir(work)
    assert main(["train", "--pairs", "data/pairs.tsv", "--out", "run", "--steps", "1",
                 *TINY]) == 0
    assert ck.load(run)["train_config"]["pairs"] == str(work / "data" / "pairs.tsv")
    for cwd, pairs, steps in [(elsewhere, None, 2), (work, "./data/pairs.tsv", 3),
                              (elsewhere, str(work / "data" / "pairs.tsv"), 4)]:
        monkeypatch.chdir(cwd)
        extra = ["--pairs", pairs] if pairs else []
        assert main(["train", "--resume", "--out", str(run), "--steps", str(steps),
                     "--no-progress", "--threads", "1", *extra]) == 0, capsys.readouterr().err
        assert ck.load(run)["step"] == steps
    # the same file spelled otherwise is the same corpus; another corpus is refused as ever
    other = elsewhere / "pairs.tsv"
    other.write_text((work / "data" / "pairs.tsv").read_text() + "new one\tneue\n")
    _refused(capsys, ["train", "--resume", "--out", str(run), "--steps", "5", "--no-progress",
                      "--threads", "1", "--pairs", str(other)], "sentence pairs changed")
    assert ck.load(run)["step"] == 4
    capsys.readouterr()
    assert main(["refine", "--checkpoint", str(run), "--substeps", "1,2", "--methods", "euler",
                 "--windows", "4", "--out", str(elsewhere / "r.png"), "--threads", "1"]) == 0
    got = capsys.readouterr()
    assert "validation pairs" in got.out + got.err


def test_an_equal_corpus_elsewhere_is_the_same_corpus():
    from splitnet.translate.translation import same_corpus

    fp = {"source": "TSV data/pairs.tsv", "src_lang": "src", "tgt_lang": "tgt",
          "pairs": {"train": 3, "valid": 1, "test": 1}, "bytes": 10, "sha256": "ab"}
    assert same_corpus(fp, {**fp, "source": "TSV /home/u/data/pairs.tsv"})
    assert not same_corpus(fp, {**fp, "sha256": "cd"})
    assert not same_corpus(fp, {**fp, "tgt_lang": "de"})
    assert not same_corpus(None, fp)


def test_an_older_checkpoints_relative_pairs_read_from_elsewhere_says_so(tmp_path, monkeypatch):
    from splitnet.training.config import TrainConfig
    from splitnet.translate.translation import load_data

    monkeypatch.chdir(tmp_path)
    cfg = TrainConfig.from_dict({**TrainConfig(task="translate").to_dict(),
                                 "pairs": "data/pairs.tsv", "out": str(tmp_path / "run")})
    assert cfg.pairs == str(tmp_path / "data" / "pairs.tsv")
    with pytest.raises(ValueError, match=r"^the checkpoint's pairs 'data/pairs.tsv' is relative "
                                         r"to the folder it was trained in"):
        load_data(cfg, {"train_config": {"pairs": "data/pairs.tsv"}}, print)


def test_a_huge_catalogue_is_skipped_unread_and_named(tmp_path):
    root = german_folder(tmp_path / "cats", names=("apt", "bash", "sed"))
    with open(root / "huge.mo", "wb") as f:          # sparse: never read
        f.truncate(PS.MAX_CATALOGUE + 1)
    c = P.load_pairs(root)
    assert c.tgt_lang == "de" and len(c) == 360
    assert c.stats["unreadable"] == {"huge.mo": f"huge.mo: {PS.MAX_CATALOGUE + 1:,} bytes, more "
                                                f"than the {PS.MAX_CATALOGUE:,} read"}
