"""Issue 28: one integrity record per checkpoint, and damaged checkpoints named as such.

Every tensor a checkpoint holds has its CRC-32 written with it and checked on load: a flipped
exponent bit in the embedding is one line naming the tensor (exit 2), for sampling and for a
resume, which writes nothing. Files that cannot be read at all (empty, cut short, random bytes,
a folder, a FIFO, a damaged zip record) are one line saying so, never a bare exception name."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
import torch
from hf_folders import HF_DAMAGE, edit_weights, hf_folder

from splitnet.cli import main
from splitnet.runs import checkpoint as ck
from splitnet.runs import integrity


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    import hostile

    return hostile.good_checkpoint(tmp_path_factory.mktemp("good"))


def _copy(run: Path, dst: Path) -> Path:
    shutil.copytree(run, dst)
    return dst


def _snapshot(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def _fails(capsys, *argv) -> str:
    """Run the CLI; it must exit 2 with exactly one line on stderr. Returns that line."""
    capsys.readouterr()
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().count("\n") == 0, err
    return err.strip()


def _flip_exponent(ckpt: Path, tensor: torch.Tensor) -> None:
    """Flip the top exponent bit of ``tensor``'s first float inside the saved file (torch.save
    stores tensor bytes uncompressed, so they appear verbatim)."""
    b = bytearray(ckpt.read_bytes())
    pattern = tensor.reshape(-1)[:4].numpy().tobytes()
    assert b.count(pattern) == 1
    b[b.index(pattern) + 3] ^= 0x40            # little-endian float32: byte 3, bit 6 = 2**7 exp
    ckpt.write_bytes(bytes(b))


def test_every_tensor_is_written_with_its_digest(run_dir):
    raw = torch.load(run_dir / ck.CKPT, weights_only=True)
    rec = raw[integrity.DIGESTS]
    assert rec["algorithm"] == "crc32"
    paths = dict(integrity._tensors(raw))
    assert set(rec["tensors"]) == set(paths)
    assert "model/tok_emb.weight" in paths and "rng/torch" in paths
    assert any(p.startswith("optimizer/state/") for p in paths)
    assert integrity.DIGESTS not in ck.load(run_dir)       # load hands back what was saved


def test_a_flipped_exponent_bit_in_the_embedding_is_refused(run_dir, tmp_path, capsys):
    bad = _copy(run_dir, tmp_path / "bad")
    emb = ck.load(run_dir)["model"]["tok_emb.weight"]
    _flip_exponent(bad / ck.CKPT, emb)
    err = _fails(capsys, "sample", "--checkpoint", str(bad), "--max-new-tokens", "2")
    assert "tensor 'model/tok_emb.weight' does not match the digest written with it" in err
    assert "and 1 more" not in err                       # the tied head is the same bytes


def test_a_resume_of_a_damaged_checkpoint_writes_nothing(run_dir, tmp_path, capsys):
    bad = _copy(run_dir, tmp_path / "bad")
    state = ck.load(run_dir)
    exp_avg = next(v["exp_avg"] for v in state["optimizer"]["state"].values())
    _flip_exponent(bad / ck.CKPT, exp_avg)
    before = _snapshot(bad)
    err = _fails(capsys, "train", "--out", str(bad), "--resume", "--steps", "3", "--no-progress",
                 "--threads", "1")
    assert "tensor 'optimizer/state/" in err and "does not match the digest" in err
    assert _snapshot(bad) == before


def test_trust_does_not_excuse_a_changed_tensor(run_dir, tmp_path, capsys):
    bad = _copy(run_dir, tmp_path / "bad")
    _flip_exponent(bad / ck.CKPT, ck.load(run_dir)["model"]["tok_emb.weight"])
    err = _fails(capsys, "sample", "--checkpoint", str(bad), "--trust-checkpoint")
    assert "does not match the digest" in err


def test_a_checkpoint_without_digests_still_loads(run_dir, tmp_path, capsysbinary):
    old = _copy(run_dir, tmp_path / "old")
    state = ck.load(run_dir)
    torch.save(state, old / ck.CKPT)                      # as splitnet wrote it before digests
    assert integrity.DIGESTS not in torch.load(old / ck.CKPT, weights_only=True)
    assert torch.equal(ck.load(old)["model"]["tok_emb.weight"], state["model"]["tok_emb.weight"])
    capsysbinary.readouterr()
    assert main(["sample", "--checkpoint", str(old), "--max-new-tokens", "2"]) == 0
    err = capsysbinary.readouterr().err.decode().split()
    assert err[0] == "sample:" and "digest" not in " ".join(err), err   # no warning


def test_a_broken_digest_record_is_refused(run_dir, tmp_path):
    bad = _copy(run_dir, tmp_path / "bad")
    raw = torch.load(run_dir / ck.CKPT, weights_only=True)
    raw[integrity.DIGESTS] = {"algorithm": "md5", "tensors": {}}
    torch.save(raw, bad / ck.CKPT)
    with pytest.raises(ValueError, match="its digest record is not valid"):
        ck.load(bad)
    raw[integrity.DIGESTS] = {"algorithm": "crc32",
                              "tensors": {"model/tok_emb.weight": "00000000"}}
    torch.save(raw, bad / ck.CKPT)
    with pytest.raises(ValueError, match=r"tensor 'model/tok_emb.weight' does not match the "
                       r"digest written with it \(and \d+ more\)"):
        ck.load(bad)
    raw = torch.load(run_dir / ck.CKPT, weights_only=True)
    del raw[integrity.DIGESTS]["tensors"]["model/pos_emb.weight"]
    torch.save(raw, bad / ck.CKPT)
    with pytest.raises(ValueError, match=r"tensor 'model/pos_emb.weight' has no digest \(the"):
        ck.load(bad)


def test_an_expanded_tensor_is_not_hashed(tmp_path):
    """A tensor that describes more elements than its storage holds is refused before the
    digest would allocate them."""
    state = {"version": ck.VERSION, "model": {}, "model_config": {},
             "optimizer": {"state": {0: {"exp_avg": torch.zeros(1)}}}}
    ck.save(state, tmp_path / ck.CKPT)
    raw = torch.load(tmp_path / ck.CKPT, weights_only=True)
    raw["optimizer"]["state"][0]["exp_avg"] = torch.zeros(1).expand(10**6)
    torch.save(raw, tmp_path / ck.CKPT)
    with pytest.raises(ValueError, match=r"exp_avg' of shape \(1000000,\) is backed by 4 bytes"):
        ck.load(tmp_path)


def test_a_digest_sees_dtype_shape_and_every_byte():
    t = torch.arange(12, dtype=torch.float32)
    d = integrity._digest(t)
    assert d == integrity._digest(t.clone().reshape(3, 4).reshape(12))
    assert d != integrity._digest(t.reshape(3, 4))
    assert d != integrity._digest(t.view(torch.int32))
    u = t.clone()
    u.view(torch.uint8)[47] ^= 1                           # the last bit of the last element
    assert d != integrity._digest(u)
    assert integrity._digest(t.reshape(3, 4).t()) == integrity._digest(t.reshape(3, 4).t()
                                                                          .contiguous())
    assert integrity._digest(torch.ones(2, dtype=torch.bfloat16)) != \
        integrity._digest(torch.ones(1, dtype=torch.float32))


# ------------------------------------------------------------------ files that cannot be read


def _damage(kind: str, good: bytes, f: Path) -> None:
    if kind == "folder":
        f.mkdir()
    elif kind == "fifo":
        os.mkfifo(f)
    elif kind == "empty":
        f.write_bytes(b"")
    elif kind == "cut in half":
        f.write_bytes(good[:len(good) // 2])
    elif kind == "last byte missing":
        f.write_bytes(good[:-1])
    elif kind == "random bytes":
        f.write_bytes(bytes(range(256)) * 20)
    elif kind == "text":
        f.write_bytes(b"hello\n")
    elif kind == "damaged record":
        b = bytearray(good)
        at = b.index(b"tok_emb.weight")                  # inside the pickled record
        b[at:at + 3] = b"XYZ"
        f.write_bytes(bytes(b))
    elif kind == "damaged directory":
        b = bytearray(good)
        at = b.rindex(b"PK\x01\x02")                     # the last central-directory entry
        b[at + 46:at + 56] = b"\xff" * 10                # its file name
        f.write_bytes(bytes(b))


DAMAGE = {
    "empty": "is not a readable checkpoint: it is empty (0 bytes",
    "cut in half": "is not a readable checkpoint: it is cut short or damaged at its end",
    "last byte missing": "is not a readable checkpoint: it is cut short or damaged at its end",
    "random bytes": "is not a readable checkpoint: it is not a file written by torch.save",
    "text": "is not a readable checkpoint: it is not a file written by torch.save (6 bytes",
    "folder": "is not a readable checkpoint: it is a directory",
    "fifo": "is not a readable checkpoint: it is a FIFO",
    "damaged record": ": its record 'archive/data.pkl' fails its CRC-32 check (the file was",
    "damaged directory": "is not a readable checkpoint: the directory of its zip archive is",
}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
@pytest.mark.parametrize("command", ["sample", "resume"])
def test_a_damaged_checkpoint_is_one_line_saying_so(kind, command, run_dir, tmp_path, capsys):
    good = (run_dir / ck.CKPT).read_bytes()
    d = tmp_path / "run"
    d.mkdir()
    _damage(kind, good, d / ck.CKPT)
    argv = (["sample", "--checkpoint", str(d)] if command == "sample" else
            ["train", "--out", str(d), "--resume", "--no-progress"])
    err = _fails(capsys, *argv)
    assert DAMAGE[kind] in err, err
    assert "Error" not in err.split("readable checkpoint")[-1], err     # no bare exception
    assert sorted(p.name for p in d.iterdir()) == [ck.CKPT]              # nothing written


def test_a_device_as_checkpoint_is_named(capsys):
    err = _fails(capsys, "sample", "--checkpoint", "/dev/zero")
    assert "/dev/zero is not a readable checkpoint: it is a character device" in err


def test_metrics_files_that_are_damaged_or_not_files(tmp_path):
    m = tmp_path / ck.METRICS
    m.write_bytes(b'{"step": 1, "val_bpb": 2.0}\n\xff\xfe{"step": 2}\n{"step": 3}\n')
    assert [r["step"] for r in ck.read_metrics(m)] == [1, 3]
    m.unlink()
    m.mkdir()
    with pytest.raises(ValueError, match="is a directory, not a metrics file"):
        ck.read_metrics(m)



# ------------------------------------------------------- Hugging Face folders (the hf extra)


@pytest.mark.parametrize("kind", ["gpt2", "neox"])
@pytest.mark.parametrize("case", sorted(HF_DAMAGE))
def test_a_damaged_hf_folder_is_refused_by_from_hf_and_refine(kind, case, tmp_path, capsys):
    import splitnet as sn

    d = hf_folder(kind, tmp_path)
    damage, pattern = HF_DAMAGE[case]
    damage(d)
    with pytest.raises(ValueError, match=pattern):
        sn.interop.from_hf(d)
    png = tmp_path / "r.png"
    err = _fails(capsys, "refine", "--hf", str(d), "--out", str(png), "--no-progress")
    assert re.search(pattern, err), err
    assert not png.exists()


@pytest.mark.parametrize("kind", ["gpt2", "neox"])
def test_an_unused_extra_tensor_in_an_hf_folder_changes_nothing(kind, tmp_path):
    import splitnet as sn

    d = hf_folder(kind, tmp_path)
    ref = sn.interop.from_hf(d)
    edit_weights(d, lambda sd: sd.__setitem__("unused.tensor", torch.zeros(3)))
    got = sn.interop.from_hf(d)
    x = torch.randint(0, 300, (1, 8))
    with torch.no_grad():
        assert torch.equal(got(x), ref(x))
