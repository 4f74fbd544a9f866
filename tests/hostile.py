"""Hostile inputs made on the spot (no binary fixtures in the repository): corrupt archives of
six kinds, edited and damaged checkpoints, a FIFO, catalogue folders whose language is wrong,
mixed or unsaid, a tiny translation run. Used by tests/test_errors.py's scratch folder (the rows
of docs/errors.md), tests/test_hostile.py and tests/test_hostile_round4.py."""

from __future__ import annotations

import io
import os
import struct
import tarfile
import zipfile
from pathlib import Path

TEXT = "".join(f"def f{i}(x):\n    return x * {i % 7} + {i * 7919 % 1000}\n" for i in range(400))

ARCHIVES = {          # name -> what is wrong with it
    "truncated.tar.gz": "a .tar.gz cut in half",
    "truncated.tar.xz": "a .tar.xz cut in half",
    "bad-crc.zip": "a zip member whose CRC does not match",
    "bad-deflate.zip": "a zip member whose deflate stream is corrupt",
    "encrypted.zip": "an encrypted zip member",
    "method.zip": "a zip member in an unsupported compression (AES, 99)",
}


def _tar(mode: str) -> bytes:
    buf = io.BytesIO()
    data = TEXT.encode()
    with tarfile.open(fileobj=buf, mode=mode) as t:
        for k in range(3):
            info = tarfile.TarInfo(f"src/m{k}.py")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _zip(method: int) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method) as z:
        z.writestr("src/a.py", TEXT)
    return buf.getvalue()


def _patch_headers(data: bytes, local_offset: int, central_offset: int, value: int) -> bytes:
    """Set a 16-bit field of the (single) member's local and central headers."""
    b = bytearray(data)
    loc = b.index(b"PK\x03\x04")
    cen = b.index(b"PK\x01\x02")
    for at in (loc + local_offset, cen + central_offset):
        b[at:at + 2] = struct.pack("<H", value)
    return bytes(b)


def corrupt_archives(folder: Path) -> dict[str, Path]:
    """The six corrupt archives of :data:`ARCHIVES` in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    gz, xz = _tar("w:gz"), _tar("w:xz")
    stored, deflated = _zip(zipfile.ZIP_STORED), _zip(zipfile.ZIP_DEFLATED)
    crc = bytearray(stored)
    at = crc.index(b"def f1(")                     # inside the stored member's data
    crc[at] ^= 0x20
    bad = bytearray(deflated)
    start = bad.index(b"src/a.py") + len("src/a.py")   # the local header's name, then data
    bad[start + 10:start + 40] = b"\xff" * 30
    content = {
        "truncated.tar.gz": gz[:len(gz) // 2],
        "truncated.tar.xz": xz[:len(xz) // 2],
        "bad-crc.zip": bytes(crc),
        "bad-deflate.zip": bytes(bad),
        "encrypted.zip": _patch_headers(stored, 6, 8, 0x1),        # general purpose flag bit 0
        "method.zip": _patch_headers(stored, 8, 10, 99),           # compression method
    }
    out = {}
    for name, data in content.items():
        (folder / name).write_bytes(data)
        out[name] = folder / name
    return out


def good_checkpoint(folder: Path, **model) -> Path:
    """A real (tiny) run directory: one step of ``splitnet train`` on a small text file;
    ``model``: options of its SplitConfig (``convection_field="none"``: one field a layer)."""
    from splitnet.configs.config import SplitConfig
    from splitnet.training.train import TrainConfig, train

    folder.mkdir(parents=True, exist_ok=True)
    text = folder / "corpus.txt"
    text.write_text(TEXT)
    cfg = TrainConfig(model=SplitConfig(d_model=16, n_heads=2, n_layers=1, **model), context=16,
                      batch_size=4, steps=1, warmup=0, eval_windows=4, text=str(text),
                      out=str(folder / "run"), progress=False, plot=False, threads=1)
    import contextlib

    with contextlib.redirect_stderr(io.StringIO()):
        train(cfg)
    return folder / "run"


EDITS = {            # name -> (what, edit of the checkpoint dict)
    "ck-no-rng": ("without 'rng'", lambda c: c.pop("rng")),
    "ck-no-step": ("without 'step'", lambda c: c.pop("step")),
    "ck-no-optimizer": ("without 'optimizer'", lambda c: c.pop("optimizer")),
    "ck-negative-step": ("with step -5", lambda c: c.update(step=-5)),
    "ck-huge-config": ("whose config describes a 1.6 GB model the file does not hold",
                       lambda c: c["model_config"].update(d_model=16384, n_heads=2)),
}


def edited_checkpoints(run: Path, folder: Path) -> dict[str, Path]:
    """Copies of the checkpoint of ``run``, each edited as in :data:`EDITS`."""
    import torch

    from splitnet import checkpoint as ck

    out = {}
    for name, (_, edit) in EDITS.items():
        state = torch.load(run / ck.CKPT, weights_only=True)
        edit(state)
        d = folder / name
        d.mkdir(parents=True, exist_ok=True)
        torch.save(state, d / ck.CKPT)
        out[name] = d
    return out


S2S_TINY = ["--task", "translate", "--d-model", "16", "--n-heads", "2", "--n-encoder-layers",
            "1", "--n-decoder-layers", "1", "--context", "16", "--batch-size", "4", "--warmup",
            "1", "--threads", "1", "--no-progress", "--no-plot", "--bleu-sentences", "0"]


def good_translation(folder: Path) -> Path:
    """A real (tiny) translation run directory: one step on the synthetic copy task, no test
    scores (so no sacrebleu)."""
    import contextlib

    from splitnet.cli import main

    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.redirect_stderr(io.StringIO()):
        if main(["train", "--pairs", "copy", "--out", str(folder / "run"), "--steps", "1",
                 *S2S_TINY]) != 0:
            raise RuntimeError("the tiny translation run failed")
    return folder / "run"


def po(language: str | None, pairs, fuzzy: bool = False) -> str:
    """A .po catalogue of ``pairs`` whose header names ``language`` (no Language: line when
    None); every entry marked fuzzy when ``fuzzy``."""
    head = f"Language: {language}\\n" if language else "Project-Id-Version: x\\n"
    mark = "#, fuzzy\n" if fuzzy else ""
    return f'msgid ""\nmsgstr "{head}"\n\n' + "".join(
        f'{mark}msgid "{s}"\nmsgstr "{t}"\n\n' for s, t in pairs)


def _messages(lang: str, tag: str, n: int = 12):
    return [(f"Message {i} of {tag}, a sentence to translate", f"{lang} message {i} {tag}")
            for i in range(n)]


def pair_sources(root: Path) -> dict[str, Path]:
    """Folders of .po catalogues, each wrong in one way: ``cats-de`` (German only: wrong for
    --tgt-lang fr), ``cats-mixed`` (German and French), ``cats-unsaid`` (no header and no
    path names a language; apt is a program, not Aptic), ``cats-garbage`` (every file
    unreadable); ``dropped.po`` (every entry fuzzy or untranslated) and ``binary.tsv`` (a
    pair file with bytes that are not text)."""
    out = {}
    for name, files in {"cats-de": {"apt": "de", "bash": "de"},
                        "cats-mixed": {"apt": "de", "bash": "fr"},
                        "cats-unsaid": {"apt": None, "bash": None}}.items():
        d = root / name
        d.mkdir(parents=True, exist_ok=True)
        for prog, lang in files.items():
            (d / f"{prog}.po").write_text(po(lang, _messages(lang or "xx", prog)))
        out[name] = d
    d = root / "cats-garbage"
    d.mkdir(parents=True, exist_ok=True)
    (d / "de.mo").write_bytes(b"garbage")
    (d / "fr.mo").write_bytes(b"\xde\xad" * 30)
    out["cats-garbage"] = d
    (root / "dropped.po").write_text(
        'msgid ""\nmsgstr "Language: de\\n"\n\nmsgid "Hello"\nmsgstr ""\n\n'
        '#, fuzzy\nmsgid "Bye"\nmsgstr "Tschuess"\n')
    out["dropped.po"] = root / "dropped.po"
    (root / "binary.tsv").write_bytes(b"Hello\tHallo\n" + bytes(range(256)) * 4)
    out["binary.tsv"] = root / "binary.tsv"
    return out


def flip_exponent(ckpt: Path, tensor) -> None:
    """Flip the top exponent bit of ``tensor``'s first float inside the saved file (torch.save
    stores tensor bytes uncompressed, so they appear verbatim): a value times 2**128 or so."""
    b = bytearray(ckpt.read_bytes())
    pattern = tensor.reshape(-1)[:4].numpy().tobytes()
    if b.count(pattern) != 1:
        raise ValueError("the tensor's first bytes are not unique in the file")
    b[b.index(pattern) + 3] ^= 0x40            # little-endian float32: byte 3, bit 6 = 2**7 exp
    ckpt.write_bytes(bytes(b))


def damaged_checkpoints(run: Path, folder: Path) -> dict[str, Path]:
    """Copies of the checkpoint of ``run``: ``ck-flipped`` (one exponent bit of the embedding
    flipped: its digest no longer matches), ``ck-empty`` (0 bytes), ``ck-cut`` (its first
    4,096 bytes: a fixed size, so the message that gives the size is the same everywhere)."""
    from splitnet.runs import checkpoint as ck

    good = (run / ck.CKPT).read_bytes()
    out = {}
    for name, data in {"ck-flipped": good, "ck-empty": b"",
                       "ck-cut": good[:4096]}.items():
        d = folder / name
        d.mkdir(parents=True, exist_ok=True)
        (d / ck.CKPT).write_bytes(data)
        out[name] = d
    flip_exponent(out["ck-flipped"] / ck.CKPT, ck.load(run)["model"]["tok_emb.weight"])
    return out


def fifo(path: Path) -> Path:
    if not path.exists():
        os.mkfifo(path)
    return path


__all__ = ["ARCHIVES", "EDITS", "S2S_TINY", "TEXT", "corrupt_archives",
           "damaged_checkpoints", "edited_checkpoints", "fifo", "flip_exponent",
           "good_checkpoint", "good_translation", "pair_sources", "po"]


def run_main(argv) -> tuple[int, str, str]:
    """``splitnet ARGV`` in this process: (exit status, stdout, stderr). The same code path as
    ``python -m splitnet`` after its imports (argparse's own exits caught as their status), at
    none of a new process's ~3 s of importing torch."""
    import contextlib

    from splitnet.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main([str(a) for a in argv])
        except SystemExit as e:
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


def code_corpus(path: Path) -> Path:
    """A small Python-like corpus (600 two-line functions) at ``path``, for training tests."""
    path.write_text("".join(f"def f{i}(x):\n    return x * {i % 7} + {i % 3}\n"
                            for i in range(600)))
    return path


def train_cli(*argv):
    """``splitnet train ARGV`` in this process, through the command line's own parser and
    config (the trainer's return value)."""
    from splitnet.cli import build_parser
    from splitnet.cli.commands.cmd_train import config_from_args
    from splitnet.training.train import train

    return train(*config_from_args(build_parser("train").parse_args([str(a) for a in argv])))
