"""What the checkpoint digests cost (issue 28): a GPT-2-small-sized checkpoint (124M float32
parameters, GPT-2's shapes: 50257 x 768 embedding, 12 layers of 768 / 3072) written with and
without its digests, and read with and without verifying them.

    nice -n 19 python3 benchmarks/bench_digest.py [--adam] [--dir /tmp] [--repeats 3]

Prints the median of ``--repeats`` runs of each: the digest alone (CRC-32, and blake2b / sha256
for comparison), ``torch.save`` through :func:`splitnet.runs.checkpoint.save` (temporary file,
fsync, rename) without and with the digests, ``torch.load``, the digest check of a loaded dict
(:func:`~splitnet.runs.integrity.verify_digests`) and all of :func:`splitnet.runs.checkpoint.load`,
each as a ratio to the plain save. ``--adam``
adds Adam's two moment tensors (a training checkpoint: 3x the bytes).
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import tempfile
import time
from pathlib import Path

import torch

from splitnet._io import atomic_write
from splitnet.cli._args import positive_int
from splitnet.runs import checkpoint as ck
from splitnet.runs import integrity


def gpt2_small_state(adam: bool) -> dict:
    """A state dict with GPT-2 small's parameter shapes (124,439,808 numbers, head tied)."""
    d, ff, n_layers, vocab, ctx = 768, 3072, 12, 50257, 1024
    g = torch.Generator().manual_seed(0)
    model = {"tok_emb.weight": torch.randn(vocab, d, generator=g) * 0.02,
             "pos_emb.weight": torch.randn(ctx, d, generator=g) * 0.01}
    for k in range(n_layers):
        for name, shape in (("attn.qkv.weight", (3 * d, d)), ("attn.qkv.bias", (3 * d,)),
                            ("attn.out.weight", (d, d)), ("attn.out.bias", (d,)),
                            ("ffn.up.weight", (ff, d)), ("ffn.up.bias", (ff,)),
                            ("ffn.down.weight", (d, ff)), ("ffn.down.bias", (d,)),
                            ("ln1.weight", (d,)), ("ln1.bias", (d,)),
                            ("ln2.weight", (d,)), ("ln2.bias", (d,))):
            model[f"layers.{k}.{name}"] = torch.randn(*shape, generator=g) * 0.02
    model["norm.weight"], model["norm.bias"] = torch.ones(d), torch.zeros(d)
    model["head.weight"] = model["tok_emb.weight"]          # tied, as in GPT-2
    state = {"version": ck.VERSION, "model": model, "model_config": {"d_model": d}}
    if adam:
        state["optimizer"] = {"state": {i: {"exp_avg": torch.zeros_like(t),
                                            "exp_avg_sq": torch.zeros_like(t)}
                                        for i, (k, t) in enumerate(model.items())
                                        if k != "head.weight"},
                              "param_groups": [{"params": list(range(len(model) - 1))}]}
    return state


def _median(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _saves(state: dict, plain: Path, digested: Path, repeats: int) -> dict:
    """Saves without and with digests, alternated (a disk's and fsync's drift hits both)."""
    times: dict = {"save without digests": [], "save with digests": []}
    for _ in range(repeats):
        for name, fn in (("save without digests",
                          lambda: atomic_write(plain, lambda f: torch.save(state, f))),
                         ("save with digests", lambda: ck.save(state, digested))):
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def _median_verify(path: Path, repeats: int) -> float:
    """The digest check alone, each time on a dict just read (its pages first touched there)."""
    times = []
    for _ in range(repeats):
        raw = torch.load(path, map_location="cpu", weights_only=True)
        t0 = time.perf_counter()
        integrity.verify_digests(raw, path)
        times.append(time.perf_counter() - t0)
        del raw
    return statistics.median(times)


def _hash_all(state: dict, make) -> None:
    seen = set()
    for _, t in integrity._tensors(state):
        if t.untyped_storage().data_ptr() in seen:
            continue
        seen.add(t.untyped_storage().data_ptr())
        make(t.contiguous().reshape(-1).view(torch.uint8).numpy())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--adam", action="store_true", help="add Adam's moments (3x the bytes)")
    p.add_argument("--dir", default=None, help="where to write (default: a temporary folder)")
    p.add_argument("--repeats", type=positive_int, default=3)
    a = p.parse_args()
    torch.set_num_threads(1)
    state = gpt2_small_state(a.adam)
    n = sum(t.numel() for k, t in state["model"].items() if k != "head.weight")
    nbytes = sum(t.numel() * t.element_size() for _, t in integrity._tensors(state)) - \
        state["model"]["head.weight"].numel() * 4
    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        plain, digested = Path(tmp) / "plain.pt", Path(tmp) / "digested.pt"
        rows = {
            "digest (crc32)": _median(lambda: integrity.digest_record(state), a.repeats),
            "blake2b-128, for comparison": _median(lambda: _hash_all(
                state, lambda b: hashlib.blake2b(b, digest_size=16).digest()), a.repeats),
            "sha256, for comparison": _median(lambda: _hash_all(
                state, lambda b: hashlib.sha256(b).digest()), a.repeats),
            **_saves(state, plain, digested, a.repeats),
            "load without verifying": _median(lambda: torch.load(
                digested, map_location="cpu", weights_only=True), a.repeats),
            "verify (digests of a fresh load)": _median_verify(digested, a.repeats),
            "load and verify (ck.load)": _median(lambda: ck.load(digested), a.repeats),
        }
        size = digested.stat().st_size
    base = rows["save without digests"]
    print(f"GPT-2-small-sized checkpoint: {n:,} parameters{' + Adam moments' if a.adam else ''}, "
          f"{nbytes / 1e6:,.0f} MB of tensors, file {size / 1e6:,.0f} MB; median of "
          f"{a.repeats}, torch {torch.__version__}, 1 thread")
    for name, sec in rows.items():
        print(f"  {name:34s} {sec:7.3f} s   {sec / base:5.2f} x save")
    print(f"  digest cost on save: +{rows['save with digests'] / base - 1:.0%} of the save; "
          f"verify: {rows['verify (digests of a fresh load)'] / base:.0%} of the save")


if __name__ == "__main__":
    main()
