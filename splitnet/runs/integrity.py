"""The integrity of a checkpoint file: a digest of every tensor written with it, checked when
it is read, and, for a file that cannot be read at all, what is wrong with it in words.

* :func:`digest_record` / :func:`verify_digests`: the CRC-32 of each tensor's dtype, shape and
  bytes, stored in the checkpoint dict under ``"digests"`` by
  :func:`splitnet.runs.checkpoint.save` and recomputed by :func:`~splitnet.runs.checkpoint.load`.
  CRC-32 detects every burst of up to 32 flipped bits (a flipped exponent bit among them) and
  any other change but for a chance of 2**-32; it is a check against damage (disks, copies,
  transfers), not against an editor, who can rewrite the digests as well.
* :func:`check_records`: the CRC-32s of the zip archive's other records (the pickle: step,
  configs, tensor names), which torch.save writes and ``torch.load`` does not check.
* :func:`why_unreadable`: why ``torch.load`` failed (empty, cut short, not a torch.save file, a
  record failing the CRC-32 of its zip archive, ...), looked up only after it failed.
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

import torch


def _damaged(f, what: str) -> ValueError:
    return ValueError(f"{f}: {what} (the file was edited or damaged; it is not used)")


def _first_line(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return f"{type(e).__name__}: {s[0]}" if s else type(e).__name__


DIGESTS = "digests"
# zlib's CRC-32: 4.3 GB/s on one core here, 5x blake2b, 3x sha256 (benchmarks/bench_digest.py)
DIGEST_ALGORITHM = "crc32"


def _tensors(obj, prefix: str = ""):
    """(path, tensor) for every tensor in nested dicts, lists and tuples, in their order; a
    path joins the keys with '/' (``model/tok_emb.weight``, ``optimizer/state/0/exp_avg``)."""
    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            if k != DIGESTS or prefix:
                yield from _tensors(v, f"{prefix}/{k}" if prefix else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _tensors(v, f"{prefix}/{i}" if prefix else str(i))


def _digest(t: torch.Tensor) -> str:
    """CRC-32 of a tensor's dtype, shape and element bytes (in row-major order), as 8 hex
    digits. The bytes of a contiguous CPU tensor are read in place, without a copy."""
    t = t.detach()
    crc = zlib.crc32(f"{t.dtype}{tuple(t.shape)}".encode())
    if t.numel():
        flat = t.cpu().contiguous().reshape(-1).view(torch.uint8)
        crc = zlib.crc32(flat.numpy(), crc)
    return f"{crc:08x}"


def _key(t: torch.Tensor) -> tuple:
    """What makes two tensors the same bytes (a tied weight appears twice in a state dict)."""
    return (t.device, t.untyped_storage().data_ptr(), t.storage_offset(), t.dtype,
            tuple(t.shape), t.stride())


def digest_record(obj: dict) -> dict:
    """``{"algorithm": "crc32", "tensors": {path: digest}}`` for every tensor of ``obj`` (paths
    as in :func:`_tensors`). CRC-32 detects every error of up to 32 consecutive bits (a flipped
    exponent bit among them) and any other change but for a chance of 2**-32."""
    seen: dict = {}
    out = {}
    for path, t in _tensors(obj):
        key = _key(t)
        if key not in seen:
            seen[key] = _digest(t)
        out[path] = seen[key]
    return {"algorithm": DIGEST_ALGORITHM, "tensors": out}


def _oversized(t: torch.Tensor) -> bool:
    """A tensor that describes more elements than its storage holds (a stride-0 expansion):
    hashing it would allocate them all."""
    return bool(t.numel()) and t.untyped_storage().nbytes() < t.numel() * t.element_size()


def verify_digests(ck: dict, f) -> dict:
    """``ck`` without its ``"digests"`` entry, once every tensor in it matches the digest
    written with it; a ValueError names the first tensor that does not (and how many more). A
    checkpoint without digests (written before they existed) is returned as it is."""
    if DIGESTS not in ck:
        return ck
    ck = dict(ck)
    rec = ck.pop(DIGESTS)
    f = Path(f)
    if not (isinstance(rec, dict) and rec.get("algorithm") == DIGEST_ALGORITHM
            and isinstance(rec.get("tensors"), dict)
            and all(isinstance(v, str) for v in rec["tensors"].values())):
        raise _damaged(f, f"its digest record is not valid (this splitnet writes "
                          f"{{'algorithm': '{DIGEST_ALGORITHM}', 'tensors': {{...}}}})")
    wanted, seen, bad = rec["tensors"], {}, []
    for path, t in _tensors(ck):
        if path not in wanted:
            bad.append(f"tensor {path!r} has no digest")
            continue
        if _oversized(t):
            bad.append(f"tensor {path!r} of shape {tuple(t.shape)} is backed by "
                       f"{t.untyped_storage().nbytes()} bytes")
            continue
        key = _key(t)
        if key in seen:     # a tied weight: the same bytes, already checked and reported
            continue
        seen[key] = _digest(t)
        if seen[key] != wanted[path]:
            bad.append(f"tensor {path!r} does not match the digest written with it")
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise _damaged(f, bad[0] + more)
    return ck


def check_records(f: Path) -> None:
    """The CRC-32 of every record of ``f``'s zip archive except the tensors' own bytes (those
    have their digests): the pickle that holds the step, the configs and the names of the
    tensors, which ``torch.load`` reads without checking. A few KB; nothing for a file that is
    not a zip (a legacy torch.save file)."""
    try:
        with zipfile.ZipFile(f) as z:
            for info in z.infolist():
                if "/data/" in info.filename:
                    continue
                try:
                    z.read(info)
                except zipfile.BadZipFile:
                    raise _damaged(f, f"its record {info.filename!r} fails its CRC-32 "
                                      f"check") from None
    except zipfile.BadZipFile:     # torch.load read it, so not a zip: the legacy format
        return


def why_unreadable(f: Path, e: BaseException) -> str:
    """Why torch.load failed on ``f``, in words, looked up only after it failed: the file's
    size and first bytes, then its zip archive (torch.save writes a zip whose records carry
    CRC-32s that torch does not check)."""
    try:
        size = f.stat().st_size
        with open(f, "rb") as fh:
            head = fh.read(4)
    except OSError as err:
        return f"reading it failed ({err.strerror or err})"
    if size == 0:
        return "it is empty (0 bytes: a copy or a save that never finished)"
    if head != b"PK\x03\x04":
        what = "a pickle that cannot be read" if head[:1] == b"\x80" else \
            "neither a zip archive nor a pickle"
        return (f"it is not a file written by torch.save ({size:,} bytes, {what}; damaged, "
                f"cut short, or another kind of file)")
    try:
        with zipfile.ZipFile(f) as z:
            broken = z.testzip()
    except (zipfile.BadZipFile, OSError, EOFError):
        return (f"it is cut short or damaged at its end ({size:,} bytes; the end of its zip "
                f"archive, which torch.save writes last, is missing)")
    except Exception:              # names or offsets zipfile cannot decode are damage too
        return "the directory of its zip archive is damaged"
    if broken is not None:
        return f"its record {broken!r} fails its CRC-32 check (the file was damaged)"
    return f"its contents are damaged ({_first_line(e)})"


__all__ = ["DIGESTS", "DIGEST_ALGORITHM", "check_records", "digest_record", "verify_digests",
           "why_unreadable"]
