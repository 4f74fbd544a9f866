"""An imported Llama against transformers' own: the forward pass of the same weights, side by side.

A random ``LlamaForCausalLM`` (float32, eval, no gradients) and the SplitTransformer
``sn.interop.from_hf`` makes of it run the same batch in alternating order, ``--rounds``
rounds after ``--warmup``; reported: the median time of each and the median of the per-round
ratios splitnet / transformers (below 1: splitnet faster), and the largest logit difference.
Two sizes by default: ``small`` (d_model 256, 4 layers, 8 heads / 2 key-value heads, batch 4 x
128) and ``medium`` (d_model 512, 8 layers, 8 / 4 heads, batch 4 x 256).

    python3 benchmarks/bench_llama.py                     # the docs numbers (CPU, 1 thread)
    python3 benchmarks/bench_llama.py --quick             # a smoke run
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

from splitnet.cli._args import nonnegative_int, positive_int, torch_device

PRESETS = {"small": (256, 4, 8, 2, 128, 4), "medium": (512, 8, 8, 4, 256, 4)}
SIZE = ("d_model", "n_layers", "n_heads", "n_kv_heads", "seq_len", "batch")


def _models(size, device):
    import transformers as tf

    import splitnet as sn

    d, layers, heads, kv, seq, _ = size
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=32000, hidden_size=d, intermediate_size=int(8 * d / 3) // 64
                         * 64, num_hidden_layers=layers, num_attention_heads=heads,
                         num_key_value_heads=kv, max_position_embeddings=seq)
    theirs = tf.LlamaForCausalLM(cfg).eval().to(device)
    ours = sn.interop.from_hf(theirs).eval().to(device)
    return ours, theirs


def _time(fn, device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - t0


def row(name: str, size, device, rounds: int, warmup: int) -> dict:
    """Both models' forward times on one batch (alternating order) and their difference."""
    ours, theirs = _models(size, device)
    idx = torch.randint(0, 32000, (size[5], size[4]), device=device,
                        generator=torch.Generator(device).manual_seed(1))
    runs = {"splitnet": lambda: ours(idx), "transformers": lambda: theirs(idx).logits}
    times = {k: [] for k in runs}
    with torch.no_grad():
        diff = float((runs["splitnet"]() - runs["transformers"]()).abs().max())
        for _ in range(warmup):
            for f in runs.values():
                f()
        for i in range(rounds):
            for k in (list(runs) if i % 2 == 0 else list(runs)[::-1]):
                times[k].append(_time(runs[k], device))
    return {"size": name, **dict(zip(SIZE, size)),
            "splitnet_ms": 1e3 * statistics.median(times["splitnet"]),
            "transformers_ms": 1e3 * statistics.median(times["transformers"]),
            "ratio": statistics.median(a / b for a, b in zip(times["splitnet"],
                                                              times["transformers"])),
            "max_logit_diff": diff}


def table(rows: list[dict]) -> list[str]:
    out = ["| size | d_model, layers, heads / kv heads | batch | splitnet ms | transformers ms | "
           "splitnet / transformers | largest logit difference |",
           "|---|---|---|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['size']} | {r['d_model']}, {r['n_layers']}, {r['n_heads']} / "
                   f"{r['n_kv_heads']} | {r['batch']} x {r['seq_len']} | {r['splitnet_ms']:.1f} | "
                   f"{r['transformers_ms']:.1f} | **{r['ratio']:.2f}** | "
                   f"{r['max_logit_diff']:.1e} |")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--presets", default="small,medium")
    p.add_argument("--rounds", type=positive_int, default=11)
    p.add_argument("--warmup", type=nonnegative_int, default=2)
    p.add_argument("--threads", type=positive_int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--quick", action="store_true", help="small only, 3 rounds")
    p.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    a = p.parse_args(argv)
    try:
        device = torch_device(a.device)
    except ValueError as e:
        p.error(str(e))
    names = ["small"] if a.quick else a.presets.split(",")
    bad = [n for n in names if n not in PRESETS]
    if bad:
        p.error(f"unknown preset {bad[0]!r}; the presets are {', '.join(PRESETS)}")
    torch.set_num_threads(a.threads)
    rounds = 3 if a.quick else a.rounds
    rows = [row(n, PRESETS[n], device, rounds, a.warmup) for n in names]
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    print("\n".join(table(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
