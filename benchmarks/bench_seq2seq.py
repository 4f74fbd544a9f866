"""Encoder–decoder speed: SplitSeq2Seq against torch.nn.Transformer, and cached decoding.

Part 1: forward + backward of ``SplitSeq2Seq(lie-trotter, lie-trotter)`` and of
``torch.nn.Transformer(norm_first=True)`` of the same size with the same embeddings, positions
and head around it and the weights mapped (the two compute the same logits: checked before
timing), on a padded source batch with its padding mask. Timed alternately ``--pairs`` times
(the order alternates within each pair); reported: the median time of each, their ratio and the
median of per-pair ratios.

Part 2: greedy decoding tokens/s with the key/value caches (``use_cache=True``) and without
(``use_cache=False``: the whole prefix through the decoder at every token), and beam 4 with
caches, ``--new-tokens`` tokens per row (eos is masked so every row runs to the end).

    python3 benchmarks/bench_seq2seq.py                 # CPU, the docs numbers
    python3 benchmarks/bench_seq2seq.py --quick         # a smoke run
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings

import torch
import torch.nn.functional as F

from splitnet.cli._args import nonnegative_int, positive_int
from splitnet.nets.reference import load_into_torch_transformer
from splitnet.nets.seq2seq import SplitSeq2Seq


class TorchSeq2Seq(torch.nn.Module):
    """torch.nn.Transformer with the SplitSeq2Seq's embeddings, positions and head (shared)."""

    def __init__(self, ours: SplitSeq2Seq, tt: torch.nn.Transformer):
        super().__init__()
        self.ours, self.tt = ours, tt

    def forward(self, src, tgt, mask):
        o = self.ours
        causal = torch.nn.Transformer.generate_square_subsequent_mask(
            tgt.shape[1], dtype=torch.float32)
        y = self.tt(o.embed_source(src), o.embed_target(tgt), tgt_mask=causal,
                    src_key_padding_mask=mask, memory_key_padding_mask=mask, tgt_is_causal=True)
        return o.head(y)


def torch_reference(ours: SplitSeq2Seq) -> TorchSeq2Seq:
    """``torch.nn.Transformer(norm_first=True)`` of ``ours``'s size with its weights mapped, inside
    ``ours``'s embeddings and head (bench_vs_hf.py uses it too)."""
    c = ours.config
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        tt = torch.nn.Transformer(c.d_model, c.n_heads, c.n_encoder_layers, c.n_decoder_layers,
                                  c.d_ff, dropout=0.0, activation="gelu", norm_first=True,
                                  batch_first=True)
    load_into_torch_transformer(tt, ours)
    return TorchSeq2Seq(ours, tt)


def _models(a):
    torch.manual_seed(0)
    ours = SplitSeq2Seq(a.vocab, a.vocab, a.d_model, a.n_heads, n_encoder_layers=a.layers,
                        n_decoder_layers=a.layers, max_len=max(a.seq_len, a.new_tokens) + 1,
                        pad_id=0, bos_id=1, eos_id=2)
    return ours, torch_reference(ours)


def _batch(a):
    g = torch.Generator().manual_seed(1)
    src = torch.randint(3, a.vocab, (a.batch, a.seq_len), generator=g)
    tgt = torch.randint(3, a.vocab, (a.batch, a.seq_len), generator=g)
    for i in range(a.batch):                  # a quarter of the rows padded by up to a third
        if i % 4 == 0:
            src[i, a.seq_len - a.seq_len // 3:] = 0
    return src, tgt, src.eq(0)


def _step(model, src, tgt, mask):
    t0 = time.perf_counter()
    logits = model(src, tgt, mask)
    F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1)).backward()
    for p in model.parameters():
        p.grad = None
    return time.perf_counter() - t0


def part1(a) -> dict:
    ours, ref = _models(a)
    src, tgt, mask = _batch(a)
    with torch.no_grad():
        diff = (ours(src, tgt, mask) - ref(src, tgt, mask)).abs().max().item()
    assert diff < 1e-4, f"the mapped models differ by {diff:g}"
    for _ in range(a.warmup):
        _step(ours, src, tgt, mask)
        _step(ref, src, tgt, mask)
    t_ours, t_ref = [], []
    for i in range(a.pairs):
        first, second = (ours, ref) if i % 2 == 0 else (ref, ours)
        x, y = _step(first, src, tgt, mask), _step(second, src, tgt, mask)
        (t_ours, t_ref)[first is ref].append(x)
        (t_ours, t_ref)[second is ref].append(y)
    mo, mr = statistics.median(t_ours), statistics.median(t_ref)
    return {"ours_ms": 1e3 * mo, "torch_ms": 1e3 * mr, "ratio": mo / mr,
            "pair_ratio": statistics.median(o / r for o, r in zip(t_ours, t_ref)),
            "max_logit_diff": diff, "tokens_per_s": a.batch * a.seq_len * 2 / mo}


def part2(a) -> dict:
    ours, _ = _models(a)
    ours.eval()
    eos = torch.tensor([ours.config.eos_id])   # never chosen: every row runs to the end
    ours.head.register_forward_hook(lambda mod, inp, out: out.index_fill(-1, eos, -float("inf")))
    src, _, mask = _batch(a)
    src, mask = src[:a.decode_batch], mask[:a.decode_batch]
    out = {}
    for name, kw in (("cached", {"use_cache": True}), ("uncached", {"use_cache": False}),
                     ("beam4_cached", {"use_cache": True, "beam": 4})):
        times = []
        for _ in range(a.decode_runs):
            t0 = time.perf_counter()
            gen = ours.generate(src, a.new_tokens, **kw)
            times.append(time.perf_counter() - t0)
        n = int(gen.ne(0).sum())
        out[name] = {"s": statistics.median(times), "tokens": n,
                     "tokens_per_s": n / statistics.median(times)}
    out["speedup"] = out["cached"]["tokens_per_s"] / out["uncached"]["tokens_per_s"]
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--d-model", type=positive_int, default=256)
    p.add_argument("--n-heads", type=positive_int, default=4)
    p.add_argument("--layers", type=positive_int, default=3)
    p.add_argument("--vocab", type=positive_int, default=259)
    p.add_argument("--batch", type=positive_int, default=16)
    p.add_argument("--seq-len", type=positive_int, default=48)
    p.add_argument("--pairs", type=positive_int, default=21)
    p.add_argument("--warmup", type=nonnegative_int, default=3)
    p.add_argument("--new-tokens", type=positive_int, default=128)
    p.add_argument("--decode-batch", type=positive_int, default=8)
    p.add_argument("--decode-runs", type=positive_int, default=3)
    p.add_argument("--threads", type=positive_int, default=1)
    p.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    a = p.parse_args(argv)
    if a.quick:
        a.d_model, a.layers, a.pairs, a.new_tokens, a.decode_runs = 64, 1, 3, 16, 1
    torch.set_num_threads(a.threads)
    r1 = part1(a)
    r2 = part2(a)
    print(f"SplitSeq2Seq vs torch.nn.Transformer (d_model {a.d_model}, {a.n_heads} heads, "
          f"{a.layers}+{a.layers} layers, batch {a.batch} x {a.seq_len}, {a.threads} thread(s), "
          f"{a.pairs} interleaved pairs; logits equal to {r1['max_logit_diff']:.1e})")
    print(f"{'forward+backward':<18} {'ours ms':>9} {'torch ms':>9} {'ratio':>7} {'per-pair':>9}")
    print(f"{'':<18} {r1['ours_ms']:9.2f} {r1['torch_ms']:9.2f} {r1['ratio']:7.3f} "
          f"{r1['pair_ratio']:9.3f}")
    print(f"decoding {a.decode_batch} rows x {a.new_tokens} new tokens (median of "
          f"{a.decode_runs})")
    for k in ("cached", "uncached", "beam4_cached"):
        print(f"{k:<18} {r2[k]['tokens_per_s']:9.0f} tokens/s ({r2[k]['s']:.2f} s)")
    print(f"cached / uncached: {r2['speedup']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
