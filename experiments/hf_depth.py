"""Depth measured on imported models (issue 61) -> docs/llama.md, "Which layers can an imported
model lose?"

    python3 experiments/hf_depth.py            # measure what is missing, write the table
    python3 experiments/hf_depth.py --print    # print it, write nothing
    python3 experiments/hf_depth.py --refresh  # measure every row again (~1 min a row)

For each family ``splitnet.interop.from_hf`` reads, a tiny transformers model of that family
(4 layers of width 32, 4 heads and 2 key/value heads where the family has them, a byte
vocabulary, context 64, float64) is trained by transformers itself (a next-byte language model
of the Python standard library's training split: AdamW at lr 3e-3, STEPS steps of 16 windows,
seed 0), saved with ``save_pretrained`` and the byte tokenizer, and measured exactly as a user's
folder is (:func:`splitnet.analyses.sources.hf_source`: 16 windows of 64 tokens of the standard
library's validation split; :func:`splitnet.analyses.redundancy.layer_study`). A random network
is measured too: its loss hardly depends on its layers, which is why the others are trained
first. Each row's numbers are kept in experiments/cache/hf_depth/ (``regen hf-depth``
renders the table from them). Float64 throughout, so a rerun on another CPU prints the same
digits give or take the last: tests/test_redundancy.py checks that the document is the
rendering of the cache and (heavy) measures rows again and compares them with it.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "llama.md"
CACHE = ROOT / "experiments" / "cache" / "hf_depth"
STEPS, BATCH, CTX, LAYERS, LR = 150, 16, 64, 4, 3e-3
_LLAMA = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": LAYERS,
          "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": CTX,
          "vocab_size": 256}


def _config(family: str):
    """transformers' config of the family's tiny model."""
    import transformers as tf

    if family == "gpt2":
        return tf.GPT2Config(vocab_size=256, n_positions=CTX, n_embd=32, n_layer=LAYERS,
                             n_head=4, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    if family == "gpt-neox":
        return tf.GPTNeoXConfig(vocab_size=256, hidden_size=32, intermediate_size=64,
                                num_hidden_layers=LAYERS, num_attention_heads=4,
                                max_position_embeddings=CTX, rotary_pct=0.5)
    if family in ("gemma2", "gemma3"):          # windows of 16 of the 64 positions
        cfg = tf.Gemma2Config if family == "gemma2" else tf.Gemma3TextConfig
        layers = {"gemma2": ["sliding_attention", "full_attention"] * (LAYERS // 2),
                  "gemma3": ["sliding_attention"] * (LAYERS - 1) + ["full_attention"]}[family]
        return cfg(**_LLAMA, head_dim=8, sliding_window=16, layer_types=layers,
                   pad_token_id=0, eos_token_id=1, bos_token_id=2)
    cfg = {"llama": tf.LlamaConfig, "qwen2": tf.Qwen2Config, "mistral": tf.MistralConfig,
           "qwen3": tf.Qwen3Config, "olmo2": tf.Olmo2Config, "phi3": tf.Phi3Config}[family]
    extra = {"mistral": {"sliding_window": None}, "qwen3": {"head_dim": 16},
             "phi3": {"pad_token_id": 0, "eos_token_id": 1, "bos_token_id": 2}}
    return cfg(**_LLAMA, **extra.get(family, {}))


FAMILIES = ("gpt2", "gpt-neox", "llama", "qwen2", "mistral", "qwen3", "olmo2", "phi3", "gemma2",
            "gemma3")
ROWS = tuple((f, True) for f in FAMILIES) + (("llama", False),)    # (family, trained)


@functools.cache
def _train_bytes() -> torch.Tensor:
    from splitnet.runs import data as D

    return torch.tensor(list(bytes(D.load_stdlib().train)), dtype=torch.long)


def _train(model, steps: int) -> None:
    """``steps`` of AdamW on next-byte prediction over the standard library's training split."""
    train = _train_bytes()
    g = torch.Generator().manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    model.train()
    for _ in range(steps):
        starts = torch.randint(0, len(train) - CTX - 1, (BATCH,), generator=g)
        x = torch.stack([train[s:s + CTX + 1] for s in starts])
        loss = model(x[:, :-1], labels=x[:, :-1].clone(), use_cache=False).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()


def measure(family: str, trained: bool = True):
    """The :class:`~splitnet.analyses.redundancy.LayerStudy` of the family's tiny model."""
    import transformers as tf

    from splitnet.analyses.redundancy import layer_study
    from splitnet.analyses.sources import hf_source
    from splitnet.interop.convert import byte_tokenizer

    torch.manual_seed(0)
    model = tf.AutoModelForCausalLM.from_config(_config(family)).double()
    if trained:
        _train(model, STEPS)
    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d)
        byte_tokenizer().save_pretrained(d)
        m, evaluate, _ = hf_source(d, windows=16)
        return layer_study(m, evaluate)


def _list(xs, fmt: str) -> str:
    """``xs`` formatted, NaN (a pair of a local and a global layer: no one step) as ``-``."""
    return ", ".join("-" if x != x else format(x, fmt) for x in xs)


def cache_file(family: str, trained: bool) -> Path:
    return CACHE / f"{family}-{'trained' if trained else 'random'}.json"


def study_of(family: str, trained: bool, refresh: bool = False):
    """The row's study: from the cache, else measured and cached."""
    from splitnet.analyses.redundancy import LayerStudy

    f = cache_file(family, trained)
    if f.exists() and not refresh:
        d = json.loads(f.read_text())
        return LayerStudy(d["loss"], d["bi"], d["drop"], d["pairs"])
    s = measure(family, trained)
    CACHE.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps({"family": family, "trained": trained, "steps": STEPS,
                             "loss": s.loss, "bi": s.bi, "drop": s.drop, "pairs": s.pairs},
                            indent=1) + "\n")
    return s


def row(family: str, trained: bool, s) -> str:
    """One row of the table (markdown) for the row's study ``s``."""
    dc = s.drop_costs()
    cheapest = min(range(len(dc)), key=dc.__getitem__)
    return (f"| {family} | {f'{STEPS} steps' if trained else 'no (random)'} | "
            f"{s.loss:.4f} | {_list(dc, '+.4f')} | {_list(s.bi, '.4f')} | "
            f"{_list(s.pair_costs('mean'), '+.4f')} | "
            f"{_list(s.pair_costs('first'), '+.4f')} | {cheapest}, "
            f"{min(range(len(s.bi)), key=s.bi.__getitem__)} | {s.spearman()[0]:+.2f} |")


HEAD = ("| family | trained | nats/token | drop layer 0..3 | block influence 0..3 | pair 0-1, 1-2, "
        "2-3 as one step of 2h (mean) | the same (first) | cheapest layer: measured, by BI | "
        "Spearman ρ (BI, drop) |\n|---|---|---:|---|---|---|---|---|---:|")


def render(refresh: bool = False) -> str:
    """The table (markdown) from the cache, measuring what is missing."""
    return "\n".join([HEAD] + [row(f, t, study_of(f, t, refresh)) for f, t in ROWS])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--doc", type=Path, default=DOC, help="the document to write (default "
                   "docs/llama.md)")
    p.add_argument("--print", action="store_true", help="print the table, write nothing")
    p.add_argument("--refresh", action="store_true", help="measure every row again")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    table = render(args.refresh)
    if args.print:
        print(table)
        return 0
    from splitnet.dev.docblocks import write_blocks

    changed = write_blocks(args.doc, "hf-depth", {"table": table})
    print(f"{args.doc}: {'written' if changed else 'unchanged'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
