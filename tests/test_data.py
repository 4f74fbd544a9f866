"""Byte-level corpus: stable split by file, position split, errors, step-seeded batches."""

import hashlib

import numpy as np
import pytest
import torch

from splitnet import data as D


def _tree(tmp_path):
    root = tmp_path / "lib"
    for rel in ["os.py", "json/__init__.py", "json/decoder.py", "b/c.py", "z.py",
                "site-packages/third/party.py", "notes.txt"] + [f"m/f{i}.py" for i in range(25)]:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"# {rel}\n" + "x = 1\n" * 40)
    return root


def test_encode_decode_roundtrip():
    s = "héllo\n\tworld"
    ids = D.encode(s)
    assert ids.dtype == torch.long and int(ids.max()) < D.VOCAB_SIZE
    assert len(ids) == len(s.encode("utf-8"))
    assert D.decode(ids) == s


def test_stdlib_files_sorted_and_skip_third_party(tmp_path):
    files = D.stdlib_files(_tree(tmp_path))
    rels = [r for r, _ in files]
    assert rels == sorted(rels)
    assert "site-packages/third/party.py" not in rels and "notes.txt" not in rels
    assert set(rels) == {"os.py", "json/__init__.py", "json/decoder.py", "b/c.py", "z.py"} | {
        f"m/f{i}.py" for i in range(25)}


def test_split_rule_is_sha256_of_relative_path():
    # Independent of Python's salted hash(): recompute the rule here.
    names = [f"pkg{i}/mod{i}.py" for i in range(4000)]
    for n in names[:50]:
        h = int.from_bytes(hashlib.sha256(n.encode()).digest()[:8], "big")
        assert D.is_val_file(n, 0.1) == (h % 1000 < 100)
    frac = np.mean([D.is_val_file(n, 0.1) for n in names])
    assert 0.08 < frac < 0.12


def test_load_stdlib_split_by_file(tmp_path):
    root = _tree(tmp_path)
    c = D.load_stdlib(val_fraction=0.4, root=root)
    ntr, nva = c.files
    assert ntr + nva == 30 and ntr > 0 and nva > 0
    val_files = [r for r, _ in D.stdlib_files(root) if D.is_val_file(r, 0.4)]
    assert len(val_files) == nva
    expected_val = b"".join((root / r).read_bytes() for r in val_files)
    assert c.val.tobytes() == expected_val
    again = D.load_stdlib(val_fraction=0.4, root=root)
    assert np.array_equal(again.train, c.train)


@pytest.mark.heavy
def test_default_corpus_is_the_running_stdlib():
    c = D.load_stdlib()
    assert len(c.train) > 1_000_000 and len(c.val) > 10_000
    assert "stdlib" in c.source


def test_load_text_split_by_position(tmp_path):
    f = tmp_path / "t.txt"
    f.write_bytes(bytes(range(256)) * 4)
    c = D.load_text(f, val_fraction=0.25)
    assert len(c.val) == 256 and c.val.tobytes() == bytes(range(256))
    assert c.train.tobytes() + c.val.tobytes() == f.read_bytes()


def test_errors(tmp_path):
    with pytest.raises(ValueError, match="not found"):
        D.load_text(tmp_path / "missing.txt")
    (tmp_path / "empty.txt").write_bytes(b"")
    with pytest.raises(ValueError, match="empty"):
        D.load_text(tmp_path / "empty.txt")
    with pytest.raises(ValueError, match="no text files"):
        D.load_text(tmp_path)               # a directory of empty files
    empty_root = tmp_path / "nolib"
    empty_root.mkdir()
    with pytest.raises(ValueError, match="empty"):
        D.load_stdlib(root=empty_root)
    with pytest.raises(ValueError, match="val_fraction"):
        D.load_text(tmp_path / "empty.txt", val_fraction=1.5)
    (tmp_path / "short.txt").write_bytes(b"a" * 100)
    c = D.load_text(tmp_path / "short.txt", val_fraction=0.1)
    with pytest.raises(ValueError, match="context"):
        D.check_context(c, 64)      # the 10-byte val split cannot hold a 65-byte window
    D.check_context(c, 8)


def _corpus():
    rng = np.random.default_rng(0)
    arr = rng.integers(0, 256, 5000).astype(np.uint8)
    return D.Corpus(arr[:4000], arr[4000:], "random")


def test_batches_are_a_function_of_seed_and_step():
    c = _corpus()
    x1, y1 = D.train_batch(c, 7, 8, 16, seed=3)
    x2, y2 = D.train_batch(c, 7, 8, 16, seed=3)
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert x1.shape == (8, 16) and x1.dtype == torch.long
    assert torch.equal(x1[:, 1:], y1[:, :-1])            # targets = inputs shifted by one
    x3, _ = D.train_batch(c, 8, 8, 16, seed=3)
    x4, _ = D.train_batch(c, 7, 8, 16, seed=4)
    assert not torch.equal(x1, x3) and not torch.equal(x1, x4)


def test_rank_blocks_concatenate_to_the_global_batch():
    c = _corpus()
    x, y = D.train_batch(c, 5, 8, 16, seed=0)
    parts = [D.train_batch(c, 5, 8, 16, seed=0, rank=r, world_size=4) for r in range(4)]
    assert torch.equal(torch.cat([p[0] for p in parts]), x)
    assert torch.equal(torch.cat([p[1] for p in parts]), y)
    with pytest.raises(ValueError, match="divisible"):
        D.train_batch(c, 5, 6, 16, seed=0, world_size=4)


def test_val_windows_fixed():
    c = _corpus()
    a = D.val_starts(c, 20, 16)
    b = D.val_starts(c, 20, 16)
    assert torch.equal(a, b) and len(a) == 20 and int(a.max()) <= len(c.val) - 16
    n = sum(x.shape[0] for x, _ in D.val_batches(c, a, 6, 16))
    assert n == 20


# ------------------------------------------------------------------ directories, globs, archives

BINARY = {"img/logo.png": b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)),
          "data/blob.py": b"x = 1\n\0\0\0",                  # NUL bytes: binary, whatever the name
          "notes/latin1.txt": "caf\xe9 cr\xe8me\n".encode("latin-1")}   # not UTF-8


def _mixed_tree(tmp_path):
    """30 text files (some non-ASCII), 3 binary ones, an empty one and a hidden folder."""
    root = tmp_path / "corpus"
    texts = {f"src/m{i:02d}.py": f"# module {i} ünï\ndef f{i}(x):\n    return x * {i}\n" * 5
             for i in range(24)}
    texts.update({f"docs/d{i}.txt": f"Doc {i}: naïve café ☃\n" * 8 for i in range(6)})
    for rel, body in texts.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(body, encoding="utf-8")
    for rel, b in BINARY.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b)
    (root / "src" / "empty.py").write_bytes(b"")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return root, {rel: body.encode("utf-8") for rel, body in texts.items()}


def _expected(texts: dict, val_fraction: float):
    rels = sorted(texts)
    val = b"".join(texts[r] for r in rels if D.is_val_file(r, val_fraction))
    train = b"".join(texts[r] for r in rels if not D.is_val_file(r, val_fraction))
    return train, val


def test_a_directory_takes_every_text_file_and_counts_the_binary_ones(tmp_path):
    root, texts = _mixed_tree(tmp_path)
    c = D.load_text(root, val_fraction=0.2)
    train, val = _expected(texts, 0.2)
    assert c.train.tobytes() == train and c.val.tobytes() == val
    assert sum(c.files) == 30 and c.skipped == len(BINARY)     # empty and hidden files: neither
    assert c.files[1] == sum(D.is_val_file(r, 0.2) for r in texts) > 0
    assert "3 binary files skipped" in c.describe()


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_an_archive_of_the_same_files_is_the_same_corpus(tmp_path, kind):
    import tarfile
    import zipfile

    root, texts = _mixed_tree(tmp_path)
    members = sorted(set(texts) | set(BINARY) | {"src/empty.py"})
    path = tmp_path / f"corpus.{kind}"
    if kind == "zip":
        with zipfile.ZipFile(path, "w") as z:
            for rel in members:
                z.write(root / rel, rel)
    else:
        with tarfile.open(path, "w:gz") as t:
            for rel in members:
                t.add(root / rel, rel)
    c, d = D.load_text(path, val_fraction=0.2), D.load_text(root, val_fraction=0.2)
    assert c.train.tobytes() == d.train.tobytes() and c.val.tobytes() == d.val.tobytes()
    assert (c.files, c.skipped, c.digest) == (d.files, d.skipped, d.digest)
    assert c.source.startswith("archive")
    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(b"not an archive")
    with pytest.raises(ValueError, match="not a readable"):
        D.load_text(broken)


def test_a_glob_takes_the_matching_files_split_by_file(tmp_path):
    root, texts = _mixed_tree(tmp_path)
    c = D.load_text(str(root / "**" / "*.py"), val_fraction=0.2)
    py = {rel: b for rel, b in texts.items() if rel.endswith(".py")}
    train, val = _expected(py, 0.2)                 # paths relative to the common folder: root
    assert c.train.tobytes() == train and c.val.tobytes() == val
    assert sum(c.files) == 24 and c.skipped == 1    # data/blob.py
    with pytest.raises(ValueError, match="no file matches"):
        D.load_text(str(root / "*.nothing"))


def test_the_start_up_line_reports_files_bytes_and_skipped(tmp_path, capsys):
    from splitnet.cli import main

    root, texts = _mixed_tree(tmp_path)
    assert main(["train", "--text", str(root), "--out", str(tmp_path / "run"), "--steps", "1",
                 "--d-model", "16", "--n-heads", "2", "--n-layers", "1", "--context", "16",
                 "--batch-size", "2", "--warmup", "1", "--eval-windows", "2", "--threads", "1",
                 "--val-fraction", "0.2", "--no-progress", "--no-plot"]) == 0
    line = next(x for x in capsys.readouterr().err.splitlines()
                if x.startswith("splitnet train: "))
    train, val = _expected(texts, 0.2)
    n_val = sum(D.is_val_file(r, 0.2) for r in texts)
    assert f"30 files ({30 - n_val} train / {n_val} val)" in line
    assert f"{len(train):,} train / {len(val):,} val bytes" in line
    assert "3 binary files skipped" in line and str(root) in line
