"""splitnet against what a user would pick instead: Hugging Face, torch.nn.Transformer, nanoGPT.

One table, every ratio measured side by side in one run (random weights, same sizes, float32,
``--threads`` threads), each pair of calls alternating which goes first; reported: the median
time of each side and the **median of per-pair ratios** (ours / theirs for tokens/s, so > 1 means
splitnet is faster; theirs / ours time for training steps, the same reading).

Decoding (``--decode``): ``SplitSeq2Seq.generate`` against ``MarianMTModel.generate`` of the same
size (d_model, heads, encoder + decoder layers, 4 x d feed-forward, exact GELU, vocabulary),
greedy and beam 4 / 5 (length penalty 1) at batch 1, 4, 16, 64, exactly ``--new-tokens`` new
tokens per row on both sides (ours: eos given -inf by a hook on the head; Hugging Face:
``min_new_tokens = max_new_tokens``), a padded source batch (a quarter of the rows padded by a
third). Tokens/s counts ``batch x new tokens``.

Training steps (``--train``): forward + cross-entropy + backward (gradients dropped) of
``SplitSeq2Seq(lie-trotter)`` against ``MarianMTModel`` and ``torch.nn.Transformer(norm_first)``
(with splitnet's embeddings and head around it), and of ``SplitTransformer(lie-trotter)``
against ``GPT2LMHeadModel`` (exact GELU) and the nanoGPT-style ``RefGPT``.

    python3 benchmarks/bench_vs_hf.py                      # the docs table (about 25 min here)
    python3 benchmarks/bench_vs_hf.py --quick              # a smoke run (seconds)
    python3 benchmarks/bench_vs_hf.py --decode --batches 16,64 --beams 4,5 --profile
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from splitnet.cli._args import positive_int
from splitnet.nets.models import SplitTransformer
from splitnet.nets.reference import RefGPT
from splitnet.nets.seq2seq import SplitSeq2Seq

PAD, BOS, EOS = 0, 1, 2


def _hf():
    try:
        import transformers
    except ImportError:
        sys.exit("bench_vs_hf: needs the hf extra: pip install -e '.[hf]'")
    transformers.logging.set_verbosity_error()
    return transformers


def pairs(f_ours, f_theirs, n: int, warmup: int = 1) -> dict:
    """Time both callables ``n`` times, alternating which runs first; each returns a work count
    (tokens) or None. Medians and the median per-pair ratio theirs_time / ours_time."""
    for _ in range(warmup):
        f_ours()
        f_theirs()
    t_o, t_t = [], []
    for i in range(n):
        order = ((f_ours, t_o), (f_theirs, t_t)) if i % 2 == 0 else ((f_theirs, t_t), (f_ours, t_o))
        for f, acc in order:
            t0 = time.perf_counter()
            f()
            acc.append(time.perf_counter() - t0)
    return {"ours_s": statistics.median(t_o), "theirs_s": statistics.median(t_t),
            "ratio": statistics.median(t / o for o, t in zip(t_o, t_t))}


# --- decoding ---------------------------------------------------------------------------------

def seq2seq_pair(a):
    """SplitSeq2Seq(lie-trotter) and a MarianMTModel of the same size, random weights, eval."""
    tf = _hf()
    torch.manual_seed(0)
    ours = SplitSeq2Seq(a.vocab, a.vocab, a.d_model, a.n_heads, n_encoder_layers=a.layers,
                        n_decoder_layers=a.layers, max_len=max(a.src_len, a.new_tokens) + 2,
                        pad_id=PAD, bos_id=BOS, eos_id=EOS)
    cfg = tf.MarianConfig(
        vocab_size=a.vocab, d_model=a.d_model, encoder_layers=a.layers, decoder_layers=a.layers,
        encoder_attention_heads=a.n_heads, decoder_attention_heads=a.n_heads,
        encoder_ffn_dim=4 * a.d_model, decoder_ffn_dim=4 * a.d_model,
        max_position_embeddings=max(a.src_len, a.new_tokens) + 2, activation_function="gelu",
        dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, pad_token_id=PAD,
        eos_token_id=EOS, decoder_start_token_id=BOS, forced_eos_token_id=None,
        bos_token_id=BOS, decoder_vocab_size=a.vocab, share_encoder_decoder_embeddings=True)
    marian = tf.MarianMTModel(cfg)
    return ours.eval(), marian.eval()


def _sources(a, batch):
    g = torch.Generator().manual_seed(1)
    src = torch.randint(3, a.vocab, (batch, a.src_len), generator=g)
    for i in range(0, batch, 4):               # a quarter of the rows padded by a third
        src[i, a.src_len - a.src_len // 3:] = PAD
    return src


def _decoders(a, ours, marian, src, mask, beam):
    """The two timed calls of one decoding row; each checks it produced exactly N tokens."""
    rows = src.shape[0]

    def f_ours():
        out = ours.generate(src, a.new_tokens, beam=beam, src_key_padding_mask=mask)
        assert out.shape == (rows, a.new_tokens), out.shape

    def f_theirs():
        out = marian.generate(
            input_ids=src, attention_mask=(~mask).long(), num_beams=beam,
            max_new_tokens=a.new_tokens, min_new_tokens=a.new_tokens, do_sample=False,
            length_penalty=1.0, early_stopping=False, use_cache=True)
        assert out.shape == (rows, a.new_tokens + 1), out.shape     # + the start token
    return f_ours, f_theirs


def decode_rows(a, ours, marian) -> list[dict]:
    """Every (batch, beam) of the decoding table: ours / Marian tokens/s."""
    eos = torch.tensor([EOS])                  # never chosen: every row runs to the end
    hook = ours.head.register_forward_hook(
        lambda mod, inp, out: out.index_fill(-1, eos, -float("inf")))
    rows = []
    try:
        for batch in a.batches:
            src = _sources(a, batch)
            mask = src.eq(PAD)
            for beam in a.beams:
                f_ours, f_theirs = _decoders(a, ours, marian, src, mask, beam)
                with torch.no_grad():
                    r = pairs(f_ours, f_theirs, a.decode_pairs)
                tokens = batch * a.new_tokens
                rows.append({"what": "greedy" if beam == 1 else f"beam {beam}", "batch": batch,
                             "ours": tokens / r["ours_s"], "theirs": tokens / r["theirs_s"],
                             "ratio": r["ratio"], "unit": "tokens/s", "vs": "Marian"})
                _progress(rows[-1])
    finally:
        hook.remove()
    return rows


# --- training steps ---------------------------------------------------------------------------

def _train_step(forward, targets, params):
    def step():
        logits = forward()
        F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)).backward()
        for p in params:
            p.grad = None
    return step


def seq2seq_train_rows(a) -> list[dict]:
    """A translation training step: ours against Marian and torch.nn.Transformer."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_seq2seq import torch_reference
    ours, marian = seq2seq_pair(a)
    ref = torch_reference(ours)
    for m in (ours, marian, ref):
        m.train()
    src = _sources(a, a.train_batch)
    mask = src.eq(PAD)
    g = torch.Generator().manual_seed(2)
    tgt = torch.randint(3, a.vocab, (a.train_batch, a.src_len), generator=g)
    f_ours = _train_step(lambda: ours(src, tgt, mask), tgt, list(ours.parameters()))
    f_marian = _train_step(
        lambda: marian(input_ids=src, attention_mask=(~mask).long(),
                       decoder_input_ids=tgt).logits, tgt, list(marian.parameters()))
    f_tt = _train_step(lambda: ref(src, tgt, mask), tgt, list(ref.parameters()))
    tokens = 2 * a.train_batch * a.src_len
    rows = []
    for name, f in (("Marian", f_marian), ("nn.Transformer", f_tt)):
        r = pairs(f_ours, f, a.train_pairs, warmup=2)
        rows.append({"what": "translation step", "batch": a.train_batch, "vs": name,
                     "ours": tokens / r["ours_s"], "theirs": tokens / r["theirs_s"],
                     "ratio": r["ratio"], "unit": "tokens/s"})
        _progress(rows[-1])
    return rows


def lm_train_rows(a) -> list[dict]:
    """A language-model training step: ours against GPT-2 (exact GELU) and RefGPT."""
    tf = _hf()
    torch.manual_seed(0)
    ours = SplitTransformer(a.vocab, a.d_model, a.n_heads, 2 * a.layers, max_len=a.lm_len)
    gpt2 = tf.GPT2LMHeadModel(tf.GPT2Config(
        vocab_size=a.vocab, n_positions=a.lm_len, n_embd=a.d_model, n_layer=2 * a.layers,
        n_head=a.n_heads, activation_function="gelu", resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0))
    ref = RefGPT(a.vocab, a.d_model, a.n_heads, 2 * a.layers, a.lm_len)
    g = torch.Generator().manual_seed(3)
    idx = torch.randint(0, a.vocab, (a.train_batch, a.lm_len), generator=g)
    y = torch.roll(idx, -1, 1)
    f_ours = _train_step(lambda: ours(idx), y, list(ours.train().parameters()))
    rows = []
    for name, m, fwd in (("GPT-2", gpt2, lambda: gpt2(input_ids=idx).logits),
                         ("nanoGPT-style", ref, lambda: ref(idx))):
        f = _train_step(fwd, y, list(m.train().parameters()))
        r = pairs(f_ours, f, a.train_pairs, warmup=2)
        tokens = a.train_batch * a.lm_len
        rows.append({"what": "LM step", "batch": a.train_batch, "vs": name,
                     "ours": tokens / r["ours_s"], "theirs": tokens / r["theirs_s"],
                     "ratio": r["ratio"], "unit": "tokens/s"})
        _progress(rows[-1])
    return rows


# --- output -----------------------------------------------------------------------------------

def _progress(r) -> None:
    print(f"  {r['what']:<16} batch {r['batch']:>3} vs {r['vs']:<14} {r['ratio']:.3f}",
          file=sys.stderr, flush=True)


def table(rows, a) -> str:
    load = os.getloadavg()[0]
    head = (f"splitnet vs references, {datetime.date.today()}, torch {torch.__version__}, "
            f"{a.threads} thread(s), load {load:.2f}, d_model {a.d_model}, {a.n_heads} heads, "
            f"{a.layers}+{a.layers} layers (LM: {2 * a.layers}), vocabulary {a.vocab}, "
            f"decode {a.new_tokens} new tokens from {a.src_len}-token sources "
            f"({a.decode_pairs} pairs), training batch {a.train_batch} ({a.train_pairs} pairs)")
    lines = [head, "", "| what | batch | against | ours tokens/s | theirs tokens/s | "
             "ours / theirs (median of pairs) |", "|---|---:|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['what']} | {r['batch']} | {r['vs']} | {r['ours']:,.0f} | "
                     f"{r['theirs']:,.0f} | **{r['ratio']:.2f}** |")
    return "\n".join(lines)


def profile_beam(a, ours, batch, beam) -> None:
    """The top operators of one of our beam searches (torch.profiler, CPU time)."""
    src = _sources(a, batch)
    with torch.no_grad(), torch.profiler.profile() as prof:
        ours.generate(src, a.new_tokens, beam=beam, src_key_padding_mask=src.eq(PAD))
    print(f"profile: ours, batch {batch}, beam {beam}")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--d-model", type=positive_int, default=256)
    p.add_argument("--n-heads", type=positive_int, default=4)
    p.add_argument("--layers", type=positive_int, default=3)
    p.add_argument("--vocab", type=positive_int, default=259)
    p.add_argument("--src-len", type=positive_int, default=32)
    p.add_argument("--new-tokens", type=positive_int, default=64)
    p.add_argument("--batches", default="1,4,16,64")
    p.add_argument("--beams", default="1,4,5")
    p.add_argument("--decode-pairs", type=positive_int, default=5)
    p.add_argument("--train-batch", type=positive_int, default=16)
    p.add_argument("--lm-len", type=positive_int, default=128)
    p.add_argument("--train-pairs", type=positive_int, default=11)
    p.add_argument("--threads", type=positive_int, default=1)
    p.add_argument("--decode", action="store_true", help="only the decoding rows")
    p.add_argument("--train", action="store_true", help="only the training rows")
    p.add_argument("--profile", action="store_true",
                   help="also profile our beam search at the largest batch and beam")
    p.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    a = p.parse_args(argv)
    a.batches = [int(x) for x in a.batches.split(",")]
    a.beams = [int(x) for x in a.beams.split(",")]
    if a.quick:
        a.d_model, a.layers, a.new_tokens, a.src_len, a.lm_len = 32, 1, 8, 8, 16
        a.batches, a.beams, a.decode_pairs, a.train_pairs, a.train_batch = [1, 4], [1, 4], 1, 1, 4
    if not (a.decode or a.train):
        a.decode = a.train = True
    return a


def main(argv=None) -> int:
    a = parse(argv)
    torch.set_num_threads(a.threads)
    rows = []
    if a.decode:
        ours, marian = seq2seq_pair(a)
        rows += decode_rows(a, ours, marian)
        if a.profile:
            profile_beam(a, ours, max(a.batches), max(a.beams))
    if a.train:
        rows += seq2seq_train_rows(a) + lm_train_rows(a)
    with contextlib.suppress(BrokenPipeError):
        print(table(rows, a))
    return 0


if __name__ == "__main__":
    sys.exit(main())
